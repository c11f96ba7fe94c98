"""`make matrix`: the suites on several Karpenter releases, written as scenario x version.

    karpenter-e2e matrix [--versions "v1.6.4 v1.15.0"] [--scenarios a,b]
        [--kubernetes-versions "1.35 1.36"] [--jobs 2] [--reports-dir reports]
        [--cluster-prefix matrix] [-- PYTEST_ARGS...]

A column is a release on its default Kubernetes minor (clusters/karpenter/compat.py), or, with
``--kubernetes-versions``, a release on each minor named (``v1.12.1@1.35``); a combination
outside the release's supported range is a column of skipped cells that says so.

1. Check the input within seconds, before any cluster starts: every version with
   releases.check (served by the Go module proxy, v1.0 on); the scenario ids with one
   ``pytest --collect-only`` (the plugin's own ``--karpenter-scenario`` error).
2. Per version, its build (one thread builds them one at a time, in the runs' order, ahead
   of the runs: runners/prebuilds.py), and ``--jobs`` at once its run: one plain pytest,
   ``python -m pytest suites -p no:xdist --karpenter-cluster-name <prefix>-<version>
   --karpenter-version <v> --karpenter-reports-dir <out>/<v>``, which brings its own
   cluster up and takes it down.
3. Each version's JUnit file gives its column: per scenario passed; failed (the first line of
   the failing assert, and the timeline picture's path); or skipped (the reason).
4. Written to ``<reports-dir>/matrix-<stamp>/``: ``matrix.json``, ``matrix.md``,
   ``matrix.png`` (a heat map) and ``allure-results/`` (every version's results, each tagged
   with its version); ``<reports-dir>/matrix-latest`` points at it.

Ctrl-C (or SIGTERM): SIGINT to every running pytest once (each takes its cluster down), up to
STOP_GRACE_S for that, then SIGKILL and ``clusters down`` for what is left; exit 130.

Exit: 0 every cell passed or skipped; 1 a cell failed; 2 bad input; 130 interrupted.

Long because the matrix runner carries its input checks (releases, Kubernetes minors,
scenario ids), the per-version runs, the classification of their JUnit files, the Allure merge
and the assembly of the cells; the rendering (table and heat map) is rendering/matrix.py. The
next seam is the input checks and the one-release run, which bisect and release-diffs use too.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import plugin_flag
from karpenter_e2e.clusters.infra import (
    build,
    kube_releases,
    process,
    releases,
    versions as local_versions,
)
from karpenter_e2e.clusters.karpenter import compat
from karpenter_e2e.rendering import run_dirs
from karpenter_e2e.rendering.matrix import Cell, Matrix, heatmap, to_markdown
from karpenter_e2e.runners import cluster_dirs, collect
from karpenter_e2e.runners.children import Child, Children
from karpenter_e2e.runners.cli import child
from karpenter_e2e.runners.prebuilds import BuildsAhead, prebuild, split_column

PY = sys.executable
BUILD_NICE = 10


class BadInput(ValueError):
    """A version or scenario id the matrix cannot run: said before any cluster starts."""


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _case_result(case: ET.Element) -> tuple[str, str]:
    """(status, text) of one JUnit <testcase>."""
    for tag in ("failure", "error"):
        el = case.find(tag)
        if el is not None:
            text = _first_line(el.get("message")) or _first_line(el.text)
            if tag == "error":
                text = f"error: {text}" if text else "error"
            return "failed", text
    el = case.find("skipped")
    if el is not None:
        reason = el.get("message") or el.text or ""
        # pytest writes "file:line: reason" for a skip raised in setup with a location
        return "skipped", _first_line(re.sub(r"^\S+:\d+: ", "", reason))
    return "passed", ""


def _properties(case: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in case.iter("property")}


def classify_junit(path: Path) -> dict[str, Cell]:
    """A version's cells from its JUnit file: one per scenario id (the ``scenario`` property
    the plugin writes; a test case without one is its own row, by name). A test that failed
    and then errored in teardown has two <testcase> entries: they count as one, failed with
    the first failure's text. A scenario with several test cases fails if one fails (the first
    failure's text), is skipped only if all are skipped, and passes otherwise."""
    tests: dict[str, dict] = {}  # "classname::name" -> status, text, scenario, timeline, time
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        if not case.get("name"):  # what pytest writes for the test a Ctrl-C cut short
            continue
        props = _properties(case)
        name = f"{case.get('classname', '')}::{case.get('name', '')}".strip(":")
        status, text = _case_result(case)
        t = tests.setdefault(name, {"status": status, "text": text, "scenario": "",
                                    "timeline": None, "seconds": 0.0})
        if t["status"] != "failed" and status == "failed":
            t["status"], t["text"] = status, text
        t["scenario"] = t["scenario"] or props.get("scenario") or case.get("name") or "?"
        t["timeline"] = t["timeline"] or props.get("timeline")
        t["seconds"] += float(case.get("time", "0") or 0)
    by_scenario: dict[str, list[tuple[str, dict]]] = {}
    for name, t in tests.items():
        by_scenario.setdefault(t["scenario"], []).append((name, t))
    cells: dict[str, Cell] = {}
    for scenario, results in by_scenario.items():
        names = [n for n, _t in results]
        seconds = round(sum(t["seconds"] for _n, t in results), 1)
        failed = [(n, t) for n, t in results if t["status"] == "failed"]
        skipped = [t for _n, t in results if t["status"] == "skipped"]
        if failed:
            name, t = failed[0]
            cells[scenario] = Cell("failed", t["text"], t["timeline"], names, seconds,
                                   name.rsplit("::", 1)[-1] if len(results) > 1 else "")
        elif len(skipped) == len(results):
            cells[scenario] = Cell("skipped", skipped[0]["text"], None, names, seconds)
        else:
            note = (f"{len(results) - len(skipped)} of {len(results)} test cases passed, "
                    f"{len(skipped)} skipped (first: {skipped[0]['text']})" if skipped else "")
            cells[scenario] = Cell("passed", note, None, names, seconds)
    return cells


# ---- Allure --------------------------------------------------------------------------------
def merge_allure(run_dirs: dict[str, Path], out: Path) -> int:
    """Every version's Allure results in one directory. Each result gets a ``karpenter``
    parameter and its version in its history and test-case ids, so that Allure shows one
    result per version instead of taking the other versions for retries."""
    from karpenter_e2e.runners import merge

    out.mkdir(parents=True, exist_ok=True)
    n = 0
    envs = []
    for version, run_dir in run_dirs.items():
        src = run_dir / "allure-results"
        if not src.is_dir():
            continue
        for f in sorted(src.iterdir()):
            if not f.is_file():
                continue
            if f.name == "environment.properties":
                envs.append(f)
                continue
            if f.name.endswith("-result.json"):
                data = json.loads(f.read_text())
                data.setdefault("parameters", []).append({"name": "karpenter", "value": version})
                for key in ("historyId", "testCaseId"):
                    if data.get(key):
                        data[key] = f"{data[key]}-{version}"
                data["name"] = f"{data.get('name', '')} [{version}]"
                data.setdefault("labels", []).append({"name": "tag", "value": version})
                (out / f.name).write_text(json.dumps(data))
                n += 1
            else:
                shutil.copy2(f, out / f.name)
    if envs:
        merge._merge_environment(envs, out / "environment.properties")
    return n


# ---- input ---------------------------------------------------------------------------------
def default_versions(served: Callable[[], list[str]] | None = None) -> list[str]:
    """Every release the module proxy serves (``releases.served``), from v1.0 on, oldest
    first."""
    key = local_versions.semver
    return [v for v in (served or releases.served)() if key(v) >= key(releases.OLDEST)]


def check_versions(wanted: Iterable[str], served: Callable[[], list[str]] | None = None
                   ) -> list[str]:
    """The versions, oldest first, each checked by releases.check (its errors, unchanged)."""
    out: list[str] = []
    for v in wanted:
        try:
            out.append(releases.check(v, served))
        except ClusterError as exc:
            raise BadInput(str(exc)) from None
    if len(set(out)) != len(out):
        raise BadInput(f"a version is named twice: {' '.join(out)}")
    return sorted(out, key=local_versions.semver)


def check_kubernetes(wanted: Iterable[str], served: Callable[[], list[str]] | None = None
                     ) -> list[str]:
    """The Kubernetes axis: minors ('1.35', 'v1.35' or a release, which names its minor),
    each served by the module proxy, oldest first."""
    out: list[str] = []
    for text in wanted:
        m = re.match(r"^v?(\d+)\.(\d+)(?:\.\d+)?$", text)
        if not m:
            raise BadInput(f"--kubernetes-versions {text!r} is not a Kubernetes minor like 1.35")
        out.append(f"{m[1]}.{m[2]}")
    if len(set(out)) != len(out):
        raise BadInput(f"a Kubernetes minor is named twice: {' '.join(out)}")
    if out:
        try:
            patches = kube_releases.served_patches(served)
        except ClusterError as exc:
            raise BadInput(str(exc)) from None
        missing = [k for k in out if compat.minor(k) not in patches]
        if missing:
            raise BadInput(f"Kubernetes {', '.join(missing)} not served by the Go module proxy "
                           f"(k8s.io/kubernetes); served minors: "
                           f"{', '.join(compat.minor_text(k) for k in sorted(patches))}")
    return sorted(out, key=compat.minor)


def columns(chosen: list[str], kube: list[str]) -> tuple[list[str], dict[str, str]]:
    """The matrix's columns (release, or release@minor for each of ``kube``) and, for each
    combination outside its release's supported range, why it is skipped."""
    if not kube:
        return list(chosen), {}
    cols: list[str] = []
    skipped: dict[str, str] = {}
    for release in chosen:
        support = compat.supported(release)
        for k in kube:
            col = f"{release}@{k}"
            cols.append(col)
            if compat.minor(k) not in support:
                skipped[col] = (f"Kubernetes {k} is outside what Karpenter {release} supports: "
                                f"{support.text}")
    return cols, skipped


def split_words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", text or "") if w]


def collect_scenarios(version: str, scenarios: list[str], paths: list[str], args: list[str],
                      workdir: Path, runner=subprocess.run) -> list[str]:
    """The scenario ids the run will have rows for, from one ``--collect-only`` (no cluster):
    ``scenarios`` in their order if given (an unknown id is the plugin's usage error, as a
    BadInput), else every collected id in suite order."""
    args = ["-p", "no:cacheprovider", plugin_flag("karpenter-version"), version, *args]
    if scenarios:
        args += [plugin_flag("scenario"), ",".join(scenarios)]
    try:
        tests = collect.plan(paths, args, workdir / "collected.json", runner=runner)
    except collect.CollectFailed as exc:
        raise BadInput(exc.error_line()) from None
    found: list[str] = []
    order = sorted(tests, key=lambda t: t["nodeid"].split("::")[0])  # by suite file
    for t in order:
        sid = t.get("scenario") or t["nodeid"].rsplit("::", 1)[-1]
        if sid not in found:
            found.append(sid)
    if scenarios:
        return [s for s in scenarios if s in found] + [s for s in found if s not in scenarios]
    return found


def cluster_name(prefix: str, version: str) -> str:
    return f"{prefix}-{re.sub(r'[.@]', '-', version)}"


# ---- running -------------------------------------------------------------------------------
def take_down(cluster: str) -> None:
    subprocess.run([*child("cluster"), "down", "--cluster-name", cluster],
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=180)


@dataclass
class VersionRun:
    version: str
    cells: dict[str, Cell]
    exit: int | None
    wall_s: float
    build_s: float
    log: Path
    run_dir: Path | None
    error: str = ""


def run_version(version: str, out: Path, scenarios: list[str], children: Children,
                paths: list[str], args: list[str], prefix: str,
                build_fn: Callable[[str], float] = prebuild, lanes: int = 0) -> VersionRun:
    """One release: its build, then one plain pytest on a cluster of its own
    (``--karpenter-scenario`` ``scenarios``, if any), or with ``lanes`` the `make e2e` runner
    on that many clusters; its cells."""
    vdir = out / version
    log = vdir / "pytest.log"
    try:
        build_s = build_fn(version)
    except ClusterError as exc:
        text = f"build failed: {_first_line(str(exc))}"
        print(f"matrix: {version}: {text}", file=sys.stderr, flush=True)
        return VersionRun(version, {}, None, 0.0, 0.0, log, None, text)
    cluster = cluster_name(prefix, version)
    release, kube = split_column(version)
    chosen = [plugin_flag("karpenter-version"), release,
              *([plugin_flag("kubernetes-version"), kube] if kube else []),
              *([plugin_flag("scenario"), ",".join(scenarios)] if scenarios else []), *args]
    if lanes:
        # The default run's layout (serial lanes for the disruption scenarios), so a cell
        # differs from the nightly's only by the release. Its lanes are <cluster>-cN.
        cmd = [*child("e2e"), "--clusters", str(lanes),
               "--reports-dir", str(vdir), "--", "-p", "no:cacheprovider", "-v", "-rs",
               plugin_flag("cluster-name"), cluster, *chosen]
        clusters = [f"{cluster}-c{i}" for i in range(1, lanes + 1)] + [cluster]
    else:
        cmd = [PY, "-m", "pytest", *paths, "-p", "no:xdist", "-p", "no:cacheprovider", "-v",
               "-rs", plugin_flag("cluster-name"), cluster, plugin_flag("reports-dir"),
               str(vdir), *chosen]
        clusters = [cluster]
    t0 = time.monotonic()
    print(f"matrix: {version}: {'lanes' if lanes else 'pytest'} start, cluster {cluster} "
          f"(log {log})", flush=True)

    def take_all_down() -> None:
        for c in clusters:
            take_down(c)

    code = children.run(Child(f"matrix: {version}", cmd, log, on_kill=take_all_down))
    if code is None:
        return VersionRun(version, {}, None, 0.0, build_s, log, None, "interrupted")
    wall = time.monotonic() - t0
    run_dir = run_dirs.latest(vdir)
    junit = run_dir / "junit.xml" if run_dir else None
    cells: dict[str, Cell] = {}
    error = ""
    if junit is not None and junit.is_file():
        try:
            cells = classify_junit(junit)
        except ET.ParseError as exc:
            error = f"unreadable JUnit file {junit}: {exc}"
    else:
        error = f"no JUnit file: pytest exited {code}; {_tail(log)}"
    if children.interrupted.is_set():
        error = "interrupted"  # the tests it did not finish are "not run"
    for c in clusters:
        said = cluster_dirs.retire(c, vdir if code != 0 else None)
        if said:
            print(f"matrix: {version}: {c}: {said}", flush=True)
    if run_dir is not None:
        ran = _environment(run_dir).get("kubernetes")
        print(f"matrix: {version}: ran on Kubernetes {ran or 'unknown'}", flush=True)
    print(f"matrix: {version}: pytest exit {code} in {wall:.0f}s: "
          f"{_closing_line(log) or error}", flush=True)
    return VersionRun(version, cells, code, wall, build_s, log, run_dir, error)


def _environment(run_dir: Path) -> dict[str, str]:
    """The run's Allure environment (mode, versions as the cluster reported them)."""
    try:
        text = (run_dir / "allure-results" / "environment.properties").read_text()
    except OSError:
        return {}
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)


def _closing_line(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if re.match(r"^=+ .*(passed|failed|skipped|error|no tests ran).* in [\d.]+s", line):
            return line.strip("= ")
    return ""


def _tail(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:200] if lines else "empty log"


def assemble(versions: list[str], scenarios: list[str], runs: dict[str, VersionRun],
             out: Path) -> Matrix:
    cells: dict[tuple[str, str], Cell] = {}
    extra: list[str] = []
    for v in versions:
        r = runs.get(v)
        if r is None:
            continue
        for s in scenarios + [s for s in r.cells if s not in scenarios]:
            cell = r.cells.get(s)
            if cell is None:
                if r.error or r.exit not in (0, 1, 5):
                    cell = Cell("not run" if r.error == "interrupted" else "failed",
                                r.error or f"no result (pytest exited {r.exit})")
                else:
                    continue
            if cell.timeline:
                try:
                    cell.timeline = os.path.relpath(cell.timeline, out)
                except ValueError:
                    pass
            if s not in scenarios and s not in extra:
                extra.append(s)
            cells[(s, v)] = cell
    meta = {"per_version": {
        v: {"exit": r.exit, "wall_s": round(r.wall_s, 1), "build_s": round(r.build_s, 1),
            "kubernetes": _environment(r.run_dir).get("kubernetes") if r.run_dir else None,
            "log": os.path.relpath(r.log, out),
            "run_dir": os.path.relpath(r.run_dir, out) if r.run_dir else None}
        for v, r in runs.items()}}
    return Matrix(versions, scenarios + extra, cells, meta)


def run_matrix(versions: list[str], scenarios: list[str], out: Path, jobs: int,
               paths: list[str], args: list[str], prefix: str,
               children: Children | None = None, lanes: int = 0,
               build_fn: Callable[[str], float] = prebuild) -> dict[str, VersionRun]:
    """Every version, ``jobs`` at once, newest first (it is what most scenarios run on, so a
    harness problem shows early); the builds one at a time in the same order, ahead of the
    runs."""
    children = children or Children()
    todo = list(reversed(versions))
    runs: dict[str, VersionRun] = {}
    lock = threading.Lock()
    builds = BuildsAhead(todo, children.interrupted, build_fn)

    def worker() -> None:
        while not children.interrupted.is_set():
            with lock:
                if not todo:
                    return
                v = todo.pop(0)
            r = run_version(v, out, scenarios, children, paths, args, prefix,
                            build_fn=builds.wait, lanes=lanes)
            with lock:
                runs[v] = r

    threads = [threading.Thread(target=worker, daemon=True, name=f"matrix-{i}")
               for i in range(max(1, min(jobs, len(versions))))]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.5)
    builds.join()
    return runs


def write(m: Matrix, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"json": out / "matrix.json", "markdown": out / "matrix.md",
             "png": out / "matrix.png"}
    files["json"].write_text(json.dumps(m.to_json(), indent=1))
    files["markdown"].write_text(to_markdown(m))
    try:
        heatmap(m, files["png"])
    except Exception as exc:  # noqa: BLE001 - the JSON and Markdown are written regardless
        print(f"matrix: heat map not drawn: {type(exc).__name__}: {exc} (--render "
              f"{out} draws it again)", file=sys.stderr)
    return files


def rerender(out: Path) -> Matrix:
    """``out``/matrix.json again, each release's cells classified anew from its JUnit file
    where that is still there (a fix to the classification then shows without a run)."""
    m = Matrix.from_json(json.loads((out / "matrix.json").read_text()))
    for v, p in (m.meta.get("per_version") or {}).items():
        junit = out / p["run_dir"] / "junit.xml" if p.get("run_dir") else None
        if junit is None or not junit.is_file():
            continue
        for s, cell in classify_junit(junit).items():
            if cell.timeline:
                cell.timeline = os.path.relpath(cell.timeline, out)
            m.cells[(s, v)] = cell
            if s not in m.scenarios:
                m.scenarios.append(s)
    return m


def harness_commit() -> str | None:
    """The harness's git commit (with ``-dirty`` for uncommitted changes), so that runs
    joined later can be told apart; None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    got = process.run(["git", "describe", "--always", "--dirty", "--abbrev=7"],
                      process.LOCAL_TIMEOUT_S, cwd=root)
    return got.stdout.strip() if got.returncode == 0 and got.stdout.strip() else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="karpenter-e2e matrix",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default="",
                    help="releases, space or comma separated (default: every release the Go "
                         "module proxy serves from v1.0 on)")
    ap.add_argument("--scenarios", default="", help="scenario ids (default: every scenario)")
    ap.add_argument("--kubernetes-versions", default="",
                    help="Kubernetes minors, space or comma separated: each release runs on "
                         "each one inside its supported range (default: each release on its "
                         "default minor)")
    ap.add_argument("--jobs", type=int, default=2, help="versions at once, each on its own "
                                                        "cluster (default 2)")
    ap.add_argument("--lanes", type=int, default=0, metavar="K",
                    help="run each version as `make e2e` does, on K clusters (serial lanes "
                         "for the disruption scenarios); with --jobs 1 the whole machine "
                         "goes to one release at a time (default 0: one plain pytest)")
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("--cluster-prefix", default="matrix",
                    help="each version's cluster is <prefix>-<version> (default matrix)")
    ap.add_argument("--paths", default="suites", help="what pytest collects (default: suites)")
    ap.add_argument("--dry-run", action="store_true",
                    help="check the input, print the releases and scenario ids, and stop")
    ap.add_argument("--print-versions", action="store_true",
                    help="print the releases it would run (--versions, else every served one) "
                         "as a JSON list, and stop: the nightly's job matrix")
    ap.add_argument("--render", type=Path, default=None, metavar="DIR",
                    help="only write DIR's matrix again (matrix.json, .md, .png) from its "
                         "releases' JUnit files (no run)")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER,
                    help="passed to every version's pytest (after --)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.render is not None:
        try:
            m = rerender(opts.render)
        except (OSError, ValueError, KeyError, TypeError, ET.ParseError) as exc:
            print(f"matrix: --render {opts.render}: {exc}", file=sys.stderr)
            return 2
        files = write(m, opts.render)
        print(f"matrix: {files['markdown']}, {files['png']}")
        return 0
    args = [a for a in opts.pytest_args if a != "--"]
    paths = opts.paths.split(",")
    started = time.time()
    t0 = time.monotonic()
    stamp = time.strftime("%m%d%H%M%S")
    out = opts.reports_dir / f"matrix-{stamp}"
    try:
        if opts.jobs < 1:
            raise BadInput(f"--jobs {opts.jobs}: at least 1")
        if opts.lanes < 0:
            raise BadInput(f"--lanes {opts.lanes}: 0 (plain pytest) or a number of clusters")
        try:
            wanted = split_words(opts.versions) or default_versions()
        except ClusterError as exc:
            raise BadInput(str(exc)) from None
        chosen = check_versions(wanted)
        if opts.print_versions:
            print(json.dumps(chosen))
            return 0
        kube = check_kubernetes(split_words(opts.kubernetes_versions))
        cols, out_of_range = columns(chosen, kube)
        out.mkdir(parents=True, exist_ok=True)
        scenarios = collect_scenarios(chosen[-1], split_words(opts.scenarios), paths, args, out)
    except BadInput as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        if out.is_dir() and not any(p.name != "collected.json" for p in out.iterdir()):
            shutil.rmtree(out, ignore_errors=True)
        return 2
    print(f"matrix: {len(scenarios)} scenario(s) x {len(chosen)} release(s) "
          f"({' '.join(chosen)})" + (f" x Kubernetes {' '.join(kube)} ({len(out_of_range)} "
                                     f"combination(s) outside their range: skipped)"
                                     if kube else "")
          + f", {opts.jobs} at once; into {out}", flush=True)
    if opts.dry_run:
        print(f"matrix: scenarios: {', '.join(scenarios)}")
        shutil.rmtree(out, ignore_errors=True)
        return 0
    # The builds ahead run beside earlier releases' clusters: they get the CPU those leave.
    os.environ.setdefault(build.BUILD_NICE_ENV, str(BUILD_NICE))
    children = Children()
    with children.stopped_by_signals("matrix"):
        # --karpenter-scenario only when ids were named: otherwise each version runs the
        # whole suites
        runs = run_matrix([c for c in cols if c not in out_of_range],
                          scenarios if split_words(opts.scenarios) else [], out,
                          opts.jobs, paths, args, opts.cluster_prefix, children,
                          lanes=opts.lanes)
    for col, why in out_of_range.items():  # nothing ran: every cell is that skip
        runs[col] = VersionRun(col, {s: Cell("skipped", why) for s in scenarios}, None, 0.0,
                               0.0, out / col / "pytest.log", None)
    m = assemble(cols, scenarios, runs, out)
    m.meta.update({"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
                   "wall_s": round(time.monotonic() - t0, 1), "jobs": opts.jobs,
                   "lanes": opts.lanes, "commit": harness_commit(),
                   "command": " ".join(["karpenter-e2e matrix",
                                        *(argv if argv is not None else sys.argv[1:])])})
    n = merge_allure({v: r.run_dir for v, r in runs.items() if r.run_dir}, out / "allure-results")
    files = write(m, out)
    run_dirs.point(opts.reports_dir, out, "matrix-latest")
    print(files["markdown"].read_text())
    print(f"matrix: {files['json']}, {files['markdown']}, {files['png']}, "
          f"{out / 'allure-results'} ({n} results); wall {m.meta['wall_s']:.0f}s", flush=True)
    if children.interrupted.is_set():
        return 130
    return 1 if m.counts()["failed"] else 0
