"""`make bisect`: the first Karpenter release where a scenario fails (or passes again).

    karpenter-e2e bisect --scenario ID --good vA --bad vB
    karpenter-e2e bisect --scenario ID --broken vA --fixed vB
        [--reports-dir reports] [--cluster-prefix matrix] [-- PYTEST_ARGS...]

GOOD/BAD finds a regression: the first release where a scenario that passed fails.
BROKEN/FIXED finds a fix: the first release where a scenario that failed passes, which is
what an operator stuck on an old release asks ("which upgrade fixes this?"). The candidates
are the releases the Go module proxy serves from the older end to the newer. Both ends are
run first and must have their outcome, else the search says which end does not hold and stops
(the newer end with the older end's outcome: "no change"). Then the middle candidate is run,
halving the range each time. A release where the scenario is skipped (it lacks a feature) has
neither outcome: it is reported, and the nearest untried candidate to the middle is run
instead. Each run is one plain pytest on a cluster of its own (runners/matrix.py's
``run_version``), one at a time.

The answer: the first release with the newer end's outcome, and the module files that changed
between the release before it and it (``go mod download -json sigs.k8s.io/karpenter@v``'s
Dir; files under pkg/ and kwok/, without *_test.go and testdata; added, removed and changed,
with line counts).

Exit: 0 a first release was found (or nothing changed); 1 an end does not hold; 2 bad
input; 130 interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions as local_versions
from karpenter_e2e.rendering.matrix import Cell
from karpenter_e2e.runners import matrix
from karpenter_e2e.runners.children import Children
from karpenter_e2e.runners.matrix import BadInput

ROOTS = ("pkg", "kwok")


@dataclass
class Step:
    version: str
    cell: Cell
    why: str  # "GOOD end", "BAD end", "middle of v.. - v.."


@dataclass
class Result:
    verdict: str  # found | no-change | old-does-not-hold | new-does-not-hold | interrupted
    message: str
    first_new: str | None = None  # the first release with the NEW end's outcome
    last_old: str | None = None  # the release before it, with the OLD end's outcome
    skipped: list[str] = field(default_factory=list)  # between last_old and first_new
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Terms:
    """What the search looks for: a regression (passes on the older end, fails on the newer:
    GOOD and BAD) or a fix (fails on the older end, passes on the newer: BROKEN and FIXED)."""
    old: str  # the older end's name
    new: str
    old_status: str  # the outcome the older end must have
    new_status: str
    first: str  # what the first release of the new outcome is called


REGRESSION = Terms("GOOD", "BAD", "passed", "failed", "first failing release")
FIX = Terms("BROKEN", "FIXED", "failed", "passed", "first passing release (the fix)")


def candidates(old: str, new: str, served: list[str], terms: Terms = REGRESSION) -> list[str]:
    """The served releases from ``old`` to ``new``, both included, oldest first."""
    key = local_versions.semver
    if key(old) >= key(new):
        raise BadInput(f"{terms.old} {old} must be older than {terms.new} {new}")
    return [v for v in sorted(set(served) | {old, new}, key=key) if key(old) <= key(v) <= key(new)]


def search(versions: list[str], run: Callable[[str], Cell],
           say: Callable[[str], None] = lambda _s: None, terms: Terms = REGRESSION) -> Result:
    """Binary search over ``versions`` (oldest first; ``versions[0]`` the older end,
    ``versions[-1]`` the newer) with ``run`` (a version -> its cell for the scenario) for the
    first release whose outcome is the newer end's. Both ends are run first."""
    steps: list[Step] = []
    did = {"failed": "failed", "skipped": "was skipped", "passed": "passed"}

    def do(v: str, why: str) -> Cell:
        say(f"bisect: running {v} ({why})")
        cell = run(v)
        steps.append(Step(v, cell, why))
        say(f"bisect: {v}: {cell.status}{f': {cell.text}' if cell.text else ''}")
        return cell

    def does_not_hold(end: str, v: str, c: Cell) -> str:
        return (f"{end} {v} does not hold: the scenario {did.get(c.status, c.status)} "
                f"there{f' ({c.text})' if c.text else ''}")

    old, new = versions[0], versions[-1]
    o = do(old, f"{terms.old} end")
    if o.status == "not run":
        return Result("interrupted", f"interrupted at {old}", steps=steps)
    if o.status != terms.old_status:
        return Result("old-does-not-hold", does_not_hold(terms.old, old, o), steps=steps)
    n = do(new, f"{terms.new} end")
    if n.status == "not run":
        return Result("interrupted", f"interrupted at {new}", steps=steps)
    if n.status == terms.old_status:
        return Result("no-change", f"no change: the scenario {did[n.status]} on {terms.old} "
                      f"{old} and on {terms.new} {new}; nothing to bisect", last_old=new,
                      steps=steps)
    if n.status != terms.new_status:
        return Result("new-does-not-hold", does_not_hold(terms.new, new, n), steps=steps)
    lo, hi = 0, len(versions) - 1
    skipped: set[int] = set()
    while True:
        untried = [i for i in range(lo + 1, hi) if i not in skipped]
        if not untried:
            break
        middle = (lo + hi) / 2
        i = min(untried, key=lambda k: (abs(k - middle), k))
        cell = do(versions[i], f"middle of {versions[lo]} .. {versions[hi]}")
        if cell.status == terms.old_status:
            lo = i
        elif cell.status == terms.new_status:
            hi = i
        elif cell.status == "skipped":
            skipped.add(i)
        else:
            return Result("interrupted", f"interrupted at {versions[i]}", steps=steps)
    between = [versions[i] for i in sorted(skipped) if lo < i < hi]
    first, last = versions[hi], versions[lo]
    if between:
        msg = (f"{terms.first}: {first}, or one of {', '.join(between)} before it, where "
               f"the scenario is skipped; last that {did[terms.old_status]}: {last}")
    else:
        msg = f"{terms.first}: {first} (the release before it, {last}, {did[terms.old_status]})"
    all_skipped = [versions[i] for i in sorted(skipped)]
    if all_skipped:
        msg += f". Skipped (neither outcome): {', '.join(all_skipped)}"
    return Result("found", msg, first, last, between, steps)


# ---- the module trees ----------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    status: str  # added | removed | changed
    path: str
    added: int  # lines
    removed: int

    def line(self) -> str:
        return f"{self.status:8} {self.path}  +{self.added} -{self.removed}"


def _wanted(rel: Path) -> bool:
    return (rel.parts[0] in ROOTS and not rel.name.endswith("_test.go")
            and "testdata" not in rel.parts)


def _files(root: Path) -> dict[str, Path]:
    out = {}
    for top in ROOTS:
        base = root / top
        if not base.is_dir():
            continue
        for f in base.rglob("*"):
            rel = f.relative_to(root)
            if f.is_file() and _wanted(rel):
                out[rel.as_posix()] = f
    return out


def _lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", errors="replace").splitlines()


def module_diff(old: Path, new: Path) -> list[Change]:
    """The files under pkg/ and kwok/ (no *_test.go, no testdata) added, removed or changed
    from the module tree ``old`` to ``new``, with their added and removed line counts."""
    a, b = _files(old), _files(new)
    out: list[Change] = []
    for rel in sorted(set(a) | set(b)):
        if rel not in a:
            out.append(Change("added", rel, len(_lines(b[rel])), 0))
        elif rel not in b:
            out.append(Change("removed", rel, 0, len(_lines(a[rel]))))
        elif a[rel].read_bytes() != b[rel].read_bytes():
            plus = minus = 0
            for line in difflib.unified_diff(_lines(a[rel]), _lines(b[rel]), n=0, lineterm=""):
                if line.startswith("+") and not line.startswith("+++"):
                    plus += 1
                elif line.startswith("-") and not line.startswith("---"):
                    minus += 1
            out.append(Change("changed", rel, plus, minus))
    return out


def module_dir(version: str) -> Path:
    from karpenter_e2e.clusters.infra import build
    return build.download_karpenter(version)  # go mod download -json ...@version: its Dir


def render_diff(old: str, new: str, changes: list[Change]) -> str:
    n = {s: sum(1 for c in changes if c.status == s) for s in ("added", "removed", "changed")}
    plus, minus = sum(c.added for c in changes), sum(c.removed for c in changes)
    head = (f"module files changed from {old} to {new} (pkg/, kwok/; no *_test.go, no "
            f"testdata): {n['changed']} changed, {n['added']} added, {n['removed']} removed; "
            f"+{plus} -{minus} lines")
    return "\n".join([head, *(f"  {c.line()}" for c in changes)])


# ---- command line --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="karpenter-e2e bisect",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", required=True, help="one scenario id")
    ap.add_argument("--good", help="a release where the scenario passes (with --bad)")
    ap.add_argument("--bad", help="a later release where it fails: find the regression")
    ap.add_argument("--broken", help="a release where the scenario fails (with --fixed)")
    ap.add_argument("--fixed", help="a later release where it passes: find the fix")
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("--cluster-prefix", default="matrix",
                    help="each run's cluster is <prefix>-<version> (default matrix)")
    ap.add_argument("--paths", default="suites")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER)
    opts = ap.parse_args(argv)
    args = [a for a in opts.pytest_args if a != "--"]
    paths = opts.paths.split(",")
    t0 = time.monotonic()
    out = opts.reports_dir / f"bisect-{time.strftime('%m%d%H%M%S')}"
    try:
        if "," in opts.scenario or not opts.scenario.strip():
            raise BadInput(f"--scenario {opts.scenario!r}: one scenario id")
        terms, ends = _ends(opts)
        older, newer = matrix.check_versions(ends)
        if (older, newer) != ends:
            raise BadInput(f"{terms.old} {ends[0]} must be older than {terms.new} {ends[1]}")
        try:
            served = matrix.default_versions()
        except ClusterError as exc:
            raise BadInput(str(exc)) from None
        versions = candidates(older, newer, served, terms)
        out.mkdir(parents=True, exist_ok=True)
        matrix.collect_scenarios(newer, [opts.scenario], paths, args, out)
    except BadInput as exc:
        print(f"bisect: {exc}", file=sys.stderr)
        return 2
    print(f"bisect: {opts.scenario} on {len(versions)} served releases {versions[0]} .. "
          f"{versions[-1]}: {' '.join(versions)}; into {out}", flush=True)
    children = Children()

    def run(version: str) -> Cell:
        r = matrix.run_version(version, out, [opts.scenario], children, paths, args,
                               opts.cluster_prefix)
        if r.error == "interrupted" or children.interrupted.is_set():
            return Cell("not run", "interrupted")
        return r.cells.get(opts.scenario) or Cell(
            "failed", r.error or f"no result for {opts.scenario} (pytest exited {r.exit})")

    with children.stopped_by_signals("bisect"):
        result = search(versions, run, say=lambda s: print(s, flush=True), terms=terms)
    lines = [f"bisect {opts.scenario} {terms.old} {older} .. {terms.new} {newer}: "
             f"{result.message}", "", "runs:"]
    lines += [f"  {s.version:9} {s.cell.status:8} ({s.why}){f': {s.cell.text}' if s.cell.text else ''}"
              for s in result.steps]
    if result.first_new and result.last_old:
        try:
            changes = module_diff(module_dir(result.last_old), module_dir(result.first_new))
            lines += ["", render_diff(result.last_old, result.first_new, changes)]
        except ClusterError as exc:
            lines += ["", f"module diff not listed: {exc}"]
    lines += ["", f"wall {time.monotonic() - t0:.0f}s; logs in {out}"]
    text = "\n".join(lines)
    (out / "bisect.txt").write_text(text + "\n")
    print(text, flush=True)
    if result.verdict == "interrupted":
        return 130
    return 0 if result.verdict in ("found", "no-change") else 1


def _ends(opts: argparse.Namespace) -> tuple[Terms, tuple[str, str]]:
    regression, fix = (opts.good, opts.bad), (opts.broken, opts.fixed)
    if all(regression) and not any(fix):
        return REGRESSION, (opts.good, opts.bad)
    if all(fix) and not any(regression):
        return FIX, (opts.broken, opts.fixed)
    raise BadInput("give --good and --bad (find the release that broke the scenario) or "
                   "--broken and --fixed (find the release that fixed it), not a mix")
