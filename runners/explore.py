"""`make explore FROM=v1.14.3 [TO=v1.15.0] [N=3] [SEED=...] [SHRINK=6]`: generated workloads
(checks/explore.py), each checked on FROM (and TO), judged by the oracles and, with TO, by
the diff of what the two releases decided (docs/differential.md).

    karpenter-e2e explore --from V [--to V] [--n N] [--seed S | --seeds FILE] [--jobs J]
        [--shrink-budget K] [--cluster local|aws-sim] [--out reports/explore]

A case whose run finds something (an oracle failing on either release, a suspect
difference) is shrunk: one simplification at a time, each a run, kept while the same thing
is still found, at most --shrink-budget runs; the smallest is written as a `check` folder
with the command that reproduces it. The seed reproduces every case. A case `check` refuses
(exit 2) is a generator defect and stops the run; a cluster that cannot be brought up
(exit 3) is reported and the run goes on. The table is written to OUT/SEED/explore.md as each
case ends, and the cases that found something to OUT/SEED/found.seeds: a seed file, which
`--seeds FILE` runs again (on another release, say). A seed file has one run's seed per
line, then the cases to run from it (`20261206101500 3 7`; none: --n cases from 0); `#`
starts a comment. With --to, a case's two releases run side by side (`check
--compare-version`: FROM on the lane's cluster, TO on its -b cluster). With --jobs J, J cases
run at once, each on clusters of its own (explore-0, explore-1, ...; with --to, 2J clusters):
a case spends most of its time waiting on Karpenter's clock (batches, consolidateAfter, the
settle window), not on the CPU.
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from karpenter_e2e import checks
from karpenter_e2e.checks import explore
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.flags import adder
from karpenter_e2e.runners.children import Child, Children, sigterm_as_ctrl_c
from karpenter_e2e.runners.cli import child

ROOT = Path(__file__).resolve().parent.parent
EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_INTERRUPTED = 2, 3, 130  # check's (checks/cli.py)


@dataclass
class Outcome:
    """What one run of a case found: oracles failed per release, suspect differences."""

    code: int
    oracles: dict[str, list[str]] = field(default_factory=dict)  # release -> oracle names
    suspect: list[str] = field(default_factory=list)  # "field key: a -> b"
    reports: str = ""
    # suspect differences whose field also differed between two runs of one release
    noise: list[str] = field(default_factory=list)
    # a floor's (check --floor-of): the fields on which two runs of one release differ
    varies: list[str] = field(default_factory=list)
    judged: bool = True  # see judged(): exit 0 or 1 is a verdict only with the reports

    @property
    def signature(self) -> set[str]:
        """What must stay found while shrinking: each oracle and each suspect field."""
        return ({f"oracle {o}" for names in self.oracles.values() for o in names}
                | {f"differs {field_of(s)}" for s in self.suspect})

    def said(self) -> str:
        parts = [f"{', '.join(n)} on {r}" for r, n in self.oracles.items() if n]
        parts += [f"suspect: {s}" for s in self.suspect]
        parts += [f"within a release's own variation: {s}" for s in self.noise][:3]
        if not self.judged:
            return f"no verdict (exit {self.code}, no report)"
        return "; ".join(parts) or ("clean" if self.code in (0, 1) else f"no verdict (exit {self.code})")


@dataclass(frozen=True)
class Lane:
    """Where a case's checks run: a cluster name of its own (cases run --jobs at a time), and
    the children a Ctrl-C stops."""

    cluster: str = "explore"
    children: Children = field(default_factory=Children)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM stopped the run: no further check starts."""


class SeedFileError(ValueError):
    """A seed file that does not parse: the message names its line."""


def read_seeds(path: Path, n: int) -> list[tuple[str, int]]:
    """The (seed, case) pairs a seed file lists, in its order; a seed with no case listed
    stands for cases 0..n-1."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SeedFileError(f"{path}: cannot be read ({exc.strerror})") from None
    cases: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        seed, listed = words[0], words[1:]
        for word in listed:
            if not word.isdigit():
                raise SeedFileError(f"{path} line {number}: {line.strip()!r}: {word!r} is not a "
                                    "case number (0, 1, ...); a line is SEED [CASE ...]")
        for i in [int(w) for w in listed] or range(n):
            if (seed, i) not in cases:
                cases.append((seed, i))
    if not cases:
        raise SeedFileError(f"{path}: no case in it (a line is SEED [CASE ...])")
    return cases


class GeneratorDefect(Exception):
    """check refused a generated case (exit 2): the generator wrote something invalid."""


def field_of(difference: str) -> str:
    """The decision record field a suspect difference ("field key: a -> b") is about."""
    return difference.split(":")[0].split(" ")[0]


def reported(reports: Path) -> tuple[dict[str, list[str]], list[dict]]:
    """What a check run with --compare-version wrote into ``reports``: the oracles that
    failed on each release (each side's check.json), and every difference (compare.json)."""
    oracles: dict[str, list[str]] = {}
    for path in sorted(reports.glob("runs/check-*/check.json")):
        result = json.loads(path.read_text())
        release = (result.get("decisions") or {}).get("release") or path.parent.name
        oracles[release] = sorted({f["oracle"] for f in
                                   (result.get("oracles") or {}).get("findings") or []})
    differences = [d for compared in _compared(reports) for d in compared["differences"]]
    return oracles, differences


def _compared(reports: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(reports.glob("runs/check-*/compare.json"))]


def judged(code: int, oracles: dict[str, list[str]], sides: int) -> bool:
    """Whether a check that exited ``code`` reached a verdict: exit 0 or 1 only with each of
    its ``sides``' reports (a check that crashed before judging exits 1 too, as a failed
    expectation does)."""
    return code not in (0, 1) or len(oracles) >= sides


def read_outcome(code: int, reports: Path, sides: int = 2) -> Outcome:
    """From a check's reports directory: each side's oracles and the suspect differences;
    judged only when each of the ``sides`` wrote its report."""
    oracles, differences = reported(reports)
    return Outcome(code, oracles, [f"{d['field']}{' ' + d['key'] if d['key'] else ''}: "
                                   f"{d['a']} -> {d['b']}" for d in differences
                                   if d["status"] == "suspect"], str(reports),
                   judged=judged(code, oracles, sides),
                   varies=sorted({f for c in _compared(reports) for f in c.get("varies") or []}))


def run_case(case: explore.Case, folder: Path, args, lane: Lane) -> Outcome:
    """The case on FROM and TO; when they differ, the pair again (its noise floor, side by
    side as the first): a field on which either release's two runs differ is that workload's
    noise, not the releases'. Each release needs two runs: explore v1.14.3 -> v1.15.0 (seed
    speed-1, case 3) planned in 2 rounds on FROM once (the second planning pods again) and
    in 1 on each of TO's three runs, which a floor of TO alone read as the releases'; and
    one pair alone misses an either-or about half the time (v1.11.2 -> v1.12.0's case 0)."""
    got = _check(case, folder, args, args.from_v, lane)
    if args.to_v and got.suspect and got.code != EXIT_BAD_INPUT:
        floor = _check(None, folder, args, args.from_v, lane,
                       reports=folder.with_name(folder.name + ".floor"), floor_of=got.reports)
        varies = set(floor.varies)  # a floor that wrote no comparison: nothing is noise
        got.noise = [s for s in got.suspect if field_of(s) in varies]
        got.suspect = [s for s in got.suspect if s not in got.noise]
    return got


def _check(case: explore.Case | None, folder: Path, args, first: str, lane: Lane,
           reports: Path | None = None, floor_of: str = "") -> Outcome:
    """``check`` on the case's folder (manifests only: check reads every YAML file under it),
    its reports and log beside it in FOLDER.reports/, as the person reproducing it would run it."""
    reports = reports or reports_of(folder)
    for old in ((folder, reports) if case is not None else (reports,)):
        if old.exists():
            shutil.rmtree(old)
    if case is not None:
        explore.write(case, folder)
    cmd = reproduce(folder, args, first, reports, lane.cluster) + \
        (["--floor-of", floor_of] if floor_of else [])
    print("$", " ".join(cmd), flush=True)
    code = lane.children.run(Child(reports.name, cmd, reports / "check.log", cwd=ROOT))
    # Not started, or stopped by the run's Ctrl-C or SIGTERM (check exits 130): no result.
    # Read as one, a floor stopped so was a floor that found nothing varying (explore
    # v1.11.2 -> v1.12.0, case 0: shrink-6 kept, and written as the minimal case, on it).
    if code is None or code == EXIT_INTERRUPTED or lane.children.interrupted.is_set():
        raise Interrupted
    return read_outcome(code, reports, sides=2 if args.to_v else 1)


def reports_of(folder: Path) -> Path:
    return folder.with_name(folder.name + ".reports")


def reproduce(folder: Path, args, first: str | None = None, reports: Path | None = None,
              cluster: str = "explore") -> list[str]:
    cmd = [*child("check"), str(folder), "--cluster", args.cluster,
           "--cluster-name", cluster, "--karpenter-version", first or args.from_v,
           "--reports-dir", str(reports or reports_of(folder))]
    kube = args.kubernetes_version
    return cmd + (["--kubernetes-version", kube] if kube else []) + \
        (["--compare-version", args.to_v] if args.to_v else [])


def shrink(case: explore.Case, found: Outcome, folder: Path, args,
           lane: Lane) -> tuple[explore.Case, int]:
    """The smallest case still finding what ``found`` found, within the budget; and the runs
    it took."""
    want, runs = found.signature, 0
    progress = True
    while progress and runs < args.shrink_budget:
        progress = False
        for candidate in explore.smaller(case):
            if runs >= args.shrink_budget:
                break
            runs += 1
            got = run_case(candidate, folder.parent / f"shrink-{runs}", args, lane)
            if got.code == EXIT_BAD_INPUT:
                raise GeneratorDefect(f"check refused a shrunk case ({folder.parent}/shrink-{runs})")
            if got.signature & want:
                print(f"explore: shrunk ({candidate.size} < {case.size}): {candidate.describe()}",
                      flush=True)
                case, progress = candidate, True
                break
    return case, runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e explore", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="from_v", required=True, help="the release every case runs on")
    p.add_argument("--to", dest="to_v", default=None, help="also run each case on this release "
                                                           "and diff what the two decided")
    p.add_argument("--n", type=int, default=3, help="cases to generate (default 3)")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", default=None, help="reproduces the run (default: the time)")
    seeds.add_argument("--seeds", type=Path, default=None,
                       help="a seed file: the cases to run again (one SEED [CASE ...] a line)")
    p.add_argument("--shrink-budget", type=int, default=6,
                   help="most check runs spent shrinking one finding (default 6)")
    # Passed to every case's check, as check takes them.
    # cluster-name names the lanes' clusters (NAME, or NAME-0, NAME-1, ... with --jobs):
    # explores running at once (release-diffs' pairs) must not share one.
    backends.add_options(adder(p.add_argument), only=("cluster", "cluster-name",
                                                      "kubernetes-version"),
                         modes=checks.MODES, defaults={"cluster-name": "explore"})
    p.add_argument("--jobs", type=int, default=1,
                   help="cases run at once, each on clusters of its own (default 1)")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "explore")
    args = p.parse_args(argv)
    if args.n < 1 or args.shrink_budget < 0 or args.jobs < 1:
        print("explore: --n and --jobs must be 1 or more, --shrink-budget 0 or more",
              file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%d%H%M%S")
    try:
        cases = read_seeds(args.seeds, args.n) if args.seeds else \
            [(args.seed or stamp, i) for i in range(args.n)]
    except SeedFileError as exc:
        print(f"explore: {exc}", file=sys.stderr)
        return 2
    seed = f"seeds-{stamp}" if args.seeds else cases[0][0]
    out = args.out / seed
    out.mkdir(parents=True, exist_ok=True)
    sigterm_as_ctrl_c()
    children = Children()
    lanes: queue.Queue[Lane] = queue.Queue()
    for k in range(args.jobs):
        lanes.put(Lane(args.cluster_name if args.jobs == 1 else f"{args.cluster_name}-{k}",
                       children))

    def one(run: str, i: int) -> tuple:
        lane = lanes.get()
        try:
            return explore_case(run, i, out / (f"{run}-case-{i}" if args.seeds else f"case-{i}"),
                                args, lane)
        finally:
            lanes.put(lane)

    rows: list[tuple] = []
    with children.stopped_by_signals("explore"), ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(one, run, i) for run, i in cases]
        try:
            for done in as_completed(futures):
                rows = sorted([*rows, done.result()])
                _write_table(out, seed, args, rows)
        except (GeneratorDefect, Interrupted) as exc:
            children.interrupt()
            for f in futures:
                f.cancel()
            if isinstance(exc, Interrupted):
                print("explore: interrupted; the table holds the cases that ended", file=sys.stderr)
                return 130
            print(f"explore: {exc}: a generator defect", file=sys.stderr)
            return 2
    print((out / "explore.md").read_text())
    return 1 if any(minimal for _, _, _, _, minimal, _, _ in rows) else 0


def explore_case(seed: str, i: int, home: Path, args, lane: Lane) -> tuple:
    """Case ``i`` of ``seed``, in the folder ``home``: run, and shrunk if it found something;
    its row of the table."""
    # what either release lacks is left out (a check it refuses would stop the run)
    case = explore.generate(seed, i, tuple(v for v in (args.from_v, args.to_v) if v))
    print(f"explore: case {i} (seed {seed}, {lane.cluster}): {case.describe()}", flush=True)
    started = time.monotonic()
    got = run_case(case, home / "case", args, lane)
    if got.code == EXIT_BAD_INPUT:
        raise GeneratorDefect(f"check refused case {i} of {seed} ({home}/case.reports/check.log)")
    minimal, runs = "", 0
    if got.signature:
        small, runs = shrink(case, got, home / "case", args, lane)
        folder = explore.write(small, home / "minimal")
        (folder / "README.md").write_text(
            f"# explore {seed}, case {i}: {got.said()}\n\n{small.describe()}\n\n"
            f"Reproduce:\n\n    {' '.join(reproduce(folder, args)[1:])}\n")
        minimal = str(folder)
    return (seed, i, case.describe(), got.said(), minimal, runs, time.monotonic() - started)


def _write_table(out: Path, seed: str, args, rows) -> None:
    lines = [f"# explore {seed}: {args.from_v}" + (f" vs {args.to_v}" if args.to_v else ""), "",
             f"{len(rows)} case(s); reproduce with `make explore FROM={args.from_v}"
             + (f" TO={args.to_v}" if args.to_v else "")
             + (f" KUBE={args.kubernetes_version}" if args.kubernetes_version else "")
             + (f" SEEDS={args.seeds}`." if args.seeds else f" N={args.n} SEED={seed}`."), "",
             "| case | what | found | minimal | shrink runs | s |", "|---|---|---|---|---|---|"]
    lines += [f"| {f'{run}/{i}' if args.seeds else i} | {what} | {said} | {minimal or '–'} "
              f"| {runs} | {s:.0f} |" for run, i, what, said, minimal, runs, s in rows]
    (out / "explore.md").write_text("\n".join(lines) + "\n")
    (out / "explore.json").write_text(json.dumps(
        {"seed": seed, "seeds": str(args.seeds) if args.seeds else None, "from": args.from_v,
         "to": args.to_v, "n": args.n, "kubernetes": args.kubernetes_version,
         "cases": [{"seed": run, "case": i, "what": what, "found": said, "minimal": minimal,
                    "shrink_runs": runs, "seconds": round(s)}
                   for run, i, what, said, minimal, runs, s in rows]}, indent=1))
    # The cases that found something, as a seed file: --seeds runs them again.
    (out / "found.seeds").write_text("".join(
        f"{run} {i}  # {' '.join(said.split())}\n" for run, i, _, said, minimal, _, _ in rows if minimal))
