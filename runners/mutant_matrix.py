"""`karpenter-e2e mutants`: run the scenarios against mutated
Karpenters (kill matrix).

For each mutant (``mutants/*.patch`` or ``--mutant-dir``): build karpenter-kwok (``--cluster
aws-sim``: Karpenter's AWS provider, its own mutants by default, core ones by name) from the
pinned module with the patch applied, bring up a cluster of its own running it, run the
scenarios its header names, and record killed / survived. The unmutated build runs the same
scenarios in the same matrix run (the control). A mutant is killed by a scenario only when
that scenario fails on an assertion (not a setup error, a harness exception or a Karpenter
that stopped) and the control passes it.

Writes ``reports/mutants/matrix.{json,md}`` (the Markdown: rendering/mutant_matrix.py) and
one Allure result per mutant.

Long because one Matrix schedules the builds, the controls and the runs and reads their
verdicts; the verdict rules (Cell, Row, classify, verdict) are the seam for the next split.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import adder, plugin_flag
from karpenter_e2e.clusters.infra import build, versions
from karpenter_e2e.clusters.karpenter import mutants as mutants_mod
from karpenter_e2e.clusters.karpenter.mutants import Mutant
from karpenter_e2e.rendering import coverage
from karpenter_e2e.rendering.mutant_matrix import markdown
from karpenter_e2e.runners import cluster_dirs, lanes
from karpenter_e2e.runners.children import Child, Children, sigterm_as_ctrl_c
from karpenter_e2e.runners.prebuilds import prebuild

log = logging.getLogger("karpenter_e2e.mutants")

ROOT = mutants_mod.ROOT
REPORTS = ROOT / "reports"
CONTROL = "control"
BARE = "-no-oracles"  # an oracle mutant's second run, with the oracles off
GENERIC = "-asserts-off"  # a generic: mutant's second run, the scenarios' own asserts set aside
# The generic run: the scenarios' asserts set aside, and the cluster watched until it settles
# after the body (as the nightly does), so that what a body cut short by its failed assert
# would have waited for (a drain, a replacement) has happened when the oracles judge.
GENERIC_OPTIONS = (f"{plugin_flag('asserts')}=off", f"{plugin_flag('settle')}=all")
# How long one child run may take: its cluster, its scenarios and their teardown.
CHILD_DEADLINE_S = 1500
# The control runs in parts of at most this many seconds of measured scenario time
# (suites/durations.json), so that no part nears the deadline and the parts spread over the
# jobs: the whole control is 3200 s of scenarios and more, serial; one run of it reached only
# 12 of its 70 scenarios in 1500 s on a loaded machine (load 8-9), 855 s of them measured.
CONTROL_PART_S = 400
DURATIONS = ROOT / "suites" / "durations.json"
# Provisioning takes 2-5s here (README); a mutant that stops it is caught after 60s, not the
# suites' default 180s. The controls run with the same deadline, so a kill is never a
# deadline too short for the unmutated build.
DEFAULT_PYTEST_ARGS = (f"{plugin_flag('timeouts')}=provision=60",)


def known_scenarios() -> set[str]:
    """Scenario ids the suites declare (read from their markers, without collecting)."""
    return {t.scenario for t in coverage.scan() if t.scenario}


def measured_seconds() -> dict[str, float]:
    """Each scenario's measured seconds: the sum over its tests (and their parameters) in
    suites/durations.json. A scenario with no measured test (the nightly ones) is absent."""
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    out: dict[str, float] = {}
    for t in coverage.scan():
        test = f"suites/{t.file}::{t.name}"
        seconds = sum(v for k, v in durations.items() if k == test or k.startswith(test + "["))
        if t.scenario and seconds:
            out[t.scenario] = out.get(t.scenario, 0.0) + seconds
    return out


def parts(scenarios: list[str], seconds: dict[str, float],
          limit: float = CONTROL_PART_S) -> list[list[str]]:
    """The scenarios in the fewest duration-balanced slices (``lanes.shard``, as for shards)
    of at most ``limit`` measured seconds each; an unmeasured scenario (or one longer than
    ``limit``) in a part of its own."""
    alone = [[s] for s in scenarios if seconds.get(s, limit + 1) > limit]
    planned = [lanes.PlannedTest(s, seconds[s]) for s in scenarios
               if seconds.get(s, limit + 1) <= limit]
    n = max(1, math.ceil(sum(t.seconds for t in planned) / limit))
    while True:
        slices = [lanes.shard(planned, i, n) for i in range(1, n + 1)]
        if all(sum(t.seconds for t in part) <= limit for part in slices):
            return alone + [sorted(t.nodeid for t in part) for part in slices if part]
        n += 1


@dataclass
class Cell:
    """One scenario against one build."""

    status: str  # killed, survived, aborted, error, skipped, inconclusive, not run
    message: str = ""  # the failing assert's first line
    where: str = ""  # the suite line that failed


@dataclass
class Row:
    name: str
    regression: str = ""
    family: str = ""
    claimed: list[str] = field(default_factory=list)
    status: str = "not run"  # killed, partial, survived, invalid, inconclusive
    cells: dict[str, Cell] = field(default_factory=dict)
    error: str = ""  # why the mutant could not run (patch, build)
    build_s: float = 0.0
    run_s: float = 0.0
    rc: int | None = None


def setup_value(setup: tuple[str, ...], option: str) -> str | None:
    """The value a setup gives the plugin's ``option`` (``--karpenter-<option> V`` or
    ``--karpenter-<option>=V``), or None."""
    flag = plugin_flag(option)
    for i, word in enumerate(setup):
        if word == flag and i + 1 < len(setup):
            return setup[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def classify(rows: list[dict], scenario: str) -> Cell:
    """What the outcome lines of one child run say about one scenario."""
    mine = [r for r in rows if r["scenario"] == scenario]
    if not mine:
        return Cell("not run", "no outcome recorded (the run stopped before it)")
    failed = [r for r in mine if r["outcome"] == "failed"]
    for kind, status in (("assertion", "killed"), ("aborted", "aborted"), ("error", "error")):
        hit = next((r for r in failed if r["kind"] == kind and r["when"] != "setup"), None)
        if hit:
            return Cell(status, f"[{hit['when']}] {hit['exception']}: {hit['message']}"[:400],
                        hit["where"])
    if failed:  # a failure while setting the scenario up says nothing about the mutant
        r = failed[0]
        return Cell("error", f"[{r['when']}] {r['exception']}: {r['message']}"[:400], r["where"])
    if all(r["outcome"] == "skipped" for r in mine):
        return Cell("skipped", mine[0]["message"])
    return Cell("survived")


def broke(message: str) -> list[str]:
    """The oracles a failure names ("... Karpenter broke a, b (oracles judge ..."), or []."""
    m = re.search(r"Karpenter broke ([a-z, -]+) \(oracles", message)
    return [n.strip() for n in m.group(1).split(",")] if m else []


def verdict(row: Row, control: Row, expect: str = "killed", oracle: str = "",
            bare: Row | None = None, generic: str = "", loose: Row | None = None,
            loose_control: Row | None = None) -> str:
    """killed: every claimed scenario failed the way the mutant expects (an assertion, or for
    a stopped Karpenter an abort); partial: some did; survived: none did. A scenario the
    unmutated build also fails proves nothing: inconclusive. An oracle's mutant is killed only
    by that oracle: each scenario fails naming it, and passes in the run with the oracles off
    (``bare``); one its scenarios' own asserts catch proves nothing of the oracle. A generic
    mutant is killed only when, beside that, each scenario also fails naming the ``generic``
    oracle in the run with its own asserts set aside (``loose``), which the unmutated build
    passes in the same mode (``loose_control``)."""
    if row.error or (bare is not None and bare.error) or (loose is not None and loose.error):
        return "invalid"
    if generic and loose is not None:
        for s in row.claimed:
            alone = loose.cells.get(s, Cell("not run"))
            same_mode = (loose_control or control).cells.get(s, Cell("not run"))
            if same_mode.status != "survived":
                row.cells[s] = Cell("inconclusive", f"the control with the asserts off did not "
                                                    f"pass {s}: {same_mode.message}")
            elif row.cells[s].status == "killed" and (alone.status != "killed"
                                                      or generic not in broke(alone.message)):
                row.cells[s] = Cell(f"not by {generic} alone",
                                    f"with its own asserts off: {alone.status}: {alone.message}",
                                    alone.where)
    if oracle and bare is not None:
        for s in row.claimed:
            cell, without = row.cells[s], bare.cells.get(s, Cell("not run"))
            if cell.status == "killed" and broke(cell.message) != [oracle]:
                row.cells[s] = Cell("not by its oracle", cell.message, cell.where)
            elif cell.status == "killed" and without.status != "survived":
                row.cells[s] = Cell("caught without the oracles",
                                    f"with the oracles off: {without.status}: {without.message}",
                                    without.where)
    for s in row.claimed:
        if control.cells.get(s, Cell("not run")).status != "survived":
            row.cells[s] = Cell("inconclusive", f"the control run did not pass {s}")
    statuses = ["killed" if row.cells[s].status == expect else row.cells[s].status
                for s in row.claimed]
    if all(st == "killed" for st in statuses):
        return "killed"
    if "killed" in statuses:
        return "partial"
    return "inconclusive" if "inconclusive" in statuses else "survived"


class Matrix:
    def __init__(self, selected: list[Mutant], out: Path, jobs: int, pytest_args: list[str],
                 cluster_prefix: str = "mut-", mode: str = "local"):
        self.mode = mode
        self.mutants = selected
        self.cluster_prefix = cluster_prefix
        self.out = out
        self.jobs = jobs
        self.pytest_args = pytest_args
        self.rows: dict[str, Row] = {m.name: Row(m.name, m.regression, m.family, list(m.scenarios))
                                     for m in selected}
        self.bare: dict[str, Row] = {}  # an oracle mutant's run with the oracles off
        self.loose: dict[str, Row] = {}  # a generic mutant's run with its asserts set aside
        # One control per set-up (most mutants share the plain one; an upgrade mutant's
        # control upgrades too): the unmutated build, on the union of the scenarios.
        self.controls: dict[tuple[str, ...], Row] = {}
        for m in selected:
            # a generic mutant's run with the asserts off has its own control, in that mode
            for setup in (m.setup, *([(*m.setup, *GENERIC_OPTIONS)] if m.generic else [])):
                name = CONTROL if not setup else f"{CONTROL}-{len(self.controls)}"
                ctl = self.controls.setdefault(setup, Row(name, "the unmutated build: "
                                                          + (" ".join(setup) or "plain"),
                                                          "control"))
                ctl.claimed = sorted({*ctl.claimed, *m.scenarios})
        seconds = measured_seconds()
        # Each control runs as parts (clusters of their own) whose results add up in its row.
        self.control_parts: list[tuple[tuple[str, ...], Row, str, list[str]]] = []
        for setup, ctl in self.controls.items():
            split = parts(ctl.claimed, seconds)
            for i, part in enumerate(split, 1):
                name = ctl.name if len(split) == 1 else f"{ctl.name}-part{i}"
                self.control_parts.append((setup, ctl, name, part))
        self._print = threading.Lock()
        self._rows = threading.Lock()
        self.children = Children()

    def say(self, text: str) -> None:
        with self._print:
            print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)

    # ---- build ---------------------------------------------------------------------------
    @property
    def binary_name(self) -> str:
        return "karpenter-aws" if self.mode == "aws-sim" else "karpenter-kwok"

    def build_mutant(self, m: Mutant) -> None:
        if self.mode == "aws-sim":
            from karpenter_e2e.clusters.awssim import build as awsbuild
            awsbuild.build_mutant(m)
        else:
            build.karpenter_binary(m.version, mutant=m)

    def build_releases(self) -> None:
        versions = sorted({m.version for m in self.mutants})
        if self.mode == "aws-sim":
            from karpenter_e2e.clusters.awssim import build as awsbuild
            for v in versions:
                awsbuild.binary(v)
        else:
            for v in versions:
                build.karpenter_binary(v)

    def build_setup(self, setup: tuple[str, ...], mutant: Mutant | None) -> str:
        """What a child run needs built, built before its deadline starts: its release's
        Karpenter and control plane (``--karpenter-version``, ``--karpenter-kubernetes-
        version``) and an upgrade's target. On a fresh machine a control plane's cold build
        took 25 min beside the runs, more than a child's whole deadline. Returns a build
        error, or "". (aws-sim builds its provider in build_releases and its control plane
        in the child, as before.)"""
        if self.mode not in ("local", "kind"):
            return ""
        release = (setup_value(setup, "karpenter-version")
                   or (mutant.version if mutant else versions.KARPENTER))
        kube = setup_value(setup, "kubernetes-version")
        upgrade = setup_value(setup, "karpenter-upgrade-to")
        try:
            prebuild(f"{release}@{kube}" if kube else release)
            if upgrade:
                build.karpenter_binary(upgrade)
        except ClusterError as exc:
            return f"its build failed: {exc}"
        return ""

    def build_one(self, m: Mutant) -> bool:
        """Build one mutant; one that does not apply or build is reported at once and left out."""
        if not m.patched:
            return True  # a fault breaks the cluster, not the code
        started = time.monotonic()
        try:
            cached = build.mutant_path(m, self.binary_name).exists()
            self.build_mutant(m)
        except ClusterError as exc:
            self.rows[m.name].error = str(exc)
            self.say(f"SKIPPED {exc}")
            return False
        self.rows[m.name].build_s = round(time.monotonic() - started, 1)
        self.say(f"built {m.name}{' (cached)' if cached else ''} in {self.rows[m.name].build_s:.0f}s")
        return True

    # ---- run -----------------------------------------------------------------------------
    def run_one(self, row: Row, mutant: Mutant | None, setup: tuple[str, ...] = (),
                part: tuple[str, list[str]] | None = None) -> None:
        """One child run: ``row``'s scenarios, or with ``part`` (a name and some of a
        control's scenarios) those, their results added to the row."""
        name, claimed = part or (row.name, row.claimed)
        run_dir = self.out / name
        run_dir.mkdir(parents=True, exist_ok=True)
        outcomes = run_dir / "outcomes.jsonl"
        outcomes.unlink(missing_ok=True)
        cluster = f"{'sim-' if self.mode == 'aws-sim' else ''}{self.cluster_prefix}{name}"[:40]
        cmd = [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
               "-o", "log_cli=false", "-q", plugin_flag("scenario"), ",".join(claimed),
               plugin_flag("cluster"), self.mode, plugin_flag("cluster-name"), cluster,
               plugin_flag("outcomes"), str(outcomes), "--junitxml", str(run_dir / "junit.xml"),
               plugin_flag("summary-file"), str(run_dir / "summary.md"),
               # A mutant's scenarios run whatever their cost: a nightly-only one too.
               plugin_flag("run-nightly"), *self.pytest_args]
        cmd += list(setup)
        if mutant and mutant.patched:
            cmd += [plugin_flag("karpenter-patch"), str(mutant.path)]
            if plugin_flag("karpenter-version") not in setup:
                cmd += [plugin_flag("karpenter-version"), mutant.version]
        if mutant:
            cmd += list(mutant.fault)
        error = self.build_setup(setup, mutant)
        started = time.monotonic()
        rc = -1
        if not error:
            self.say(f"running {name}: {', '.join(claimed)}")
            try:
                code = self.children.run(Child(name, cmd, run_dir / "pytest.log", cwd=ROOT),
                                         timeout=CHILD_DEADLINE_S)
                rc = -1 if code is None else code
                if code is None:
                    error = "interrupted before it started"
            except subprocess.TimeoutExpired:  # stopped: SIGINT; pytest tore its cluster down
                error = f"its run did not finish in {CHILD_DEADLINE_S}s (see {run_dir})"
        run_s = round(time.monotonic() - started, 1)
        said = cluster_dirs.retire(cluster, run_dir if rc != 0 else None, self.mode)
        lines = [json.loads(x) for x in outcomes.read_text().splitlines()] if outcomes.exists() else []
        cells = {s: classify(lines, s) for s in claimed}
        if rc not in (0, 1) and not error:
            error = f"pytest exited {rc}: " + _tail(run_dir / "pytest.log", 3)
        with self._rows:  # the parts of one control finish on different threads
            row.cells.update(cells)
            row.run_s = round(row.run_s + run_s, 1)
            row.rc = rc if row.rc in (None, 0) else row.rc
            row.error = "; ".join(filter(None, (row.error, error)))
        summary = ", ".join(f"{s}={c.status}" for s, c in cells.items())
        self.say(f"finished {name} in {run_s:.0f}s: {summary}{'; ' + said if said else ''}")

    def run(self) -> None:
        """The control starts at once; each mutant starts as soon as it is built. Builds go
        one at a time (a build fills both cores), overlapping the runs, which mostly wait on
        Karpenter's clocks."""
        self.build_releases()
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            futures = [pool.submit(self.run_one, ctl, None, setup, (name, part))
                       for setup, ctl, name, part in self.control_parts]
            for m in self.mutants:
                if self.build_one(m):
                    futures.append(pool.submit(self.run_one, self.rows[m.name], m, m.setup))
                    if m.oracle:  # the same mutant with the oracles off: its scenarios pass
                        bare = self.bare.setdefault(m.name, Row(f"{m.name}{BARE}",
                                                                claimed=list(m.scenarios)))
                        futures.append(pool.submit(
                            self.run_one, bare, m, (*m.setup, f"{plugin_flag('oracles')}=off")))
                    if m.generic:  # the same mutant judged by the oracles alone
                        loose = self.loose.setdefault(m.name, Row(f"{m.name}{GENERIC}",
                                                                  claimed=list(m.scenarios)))
                        futures.append(pool.submit(self.run_one, loose, m, (*m.setup,
                                                                            *GENERIC_OPTIONS)))
            for f in futures:
                f.result()
        except BaseException:
            # Ctrl-C or SIGTERM: queued runs never start, running ones are interrupted
            # (each tears its own cluster down), and only then does the matrix return.
            pool.shutdown(wait=False, cancel_futures=True)
            self.children.interrupt()
            pool.shutdown(wait=True)
            raise
        pool.shutdown()
        for m in self.mutants:
            row = self.rows[m.name]
            row.status = verdict(row, self.controls[m.setup], m.expect, m.oracle,
                                 self.bare.get(m.name), m.generic, self.loose.get(m.name),
                                 self.controls.get((*m.setup, *GENERIC_OPTIONS)))
        for ctl in self.controls.values():
            ctl.status = "passed" if all(c.status == "survived" for c in ctl.cells.values()) \
                else "failed"

    # ---- report --------------------------------------------------------------------------
    def result(self, wall_s: float) -> dict:
        rows = list(self.rows.values())
        killed = sum(r.status == "killed" for r in rows)
        return {"score": f"{killed}/{len(rows)}", "killed": killed, "total": len(rows),
                "wall_s": round(wall_s, 1), "jobs": self.jobs, "mode": self.mode,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "controls": [asdict(c) for c in self.controls.values()],
                "mutants": [asdict(r) for r in rows],
                "without_oracles": [asdict(r) for r in self.bare.values()],
                "asserts_off": [asdict(r) for r in self.loose.values()]}


def _tail(path: Path, lines: int) -> str:
    try:
        return " / ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def write_allure(alluredir: Path, result: dict) -> None:
    """One Allure test result per mutant (passed = killed), plus the matrix as a global file."""
    import uuid

    from karpenter_e2e.rendering import allure_files
    alluredir.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    for m in result["mutants"]:
        status = "passed" if m["status"] == "killed" else "failed"
        details = "\n".join(f"{s}: {c['status']} {c['message']}" for s, c in m["cells"].items())
        body = {"uuid": str(uuid.uuid4()), "historyId": f"mutant-{m['name']}",
                "name": f"mutant {m['name']} is killed by {', '.join(m['claimed'])}",
                "fullName": f"mutants.{m['name']}", "status": status,
                "statusDetails": {"message": f"{m['status']}: {m['regression']}",
                                  "trace": m["error"] or details},
                "start": now, "stop": now + int((m["build_s"] + m["run_s"]) * 1000),
                "labels": [{"name": "epic", "value": "Mutant matrix"},
                           {"name": "feature", "value": m["family"]},
                           {"name": "story", "value": m["name"]}]}
        (alluredir / f"{body['uuid']}-result.json").write_text(json.dumps(body))
    allure_files.attach_globally(alluredir, "Mutant kill matrix", markdown(result))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e mutants", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mutants", default="", help="names to run, space or comma separated "
                                                 "(default: every *.patch in the folder)")
    p.add_argument("--mutant-dir", type=Path, default=mutants_mod.MUTANTS_DIR,
                   help="a folder of patches in the mutants/ format (e.g. a patched fork's)")
    p.add_argument("--jobs", type=int, default=4,
                   help="clusters run at once (4: measured, see docs/mutants.md)")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only the I-th of N slices of the mutants, balanced by how many "
                        "scenarios each names (the controls run in every shard)")
    p.add_argument("--cluster-prefix", default="mut-",
                   help="prefix of the clusters' names (<prefix><mutant>): two matrices on one "
                        "machine need different ones, or their controls share a cluster")
    backends.add_options(adder(p.add_argument), only=("cluster",),
                         modes=("local", "aws-sim", "kind"))
    p.add_argument("--out", type=Path, default=REPORTS / "mutants")
    p.add_argument("--alluredir", type=Path, default=REPORTS / "allure-results")
    p.add_argument("pytest_args", nargs="*", default=list(DEFAULT_PYTEST_ARGS),
                   help="pytest options for every run, the controls included (default: "
                        f"{' '.join(DEFAULT_PYTEST_ARGS)})")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    started = time.monotonic()
    try:
        found = mutants_mod.load(args.mutant_dir)
        selected = mutants_mod.select(found, args.mutants.replace(",", " ").split(), args.cluster)
        if args.shard:
            try:
                i, n = lanes.parse_shard(args.shard)
            except lanes.PlanError as exc:
                raise ClusterError(str(exc)) from None
            mine = {t.nodeid for t in lanes.shard(
                [lanes.PlannedTest(m.name, float(len(m.scenarios))) for m in selected], i, n)}
            selected = [m for m in selected if m.name in mine]
        if not selected:
            raise ClusterError(f"no mutant in {args.mutant_dir} runs in {args.cluster} mode")
        known = known_scenarios()
        for m in selected:
            unknown = sorted(set(m.scenarios) - known)
            if unknown:
                raise ClusterError(f"mutant {m.name} names unknown scenario ids "
                                   f"{', '.join(unknown)}; known: {', '.join(sorted(known))}")
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    matrix = Matrix(selected, args.out, max(1, args.jobs), args.pytest_args,
                    cluster_prefix=args.cluster_prefix, mode=args.cluster)
    scenarios = sorted({s for m in selected for s in m.scenarios})
    print(f"mutant matrix ({args.cluster} mode): {len(selected)} mutants, scenarios "
          f"{', '.join(scenarios)}, {matrix.jobs} at a time", flush=True)
    sigterm_as_ctrl_c()
    try:
        matrix.run()
    except KeyboardInterrupt:
        print("interrupted: every mutant run stopped and took its cluster down", file=sys.stderr)
        return 130
    result = matrix.result(time.monotonic() - started)
    (args.out / "matrix.json").write_text(json.dumps(result, indent=1))
    text = markdown(result)
    (args.out / "matrix.md").write_text(text)
    write_allure(args.alluredir, result)
    print(text)
    print(f"(also in {args.out / 'matrix.md'} and matrix.json)")
    ok = result["killed"] == result["total"] and all(c["status"] == "passed"
                                                     for c in result["controls"])
    return 0 if ok else 1
