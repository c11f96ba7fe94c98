"""`make matrix-join DIRS="a b"`: several matrix runs as one table, picture and Allure report.

    karpenter-e2e matrix-join [--reports-dir reports | --out DIR] DIR ...

Each DIR is a `make matrix` directory (its ``matrix.json``, the releases' run directories
and Allure results). The nightly workflow runs one job per release and joins their
directories here; on one machine, releases run in different sessions join the same way.
The columns are every DIR's releases, oldest first; the rows every scenario any DIR ran. A
release that two DIRs finished is refused: two verdicts for one cell would hide one of them.
A release a DIR did not finish (an interrupted matrix: its cells "not run", or none) gives
way to a DIR that finished it, so an interrupted matrix is completed by running the rest
later; where no DIR finished it, it shows as the first DIR left it. Written
to ``<reports-dir>/matrix-<stamp>/`` (``matrix-latest`` points at it) or ``--out``, with each
part's command, start and wall time in ``meta.parts``; its links to timelines and logs are
relative paths into the parts, which stay where they are.

Exit: 0 every cell passed or skipped; 1 a cell failed; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from karpenter_e2e.clusters.infra import versions as local_versions
from karpenter_e2e.rendering import run_dirs
from karpenter_e2e.rendering.matrix import Matrix
from karpenter_e2e.runners import matrix as matrix_mod


def _column_key(column: str) -> tuple:
    release, kube = matrix_mod.split_column(column)
    return local_versions.semver(release), kube or ""


def _moved(rel: str | None, part: Path, out: Path) -> str | None:
    """A path written relative to ``part``, made relative to ``out``."""
    if not rel or os.path.isabs(rel):
        return rel
    return os.path.relpath(part / rel, out)


def load(part: Path) -> Matrix:
    try:
        return Matrix.from_json(json.loads((part / "matrix.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{part} is not a matrix directory ({part / 'matrix.json'}: "
                         f"{exc})") from None


def finished(m: Matrix, version: str) -> bool:
    """The run reached the end of ``version``: it has cells and none is "not run"."""
    mine = [c for (_s, v), c in m.cells.items() if v == version]
    return bool(mine) and all(c.status != "not run" for c in mine)


def join(parts: list[Path], out: Path) -> Matrix:
    """One matrix of ``parts``' cells, its paths relative to ``out``."""
    if not parts:
        raise ValueError("no matrix directory given")
    loaded = [(part, load(part)) for part in parts]
    owner: dict[str, Path] = {}
    for part, m in loaded:
        for v in m.versions:
            if finished(m, v):
                if v in owner:
                    raise ValueError(f"release {v} is in both {owner[v]} and {part}")
                owner[v] = part
    for part, m in loaded:
        for v in m.versions:
            owner.setdefault(v, part)  # finished nowhere: as the first part left it
    scenarios: list[str] = []
    cells = {}
    per_version: dict[str, dict] = {}
    meta_parts = []
    for part, m in loaded:
        taken = [v for v in m.versions if owner[v] == part]
        scenarios += [s for s in m.scenarios if s not in scenarios]
        for (s, v), cell in m.cells.items():
            if v in taken:
                cell.timeline = _moved(cell.timeline, part, out)
                cells[(s, v)] = cell
        for v, p in (m.meta.get("per_version") or {}).items():
            if v in taken:
                per_version[v] = {**p, "log": _moved(p.get("log"), part, out),
                                  "run_dir": _moved(p.get("run_dir"), part, out)}
        meta_parts.append({"dir": os.path.relpath(part, out), "versions": taken,
                           "left_out": [v for v in m.versions if v not in taken],
                           **{k: m.meta.get(k) for k in ("command", "started", "wall_s",
                                                         "jobs", "lanes", "commit")}})
    versions = sorted(owner, key=_column_key)
    # No "started" or "wall_s" of its own: each part has its own (the table lists them).
    meta = {"per_version": per_version, "parts": meta_parts}
    return Matrix(versions, scenarios, cells, meta)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="karpenter-e2e matrix-join",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="make matrix directories")
    ap.add_argument("--reports-dir", type=Path, default=Path("reports"))
    ap.add_argument("--out", type=Path, default=None,
                    help="write here instead (default <reports-dir>/matrix-<stamp>, which "
                         "<reports-dir>/matrix-latest then points at)")
    opts = ap.parse_args(argv)
    out = opts.out or opts.reports_dir / f"matrix-{time.strftime('%m%d%H%M%S')}"
    try:
        m = join([d.resolve() for d in opts.dirs], out.resolve())
    except ValueError as exc:
        print(f"matrix-join: {exc}", file=sys.stderr)
        return 2
    runs = {v: (out / p["run_dir"]).resolve() for v, p in m.meta["per_version"].items()
            if p.get("run_dir")}
    n = matrix_mod.merge_allure(runs, out / "allure-results")
    files = matrix_mod.write(m, out)
    if opts.out is None:
        run_dirs.point(opts.reports_dir, out, "matrix-latest")
    print(files["markdown"].read_text())
    print(f"matrix-join: {len(opts.dirs)} part(s), {len(m.versions)} release(s): "
          f"{files['json']}, {files['markdown']}, {files['png']}, {out / 'allure-results'} "
          f"({n} results)", flush=True)
    return 1 if m.counts()["failed"] else 0
