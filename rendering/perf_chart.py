"""The upgrade gate's performance picture: FROM and TO side by side.

Left, the two runs on one time axis (seconds since each run's first pod was created): pods
Running (top) and the pool's nodes (bottom), with each run's scale-to-0 call dotted.
Right, each figure's TO/FROM ratio as a bar, its limit as a tick, 1 (no change) as a line;
the bar is red when the figure fails the gate.

``karpenter-e2e perf FROM.json TO.json --chart OUT.png`` (rendering/perf_comparison.py) draws it
from two measurement files (``timings/*.json`` of the scale-perf scenario).
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from karpenter_e2e.rendering import perf_comparison
from karpenter_e2e.rendering.perf_comparison import Row

COLOURS = ("#4e79a7", "#f28e2b")  # FROM, TO
OK, OVER = "#59a14f", "#e15759"


def _steps(times: list[float], start: float = 0.0) -> tuple[list[float], list[int]]:
    """A running count that rises by one at each time, from 0 at ``start``."""
    xs, ys = [start], [0]
    for i, t in enumerate(sorted(times), 1):
        xs += [t, t]
        ys += [i - 1, i]
    return xs, ys


def _node_counts(spans: list[list[float]]) -> tuple[list[float], list[int]]:
    changes = sorted([(c, 1) for c, _ in spans] + [(d, -1) for _, d in spans])
    xs, ys, n = [0.0], [0], 0
    for t, step in changes:
        xs += [t, t]
        ys += [n, n + step]
        n += step
    return xs, ys


def render(runs: list[tuple[str, dict]], rows: list[Row], path: Path, dpi: int = 90) -> Path:
    """``runs``: [(FROM version, its measurements), (TO version, ...)], as loaded by
    perf_comparison.load; ``rows``: the comparison."""
    fig = Figure(figsize=(13, 6.2), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[1.25, 1])
    pods_ax, nodes_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0])
    ratio_ax = fig.add_subplot(grid[:, 1])
    end = 1.0
    for (version, run), colour in zip(runs, COLOURS, strict=False):
        series, values = run.get("series", {}), run.get("values", {})
        ready = series.get("pods_ready_s", [])
        if ready:
            pods_ax.plot(*_steps(ready), color=colour, lw=1.8,
                         label=f"{version}: {len(ready)} pods in {values.get('scale_out_s', '?')} s")
        spans = series.get("nodes_s", [])
        if spans:
            nodes_ax.plot(*_node_counts(spans), color=colour, lw=1.8,
                          label=f"{version}: {values.get('nodes', '?')} nodes, gone "
                                f"{values.get('consolidation_s', '?')} s after scale-in")
            end = max(end, max(d for _, d in spans))
        for t in series.get("scale_in_s", []):
            nodes_ax.axvline(t, color=colour, ls=":", lw=1.2)
    pods_ax.set_ylabel("pods Running")
    pods_ax.set_xlabel("seconds since the first pod was created")
    pods_ax.set_title("scale-out", loc="left", fontsize=10)
    nodes_ax.set_ylabel("nodes")
    nodes_ax.set_xlabel("seconds since the first pod was created (dotted: scale to 0)")
    nodes_ax.set_title("nodes over the whole run", loc="left", fontsize=10)
    nodes_ax.set_xlim(0, end * 1.03)
    for ax in (pods_ax, nodes_ax):
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right" if ax is pods_ax else "best", fontsize=8)
    _ratios(ratio_ax, rows)
    before, after = (v for v, _ in runs)
    fig.suptitle(f"Upgrade gate performance: {before} (FROM) vs {after} (TO) — "
                 f"{'all within limits' if all(r.ok for r in rows) else 'OVER A LIMIT'}",
                 color="#2e7d32" if all(r.ok for r in rows) else "#c62828", fontsize=12)
    fig.savefig(path, dpi=dpi)
    return path


def _ratios(ax, rows: list[Row]) -> None:
    labels = [r.metric.short for r in rows]
    shown = [min(r.ratio, 3.0) if r.ratio is not None and not math.isinf(r.ratio) else 0.0
             for r in rows]
    y = list(range(len(rows)))[::-1]
    ax.barh(y, shown, color=[OK if r.ok else OVER for r in rows], height=0.55)
    ax.scatter([r.limit for r in rows], y, marker="|", s=500, color="#000000", zorder=3)
    ax.axvline(1.0, color="#79706e", lw=1)
    for yi, r in zip(y, rows, strict=True):
        text = (f"{perf_comparison.fmt(r.before, r.metric)} → "
                f"{perf_comparison.fmt(r.after, r.metric)}  ({perf_comparison.fmt_ratio(r)})")
        ax.text(0.03, yi + 0.38, text.replace("$", r"\$"), fontsize=8.5, va="center")
    ax.set_yticks(y, labels, fontsize=9)
    top = max([2.0] + [r.limit * 1.1 for r in rows] + [s * 1.05 for s in shown])
    ax.set_xlim(0, top)
    ax.set_xlabel("TO / FROM (1 = unchanged; | = the gate's limit)")
    ax.set_title("each figure, FROM → TO (TO/FROM)", loc="left", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Line2D([], [], color=OK, lw=6, label="within its limit"),
                       Line2D([], [], color=OVER, lw=6, label="over: fails the gate")],
              loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2, fontsize=8,
              frameon=False)
