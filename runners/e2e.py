"""`make e2e`: the suites on K local clusters at once, each with its own Karpenter.

    karpenter-e2e e2e [--clusters K] [--workers W] [--shard I/N]
        [--reports-dir reports] [-- PYTEST_ARGS...]

1. Collect the tests once (``--collect-only``), with their measured durations and markers.
2. With ``--shard I/N``, keep the I-th duration-balanced slice (N CI jobs run the whole suite).
3. Deal them to K lanes (runners/lanes.py): longest first, own_karpenter tests on serial lanes.
4. Run one pytest per lane, each bringing up and taking down its own cluster
   (``--karpenter-cluster-name <name>-cN``) with W xdist workers sharing it.
5. Merge the lanes' reports into one run directory: one JUnit, one Allure results
   directory, one summary, every timeline.

A lane's cluster dying fails that lane's tests with the reason; the others go on. Ctrl-C
(or SIGTERM) is passed to every lane, which takes its cluster down; exit 130.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.base import Cluster
from karpenter_e2e.clusters.flags import adder, plugin_flag
from karpenter_e2e.clusters.infra import cluster_files
from karpenter_e2e.clusters.infra.stalls import MachineWatch
from karpenter_e2e.rendering import run_dirs
from karpenter_e2e.runners import cluster_dirs, lanes, machine, merge, usage
from karpenter_e2e.runners.children import STOP_GRACE_S, Child, Children
from karpenter_e2e.runners.collect import CollectFailed, plan
from karpenter_e2e.runners.lanes import Lane, PlannedTest

PY = sys.executable


def _strip_workers(args: list[str]) -> list[str]:
    """The runner sets -n per lane: drop a -n/--numprocesses the caller passed through."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-n", "--numprocesses"):
            skip = True
            continue
        if a.startswith("--numprocesses=") or (a.startswith("-n") and a[2:].isdigit()):
            continue
        out.append(a)
    return out


def _option(args: list[str], name: str, default: str) -> str:
    return _pop_option(list(args), name, default)[0]


def within(tests: list, size: machine.Size, cost: machine.Cost, asked: bool) -> list:
    """The lanes for ``size``; where the mode's settings lanes count toward the machine's
    clusters (machine.Cost.settings_within) and the clusters were not asked for, as few
    default lanes as bring the whole plan within them (one at least)."""
    k = size.clusters
    plan = lanes.deal(tests, k, size.workers, start_gap=cost.bringup_s)
    while cost.settings_within and not asked and len(plan) > size.clusters and k > 1:
        k -= 1
        plan = lanes.deal(tests, k, size.workers, start_gap=cost.bringup_s)
    return plan


def _pop_option(args: list[str], name: str, default: str) -> tuple[str, list[str]]:
    """``name``'s value in ``args`` (``--x v`` or ``--x=v``) and the args without it."""
    value, rest, i = default, [], 0
    while i < len(args):
        a = args[i]
        if a == name and i + 1 < len(args):
            value, i = args[i + 1], i + 2
            continue
        if a.startswith(name + "="):
            value = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    return value, rest


def collect(paths: list[str], args: list[str], out: Path) -> list[PlannedTest]:
    try:
        return [PlannedTest(**t) for t in plan(paths, args, out)]
    except CollectFailed as exc:
        sys.stderr.write(exc.output[-8000:])
        raise SystemExit(exc.code or 4) from None


class LaneRun:
    """One lane: its cluster (brought up and taken down here, in local and kind mode) and its tests:
    a serial lane's one at a time (one pytest), a plain lane's with xdist."""

    def __init__(self, lane: Lane, cluster_name: str, run_dir: Path, args: list[str],
                 cluster_opts: argparse.Namespace | None):
        self.lane, self.cluster_name = lane, cluster_name
        self.tag = f"[c{lane.index + 1}]"
        self.cluster_opts = cluster_opts
        reports = run_dir / "lanes" / f"c{lane.index + 1}"
        self.reports = reports
        own = [plugin_flag("cluster-name"), cluster_name] + (
            [plugin_flag("keep-cluster")] if cluster_opts else [])
        self.procs: list[Child] = []
        # A settings lane's groups run one after another, each pytest on a Karpenter its
        # plugin restarts with the group's settings (what its tests then check they have).
        self.waiting: list[Child] = []
        self.children: Children | None = None  # set by start()
        for k, group in enumerate(lane.groups):
            name = f"group{k + 1}"
            settings = [a for s in group.settings for a in (plugin_flag("karpenter-setting"), s)]
            self.waiting.append(Child(f"[c{lane.index + 1} {name}]", [
                PY, "-m", "pytest", *[t.nodeid for t in group.tests], "-p", "no:xdist", *own,
                *settings, plugin_flag("reports-dir"), str(reports / name), *args],
                reports / name / "pytest.log", tee=True))
        if lane.chain:
            self.procs.append(Child(f"[c{lane.index + 1} chain]", [
                PY, "-m", "pytest", *[t.nodeid for t in lane.chain], "-p", "no:xdist", *own,
                plugin_flag("reports-dir"), str(reports / "chain"), *args], reports / "chain" / "pytest.log",
                tee=True))
        if lane.plain:
            n = lane.plain_workers
            self.procs.append(Child(f"[c{lane.index + 1} plain]", [
                PY, "-m", "pytest", *[t.nodeid for t in lane.plain],
                *(["-n", str(n)] if n > 1 else ["-p", "no:xdist"]), *own,
                plugin_flag("reports-dir"), str(reports / "plain"), *args], reports / "plain" / "pytest.log",
                tee=True))
        self.mode = cluster_opts.cluster if cluster_opts is not None else "local"
        container = None
        if self.mode == "kind":
            from karpenter_e2e.clusters.kind.cluster import KindCluster
            container = KindCluster.node_container(cluster_name)
        self.usage = usage.LaneUsage(
            str(cluster_files.directory(backends.files_name(self.mode, cluster_name))),
            container=container)
        self.started = self.ended = 0.0
        self.up_s: float | None = None
        self.up_error = ""
        self.backend: Cluster | None = None

    def bring_up(self) -> None:
        """Up before its tests start (local and kind mode): clusters come up one at a time, so each
        lane's tests start as soon as its own cluster is ready. A failure is left to the
        lane's pytest, which then fails its tests with the reason."""
        self.started = time.monotonic()
        if self.cluster_opts is None:
            return
        from karpenter_e2e.clusters import backends
        from karpenter_e2e.clusters.errors import ClusterError
        opts = argparse.Namespace(**{**vars(self.cluster_opts), "cluster_name": self.cluster_name,
                                     "karpenter_setting": [*self.cluster_opts.karpenter_setting,
                                                           *self.lane.settings]})
        try:  # opts came as pytest args
            backend = backends.create(backends.ClusterOptions.of(opts), plugin_flag)
            self.backend = backend
            backend.up(reuse=bool(opts.keep_cluster))
            self.up_s = time.monotonic() - self.started
            print(f"e2e: {self.tag} cluster {self.cluster_name} up in {self.up_s:.1f}s",
                  flush=True)
        except (ClusterError, ValueError) as exc:
            self.up_error = str(exc).splitlines()[0]
            print(f"e2e: {self.tag} cluster {self.cluster_name} did not come up: "
                  f"{self.up_error}", file=sys.stderr, flush=True)

    def start(self, children: Children) -> None:
        # None started once interrupted: the lane then has nothing left to wait for.
        self.children = children
        procs = self.procs + self.waiting[:1]
        del self.waiting[:1]
        self.procs = []
        self._started([p for p in procs if children.start(p) is not None])

    def _started(self, procs: list[Child]) -> None:
        self.procs += procs
        self.usage.pytest_pids = [p.pid for p in self.procs if p.pid]

    def done(self) -> bool:
        if self.waiting and self.children is not None and all(p.done() for p in self.procs):
            # the next group's turn
            started = self.children.start(self.waiting.pop(0))
            if started is None:  # interrupted: no further group starts
                self.waiting.clear()
            else:
                self._started([started])
                print(f"e2e: {started.tag} starts (its pytest restarts Karpenter with its settings)",
                      flush=True)
        finished = (not self.waiting or self.children is None) and all(p.done() for p in self.procs)
        if finished and not self.ended:
            self.ended = time.monotonic()
        return finished

    def take_down(self) -> None:
        if self.backend is not None and self.cluster_opts is not None \
                and not self.cluster_opts.keep_cluster:
            try:
                self.backend.down()
            except Exception as exc:  # noqa: BLE001 - every other lane still goes down
                print(f"e2e: {self.tag} taking {self.cluster_name} down failed: {exc}",
                      file=sys.stderr, flush=True)
            else:
                # A red lane's cluster logs go with its report: the next run of the same lane
                # name starts its cluster afresh, and would remove them.
                red = not all(p.code == 0 for p in self.procs)
                said = cluster_dirs.retire(self.cluster_name, self.reports if red else None,
                                           self.mode)
                if said:
                    print(f"e2e: {self.tag} {'red: ' if red else ''}{said}", file=sys.stderr,
                          flush=True)
        self.backend = None


def _cluster_options(args: list[str], mode: str) -> argparse.Namespace | None:
    """The cluster options among the pytest args (local and kind mode: the runner brings the
    lanes' clusters up and down itself with them); None in other modes, where pytest does."""
    if mode not in machine.LANE_MODES:
        return None
    from karpenter_e2e.clusters import backends
    p = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    add = adder(p.add_argument, plugin_flag)  # pytest's flags, the backends' short dests
    backends.add_options(add, plugin_flag)
    add("keep-cluster", action="store_true")
    return p.parse_known_args(args)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="karpenter-e2e e2e",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=None,
                    help="local clusters at once (default: what this machine's cores and "
                         "memory allow, runners/machine.py)")
    ap.add_argument("--workers", type=int, default=None,
                    help="tests at once on a plain lane (serial lanes run one at a time; "
                         "default: runners/machine.py)")
    ap.add_argument("--shard", default=None, metavar="I/N",
                    help="run only the I-th of N duration-balanced slices")
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("--paths", default="suites", help="what pytest collects (default: suites)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER,
                    help="passed to every lane's pytest (after --)")
    opts = ap.parse_args(argv)
    # The lanes' bring-ups log here (a release's cold build says how it is getting on).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("kubernetes", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = _strip_workers([a for a in opts.pytest_args if a != "--"])
    mode = _option(args, plugin_flag("cluster"), "local")
    try:
        shard = lanes.parse_shard(opts.shard) if opts.shard else None
        size = machine.plan(opts.clusters, opts.workers, mode)
    except (lanes.PlanError, machine.SizeError) as exc:
        print(f"e2e: {exc}", file=sys.stderr)
        return 4
    run_id = time.strftime("%m%d%H%M%S") + os.urandom(2).hex()
    run_dir = opts.reports_dir / "runs" / f"e2e-{run_id}"
    run_dir.mkdir(parents=True, exist_ok=True)
    tests = collect(opts.paths.split(","), args, run_dir / "collected.json")
    if shard:
        tests = lanes.shard(tests, *shard)
    if not tests:
        print("e2e: no test collected", file=sys.stderr)
        return 5
    if mode in machine.LANE_MODES:
        plan = within(tests, size, machine.COSTS[mode], asked=opts.clusters is not None)
    else:  # one cluster that pytest itself reaches: one pytest with xdist (own_karpenter
        # and disruption_loop tests then hold the cluster alone through the plugin's room lock)
        only = lanes.Lane(0, size.workers)
        for t in sorted(tests, key=lambda t: -t.seconds):
            only.place_plain(t)
        plan = [only]
    base, args = _pop_option(args, plugin_flag("cluster-name"), "karpenter-e2e")
    # The lanes get node ids already selected: a --karpenter-scenario filter would then name
    # ids that are not in a lane's share, which pytest refuses.
    _, args = _pop_option(args, plugin_flag("scenario"), "")
    settings_lanes = [lane for lane in plan if lane.groups]
    extra = (f", plus {len(settings_lanes)} for {sum(len(lane.groups) for lane in settings_lanes)}"
             f" sets of Karpenter settings" if settings_lanes else "")
    print(f"e2e: {len([t for t in tests if not t.skipped])} tests to run"
          f"{f' (shard {opts.shard})' if shard else ''} on {len(plan)} cluster(s): "
          f"{size.why}{extra}; planned {lanes.makespan(plan):.0f}s", flush=True)
    for lane in plan:
        kind = "serial (one test at a time)" if lane.serial else f"{lane.plain_workers} plain at once"
        if lane.groups:
            kind = "settings groups in turn, Karpenter restarted with each: " + "; ".join(
                f"{', '.join(g.settings)} ({len(g.tests)} test(s))" for g in lane.groups)
            print(f"e2e:   c{lane.index + 1}: {kind}; planned {lane.makespan:.0f}s", flush=True)
            continue
        print(f"e2e:   c{lane.index + 1}: {kind}: {len(lane.chain)} + {len(lane.plain)} tests, "
              f"planned {lane.makespan:.0f}s", flush=True)
    (run_dir / "plan.json").write_text(json.dumps(
        [{"lane": f"c{lane.index + 1}", "plain_workers": lane.plain_workers,
          "planned_s": round(lane.makespan, 1), "chain": [t.nodeid for t in lane.chain],
          "plain": [t.nodeid for t in lane.plain],
          "groups": [{"settings": list(g.settings), "tests": [t.nodeid for t in g.tests]}
                     for g in lane.groups]} for lane in plan], indent=1))
    if opts.dry_run:
        return 0
    cluster_opts = _cluster_options(args, mode)
    runs = [LaneRun(lane, base if len(plan) == 1 else f"{base}-c{lane.index + 1}", run_dir, args,
                    cluster_opts) for lane in plan]
    return _run(runs, run_dir, opts.reports_dir)


def _run(runs: list[LaneRun], run_dir: Path, reports_dir: Path) -> int:
    children = Children(grace=STOP_GRACE_S)
    started_lanes: list[LaneRun] = []
    lock = threading.Lock()

    def bring_up_in_turn() -> None:
        # One at a time, in lane order (the longest plans first), each lane starting once its
        # own cluster is up. All at once was slower: ten kube-apiservers starting together
        # took 49-60 s each on 2 cores, against 6-10 s in turn.
        for r in runs:
            if children.interrupted.is_set():
                return
            r.bring_up()
            with lock:
                if children.interrupted.is_set():
                    return
                r.start(children)
                started_lanes.append(r)

    started = time.monotonic()
    sampler = usage.Sampler([r.usage for r in runs]).start()
    watch = MachineWatch().start()
    up = threading.Thread(target=bring_up_in_turn, daemon=True, name="bring-up")
    try:
        with children.stopped_by_signals("e2e"):
            up.start()
            while up.is_alive() or any(not r.done() for r in list(started_lanes)):
                for r in list(started_lanes):
                    if r.backend is not None and r.done():
                        r.take_down()  # as soon as its tests are over: the others have the cores
                time.sleep(0.5)
            up.join(STOP_GRACE_S)
    finally:
        for r in runs:
            r.done()
            r.take_down()
        sampler.stop()
        watch.stop()
    wall = time.monotonic() - started
    procs = [p for r in runs for p in r.procs]
    dirs = [d for d in (run_dirs.latest(p.log.parent) for p in procs) if d is not None]
    totals = merge.merge(dirs, run_dir, wall) if dirs else merge.Totals()
    run_dirs.point(reports_dir, run_dir)
    print("=" * 30 + " karpenter-e2e lanes " + "=" * 30)
    rows = []
    for r in runs:
        took = max((r.ended or time.monotonic()) - r.started, 1e-9) if r.started else 0.0
        lane_usage = r.usage
        rows.append({"lane": r.tag, "cluster": r.cluster_name,
                     "plain_workers": r.lane.plain_workers,
                     "exit": {p.tag: p.code for p in r.procs}, "up_s": r.up_s,
                     "wall_s": round(took, 1), "planned_s": round(r.lane.makespan, 1),
                     "peak_cluster_mib": round(lane_usage.peak_cluster_mib),
                     "peak_pytest_mib": round(lane_usage.peak_pytest_mib),
                     "cpu_cores": round(lane_usage.cpu_seconds / max(took, 1e-9), 3)})
        print(f"{r.tag} {r.cluster_name}: exit {', '.join(f'{p.code}' for p in r.procs)}; "
              f"{took:.0f}s from bring-up to its last test (planned "
              f"{r.lane.makespan - r.lane.start:.0f}s){f'; up in {r.up_s:.1f}s' if r.up_s else ''}"
              f"{f'; DID NOT COME UP: {r.up_error}' if r.up_error else ''}; peak memory: "
              f"cluster {lane_usage.peak_cluster_mib:.0f} MiB, pytest "
              f"{lane_usage.peak_pytest_mib:.0f} MiB; "
              f"CPU {lane_usage.cpu_seconds / max(took, 1e-9):.2f} cores")
    (run_dir / "lanes.json").write_text(json.dumps(rows, indent=1))
    # A timing assert assumes the machine ran: what it took away is kept beside the lanes.
    (run_dir / "machine.json").write_text(json.dumps(watch.as_dict(), indent=1))
    print(f"machine: {watch.line()}")
    print((run_dir / "summary.md").read_text() if (run_dir / "summary.md").is_file() else "")
    print(f"(merged: {run_dir}/junit.xml, allure-results/, summary.md, timelines/; lanes' "
          f"logs in {run_dir}/lanes/)")
    print(f"{'=' * 20} {totals.line(wall)} {'=' * 20}", flush=True)
    if children.interrupted.is_set():
        return 130
    codes = [p.code for p in procs]
    bad = [c for c in codes if c not in (0, 5)]
    if not bad and any(c == 0 for c in codes):
        return 0
    if not bad:
        return 5
    return 1 if all(c == 1 for c in bad) else max(c if c is not None else 3 for c in bad)
