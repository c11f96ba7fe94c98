"""`make release-diffs [PAIRS=...] [FOLDERS=...] [EXPLORE=N]`: each served release against
the one before it, on the same workloads, every difference in what they decided joined into
one table (docs/differential.md, "The nightly").

    karpenter-e2e release-diffs [--pairs A:B,...|--last K]
        [--folder DIR ...] [--explore N] [--seed S] [--cluster local]
        [--kubernetes-version MINOR] [--out reports/release-diffs]

Per pair, each folder (default: every example but plugin-project, as the upgrade gate's
differential phase) is checked on A and on B (`check DIR --karpenter-version A
--compare-version B`, the same Kubernetes release and catalogue on both sides), and, with
--explore N, N generated cases run on both (`make explore`, seed "<seed>-<A>-<B>", so each
pair's cases reproduce alone). Both sides of a pair run on one Kubernetes release: by default
the older release's newest served minor; --kubernetes-version names one for every pair,
refused before anything starts when a release does not support it (the old pairs: their newest
minors, 1.31 and 1.32, do not build from every proxy, docs/versions.md). The table
(OUT/release-diffs.md, .json) is rewritten as each check ends: per pair, what was diffed and
how many differences were suspect, expected and noted; then every difference, with the folder,
the field, both values and why it is expected (the features table's entry) or suspect. Exit 1
when a pair has a suspect difference or a side whose oracles fail, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from karpenter_e2e import checks
from karpenter_e2e.checks import needs
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import adder
from karpenter_e2e.clusters.karpenter import compat
from karpenter_e2e.rendering.release_diffs import counts, markdown, no_verdict
from karpenter_e2e.runners import matrix
from karpenter_e2e.runners.children import Child, run_one, sigterm_as_ctrl_c
from karpenter_e2e.runners.cli import child
from karpenter_e2e.runners.explore import judged, reported
from karpenter_e2e.runners.upgrade_gate import diff_folders

ROOT = Path(__file__).resolve().parent.parent
EXIT_BAD_INPUT = 2


def pairs_of(versions: list[str]) -> list[tuple[str, str]]:
    """Each release after the first against the one before it (oldest first)."""
    return list(zip(versions, versions[1:], strict=False))


def chosen_pairs(spec: str, last: int, served: list[str]) -> list[tuple[str, str]]:
    """--pairs "A:B,C:D" (each release served) or the last K consecutive pairs (default all)."""
    if spec:
        out = []
        for item in spec.split(","):
            a, sep, b = item.strip().partition(":")
            if not sep or not a or not b:
                raise matrix.BadInput(f"--pairs {item!r}: FROM:TO, as v1.14.3:v1.15.0")
            a, b = matrix.check_versions([a], lambda: served)[0], \
                matrix.check_versions([b], lambda: served)[0]
            out.append((a, b))
        return out
    every = pairs_of(served)
    return every[-last:] if last else every


def outside_ranges(pairs: list[tuple[str, str]], kube: str) -> None:
    """Refuse, before any cluster starts, a minor one release of a pair does not support."""
    try:
        wanted = compat.minor(kube)
    except (ValueError, IndexError):
        raise matrix.BadInput(f"--kubernetes-version {kube!r} is not a minor like 1.30") from None
    bad = [f"{v} supports {compat.supported(v).text}" for pair in pairs for v in pair
           if wanted not in compat.supported(v)]
    if bad:
        raise matrix.BadInput(f"Kubernetes {compat.minor_text(wanted)} is outside what these "
                              "releases support: " + "; ".join(dict.fromkeys(bad)))


def check_pair(folder: Path, a: str, b: str, out: Path, cluster: str,
               kube: str | None = None) -> dict:
    """`check FOLDER` on A and B, its reports in OUT/A-B/FOLDER; what it found."""
    reports = out / f"{a}-{b}" / folder.name
    if why := needs.lacking(folder, a, b):
        return {"folder": folder.name, "exit": None, "reports": str(reports),
                "not_diffed": why, "differences": [], "oracles": {}}
    cmd = [*child("check"), str(folder), "--cluster", cluster,
           "--cluster-name", f"rd-{a}-{b}".replace(".", ""), "--karpenter-version", a,
           "--compare-version", b, *(["--kubernetes-version", kube] if kube else []),
           "--reports-dir", str(reports)]
    code = _run(cmd, reports / "check.log", f"{a}-{b}-{folder.name}")
    oracles, differences = reported(reports)
    return {"folder": folder.name, "exit": code, "reports": str(reports),
            "judged": judged(code, oracles, sides=2),
            "differences": differences, "oracles": oracles}


def explore_pair(a: str, b: str, n: int, seed: str, out: Path, cluster: str,
                 kube: str | None = None) -> dict:
    """N generated cases on A and B (runners/explore.py); what they found."""
    where = out / f"{a}-{b}" / "explore"
    name = f"{seed}-{a}-{b}"
    cmd = [*child("explore"), "--from", a, "--to", b,
           "--n", str(n), "--seed", name, "--cluster", cluster, "--out", str(where),
           # a name of the pair's own: pairs run as parallel jobs (once, two explores met
           # on the one default "explore" cluster and took each other's down)
           "--cluster-name", f"rd-{a}-{b}-x".replace(".", ""),
           *(["--kubernetes-version", kube] if kube else [])]
    code = _run(cmd, where / f"{name}.log", f"explore-{a}-{b}")
    table = where / name / "explore.json"
    cases = json.loads(table.read_text())["cases"] if table.is_file() else []
    return {"folder": f"explore ({n} cases, seed {name})", "exit": code, "reports": str(where / name),
            "cases": cases, "differences": [], "oracles": {}}


def _run(cmd: list[str], log: Path, name: str) -> int:
    print("$", " ".join(cmd), flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    return run_one(Child(name, cmd, log, cwd=ROOT))


def failed(rows: list[dict]) -> bool:
    return any(counts([r])["suspect"] or any(r["oracles"].values()) or no_verdict(r)
               for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e release-diffs",
                                description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", default="", help="FROM:TO,... (default: every consecutive pair)")
    p.add_argument("--last", type=int, default=0, help="only the last K consecutive pairs")
    p.add_argument("--folder", action="append", default=[], type=Path, metavar="DIR",
                   help="a folder to diff (repeatable; default: every example)")
    p.add_argument("--explore", type=int, default=0, metavar="N",
                   help="also N generated cases per pair (default 0)")
    p.add_argument("--seed", default="nightly", help="the explore seed's stem (default nightly)")
    # Passed to every pair's check, as check takes them (the docstring: which minor by default).
    backends.add_options(adder(p.add_argument), only=("cluster", "kubernetes-version"),
                         modes=checks.MODES)
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "release-diffs")
    p.add_argument("--join", nargs="+", type=Path, default=None, metavar="DIR",
                   help="run nothing: join the tables of these runs' --out folders into --out "
                        "(the nightly's pairs run as parallel jobs)")
    args = p.parse_args(argv)
    if args.join:
        return join(args.join, args.out)
    try:
        missing = [str(d) for d in args.folder if not d.is_dir()]
        if missing:
            raise matrix.BadInput(f"--folder: no such folder: {', '.join(missing)}")
        if args.explore < 0 or args.last < 0:
            raise matrix.BadInput("--explore and --last are 0 or more")
        pairs = chosen_pairs(args.pairs, args.last, matrix.default_versions())
        if args.kubernetes_version:
            outside_ranges(pairs, args.kubernetes_version)
    except (matrix.BadInput, ClusterError) as exc:
        print(f"release-diffs: bad input, nothing started:\n{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    folders = diff_folders(args.folder, not args.folder)
    args.out.mkdir(parents=True, exist_ok=True)
    sigterm_as_ctrl_c()
    started = "Started " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table: dict[str, list[dict]] = {}
    for a, b in pairs:
        rows = table.setdefault(f"{a} -> {b}", [])
        for folder in folders:
            rows.append(check_pair(folder, a, b, args.out, args.cluster, args.kubernetes_version))
            _write(args.out, table, started)
        if args.explore:
            rows.append(explore_pair(a, b, args.explore, args.seed, args.out, args.cluster,
                                     args.kubernetes_version))
            _write(args.out, table, started)
    print((args.out / "release-diffs.md").read_text())
    return 1 if any(failed(rows) for rows in table.values()) else 0


def join(dirs: list[Path], out: Path) -> int:
    """One table of several runs' (each DIR/release-diffs.json), pairs oldest first."""
    table: dict[str, list[dict]] = {}
    missing = [str(d) for d in dirs if not (d / "release-diffs.json").is_file()]
    if missing:
        print(f"release-diffs: bad input: no release-diffs.json in {', '.join(missing)}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    for d in dirs:
        table.update(json.loads((d / "release-diffs.json").read_text()))
    ordered = dict(sorted(table.items(), key=lambda kv: [
        matrix.local_versions.semver(v.strip()) for v in kv[0].split("->")]))
    out.mkdir(parents=True, exist_ok=True)
    _write(out, ordered, "Joined from " + ", ".join(str(d) for d in dirs))
    print((out / "release-diffs.md").read_text())
    return 1 if any(failed(rows) for rows in ordered.values()) else 0


def _write(out: Path, table: dict[str, list[dict]], started: str) -> None:
    (out / "release-diffs.md").write_text(markdown(table, started))
    (out / "release-diffs.json").write_text(json.dumps(table, indent=1, default=str))
