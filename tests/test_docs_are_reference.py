"""The docs site is a reference, one page per concept; dated run records live in records/.

The rule: no heading of a docs page carries a date (YYYY-MM-DD). A heading names a concept;
a section named after the day of a run is a record, and belongs in records/ (the page keeps
the concept, its current figure and a line naming the record). docs/measurements.md keeps
one row per figure, each row dated, and says where the history is.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _lines_outside_code(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def _pages() -> list[Path]:
    # index.md is rendered from README.md by `make docs` (and ignored by git)
    return [p for p in sorted(DOCS.glob("*.md")) if p.name != "index.md"]


def test_no_docs_heading_is_a_date():
    dated = [f"{page.relative_to(ROOT)}: {line}"
             for page in _pages()
             for line in _lines_outside_code(page.read_text())
             if line.startswith("#") and DATE.search(line)]
    assert not dated, ("docs pages are a reference: a section named after a run's date is a "
                       "record, move it under records/ and leave the concept and a line "
                       "naming the record:\n" + "\n".join(dated))


def test_every_measurement_row_is_dated_and_the_history_is_named():
    text = (DOCS / "measurements.md").read_text()
    rows = [line for line in _lines_outside_code(text)
            if line.startswith("|") and not re.match(r"^\|[\s|:-]+\|$", line)
            and not line.startswith("| what |")]
    assert rows, "docs/measurements.md has no table rows"
    undated = [row for row in rows if not DATE.search(row)]
    assert not undated, "each figure says when it was measured:\n" + "\n".join(undated)
    assert "records/measurements-history.md" in text.split("\n## ", 1)[0], (
        "the page says at its top where the dated history is")
    assert (ROOT / "records" / "measurements-history.md").is_file()
