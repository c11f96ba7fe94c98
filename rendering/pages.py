"""`karpenter-e2e pages [--check] [PAGE ...]`: the documentation pages generated from the code,
written: docs/coverage.md (rendering/coverage.py), docs/oracles.md (oracles_page.py) and
docs/scenarios.md (scenarios_page.py). With ``--check`` nothing is written and a stale page
exits 1 (the tests check each page so).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from karpenter_e2e.rendering import coverage, oracles_page, scenarios_page
from karpenter_e2e.rendering.coverage import COMMAND, CoverageError

PAGES = {"coverage": coverage, "oracles": oracles_page, "scenarios": scenarios_page}


def write_or_check(out: Path, text: str, check: bool, name: str) -> int:
    """A generated page: write it, or with ``check`` only say whether it is stale (exit 1)."""
    if check:
        if not out.is_file() or out.read_text() != text:
            print(f"{name}: {out} is stale; run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text)
    print(f"{name}: wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="*", metavar="PAGE",
                    help=f"some of {', '.join(PAGES)} (default: every one)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if one is stale")
    args = ap.parse_args(argv)
    unknown = [name for name in args.pages if name not in PAGES]
    if unknown:
        ap.error(f"no page {unknown[0]!r}; the pages: {', '.join(PAGES)}")
    code = 0
    for name in args.pages or PAGES:
        page = PAGES[name]
        try:
            text = page.render()
        except CoverageError as exc:  # the suites' markers or mutants' headers disagree
            print(f"{name}: {exc}", file=sys.stderr)
            return 2
        code = max(code, write_or_check(page.OUT, text, args.check, name))
    return code
