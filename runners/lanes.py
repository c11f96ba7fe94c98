"""How a run's tests are dealt out: to shards (machines), then to lanes (clusters) on one.

A lane is one cluster with its own Karpenter and ``workers`` xdist workers sharing it. A test
marked ``own_karpenter`` never shares its Karpenter with a test running at the same time: it
goes to a serial lane (one worker). Within those rules, tests are dealt longest first to the
lane whose earliest-free worker frees first (LPT list scheduling), which is how xdist's load
scheduler then runs them; the plan's makespan is the run's expected wall time.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlannedTest:
    nodeid: str
    seconds: float  # measured duration (or its module's typical cost)
    solo: bool = False  # marked own_karpenter
    skipped: bool = False  # will be skipped at collection (costs nothing, needs no cluster)


@dataclass
class Lane:
    index: int
    workers: int
    tests: list[PlannedTest] = field(default_factory=list)
    finish: list[float] = field(default_factory=list)  # per worker, as planned

    @property
    def serial(self) -> bool:
        return self.workers == 1

    @property
    def makespan(self) -> float:
        return max(self.finish, default=0.0)

    def place(self, test: PlannedTest) -> None:
        if not self.finish:
            self.finish = [0.0] * self.workers
        earliest = heapq.heappop(self.finish)
        heapq.heappush(self.finish, earliest + test.seconds)
        self.tests.append(test)

    def free_at(self) -> float:
        return min(self.finish) if self.finish else 0.0


class PlanError(ValueError):
    """A plan that cannot be made (bad shard spec, no lanes)."""


def parse_shard(spec: str) -> tuple[int, int]:
    """'2/4' -> (2, 4): the second of four shards, 1-based."""
    head, sep, tail = spec.partition("/")
    if not sep or not head.isdigit() or not tail.isdigit():
        raise PlanError(f"shard {spec!r}: expected I/N, e.g. 1/4")
    i, n = int(head), int(tail)
    if n < 1 or not 1 <= i <= n:
        raise PlanError(f"shard {spec!r}: I must be between 1 and N (N >= 1)")
    return i, n


def _longest_first(tests: list[PlannedTest]) -> list[PlannedTest]:
    # Ties by node id: every machine computes the same plan from the same inputs.
    return sorted(tests, key=lambda t: (-t.seconds, t.nodeid))


def shard(tests: list[PlannedTest], i: int, n: int) -> list[PlannedTest]:
    """The i-th of n duration-balanced slices (deterministic: the same on every machine).
    Skipped tests are dealt round-robin so each shard reports its share of them."""
    loads = [(0.0, k) for k in range(n)]
    mine: list[PlannedTest] = []
    run = [t for t in tests if not t.skipped]
    for t in _longest_first(run):
        load, k = heapq.heappop(loads)
        heapq.heappush(loads, (load + t.seconds, k))
        if k == i - 1:
            mine.append(t)
    skipped = sorted((t for t in tests if t.skipped), key=lambda t: t.nodeid)
    mine += [t for j, t in enumerate(skipped) if j % n == i - 1]
    return mine


def deal(tests: list[PlannedTest], clusters: int, workers: int) -> list[Lane]:
    """Deal the tests to ``clusters`` lanes of ``workers`` workers each; as many lanes as the
    own_karpenter tests need become serial (one worker), so none of them shares Karpenter.
    Lanes left with no test are dropped (no cluster is started for them)."""
    if clusters < 1 or workers < 1:
        raise PlanError(f"need at least one cluster and one worker (got {clusters} and {workers})")
    run = _longest_first([t for t in tests if not t.skipped])
    solo = [t for t in run if t.solo]
    serial = _serial_lanes_needed(run, solo, clusters, workers) if solo else 0
    lanes = [Lane(k, 1 if k < serial else workers) for k in range(clusters)]
    for t in run:
        allowed = lanes[:serial] if t.solo else lanes
        min(allowed, key=lambda lane: (lane.free_at(), lane.index)).place(t)
    skipped = [t for t in tests if t.skipped]
    used = [lane for lane in lanes if lane.tests] or lanes[:1]
    for j, t in enumerate(sorted(skipped, key=lambda t: t.nodeid)):
        used[j % len(used)].tests.append(t)
    for k, lane in enumerate(used):
        lane.index = k
    return used


def _serial_lanes_needed(run: list[PlannedTest], solo: list[PlannedTest], clusters: int,
                         workers: int) -> int:
    """The fewest serial lanes whose plan has the smallest makespan (one lane at least keeps
    its workers while there are tests that may share)."""
    best, best_span = 1, float("inf")
    top = clusters if len(solo) == len(run) else clusters - 1
    for serial in range(1, max(top, 1) + 1):
        lanes = [Lane(k, 1 if k < serial else workers) for k in range(clusters)]
        for t in run:
            allowed = lanes[:serial] if t.solo else lanes
            min(allowed, key=lambda lane: (lane.free_at(), lane.index)).place(t)
        span = max(lane.makespan for lane in lanes)
        if span < best_span - 1e-9:
            best, best_span = serial, span
    return best


def makespan(lanes: list[Lane]) -> float:
    return max((lane.makespan for lane in lanes), default=0.0)
