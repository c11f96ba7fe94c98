"""The behaviour matrix as a result: scenario x release cells, their JSON, the Markdown table
(``matrix.md``) and the heat map (``matrix.png``).

``karpenter-e2e matrix`` (runners/matrix.py) runs the releases and classifies each one's JUnit
file into cells; ``matrix-join`` (runners/matrix_join.py) joins several matrices' JSON; both
write with these. Data in, text or a picture out: no run, no cluster.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATUSES = ("passed", "failed", "skipped", "not run")


@dataclass
class Cell:
    """One scenario on one release. ``text``: the failing assert's first line, or the skip's
    reason; ``timeline``: the failing test's timeline picture (relative to the matrix's
    directory once written); ``tests``: the test cases behind it."""

    status: str  # one of STATUSES
    text: str = ""
    timeline: str | None = None
    tests: list[str] = field(default_factory=list)
    seconds: float = 0.0
    test: str = ""  # the failing test case, where the scenario has several


@dataclass
class Matrix:
    versions: list[str]
    scenarios: list[str]
    cells: dict[tuple[str, str], Cell]  # (scenario, version) -> cell
    meta: dict = field(default_factory=dict)  # command, walls, exit codes per version

    def cell(self, scenario: str, version: str) -> Cell:
        return self.cells.get((scenario, version)) or Cell("not run", "no result")

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for s in self.scenarios:
            for v in self.versions:
                out[self.cell(s, v).status] += 1
        return out

    def to_json(self) -> dict:
        return {"versions": self.versions, "scenarios": self.scenarios, "meta": self.meta,
                "counts": self.counts(),
                "cells": {s: {v: asdict(self.cell(s, v)) for v in self.versions}
                          for s in self.scenarios}}

    @classmethod
    def from_json(cls, data: dict) -> Matrix:
        cells = {(s, v): Cell(**c) for s, row in data["cells"].items() for v, c in row.items()}
        return cls(data["versions"], data["scenarios"], cells, data.get("meta", {}))

    def differing(self) -> list[str]:
        """Scenarios that pass on one release and fail on another (a skip is no difference)."""
        out = []
        for s in self.scenarios:
            seen = {self.cell(s, v).status for v in self.versions}
            if {"passed", "failed"} <= seen:
                out.append(s)
        return out


NOTE_CHARS = 400  # a note's text at most (the JSON has it whole)
MARK = {"passed": "passed", "failed": "**FAILED**", "skipped": "skipped", "not run": "not run"}


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _size(rows: int, cols: int) -> str:
    return (f"{rows} scenario{'s' if rows != 1 else ''} x "
            f"{cols} release{'s' if cols != 1 else ''}")


def to_markdown(m: Matrix, title: str = "Behaviour matrix") -> str:
    """The table (scenario rows, version columns) with short cells; each failure's and skip's
    full text once, below it, numbered (equal texts share a note)."""
    notes: dict[str, int] = {}

    def note(text: str) -> int:
        return notes.setdefault(text, len(notes) + 1)

    lines = [f"# {title}", ""]
    c = m.counts()
    lines.append(", ".join(f"{n} {s}" for s, n in c.items() if n)
                 + f" ({_size(len(m.scenarios), len(m.versions))})")
    if m.meta.get("started"):
        lines.append(f"\nrun {m.meta['started']}, wall {m.meta.get('wall_s', '?')} s")
    if m.meta.get("commit"):
        lines.append(f"\nharness commit {m.meta['commit']}")
    for part in m.meta.get("parts") or []:
        lines.append(f"\n{' '.join(part['versions'])}: run {part.get('started') or '?'}, "
                     f"wall {part.get('wall_s') or '?'} s, harness commit "
                     f"{part.get('commit') or '?'} (`{part.get('command') or '?'}`)"
                     + (f"; not finished there, taken from another part: "
                        f"{' '.join(part['left_out'])}" if part.get("left_out") else ""))
    lines += ["", "| scenario | " + " | ".join(m.versions) + " |",
              "|---|" + "---|" * len(m.versions)]
    for s in m.scenarios:
        row = []
        for v in m.versions:
            cell = m.cell(s, v)
            text = MARK[cell.status]
            if cell.status == "failed":
                detail = textwrap.shorten(cell.text, NOTE_CHARS, placeholder=" ...") \
                    if cell.text else "(no message)"
                if cell.test:
                    detail = f"{cell.test}: {detail}"
                if cell.timeline:
                    detail += f" ([timeline]({cell.timeline}))"
                text += f" [{note(detail)}]"
            elif cell.text:
                text += f" [{note(cell.text)}]"
            row.append(text)
        lines.append(f"| {s} | " + " | ".join(row) + " |")
    differ = m.differing()
    lines += ["", "Scenarios that pass on one release and fail on another (bisect candidates): "
              + (", ".join(differ) if differ else "none") + "."]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"{n}. {_md_escape(text)}" for text, n in notes.items()]
    per = m.meta.get("per_version") or {}
    if per:
        lines += ["", "| release | pytest exit | build s | pytest wall s | log |",
                  "|---|---|---|---|---|"]
        for v in m.versions:
            p = per.get(v, {})
            lines.append(f"| {v} | {p.get('exit', '-')} | {p.get('build_s', '-')} | "
                         f"{p.get('wall_s', '-')} | {p.get('log', '-')} |")
    return "\n".join(lines) + "\n"


COLOURS = {"passed": "#3a9d5d", "failed": "#d64541", "skipped": "#d9d9d9", "not run": "#7f7f7f"}
TEXT_COLOURS = {"passed": "white", "failed": "white", "skipped": "#444444", "not run": "white"}


def heatmap(m: Matrix, path: Path, title: str = "Karpenter behaviour matrix") -> Path:
    """One picture: rows scenarios, columns releases, a colour per status; a failed cell
    carries the start of its failing assert, a skipped one why, in short."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    cols, rows = len(m.versions), len(m.scenarios)
    cell_w = max(2.3, 5.0 / max(cols, 1))  # the title's width, whatever the columns
    cell_h = 0.8 if any(c.status == "failed" for c in m.cells.values()) else 0.62
    label_w = 0.075 * max([len(s) for s in m.scenarios] + [10]) + 0.3  # 9 pt labels
    fig_w, fig_h = label_w + cols * cell_w + 0.4, 1.7 + rows * cell_h
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    for i, s in enumerate(m.scenarios):
        for j, v in enumerate(m.versions):
            cell = m.cell(s, v)
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor=COLOURS[cell.status],
                                   edgecolor="white", linewidth=2))
            label = {"passed": "passed", "failed": "FAILED", "skipped": "skipped",
                     "not run": "not run"}[cell.status]
            detail = _cell_detail(cell)
            ax.text(j + 0.5, i + (0.28 if detail else 0.5), label, ha="center", va="center",
                    fontsize=8.5, fontweight="bold", color=TEXT_COLOURS[cell.status])
            if detail:
                ax.text(j + 0.5, i + 0.66, detail, ha="center", va="center", fontsize=7,
                        color=TEXT_COLOURS[cell.status], linespacing=0.95)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([j + 0.5 for j in range(cols)], m.versions, fontsize=9, fontweight="bold")
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(rows)], m.scenarios, fontsize=9)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    c = m.counts()
    when = f" ({m.meta['started']})" if m.meta.get("started") else ""
    ax.set_title(f"{title}{when}\n" + ", ".join(f"{n} {s}" for s, n in c.items() if n)
                 + f" ({_size(rows, cols)})", fontsize=10, pad=24)
    present = [s for s in STATUSES if c[s]]
    ax.legend(handles=[Patch(facecolor=COLOURS[s], label=s) for s in present],
              loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=len(present),
              fontsize=8, frameon=False)
    fig.subplots_adjust(left=label_w / fig_w, right=1 - 0.2 / fig_w, top=1 - 1.0 / fig_h,
                        bottom=0.6 / fig_h)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cell_detail(cell: Cell, lines: int = 3) -> str:
    """A few short lines for the heat map: a failure's message (without the exception's
    type), a skip's gist (the release the feature needs)."""
    if cell.status == "failed":
        text = re.sub(r"^(?:[\w.]*\.)?(\w+(?:Error|Exception|Timeout|Failed|Nodes))?:\s*", "",
                      cell.text) or "(no message)"
    elif cell.status == "skipped":
        since = re.search(r"(appeared|first released) in (v\d+\.\d+\.\d+)", cell.text)
        text = f"needs {since[2]}" if since else cell.text
    else:
        return ""
    return "\n".join(textwrap.wrap(text, 40, max_lines=lines, placeholder="..."))
