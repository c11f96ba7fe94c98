"""`make e2e`: the suites on K local clusters at once, each with its own Karpenter.

    python -m karpenter_e2e.runners.e2e [--clusters K] [--workers W] [--shard I/N]
        [--reports-dir reports] [-- PYTEST_ARGS...]

1. Collect the tests once (``--collect-only``), with their measured durations and markers.
2. With ``--shard I/N``, keep the I-th duration-balanced slice (N CI jobs run the whole suite).
3. Deal them to K lanes (runners/lanes.py): longest first, own_karpenter tests on serial lanes.
4. Run one pytest per lane, each bringing up and taking down its own cluster
   (``--cluster-name <name>-cN``) with W xdist workers sharing it.
5. Merge the lanes' reports into one run directory: one JUnit, one Allure results
   directory, one summary, every timeline.

A lane's cluster dying fails that lane's tests with the reason; the others go on. Ctrl-C
(or SIGTERM) is passed to every lane, which takes its cluster down; exit 130.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from karpenter_e2e.clusters.local import build
from karpenter_e2e.runners import lanes, machine, merge, usage
from karpenter_e2e.runners.lanes import Lane, PlannedTest

PY = sys.executable
STOP_GRACE_S = 120  # a lane's teardown after Ctrl-C (measured: seconds; bounded here)


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
    cmd = [PY, "-m", "pytest", *paths, "--collect-only", "-q", "-p", "no:xdist",
           "--karpenter-e2e-plan", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, 5) or not out.is_file():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(proc.returncode or 4)
    return [PlannedTest(**t) for t in json.loads(out.read_text())]


class LaneRun:
    """One lane's pytest process, its output prefixed on our terminal and kept in a file."""

    def __init__(self, lane: Lane, cluster_name: str, run_dir: Path, args: list[str]):
        self.lane, self.cluster_name = lane, cluster_name
        self.reports = run_dir / "lanes" / f"c{lane.index + 1}"
        self.reports.mkdir(parents=True, exist_ok=True)
        self.log = self.reports / "pytest.log"
        ids = [t.nodeid for t in lane.tests]
        workers = ["-n", str(lane.workers)] if lane.workers > 1 else ["-p", "no:xdist"]
        self.cmd = [PY, "-m", "pytest", *ids, *workers, "--cluster-name", cluster_name,
                    "--reports-dir", str(self.reports), *args]
        self.proc: subprocess.Popen | None = None
        self.usage = usage.LaneUsage(str(build.cache_dir() / "clusters" / cluster_name))
        self.started = self.ended = 0.0
        self._pump: threading.Thread | None = None

    @property
    def tag(self) -> str:
        return f"[c{self.lane.index + 1}]"

    def start(self) -> None:
        self.started = time.monotonic()
        # A session of its own: Ctrl-C reaches the runner, which hands it on once to each lane.
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, bufsize=1,
                                     start_new_session=True)
        self.usage.pytest_pid = self.proc.pid
        self._pump = threading.Thread(target=self._copy_output, daemon=True)
        self._pump.start()

    def _copy_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log, "w") as keep:
            for line in self.proc.stdout:
                keep.write(line)
                sys.stdout.write(f"{self.tag} {line}")
                sys.stdout.flush()

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float | None = None) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        if self._pump is not None:
            self._pump.join(10)
        self.ended = time.monotonic()
        return rc

    def run_dir(self) -> Path | None:
        latest = self.reports / "latest"
        return latest.resolve() if latest.exists() else None


def _take_down(name: str, mode: str) -> None:
    subprocess.run([PY, "-m", "karpenter_e2e.clusters", "down", "--cluster", mode,
                    "--cluster-name", name], timeout=120, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m karpenter_e2e.runners.e2e",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=None,
                    help="local clusters at once (default: what this machine's cores and "
                         "memory allow, runners/machine.py)")
    ap.add_argument("--workers", type=int, default=None,
                    help="xdist workers per cluster (default: runners/machine.py)")
    ap.add_argument("--shard", default=None, metavar="I/N",
                    help="run only the I-th of N duration-balanced slices")
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("--paths", default="suites", help="what pytest collects (default: suites)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER,
                    help="passed to every lane's pytest (after --)")
    opts = ap.parse_args(argv)
    args = _strip_workers([a for a in opts.pytest_args if a != "--"])
    mode = _option(args, "--cluster", "local")
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
    if not [t for t in tests if not t.skipped] and not tests:
        print("e2e: no test collected", file=sys.stderr)
        return 5
    plan = lanes.deal(tests, size.clusters, size.workers)
    base, args = _pop_option(args, "--cluster-name", "karpenter-e2e")
    print(f"e2e: {len([t for t in tests if not t.skipped])} tests to run"
          f"{f' (shard {opts.shard})' if shard else ''} on {len(plan)} cluster(s): "
          f"{size.why}; planned {lanes.makespan(plan):.0f}s", flush=True)
    for lane in plan:
        ran = [t for t in lane.tests if not t.skipped]
        serial = " (serial: own_karpenter)" if lane.serial and any(t.solo for t in ran) else ""
        print(f"e2e:   c{lane.index + 1}: {lane.workers} worker(s), {len(ran)} tests, "
              f"planned {lane.makespan:.0f}s{serial}", flush=True)
    (run_dir / "plan.json").write_text(json.dumps(
        [{"lane": f"c{lane.index + 1}", "workers": lane.workers, "planned_s": lane.makespan,
          "tests": [t.nodeid for t in lane.tests]} for lane in plan], indent=1))
    if opts.dry_run:
        return 0
    runs = [LaneRun(lane, base if len(plan) == 1 else f"{base}-c{lane.index + 1}", run_dir, args)
            for lane in plan]
    return _run(runs, run_dir, opts.reports_dir, mode)


def _run(runs: list[LaneRun], run_dir: Path, reports_dir: Path, mode: str) -> int:
    interrupted = threading.Event()

    def on_signal(signum, _frame) -> None:
        if not interrupted.is_set():
            interrupted.set()
            print(f"e2e: {signal.Signals(signum).name}: stopping every lane (each takes its "
                  f"cluster down)", file=sys.stderr, flush=True)
            for r in runs:
                r.signal(signal.SIGINT)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    codes: dict[str, int] = {}
    sampler = usage.Sampler([r.usage for r in runs])
    try:
        for r in runs:
            r.start()
        sampler.start()
        for r in runs:
            while True:
                try:
                    codes[r.tag] = r.wait(timeout=1.0 if not interrupted.is_set() else STOP_GRACE_S)
                    break
                except subprocess.TimeoutExpired:
                    if interrupted.is_set():
                        r.signal(signal.SIGKILL)
                        _take_down(r.cluster_name, mode)
                        codes[r.tag] = 130
                        break
    finally:
        sampler.stop()
        for s, h in old.items():
            signal.signal(s, h)
    wall = time.monotonic() - started
    lane_dirs = [d for d in (r.run_dir() for r in runs) if d is not None]
    totals = merge.merge(lane_dirs, run_dir, wall) if lane_dirs else merge.Totals()
    latest = reports_dir / "latest"
    tmp = latest.with_name(f".latest-{run_dir.name}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.relative_to(reports_dir))
    os.replace(tmp, latest)
    print("=" * 30 + " karpenter-e2e lanes " + "=" * 30)
    rows = []
    for r in runs:
        took = max(r.ended - r.started, 1e-9)
        u = r.usage
        rows.append({"lane": r.tag, "cluster": r.cluster_name, "workers": r.lane.workers,
                     "exit": codes.get(r.tag), "wall_s": round(took, 1),
                     "planned_s": round(r.lane.makespan, 1),
                     "peak_cluster_mib": round(u.peak_cluster_mib),
                     "peak_pytest_mib": round(u.peak_pytest_mib),
                     "cpu_cores": round(u.cpu_seconds / took, 2)})
        print(f"{r.tag} {r.cluster_name}: exit {codes.get(r.tag)}, {took:.0f}s (planned "
              f"{r.lane.makespan:.0f}s); peak memory: cluster {u.peak_cluster_mib:.0f} MiB, "
              f"pytest {u.peak_pytest_mib:.0f} MiB ({r.lane.workers} workers); CPU "
              f"{u.cpu_seconds / took:.2f} cores; log {r.log}")
    (run_dir / "lanes.json").write_text(json.dumps(rows, indent=1))
    print((run_dir / "summary.md").read_text() if (run_dir / "summary.md").is_file() else "")
    print(f"(merged: {run_dir}/junit.xml, allure-results/, summary.md, timelines/)")
    print(f"{'=' * 20} {totals.line(wall)} {'=' * 20}", flush=True)
    if interrupted.is_set():
        return 130
    bad = [c for c in codes.values() if c not in (0, 5)]
    if not bad:
        return 0
    return 1 if all(c == 1 for c in bad) else max(bad)


if __name__ == "__main__":
    sys.exit(main())
