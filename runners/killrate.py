"""`karpenter-e2e killrate`: the oracles' own kill rate on the shipped mutants. The verdict
is only the generic one: the oracles (fixtures/oracles/) and the differential
(docs/differential.md); no scenario's asserts and no folder's expectations count.

    karpenter-e2e killrate [--mutants a,b | --sample N] [--workloads a,b] [--controls 2]
        [--jobs J] [--cluster-prefix killrate-] [--shard I/N] [--out reports/killrate]
    karpenter-e2e killrate --join DIR [DIR ...] [--out DIR]

Every mutant runs as ``check`` on the same generic workloads (WORKLOADS: the examples and a
fixed set of explore cases), each on a fresh cluster, and so does the unmutated build (the
control): ``--controls`` runs per workload and set-up, shared by every mutant of that set-up,
never one per mutant. A mutant's check diffs what it decided against its control's
(``check --compare-to``); the fields on which the control's own runs differ are that
workload's noise. A mutant is killed on a workload when an oracle fails on it that failed on
none of the control's runs there, or the differential marks a field suspect beyond the
control's noise; killed when it is killed on any workload. Written to OUT/killrate.{json,md}
(rendering/killrate.py) as each run ends.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.checks import explore
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build
from karpenter_e2e.clusters.karpenter import mutants as mutants_mod
from karpenter_e2e.clusters.karpenter.mutants import Mutant
from karpenter_e2e.rendering.killrate import GOAL, markdown
from karpenter_e2e.runners import lanes
from karpenter_e2e.runners.children import Child, Children, sigterm_as_ctrl_c
from karpenter_e2e.runners.cli import child
from karpenter_e2e.runners.explore import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from karpenter_e2e.runners.killrate_verdict import (
    AGAIN,
    PLAIN,
    MutantResult,
    Run,
    conclude,
    confirmed,
    from_reports,
    join,
    judge,
    needs_again,
    read_run,
    rejudge,
    summary,
)

ROOT = Path(__file__).resolve().parent.parent
# The generic workloads, by name: an example folder, or an explore case (seed, case), drawn
# for the mutants' release. Every example a local cluster runs, and explore cases of seed
# killrate chosen for what the examples lack (the inputs each describes: DaemonSets, a Job
# beside Deployments, PreferNoSchedule pools, Gte and Exists requirements, hostPorts,
# ephemeral storage, init containers, overhead, spreads, PDBs, budgets). Not killrate/12: on
# v1.15.0 every one of its pods stayed Pending (Karpenter: "nodepool requirements filtered
# out all available instance types"), so no mutant could change what it decides.
EXAMPLES = ("workshop-basic", "workshop-weight", "capacity-split", "capacity-buffer",
            "ml-platform", "diff-base", "diff-head", "graviton-storage", "volume-zones",
            "team-namespace", "kustomize-overlay", "steps-drift", "provisioner-era",
            "drift-guarded")
EXPLORED = (("killrate", 1), ("killrate", 7), ("killrate", 15), ("killrate", 17), ("killrate", 59))
WORKLOADS: dict[str, str | tuple[str, int]] = {
    **{name: f"examples/{name}" for name in EXAMPLES},
    **{f"explore-{seed}-{case}": (seed, case) for seed, case in EXPLORED}}
# The nightly's workloads (every mutant on each: 6 x 110 checks beside the controls): the
# workshop's pool with its scale-in to 0, GPUs with a Job and four pools, two pools of spot
# and on-demand with a scale-in of five nodes, two explore cases (a DaemonSet, hostPorts,
# ephemeral storage, one pod per node; PDBs, budgets, overhead, init containers, affinities),
# and the workshop's drift under protection (a nodeClassRef change drifting a node that a
# do-not-disrupt pod holds, then a replacement and a drain paced by a PDB): without it no
# nightly workload drifts anything while pods are protected, and the drift family (drain,
# eviction, do-not-disrupt, replace-first) had nothing to show on. "all" is every workload
# above.
NIGHTLY = ("workshop-basic", "ml-platform", "capacity-split", "explore-killrate-17",
           "explore-killrate-1", "drift-guarded")
# What a mutant's ``setup:`` (the suites' options) is in check's options; anything else is a
# set-up check does not run (an upgrade), and the mutant is listed as not run, with why.
SETUP_FLAGS = {"--karpenter-setting": "--karpenter-setting",
               "--karpenter-kubernetes-version": "--kubernetes-version"}


class PlanError(ValueError):
    """Bad input: the run stops before anything starts (exit 2)."""


# ---- what runs -------------------------------------------------------------------------------
def check_setup(m: Mutant) -> tuple[tuple[str, ...], str]:
    """(check's options for the mutant and its control, why it cannot run: '' if it can)."""
    if m.fault:
        return (), ("a fault breaks the cluster (" + " ".join(m.fault) + "), not Karpenter's "
                    "code: it is the harness's own negative check, judged by its scenario")
    if m.module != mutants_mod.CORE:
        return (), f"patches {m.module}, which local mode does not build"
    out: list[str] = []
    words = list(m.setup)
    while words:
        flag = words.pop(0)
        name, eq, value = flag.partition("=")
        if name not in SETUP_FLAGS:
            return (), (f"its set-up ({' '.join(m.setup)}) is not one check runs: its "
                        "scenario's own run is the only one")
        if not eq:
            if not words:
                return (), f"its set-up ends in {flag} without a value"
            value = words.pop(0)
        out += [SETUP_FLAGS[name], value]
    return tuple(out), ""


def setup_key(options: tuple[str, ...]) -> str:
    """A folder name for a set-up: 'plain', or its options' digest."""
    if not options:
        return PLAIN
    return "setup-" + hashlib.sha256("\0".join(options).encode()).hexdigest()[:10]


def stratified(mutants: list[Mutant], n: int) -> list[Mutant]:
    """A deterministic sample of ``n`` spread over the families in proportion to their
    sizes (largest remainders; every family at least one while ``n`` allows), each family's
    taken in the order of sha256(name): the same mutants on every machine, none hand-picked."""
    families: dict[str, list[Mutant]] = {}
    for m in sorted(mutants, key=lambda m: hashlib.sha256(m.name.encode()).hexdigest()):
        families.setdefault(m.family, []).append(m)
    n = min(n, len(mutants))
    total = len(mutants)
    share = {f: n * len(ms) / total for f, ms in families.items()}
    take = {f: min(len(families[f]), max(int(s), 1 if n >= len(families) else 0))
            for f, s in share.items()}
    by_remainder = sorted(families, key=lambda f: (-(share[f] - int(share[f])), f))
    while sum(take.values()) > n:  # the floor of one overshot: the largest shares give way
        f = max((f for f in take if take[f] > 1), key=lambda f: (take[f] - share[f], f))
        take[f] -= 1
    while sum(take.values()) < n:
        for f in by_remainder:
            if sum(take.values()) < n and take[f] < len(families[f]):
                take[f] += 1
    # In turns, one of each family: a run cut short has still sampled every family.
    return [m for _, _, m in sorted((i, f, m) for f, ms in families.items()
                                    for i, m in enumerate(ms[:take[f]]))]


def select_workloads(spec: str) -> list[str]:
    names = list(WORKLOADS) if spec == "all" else list(NIGHTLY) if spec in ("", "nightly") \
        else [w.strip() for w in spec.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown:
        raise PlanError(f"unknown workload {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    return names


def workload_folder(name: str, out: Path, version: str) -> Path:
    """The folder check runs for the workload: the example's, or the explore case written
    under OUT/workloads/ (drawn for ``version``, as explore draws it)."""
    source = WORKLOADS[name]
    if isinstance(source, str):
        return ROOT / source
    seed, case = source
    return explore.write(explore.generate(seed, case, (version,)), out / "workloads" / name)


# ---- running ---------------------------------------------------------------------------------
class Interrupted(Exception):
    """Ctrl-C or SIGTERM: no further check starts."""


@dataclass
class Plan:
    mutants: list[Mutant]
    options: dict[str, tuple[str, ...]]  # mutant -> check's set-up options
    not_run: dict[str, str]  # mutant -> why not
    workloads: list[str]


def plan(args) -> Plan:
    try:
        every = mutants_mod.load(args.mutant_dir)
        chosen = mutants_mod.select(every, args.mutants.replace(",", " ").split(), "local")
    except ClusterError as exc:
        raise PlanError(str(exc)) from None
    options, not_run = {}, {}
    for m in chosen:
        opts, why = check_setup(m)
        if why:
            not_run[m.name] = why
        else:
            options[m.name] = opts
    runnable = [m for m in chosen if m.name in options]
    if args.plain_only:  # one control set serves them all
        not_run.update({m.name: "left out by --plain-only (it has a set-up of its own)"
                        for m in runnable if options[m.name]})
        runnable = [m for m in runnable if not options[m.name]]
    if args.sample:
        runnable = stratified(runnable, args.sample)
        not_run = {}  # a sample is drawn from what can run
    if args.shard:
        i, n = lanes.parse_shard(args.shard)
        runnable = runnable[i - 1::n]
        not_run = {k: v for k, v in not_run.items() if (sorted(not_run).index(k) % n) == i - 1}
    return Plan(runnable, {m.name: options[m.name] for m in runnable}, not_run,
                select_workloads(args.workloads))


class KillRate:
    def __init__(self, p: Plan, args) -> None:
        self.p, self.args = p, args
        self.out: Path = args.out
        self.children = Children()
        self.lock = threading.Lock()
        self.lanes: list[str] = [f"{args.cluster_prefix}{k}" for k in range(args.jobs)]
        self.lane_free = threading.Semaphore(args.jobs)
        self.controls: dict[tuple[str, str], list[Run]] = {}
        self.runs: dict[str, list[Run]] = {}
        self.built: dict[str, threading.Event] = {m.name: threading.Event() for m in p.mutants}
        self.build_error: dict[str, str] = {}
        self.rows = {m.name: MutantResult(m.name, m.family, m.regression,
                                          setup_key(p.options[m.name])) for m in p.mutants}
        by_name = {m.name: m for m in mutants_mod.load(args.mutant_dir)}
        for name, why in p.not_run.items():
            m = by_name[name]
            self.rows[name] = MutantResult(name, m.family, m.regression, status="not run",
                                           error=why)
        self.version = p.mutants[0].version if p.mutants else ""
        self.folders: dict[str, Path] = {}
        self.started = time.monotonic()

    # -- builds: one at a time, in the order the runs take the mutants, ahead of them
    def _builds(self) -> None:
        for m in self.p.mutants:
            if self.children.interrupted.is_set():
                break
            try:
                build.karpenter_binary(m.version, mutant=m)
            except ClusterError as exc:
                self.build_error[m.name] = str(exc).splitlines()[0][:300]
            finally:
                self.built[m.name].set()

    def _check(self, tag: str, folder: Path, reports: Path, extra: list[str]) -> Run:
        with self.lock:
            lane = self.lanes.pop(0)
        try:
            cmd = [*child("check"), str(folder), "--cluster", "local", "--cluster-name", lane,
                   "--karpenter-version", self.version, "--reports-dir", str(reports), *extra]
            if self.children.interrupted.is_set():
                raise Interrupted
            print(f"killrate: [{lane}] {tag}: $ {' '.join(cmd[3:])}", flush=True)
            t0 = time.monotonic()
            code = self.children.run(Child(tag, cmd, reports / f"{tag}.log", cwd=ROOT))
            if code is None or code == EXIT_INTERRUPTED or self.children.interrupted.is_set():
                raise Interrupted
            run = Run("", "", "", str(reports), code, round(time.monotonic() - t0, 1))
            print(f"killrate: [{lane}] {tag}: exit {code} in {run.seconds:.0f}s", flush=True)
            return run
        finally:
            with self.lock:
                self.lanes.append(lane)

    def controls_of(self, workload: str, key: str, options: tuple[str, ...]) -> list[Run]:
        return [self.control(workload, key, options, k) for k in range(self.args.controls)]

    def _kept(self, run: Run, index: int = -1) -> Run | None:
        """--resume: the run a check already left in its reports, else None (and the reports
        cleared: what is there is from another run of the command)."""
        if self.args.resume:
            got = from_reports(run, index)
            if got.code is not None:
                print(f"killrate: {run.reports}: kept from an earlier run", flush=True)
                return got
        if index in (-1, 0) and Path(run.reports).exists():
            shutil.rmtree(run.reports)
        return None

    def control(self, workload: str, key: str, options: tuple[str, ...], k: int) -> Run:
        reports = self.out / "controls" / key / workload
        run = self._kept(Run("", workload, key, str(reports)), k)
        if run is None:
            with self.lane_free:
                run = self._check(f"control-{key}-{workload}-{k}", self.folders[workload],
                                  reports, list(options))
            run.workload, run.setup = workload, key
            run = read_run(run)
        if run.code == EXIT_BAD_INPUT:
            run.error = f"check refused the workload (exit 2): {reports}"
        with self.lock:
            self.controls.setdefault((workload, key), []).append(run)
        return run

    def mutant(self, m: Mutant, workload: str, waits: list[Future]) -> Run:
        for f in waits:
            f.result()  # the control's runs of this workload and set-up
        self.built[m.name].wait()
        key = setup_key(self.p.options[m.name])
        reports = self.out / "mutants" / m.name / workload
        if m.name in self.build_error:
            return Run(m.name, workload, key, str(reports), error=self.build_error[m.name])
        run = self._mutant_run(m, workload, key, reports)
        controls = self.controls.get((workload, key), [])
        if needs_again(run, controls):  # the differential alone: confirmed by a second run
            again = self._mutant_run(m, workload, key, reports.with_name(reports.name + AGAIN))
            run = confirmed(run, again, controls)
        return run

    def _mutant_run(self, m: Mutant, workload: str, key: str, reports: Path) -> Run:
        run = self._kept(Run(m.name, workload, key, str(reports)))
        if run is not None:
            return run
        with self.lane_free:
            run = self._check(f"{m.name}-{workload}{'' if reports.name == workload else AGAIN}",
                              self.folders[workload], reports,
                              [*self.p.options[m.name], "--karpenter-patch", str(m.path),
                               "--compare-to", str(self.out / "controls" / key / workload)])
        run.mutant, run.workload, run.setup = m.name, workload, key
        return read_run(run)

    def finish_mutant(self, m: Mutant, runs: list[Run]) -> None:
        with self.lock:
            verdicts = [judge(r, self.controls.get((r.workload, r.setup), [])) for r in runs]
            row = conclude(self.rows[m.name], verdicts)
            if m.name in self.build_error:
                row.status, row.error = "invalid", self.build_error[m.name]
            self.runs[m.name] = runs
            print(f"killrate: {m.name}: {row.status}"
                  + (f" by {', '.join(row.killers)}" if row.killers else ""), flush=True)
            self.write()

    def write(self) -> dict:
        controls = [c for runs in self.controls.values() for c in runs]
        rows = sorted(self.rows.values(), key=lambda r: (r.family, r.name))
        result = summary(rows, controls, {
            "version": self.version, "workloads": self.p.workloads,
            "controls_per_workload": self.args.controls, "jobs": self.args.jobs,
            "sample": self.args.sample or None, "shard": self.args.shard,
            "wall_s": round(time.monotonic() - self.started, 1)})
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "killrate.json").write_text(json.dumps(result, indent=1))
        (self.out / "killrate.md").write_text(markdown(result))
        return result

    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        for w in self.p.workloads:
            self.folders[w] = workload_folder(w, self.out, self.version)
        builder = threading.Thread(target=self._builds, daemon=True)
        builder.start()
        keys = {setup_key(o): o for o in self.p.options.values()}
        with self.children.stopped_by_signals("killrate"), \
                ThreadPoolExecutor(max(self.args.jobs, 1) * 2) as pool:
            waits: dict[tuple[str, str], list[Future]] = {}
            # Controls first: every mutant of a workload and set-up waits for them. A
            # workload's control runs go one after the other (the later ones read as its
            # noise beside the first).
            for key, options in keys.items():
                for w in self.p.workloads:
                    waits[(w, key)] = [pool.submit(self.controls_of, w, key, options)]
            futures = []
            for m in self.p.mutants:
                key = setup_key(self.p.options[m.name])
                futures.append((m, [pool.submit(self.mutant, m, w, waits[(w, key)])
                                    for w in self.p.workloads]))
            try:
                for m, fs in futures:
                    self.finish_mutant(m, [f.result() for f in fs])
            except Interrupted:
                self.children.interrupt()
                for _, fs in futures:
                    for f in fs:
                        f.cancel()
                self.write()
                raise
        return self.write()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e killrate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mutants", default="", help="mutant names, separated by commas or spaces (default: "
                   "every one local mode builds)")
    p.add_argument("--mutant-dir", type=Path, default=mutants_mod.MUTANTS_DIR)
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="N of them, stratified by family (deterministic: docs/killrate.md)")
    p.add_argument("--plain-only", action="store_true",
                   help="only mutants without a set-up of their own (the plain control serves "
                        "them all; the sample is drawn from them)")
    p.add_argument("--workloads", default="nightly",
                   help=f"workload names, comma-separated; nightly (default: {', '.join(NIGHTLY)}) "
                        f"or all: {', '.join(WORKLOADS)}")
    p.add_argument("--controls", type=int, default=2,
                   help="runs of the unmutated build per workload and set-up (default 2: the "
                        "fields they differ on are the workload's noise)")
    p.add_argument("--jobs", type=int, default=1, help="clusters at a time (default 1)")
    p.add_argument("--cluster-prefix", default="killrate-",
                   help="the clusters are PREFIX0, PREFIX1, ... (default killrate-)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run the I-th of N shares of the mutants (the controls run in each)")
    p.add_argument("--join", type=Path, nargs="+", default=None, metavar="DIR",
                   help="only join shards' OUT directories into one table in --out")
    p.add_argument("--resume", action="store_true",
                   help="keep every run OUT already holds (a check's reports there) and run "
                        "only what is missing; without it, OUT's runs are cleared as each runs")
    p.add_argument("--judge-only", action="store_true",
                   help="run nothing: judge OUT's runs again from their reports")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "killrate")
    args = p.parse_args(argv)
    args.out = args.out.resolve()
    if args.join:
        return _join(args.join, args.out)
    if args.judge_only:
        return _judge_only(args.out)
    if args.controls < 1 or args.jobs < 1 or args.sample < 0:
        print("killrate: --controls and --jobs must be 1 or more, --sample 0 or more",
              file=sys.stderr)
        return 2
    try:
        the_plan = plan(args)
    except (PlanError, lanes.PlanError) as exc:
        print(f"killrate: {exc}", file=sys.stderr)
        return 2
    print(f"killrate: {len(the_plan.mutants)} mutant(s) on {len(the_plan.workloads)} "
          f"workload(s) ({', '.join(the_plan.workloads)}), {args.controls} control run(s) each; "
          f"{len(the_plan.not_run)} not run", flush=True)
    sigterm_as_ctrl_c()
    runner = KillRate(the_plan, args)
    try:
        result = runner.run()
    except (Interrupted, KeyboardInterrupt):
        print(f"killrate: interrupted; {args.out}/killrate.md holds the mutants that ended",
              file=sys.stderr)
        return 130
    print((args.out / "killrate.md").read_text())
    return verdict_code(result)


def verdict_code(result: dict) -> int:
    """1 when the rate is under the goal or a control run reached no verdict (its workload
    then judged no mutant), else 0."""
    broken = [c for c in result["controls"] if not c["judged"]]
    return 1 if broken or result["rate"] is None or result["rate"] < GOAL else 0


def _judge_only(out: Path) -> int:
    path = out / "killrate.json"
    if not path.is_file():
        print(f"killrate: {out}: no killrate.json to judge again", file=sys.stderr)
        return 2
    result = rejudge(json.loads(path.read_text()), out)
    path.write_text(json.dumps(result, indent=1))
    (out / "killrate.md").write_text(markdown(result))
    print((out / "killrate.md").read_text())
    return verdict_code(result)


def _join(dirs: Iterable[Path], out: Path) -> int:
    results = []
    for d in dirs:
        path = d / "killrate.json"
        if not path.is_file():
            print(f"killrate: {d}: no killrate.json", file=sys.stderr)
            return 2
        results.append(json.loads(path.read_text()))
    result = join(results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "killrate.json").write_text(json.dumps(result, indent=1))
    (out / "killrate.md").write_text(markdown(result))
    print((out / "killrate.md").read_text())
    return verdict_code(result)

