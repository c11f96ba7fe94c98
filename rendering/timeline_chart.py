"""One picture per scenario: its timeline as stacked lanes over seconds since the test began.

Lanes, top to bottom, sharing the time axis:

- pods by phase (step lines: Pending, Running, Terminating, ...);
- NodeClaims by state (launching, ready, deleting; dashed: how many are Drifted and
  Consolidatable);
- one bar per NodeClaim and its node, coloured by capacity type and labelled with the
  instance type: pale while launching, solid once Ready, hatched while deleting;
  ▼ where it turned Drifted, ◆ where it turned Consolidatable;
- Karpenter's decisions about the test's objects and what got in their way (DisruptionBlocked,
  Unconsolidatable, FailedDraining, ...), one row per event reason.

Across all lanes: the scenario's bands (shaded, e.g. consolidateAfter and its tolerance)
and marks (dotted lines, e.g. "inflate 3→0"); setup and teardown in grey; on a failed
scenario, a red line where the test body ended.

Input is the dict ``fixtures.timeline.Timeline.snapshot`` returns (also written as JSON next
to the picture); ``karpenter-e2e chart timeline SNAPSHOT.json OUT.png`` (rendering/charts.py)
draws one again, from its recording.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

POD_COLOURS = {"Pending": "#f28e2b", "Running": "#59a14f", "Terminating": "#79706e",
               "Succeeded": "#4e79a7", "Failed": "#e15759", "Unknown": "#b07aa1"}
CLAIM_STYLE = {"launching": ("#f28e2b", "-"), "ready": ("#4e79a7", "-"),
               "deleting": ("#79706e", "-"), "Drifted": ("#b07aa1", "--"),
               "Consolidatable": ("#9c755f", "--")}
CAPACITY_COLOURS = {"on-demand": "#4e79a7", "spot": "#f28e2b", "reserved": "#76b7b2"}
# Karpenter's decisions and what got in their way are drawn; the rest of its events (status
# conditions such as Launched or Ready, which the lanes above show, Nominated, Evicted)
# stay in the JSON.
PROBLEM = ("v", "#e15759")
EVENT_STYLE = {"DisruptionTerminating": ("X", "#e15759"), "DisruptionLaunching": ("^", "#59a14f"),
               "DisruptionWaitingReadiness": ("o", "#edc948"),
               "DisruptionBlocked": ("s", "#000000"), "Unconsolidatable": ("D", "#79706e"),
               "ConsolidationCandidate": ("d", "#9c755f"), "ConsolidationRejected": ("x", "#9c755f"),
               "ConsolidationApproved": ("P", "#59a14f"), "FailedDraining": ("v", "#f28e2b"),
               "NodeRepairBlocked": ("s", "#e15759"),
               **dict.fromkeys(("TerminationGracePeriodExpiring", "FailedTermination",
                                "InsufficientCapacityError", "NodeClassNotReady",
                                "FailedConsistencyCheck", "FailedScheduling",
                                "NoCompatibleInstanceTypes"), PROBLEM)}
# Events whose message ends in the disruption reason ("Disrupting NodeClaim: Empty") are
# labelled with that reason; the others with the start of their message.
REASON_IN_MESSAGE = ("DisruptionTerminating", "DisruptionLaunching")
BAND_COLOURS = ["#b07aa1", "#76b7b2", "#edc948", "#ff9da7"]
OUTCOME_COLOURS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#c62828",
                   "skipped": "#757575"}
MAX_LABELLED_ROWS = 30  # more NodeClaims than this: bars only, no per-row text

P = ParamSpec("P")
R = TypeVar("R")
# Matplotlib is not thread-safe (its FAQ: serialize access to its artists yourself), and the
# two sides of check --compare-version draw their pictures on threads of their own: one
# picture is drawn at a time. Drawing is CPU work under the GIL, so no time is lost.
_DRAWING = threading.Lock()


def one_at_a_time(draw: Callable[P, R]) -> Callable[P, R]:
    """``draw``, holding the one drawing lock (see _DRAWING)."""
    @functools.wraps(draw)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> R:
        with _DRAWING:
            return draw(*args, **kwargs)
    return drawn


@one_at_a_time
def render(snap: dict, path: Path, dpi: int = 80, inspect: dict | None = None) -> Path:
    """Draw ``snap`` into ``path`` (PNG or SVG, by suffix); returns ``path``. ``inspect``, if
    given, gets what was drawn (lane labels, title, legend entries), for tests."""
    machines = snap["machines"]
    events = [e for e in snap["events"] if e["reason"] in EVENT_STYLE]
    reasons = list(dict.fromkeys(e["reason"] for e in events))
    rows = max(len(machines), 1)
    heights = [1.6, 1.6, min(0.9 + 0.28 * rows, 5.0)]
    heights += [0.5 + 0.3 * len(reasons)] if reasons else []
    fig = Figure(figsize=(13, sum(heights) + 1.9), layout="constrained")
    axes = fig.subplots(len(heights), 1, sharex=True, gridspec_kw={"height_ratios": heights})
    # The whole of each band, even one that reaches past the end (a test that failed early),
    # within reason.
    end = max(snap["duration"], 1.0)
    end = min(max([end] + [b["end"] for b in snap["bands"]]), end * 1.5)
    for ax in axes:
        _backdrop(ax, snap, end)
    _pods(axes[0], snap["pods"])
    _claims(axes[1], snap["nodeclaims"])
    _machines(axes[2], machines, end)
    if reasons:
        _events(axes[3], events, reasons, end)
    _mark_labels(axes[0], snap, end)
    _step_labels(axes[1], snap, end)  # the top lane holds the marks' labels
    axes[-1].set_xlim(0, end)
    axes[-1].set_xlabel("seconds since the test started")
    _phase_labels(axes[-1], snap, end)
    _title(fig, snap)
    if snap.get("failure"):  # over the top lane, where the layout keeps room for it
        axes[0].set_title(_short_text(snap["failure"], 180), loc="left", fontsize=8.5,
                          color=OUTCOME_COLOURS["failed"])
    legend = _bounds_legend(fig, snap)
    if inspect is not None:
        inspect.update(lanes=[ax.get_ylabel() for ax in axes], title=fig._suptitle.get_text(),
                       title_colour=fig._suptitle.get_color(),
                       texts=[t.get_text() for t in fig.texts]
                       + [axes[0].get_title(loc="left")],
                       legend=[t.get_text() for t in legend.get_texts()] if legend else [])
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def _title(fig: Figure, snap: dict) -> None:
    outcome = snap["outcome"] or "unknown"
    fig.suptitle(f"{snap['scenario']}: {outcome.upper()}", fontsize=15, fontweight="bold",
                 color=OUTCOME_COLOURS.get(outcome.split()[0], "#000000"), x=0.01, ha="left")
    notes = [snap["nodeid"], f"test id {snap['test_id']}", f"{snap['duration']:.0f}s recorded"]
    if snap.get("errors"):
        notes.append("recorder API errors (gaps possible): "
                     + ", ".join(f"{k}×{v}" for k, v in snap["errors"].items()))
    fig.text(0.99, 0.995, " · ".join(notes), ha="right", va="top", fontsize=8, color="#555555")


def _backdrop(ax, snap: dict, end: float) -> None:
    """Setup/teardown in grey, the scenario's bands and marks, the failure line."""
    call = snap.get("call")
    recorded = snap["duration"]
    if call:
        ax.axvspan(0, call[0], color="#eeeeee", zorder=0, lw=0)
        ax.axvspan(call[1], recorded, color="#eeeeee", zorder=0, lw=0)
    if end > recorded:  # a band reaching past the recording: nothing was seen there
        ax.axvspan(recorded, end, facecolor="none", hatch="..", edgecolor="#dddddd", lw=0,
                   zorder=0)
    for i, band in enumerate(snap["bands"]):
        ax.axvspan(band["start"], band["end"], color=BAND_COLOURS[i % len(BAND_COLOURS)],
                   alpha=0.18, zorder=0.5, lw=0)
    for mark in snap["marks"]:
        ax.axvline(mark["t"], color="#333333", ls=":", lw=1, zorder=1)
    if call and snap["outcome"] != "passed":
        ax.axvline(call[1], color=OUTCOME_COLOURS["failed"], lw=2, zorder=3)
    ax.grid(axis="x", color="#dddddd", lw=0.5)


def _mark_labels(ax, snap: dict, end: float) -> None:
    """Each mark's label beside its line; labels of marks close together step right."""
    last, step = None, 0
    for mark in sorted(snap["marks"], key=lambda m: m["t"]):
        close = last is not None and mark["t"] - last < end * 0.012 * (step + 1)
        step = step + 1 if close else 0
        last = mark["t"] if not close else last
        ax.annotate(mark["label"], (mark["t"], 1), xycoords=("data", "axes fraction"),
                    xytext=(2 + 10 * step, -2), textcoords="offset points", rotation=90, va="top",
                    fontsize=7, color="#333333", clip_on=True, zorder=5,
                    bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})


def _step_labels(ax, snap: dict, end: float) -> None:
    """Where each step of the scenario began: a tick and its title, small, under the lanes'
    top edge; titles close together take turns in height."""
    last, row = None, 0
    for s in sorted(snap.get("steps") or [], key=lambda m: m["t"]):
        row = (row + 1) % 3 if last is not None and s["t"] - last < end * 0.15 else 0
        last = s["t"]
        ax.axvline(s["t"], ymin=0.9, ymax=1.0, color="#8888aa", lw=0.8, zorder=1)
        title = s["label"] if len(s["label"]) <= 48 else s["label"][:47] + "…"
        ax.annotate(title, (s["t"], 0.97 - 0.035 * row), xycoords=("data", "axes fraction"),
                    xytext=(2, 0), textcoords="offset points", fontsize=6, color="#555577",
                    va="top", clip_on=True, zorder=5)


def _phase_labels(ax, snap: dict, end: float) -> None:
    call = snap.get("call")
    if not call:
        return
    style = {"xycoords": ("data", "axes fraction"), "fontsize": 7, "color": "#777777",
             "style": "italic", "va": "bottom"}
    if call[0] > end * 0.04:
        ax.annotate("setup", (call[0] / 2, 0.02), ha="center", **style)
    recorded = snap["duration"]
    if recorded - call[1] > end * 0.06:
        ax.annotate("teardown", ((call[1] + recorded) / 2, 0.02), ha="center", **style)
    if end - recorded > end * 0.1:
        ax.annotate("not recorded", ((recorded + end) / 2, 0.02), ha="center", **style)


def _bounds_legend(fig: Figure, snap: dict):
    handles = [Patch(color=BAND_COLOURS[i % len(BAND_COLOURS)], alpha=0.35, label=b["label"])
               for i, b in enumerate(snap["bands"])]
    if snap["marks"]:
        handles.append(Line2D([], [], color="#333333", ls=":", label="scenario actions"))
    if snap.get("call"):
        handles.append(Patch(color="#eeeeee", label="setup / teardown"))
        if snap["outcome"] != "passed":
            handles.append(Line2D([], [], color=OUTCOME_COLOURS["failed"], lw=2,
                                  label=f"test body ended ({snap['outcome']})"))
    if handles:
        return fig.legend(handles=handles, loc="outside lower left", ncols=min(len(handles), 4),
                   fontsize=9, frameon=False, title="bounds the scenario asserts",
                   title_fontsize=9, alignment="left")


def _steps(ax, series: dict, styles: dict[str, tuple[str, str]], ylabel: str) -> None:
    t = series["t"]
    drawn = 0
    for state, (colour, ls) in styles.items():
        values = series.get(state)
        if values and any(values):
            ax.step(t, values, where="post", color=colour, ls=ls, lw=1.8, label=state)
            drawn += 1
    for state, values in series.items():  # states without a style (e.g. a pod phase)
        if state != "t" and state not in styles and any(values):
            ax.step(t, values, where="post", lw=1.8, label=state)
            drawn += 1
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=2))
    top = max((max(v) for k, v in series.items() if k != "t" and v), default=0)
    ax.set_ylim(0, max(top, 1) * 1.15 + 0.2)
    if drawn:
        ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, f"no {ylabel} seen", transform=ax.transAxes, ha="center",
                va="center", color="#999999")


def _pods(ax, series: dict) -> None:
    _steps(ax, series, {k: (v, "-") for k, v in POD_COLOURS.items()}, "pods")


def _claims(ax, series: dict) -> None:
    _steps(ax, series, CLAIM_STYLE, "NodeClaims")


def _machines(ax, machines: list[dict], end: float) -> None:
    ax.set_ylabel("NodeClaims / nodes")
    if not machines:
        ax.text(0.5, 0.5, "no NodeClaims or nodes seen", transform=ax.transAxes, ha="center",
                va="center", color="#999999")
        ax.set_yticks([])
        return
    labelled = len(machines) <= MAX_LABELLED_ROWS
    capacities = set()
    for row, m in enumerate(machines):
        y = len(machines) - 1 - row
        colour = CAPACITY_COLOURS.get(m["capacity_type"], "#bab0ac")
        capacities.add(m["capacity_type"] or "unknown")
        start = m["created"] if m["created"] is not None else 0.0
        stop = m["gone"] if m["gone"] is not None else end
        deleting = m["deleting"] if m["deleting"] is not None else stop
        ready = m["ready"] if m["ready"] is not None else deleting
        ready = min(max(ready, start), deleting)
        if ready > start:
            ax.barh(y, ready - start, left=start, height=0.6, color=colour, alpha=0.3, lw=0)
        if deleting > ready:
            ax.barh(y, deleting - ready, left=ready, height=0.6, color=colour, lw=0)
        if stop > deleting:
            ax.barh(y, stop - deleting, left=deleting, height=0.6, color=colour, alpha=0.45,
                    hatch="////", edgecolor="white", lw=0)
        for t in m["drifted"]:
            ax.plot(t, y + 0.38, marker="v", color=CLAIM_STYLE["Drifted"][0], ms=7, zorder=4)
        for t in m["consolidatable"]:
            ax.plot(t, y + 0.38, marker="D", color=CLAIM_STYLE["Consolidatable"][0], ms=5,
                    zorder=4)
        if labelled:
            text = m["instance_type"] or "type not known yet"
            if not m["claim"]:  # a node no NodeClaim names (a leak, or one not registered)
                text += " · node without a NodeClaim"
            ax.annotate(text, (start, y), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=7.5, color="#222222", clip_on=True)
    ax.set_ylim(-0.7, len(machines) - 0.3)
    if labelled:
        ax.set_yticks(range(len(machines)),
                      [_short(m["claim"] or m["node"]) for m in reversed(machines)], fontsize=7)
    else:
        ax.set_yticks([])
        ax.text(0.01, 0.98, f"{len(machines)} NodeClaims", transform=ax.transAxes, va="top",
                fontsize=8)
    handles = [Patch(color=CAPACITY_COLOURS.get(c, "#bab0ac"), label=c) for c in sorted(capacities)]
    handles += [Patch(color="#888888", alpha=0.3, label="launching"),
                Patch(color="#888888", label="Ready"),
                Patch(facecolor="#888888", alpha=0.45, hatch="////", edgecolor="white",
                      label="deleting"),
                Line2D([], [], marker="v", ls="", color=CLAIM_STYLE["Drifted"][0], label="Drifted"),
                Line2D([], [], marker="D", ls="", ms=5, color=CLAIM_STYLE["Consolidatable"][0],
                       label="Consolidatable")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1), fontsize=8,
              frameon=False)


def _short(name: str, keep: int = 22) -> str:
    return name if len(name) <= keep else "…" + name[-keep + 1:]


def _short_text(text: str, keep: int = 48) -> str:
    return text if len(text) <= keep else text[:keep - 1] + "…"


def _events(ax, events: list[dict], reasons: list[str], end: float) -> None:
    """A row per reason; each marker's words beside it where they fit: on the right, or on the
    left near the right edge, never over the words before them on the row."""
    ax.set_ylabel("Karpenter\nevents")
    rows = {r: len(reasons) - 1 - i for i, r in enumerate(reasons)}
    # Seconds per character of the 7-point words (the lane is about 10 of the 13 inches).
    per_char = end / (10 * 72 / (7 * 0.55))
    free = {r: float("-inf") for r in reasons}  # where the next words on a row may begin
    for e in events:
        marker, colour = EVENT_STYLE.get(e["reason"], ("o", "#4e79a7"))
        y = rows[e["reason"]]
        ax.plot(e["t"], y, marker=marker, color=colour, ms=7, ls="", alpha=0.8)
        why = (e["message"].rpartition(": ")[2] if e["reason"] in REASON_IN_MESSAGE
               else _short_text(e["message"]))
        width = (len(why) + 2) * per_char
        left = e["t"] + width > end
        start = e["t"] - width if left else e["t"]
        if not why or start < free[e["reason"]]:
            continue
        free[e["reason"]] = e["t"] if left else e["t"] + width
        ax.annotate(why, (e["t"], y), xytext=(-6 if left else 6, 0), textcoords="offset points",
                    ha="right" if left else "left", fontsize=7, color="#333333", va="center",
                    clip_on=True)
    ax.set_yticks(list(rows.values()), list(rows), fontsize=8)
    ax.set_ylim(-0.6, len(reasons) - 0.4)


def load(path: Path) -> dict:
    """A snapshot file as ``render`` takes it; a recording is reduced again, with this
    version's reductions."""
    snap = json.loads(path.read_text())
    if "declared" in snap:
        from karpenter_e2e.fixtures.timeline import Timeline
        snap = Timeline.from_snapshot(snap).snapshot(snap["outcome"])
    return snap
