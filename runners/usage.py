"""What each lane costs the machine: resident memory and CPU seconds of its processes.

A lane's processes are its pytest (with its xdist workers: the process tree under it) and
its cluster's (every process whose command line names the cluster's run directory). The
runner samples them every few seconds and reports each lane's peak memory and its CPU
seconds per wall second, which is how runners/machine.py's figures were measured.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from karpenter_e2e.clusters.api.poller import Poller
from karpenter_e2e.clusters.infra import process

PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, int] | None:
    """(parent pid, CPU seconds, RSS bytes) of a live process, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE


def tree(root: int) -> list[int]:
    """``root`` and every descendant, from /proc."""
    parents: dict[int, list[int]] = {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(int(p))
        if st:
            parents.setdefault(st[0], []).append(int(p))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += parents.get(pid, [])
    return out


@dataclass
class LaneUsage:
    cluster_dir: str
    pytest_pids: list[int] = field(default_factory=list)
    peak_cluster_mib: float = 0.0
    peak_pytest_mib: float = 0.0
    cpu_s: dict[int, float] = field(default_factory=dict)  # last CPU seconds seen, per pid
    # kind: the node container, whose cgroup holds the cluster (read once it exists)
    container: str | None = None
    container_cpu_s: float = 0.0

    def sample(self) -> None:
        if self.container:
            self._sample_container(self.container)
        cluster = process.pids_using(self.cluster_dir)
        tests = [pid for root in self.pytest_pids for pid in tree(root)]
        rss = {"cluster": 0, "pytest": 0}
        for group, pids in (("cluster", cluster), ("pytest", tests)):
            for pid in pids:
                st = _stat(pid)
                if st:
                    rss[group] += st[2]
                    self.cpu_s[pid] = st[1]
        if not self.container:  # kind: the container's cgroup already counted it all
            self.peak_cluster_mib = max(self.peak_cluster_mib, rss["cluster"] / 2**20)
        self.peak_pytest_mib = max(self.peak_pytest_mib, rss["pytest"] / 2**20)

    def _sample_container(self, name: str) -> None:
        from karpenter_e2e.clusters.kind import docker
        cid = docker.container_id(name)
        seen = docker.container_usage(cid) if cid else None
        if seen:
            self.peak_cluster_mib = max(self.peak_cluster_mib, seen[0])
            self.container_cpu_s = max(self.container_cpu_s, seen[1])

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu_s.values()) + self.container_cpu_s


class Sampler:
    """Samples every lane every ``interval`` seconds until stopped (on the one poller)."""

    def __init__(self, lanes: list[LaneUsage], interval: float = 5.0):
        self.lanes, self.interval = lanes, interval
        self._poller = Poller(self._tick, interval, name="lane-usage", wait_first=True)
        self.started = time.monotonic()

    def _tick(self) -> None:
        for lane in self.lanes:
            lane.sample()

    def start(self) -> Sampler:
        self._poller.start()
        return self

    def stop(self) -> float:
        self._poller.stop(self.interval + 5)
        if self._poller.error is not None:  # the run's own report still gets written
            print(f"e2e: sampling the lanes' usage stopped: {type(self._poller.error).__name__}: "
                  f"{self._poller.error}", file=sys.stderr, flush=True)
        return time.monotonic() - self.started
