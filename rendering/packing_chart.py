"""Node packing, in the spirit of eks-node-viewer: which pods sit on which node, from one of
check's snapshots.

One horizontal bar per node Karpenter launched for the folder's NodePools, as long as the
node's allocatable CPU (or another resource), filled with one segment per pod in the order of
their requests: DaemonSet pods first (hatched: the node's overhead), then the largest request
first. What is left of the bar is unused. Bars are grouped by NodePool and, within a pool, by
capacity type (on-demand, reserved, spot), each group under a heading with its nodes and cost;
within a group, in launch order. Each bar is labelled with its NodeClaim (or node), instance
type, zone, capacity type and price per hour with where the price came from (a modelled spot
price says so). Under the picture: the Pending pods per workload, which no bar shows, the
pools with no node, and the price sources.

``prepare`` reduces a snapshot (``checks.observe.Snapshot.to_dict()``, as check.json holds it
under ``snapshot``) to what is drawn; ``render`` draws it. ``karpenter-e2e chart packing
check.json packing.png [RESOURCE]`` (rendering/charts.py) draws one again from a check's result.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import blended_transform_factory

from karpenter_e2e.rendering.timeline_chart import (
    CAPACITY_COLOURS,
    _short,
    _short_text,
    one_at_a_time,
)

# Capacity types in the order a pool's groups are listed; any other after them, by name.
CAPACITY_ORDER = ("on-demand", "reserved", "spot")
# How each resource is shown: its unit and what one unit is in the snapshot's amounts.
UNITS = {"cpu": ("CPU", 1.0), "memory": ("GiB", 2.0 ** 30), "ephemeral-storage": ("GiB", 2.0 ** 30),
         "pods": ("pods", 1.0)}
# Distinct colours for workloads; none of them grey (the unused part) or a capacity type's
# colour (the strips and bands), so a segment never reads as on-demand or spot. They repeat
# past 20 workloads.
PALETTE = ["#59a14f", "#e15759", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf",
           "#d37295", "#499894", "#8cd17d", "#b6992d", "#a0cbe8", "#665191", "#d4a6c8",
           "#bcbd22", "#e377c2", "#8c564b", "#86bcb6", "#f1ce63", "#7f3c8d"]
MAX_BARS = 100  # nodes drawn at most; the rest counted under their group's heading
MAX_LEGEND = 16  # workloads named in the legend; the rest counted
ROW_IN = 0.3  # inches per row (a bar or a heading)
BARS_IN, LEGEND_IN = 7.0, 3.1  # the bars' width and the legend's beside them
FIGURES_IN = 1.5  # of BARS_IN: room after the widest bar for its figures ('4.6 / 7.91 CPU  58%')
LABEL_PT = 7.5  # the labels' font size (monospace, so that their columns line up)
NAME_CHARS = 24  # NodeClaim or node names are cut to this many characters
UNUSED = "#f0f0f0"
# Pods that hold their requests on a node; Succeeded and Failed pods no longer do.
HOLDING = ("Running", "Pending", "Terminating", "Unknown")


@dataclass
class Segment:
    pod: str  # namespace/name
    workload: str  # Kind/namespace/name
    amount: float  # the pod's request, in the resource's unit
    daemonset: bool = False


@dataclass
class Bar:
    name: str  # the NodeClaim's, else the node's
    node: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None  # USD/hour
    price_tag: str  # where the price came from, in a word or two ("modelled" for spot)
    allocatable: float | None  # None: the snapshot did not record it
    created: float | None = None
    segments: list[Segment] = field(default_factory=list)

    @property
    def used(self) -> float:
        return sum(s.amount for s in self.segments)


@dataclass
class Group:
    nodepool: str
    capacity_type: str
    bars: list[Bar] = field(default_factory=list)
    hidden: int = 0  # bars of this group not drawn (past MAX_BARS)

    @property
    def nodes(self) -> int:
        return len(self.bars) + self.hidden


@dataclass
class Pending:
    workload: str
    pods: int
    amount: float  # their requests together, in the resource's unit


@dataclass
class Packing:
    resource: str
    unit: str
    groups: list[Group]
    workloads: list[str]  # every workload with a pod, in legend (and colour) order
    daemonsets: list[str]  # the workloads that are DaemonSets
    pending: list[Pending]  # workloads with pods on no node, most pods first
    empty_pools: list[str]  # the folder's NodePools without a node
    elsewhere: int = 0  # pods on a node that is not drawn (not one of the pools' nodes)
    price_notes: list[str] = field(default_factory=list)  # where each capacity type's price came from
    cost_per_hour: float | None = None  # every drawn node's price, None when one is unknown

    @property
    def bars(self) -> list[Bar]:
        return [b for g in self.groups for b in g.bars]


def _amount(requests: dict[str, str], resource: str) -> float:
    """A pod's request of ``resource`` in the unit it is drawn in; a pod counts 1 of 'pods'."""
    return 1.0 if resource == "pods" else _in_unit(requests.get(resource, "0"), resource)


def _in_unit(quantity: str, resource: str) -> float:
    """'1.5Gi' of memory -> 1.5, '3920m' of cpu -> 3.92."""
    from kubernetes.utils import parse_quantity
    return float(parse_quantity(quantity)) / UNITS.get(resource, ("", 1.0))[1]


def _capacity_rank(capacity_type: str) -> tuple[int, str]:
    order = CAPACITY_ORDER.index(capacity_type) if capacity_type in CAPACITY_ORDER else \
        len(CAPACITY_ORDER)
    return order, capacity_type


def prepare(snapshot: dict, resource: str = "cpu",
            prices: dict[str, list[str]] | None = None, max_bars: int = MAX_BARS) -> Packing:
    """What the picture shows, from a snapshot's dict. ``prices``: capacity type -> [tag,
    words] saying where its price came from (``checks.report.price_sources``); without it the
    price is 'from its label'. Groups: the NodePools in the snapshot's order (nodes of pools
    it does not list are left out and counted in ``elsewhere`` with their pods), then per
    capacity type in CAPACITY_ORDER; bars in launch order; segments DaemonSet pods first, then
    the largest request first (ties by workload, then pod)."""
    prices = prices or {}
    unit = UNITS.get(resource, (resource, 1.0))[0]
    pools = [p["name"] for p in snapshot.get("pools") or []]
    nodes = [n for n in snapshot.get("nodes") or [] if not pools or n["nodepool"] in pools]
    pools += sorted({n["nodepool"] for n in nodes} - set(pools))
    bars: dict[str, Bar] = {}
    for n in nodes:
        alloc = (n.get("allocatable") or {}).get(resource)
        tag = (prices.get(n["capacity_type"]) or ["from its label"])[0]
        bars[n["name"]] = Bar(_short(n.get("claim") or n["name"], NAME_CHARS), n["name"],
                              n["instance_type"], n["zone"], n["capacity_type"], n["price"],
                              tag, _in_unit(alloc, resource) if alloc else None,
                              n.get("created"))
    pods = snapshot.get("pods") or []
    daemonsets = sorted({p["workload"] for p in pods if p["workload"].startswith("DaemonSet/")})
    elsewhere, pending = 0, Counter[str]()
    pending_amount: dict[str, float] = {}
    for p in pods:
        if p["phase"] not in HOLDING:
            continue
        amount = _amount(p.get("requests") or {}, resource)
        if not p["node"]:
            pending[p["workload"]] += 1
            pending_amount[p["workload"]] = pending_amount.get(p["workload"], 0.0) + amount
        elif p["node"] in bars:
            bars[p["node"]].segments.append(Segment(f"{p['namespace']}/{p['name']}",
                                                    p["workload"], amount,
                                                    p["workload"] in daemonsets))
        else:
            elsewhere += 1
    for bar in bars.values():
        bar.segments.sort(key=lambda s: (not s.daemonset, -s.amount, s.workload, s.pod))
    groups: dict[tuple[str, str], Group] = {}
    for n in sorted(nodes, key=lambda n: (pools.index(n["nodepool"]),
                                          _capacity_rank(n["capacity_type"]),
                                          n.get("created") or 0.0, n["name"])):
        key = (n["nodepool"], n["capacity_type"])
        groups.setdefault(key, Group(*key)).bars.append(bars[n["name"]])
    _cap(list(groups.values()), max_bars)
    workloads = sorted({p["workload"] for p in pods}, key=_natural)
    used = {g.nodepool for g in groups.values()}
    return Packing(resource, unit, list(groups.values()), workloads, daemonsets,
                   [Pending(w, c, round(pending_amount[w], 3)) for w, c in
                    sorted(pending.items(), key=lambda i: (-i[1], i[0]))],
                   [p for p in pools if p not in used], elsewhere,
                   [f"{ct}: {words[1]}" for ct, words in prices.items()
                    if any(n["capacity_type"] == ct for n in nodes)],
                   _total([n["price"] for n in nodes]))


def _total(values: list[float | None]) -> float | None:
    """Their sum, or None when one of them is not known."""
    known = [v for v in values if v is not None]
    return round(sum(known), 4) if len(known) == len(values) else None


def _natural(text: str) -> list:
    """'app-10' after 'app-9'."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _cap(groups: list[Group], max_bars: int) -> None:
    """At most ``max_bars`` bars, each group keeping its share (at least one bar)."""
    total = sum(len(g.bars) for g in groups)
    if total <= max_bars:
        return
    for g in groups:
        keep = max(1, len(g.bars) * max_bars // total)
        g.hidden, g.bars = len(g.bars) - keep, g.bars[:keep]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _workload_name(workload: str) -> str:
    """'Deployment/workshop/inflate' -> 'inflate (Deployment, workshop)'."""
    kind, _, rest = workload.partition("/")
    ns, _, name = rest.partition("/")
    return f"{name} ({kind}, {ns})" if name else workload


def _money(v: float | None) -> str:
    return "price ?" if v is None else f"${v:.4f}/h"


def _figure_of(amount: float) -> str:
    return f"{amount:.3g}" if amount < 100 else f"{amount:,.0f}"


def colours(packing: Packing) -> dict[str, str]:
    return {w: PALETTE[i % len(PALETTE)] for i, w in enumerate(packing.workloads)}


@one_at_a_time
def render(packing: Packing, path: Path, title: str = "Node packing", subtitle: str = "",
           dpi: int = 100, inspect: dict | None = None) -> Path:
    """Draw ``packing`` into ``path`` (PNG or SVG, by suffix); returns ``path``. ``inspect``,
    if given, gets what was drawn (row labels, headings, legend, notes), for tests.

    Laid out in inches, not by matplotlib's layout engines, so that the labels' column is as
    wide as its longest line: the labels (a table in monospace, a line per node, a heading
    per group) on the left, the bars on one axis beside them, the legend on the right, the
    notes under it all. The height grows with the rows."""
    rows = _rows(packing)
    notes = _notes(packing)
    labels = [_label(b) for b in packing.bars] + [_columns(*(n for n, _ in COLUMNS))]
    labels_in = 0.25 + max(len(t) for t in labels) * LABEL_PT * 0.61 / 72
    main_in = ROW_IN * (max(len(rows), 2) + 1.3)
    notes_in = 0.2 * len(notes) + 0.1
    top_in, axis_in = 0.65, 0.55
    height = top_in + main_in + axis_in + notes_in + 0.15
    width = labels_in + BARS_IN + LEGEND_IN
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((labels_in / width, (notes_in + 0.15 + axis_in) / height,
                       BARS_IN / width, main_in / height))
    palette = colours(packing)
    drawn: dict[str, list] = {"rows": [], "headings": [], "segments": []}
    ax.set_ylim(max(len(rows), 1) - 0.4, -1.3)
    _table(fig, ax, packing, rows, drawn)
    _bars(ax, packing, rows, palette, drawn)
    legend = _legend(ax, packing, palette)
    _notes_text(fig, notes, palette, notes_in + 0.15)
    fig.text(0.1 / width, 1 - 0.1 / height, title, fontsize=14, fontweight="bold", va="top")
    if subtitle:
        fig.text(0.1 / width, 1 - 0.4 / height, subtitle, va="top", fontsize=8.5,
                 color="#555555")
    if inspect is not None:
        inspect.update(drawn, legend=[t.get_text() for t in legend.get_texts()] if legend else [],
                       notes=[text for text, _ in notes], title=title, size_in=(width, height))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def _rows(packing: Packing) -> list[Group | Bar]:
    """Top to bottom: each group's heading, then its bars."""
    out: list[Group | Bar] = []
    for g in packing.groups:
        out += [g, *g.bars]
    return out


def _heading(g: Group, unit: str) -> str:
    cost = _total([b.price for b in g.bars])
    cost_text = f" · {_money(cost)}" if cost is not None and not g.hidden else ""
    alloc = _total([b.allocatable for b in g.bars])
    share = f" · {sum(b.used for b in g.bars) / alloc:.0%} of allocatable {unit} requested" \
        if alloc else ""
    more = f" ({g.hidden} more not drawn)" if g.hidden else ""
    return f"NodePool {g.nodepool} · {g.capacity_type} · {_plural(g.nodes, 'node')}{more}{cost_text}{share}"


COLUMNS = (("NodeClaim", NAME_CHARS), ("instance type", 16), ("zone", 11), ("capacity", 10),
           ("price per hour", 0))


def _columns(*values: str) -> str:
    return "".join(v.ljust(width + 1) if width else v
                   for v, (_, width) in zip(values, COLUMNS, strict=True))


def _label(b: Bar) -> str:
    price = f"{_money(b.price)} {b.price_tag}" if b.price is not None else "no price label"
    return _columns(b.name, _short_text(b.instance_type, 16), _short_text(b.zone, 11),
                    _short_text(b.capacity_type, 9), price)


def _table(fig: Figure, ax, packing: Packing, rows: list, drawn: dict) -> None:
    """The labels, left of the bars: a header line, and per row a node's line or its
    group's heading (in bold, over a band of its capacity type's colour reaching across the
    bars). A strip of that colour sits between each node's line and its bar."""
    if not rows:
        return
    at = blended_transform_factory(fig.dpi_scale_trans, ax.transData)
    strip = blended_transform_factory(ax.transAxes, ax.transData)
    text: dict[str, Any] = {"fontsize": LABEL_PT, "family": "monospace", "va": "center", "transform": at,
            "color": "#222222"}
    fig.text(0.1, -0.9, _columns(*(name for name, _ in COLUMNS)),
             **{**text, "color": "#666666", "fontweight": "bold"})
    for y, row in enumerate(rows):
        if isinstance(row, Group):
            heading = _heading(row, packing.unit)
            fig.text(0.1, y, heading, fontsize=9, fontweight="bold", va="center",
                     color="#222222", transform=at, zorder=5)
            ax.add_patch(Rectangle((-1.0, y - 0.5), 2.0, 1.0, transform=strip, clip_on=False,
                                   lw=0, alpha=0.13, zorder=0,
                                   color=CAPACITY_COLOURS.get(row.capacity_type, "#bab0ac")))
            drawn["headings"].append(heading)
        else:
            fig.text(0.1, y, _label(row), **text)
            ax.add_patch(Rectangle((-0.012, y - 0.36), 0.006, 0.72, transform=strip,
                                   clip_on=False, lw=0,
                                   color=CAPACITY_COLOURS.get(row.capacity_type, "#bab0ac")))
            drawn["rows"].append(_label(row))


def _bars(ax, packing: Packing, rows: list, palette: dict[str, str], drawn: dict) -> None:
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", left=False, labelleft=False)
    if not packing.groups:
        ax.text(0.0, 0.5, "no node launched by Karpenter for the folder's NodePools",
                transform=ax.transAxes, ha="left", va="center", color="#777777", fontsize=11)
        ax.set_xticks([])
        ax.spines["bottom"].set_visible(False)
        return
    widest = max((max(b.allocatable or 0.0, b.used) for b in packing.bars), default=1.0) or 1.0
    # room for each bar's figures after its end
    ax.set_xlim(0, widest * BARS_IN / (BARS_IN - FIGURES_IN))
    per_unit = (BARS_IN - FIGURES_IN) / widest  # inches per unit, to fit the segments' words
    for y, row in enumerate(rows):
        if isinstance(row, Bar):
            _bar(ax, row, y, packing, palette, drawn, per_unit)
    ax.set_xlabel(f"{packing.unit}: the pods' requests (segments) in each node's allocatable "
                  f"{packing.resource} (bar)", fontsize=9)
    ticks = [t for t in ax.get_xticks() if t >= 0]  # not past the first at or after the widest
    ticks = [t for t in ticks if t <= min([t for t in ticks if t >= widest] or [widest])]
    ax.set_xticks(ticks)
    ax.spines["bottom"].set_bounds(0, max(ticks + [widest]))
    ax.grid(axis="x", color="#e4e4e4", lw=0.5)
    ax.set_axisbelow(True)


def _bar(ax, b: Bar, y: float, packing: Packing, palette: dict[str, str], drawn: dict,
         per_unit: float) -> None:
    """The node's allocatable as an outlined pale bar, its pods' requests over it, each
    segment with its workload's name where the name fits in it."""
    if b.allocatable is not None:
        ax.barh(y, b.allocatable, height=0.7, color=UNUSED, edgecolor="#8a8a8a", lw=0.8,
                zorder=1)
    x = 0.0
    edge = 0.7 if len(b.segments) <= 40 else 0.0
    for s in b.segments:
        colour = palette[s.workload]
        if s.daemonset:
            ax.barh(y, s.amount, left=x, height=0.7, facecolor="white", hatch="////",
                    hatchcolor=colour, edgecolor="white", lw=edge, zorder=2)
        else:
            ax.barh(y, s.amount, left=x, height=0.7, color=colour, edgecolor="white", lw=edge,
                    zorder=2)
            name = s.workload.rpartition("/")[2]
            if s.amount * per_unit >= len(name) * 7 * 0.6 / 72 + 0.1:
                ax.text(x + s.amount / 2, y, name, ha="center", va="center", fontsize=7,
                        color=_ink(colour), zorder=3)
        drawn["segments"].append((b.name, s.workload, s.amount))
        x += s.amount
    end = max(b.allocatable or 0.0, x)
    figures = f"{_figure_of(x)} / {_figure_of(b.allocatable)} {packing.unit}" \
        f"  {x / b.allocatable:.0%}" if b.allocatable else \
        f"{_figure_of(x)} {packing.unit} requested (allocatable not recorded)"
    if not b.segments:
        figures += "  empty"
    ax.annotate(figures, (end, y), xytext=(4, 0), textcoords="offset points", va="center",
                fontsize=8, color="#333333")


def _ink(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` ('#rrggbb')."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return "#111111" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "white"


def _legend(ax, packing: Packing, palette: dict[str, str]):
    counts = Counter(s.workload for b in packing.bars for s in b.segments)
    counts.update({p.workload: p.pods for p in packing.pending})
    handles = []
    for w in packing.workloads[:MAX_LEGEND]:
        text = f"{_short_text(_workload_name(w), 40)} ×{counts[w]}"
        if w in packing.daemonsets:
            handles.append(Patch(facecolor="white", hatch="////", hatchcolor=palette[w],
                                 edgecolor=palette[w], label=text))
        else:
            handles.append(Patch(color=palette[w], label=text))
    if len(packing.workloads) > MAX_LEGEND:
        handles.append(Patch(color="white", label=f"+{len(packing.workloads) - MAX_LEGEND} "
                                                  "more workloads (colours repeat)"))
    handles.append(Patch(facecolor=UNUSED, edgecolor="#8a8a8a", label="unused allocatable"))
    if packing.daemonsets:
        handles.append(Patch(facecolor="white", hatch="////", hatchcolor="#555555",
                             edgecolor="#555555", label="DaemonSet pod (hatched)"))
    for ct in sorted({g.capacity_type for g in packing.groups}, key=_capacity_rank):
        handles.append(Patch(color=CAPACITY_COLOURS.get(ct, "#bab0ac"),
                             label=f"{ct} (capacity type)"))
    if not packing.groups:
        return None
    return ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
                     frameon=False, title="workload (kind, namespace) ×pods",
                     title_fontsize=8.5, alignment="left")


def _notes(packing: Packing) -> list[tuple[str, str]]:
    """The lines under the picture, each with its workload (for its colour) or ''."""
    out: list[tuple[str, str]] = []
    if packing.pending:
        total = sum(p.pods for p in packing.pending)
        out.append((f"Pending, on no node: {_plural(total, 'pod')}", ""))
        out += [(f"    {_workload_name(p.workload)}: {_plural(p.pods, 'pod')}, "
                 f"{_figure_of(p.amount)} {packing.unit} requested", p.workload)
                for p in packing.pending]
    else:
        out.append(("Pending, on no node: none", ""))
    if packing.empty_pools:
        out.append(("NodePools with no node: " + ", ".join(packing.empty_pools), ""))
    if packing.elsewhere:
        out.append((f"Not drawn: {packing.elsewhere} pods on nodes of no listed NodePool", ""))
    if packing.price_notes:
        out.append(("Prices per hour, from each node's price label: "
                    + "; ".join(packing.price_notes)
                    + (f". Total {_money(packing.cost_per_hour)}" if packing.cost_per_hour
                       is not None else ""), ""))
    return out


def _notes_text(fig: Figure, notes: list[tuple[str, str]], palette: dict[str, str],
                top_in: float) -> None:
    """The notes, a line each from ``top_in`` inches above the bottom down; a workload's line
    after a square of its colour."""
    at = fig.dpi_scale_trans
    for i, (text, workload) in enumerate(notes):
        y = top_in - 0.1 - 0.2 * i
        if workload:
            fig.patches.append(Rectangle((0.3, y - 0.13), 0.11, 0.11, transform=at, lw=0,
                                         color=palette[workload], figure=fig))
        fig.text(0.5 if workload else 0.1, y, text.strip(), transform=at, va="top",
                 fontsize=8.5, color="#222222")


def render_result(result: dict, path: Path, resource: str = "cpu",
                  inspect: dict | None = None) -> Path:
    """The picture of a check's result (check.json): its scale-out snapshot."""
    packing = prepare(result["snapshot"], resource, result.get("price_sources"))
    nodes = sum(g.nodes for g in packing.groups)
    pools = len({g.nodepool for g in packing.groups}) + len(packing.empty_pools)
    subtitle = (f"{_plural(nodes, 'node')} of {_plural(pools, 'NodePool')} · "
                f"after scale-out · {result.get('mode', '?')} cluster, Karpenter "
                f"{result.get('karpenter_version', '?')} · run {result.get('run_id', '?')}")
    return render(packing, path, f"Node packing: {result.get('folder', '')}", subtitle,
                  inspect=inspect)
