"""The run summary: per scenario, what it measured and what its nodes cost."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

# How much of each failure's message the summary quotes: enough for the verdict's first
# sentence (what was expected, what was seen); the whole of it is in the JUnit and Allure.
FAILURE_CHARS = 600

# The columns a person scans first; every other measured value follows in "other". The
# first is every scenario's, from its timeline (fixtures/timeline.pending_to_running).
KEY_COLUMNS = [
    ("slowest_pending_to_running_s", "pending→running s"),
    ("nodes_used", "nodes"),
    ("node_hours", "node-hours"),
    ("cost_usd", "cost $"),
]


def load(directory: Path) -> list[dict]:
    rows = []
    for f in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            rows.append(json.loads(f.read_text()))
        except ValueError:
            continue
    return sorted(rows, key=lambda r: (r.get("scenario", ""), r.get("test", "")))


def markdown(rows: list[dict], title: str = "Run summary") -> str:
    if not rows:
        return f"## {title}\n\n(no scenario recorded measurements)\n"
    head = ["scenario", "outcome"] + [label for _, label in KEY_COLUMNS] + ["other measurements"]
    lines = [f"## {title}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    total, unpriced = 0.0, 0
    for r in rows:
        values = r.get("values", {})
        key_names = {k for k, _ in KEY_COLUMNS}
        other = ", ".join(f"{k}={v}" for k, v in values.items() if k not in key_names)
        cells = [r.get("scenario", "?"), r.get("outcome", "?")]
        cells += [_fmt(values.get(k)) for k, _ in KEY_COLUMNS]
        cells.append(other or "")
        lines.append("| " + " | ".join(cells) + " |")
        total += values.get("cost_usd") or 0.0
        # nodes but no cost: a node's price was unknown (fixtures/ledger.py records none)
        unpriced += bool(values.get("nodes_used")) and values.get("cost_usd") is None
    lines += ["", "pending→running: of the pods that waited for Karpenter (kube-scheduler found "
                  "no room for them), the slowest from its creation to Running, from the "
                  "scenario's timeline; – where no pod waited and ran.",
              "", f"Total node cost: {'–' if unpriced else f'${total:.4f}'} (price × node "
                  "lifetime, from each node's creation to its deletion as watched"
                  + (f"; {unpriced} scenario(s) had a node of unknown price" if unpriced else "")
                  + ")."]
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    if value is None:
        return "–"
    return f"{value:g}" if isinstance(value, float) else str(value)


def failures(junit: Path) -> str:
    """Each failed or erred test with the start of its message, for the summary's end: a
    log's tail (CI's) then says why a run failed, not only which scenario did."""
    if not junit.is_file():
        return ""
    lines = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            el = case.find(kind)
            if el is None:
                continue
            message = " ".join((el.get("message") or el.text or "").split())
            if len(message) > FAILURE_CHARS:
                message = message[:FAILURE_CHARS] + " …"
            where = f"{case.get('classname', '')}::{case.get('name', '?')}".lstrip(":")
            lines.append(f"- `{where}` ({kind}): {message or '(no message)'}")
    if not lines:
        return ""
    return "\n".join(["## Why they failed", "", *lines, "",
                      "(the first lines of each message; the whole verdict, with its "
                      "evidence, is in junit.xml and the Allure report)"]) + "\n"
