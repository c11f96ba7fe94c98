"""The upgrade gate's performance comparison: the measured scale case (scenario
``scale-perf``) on FROM and on TO, each figure as a TO/FROM ratio against a limit.

``karpenter-e2e perf FROM.json TO.json [--max-ratio 1.5] [--ratios k=v,...] [--chart OUT.png]``
compares two runs' measurement files (``timings/*.json``) by hand, e.g. a version with
itself to see the noise; exit 1 when a figure is over its limit. ``--chart`` also draws the
gate's picture of them (rendering/perf_chart.py).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

SCENARIO = "scale-perf"


@dataclass(frozen=True)
class Metric:
    key: str  # in the scenario's measurements
    short: str  # the picture's label
    label: str  # the table's
    unit: str
    # A difference at most this large never fails, whatever the ratio: the figure's own
    # resolution (timestamps are whole seconds, polls 2 s apart, /proc ticks of 10 ms).
    slack: float
    digits: int = 1


METRICS = (
    Metric("scale_out_s", "scale-out", "scale-out: first pod created → all Running", "s",
           slack=3),
    Metric("nodes", "nodes", "nodes at scale-out", "", slack=0, digits=0),
    Metric("cost_per_hour", "cost per hour", "their cost per hour (catalogue prices)", "$/h",
           slack=0, digits=2),
    Metric("karpenter_cpu_s", "Karpenter CPU", "Karpenter CPU, scale-out to last node gone",
           "s", slack=1),
    Metric("karpenter_peak_rss_mib", "Karpenter peak RSS", "Karpenter peak resident memory",
           "MiB", slack=8, digits=0),
    Metric("consolidation_s", "consolidation", "consolidation: scale to 0 → last node gone", "s",
           slack=5),
)
BY_KEY = {m.key: m for m in METRICS}


def parse_limits(default: float, overrides: str = "") -> dict[str, float]:
    """{metric: largest TO/FROM allowed}: ``default`` for each, ``overrides`` as
    "scale_out_s=2,nodes=1.2"; unknown metrics and ratios below 1 are refused."""
    if not default >= 1:
        raise ValueError(f"--perf-max-ratio {default}: must be at least 1 (TO as good as FROM)")
    limits = dict.fromkeys(BY_KEY, float(default))
    for item in filter(None, (i.strip() for i in overrides.split(","))):
        key, _, value = item.partition("=")
        if key not in BY_KEY:
            raise ValueError(f"--perf-ratios {item!r}: unknown metric {key!r}; known: "
                             f"{', '.join(BY_KEY)}")
        try:
            limits[key] = float(value)
        except ValueError:
            raise ValueError(f"--perf-ratios {item!r}: expected METRIC=RATIO") from None
        if not limits[key] >= 1:
            raise ValueError(f"--perf-ratios {item!r}: a limit below 1 fails an unchanged run")
    return limits


@dataclass(frozen=True)
class Row:
    metric: Metric
    before: float | None  # FROM
    after: float | None  # TO
    limit: float

    @property
    def ratio(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        if self.before == 0:
            return 1.0 if self.after == 0 else math.inf
        return self.after / self.before

    @property
    def ok(self) -> bool:
        if self.ratio is None:
            return False  # an unmeasured figure is not a pass
        return self.ratio <= self.limit or self.after - self.before <= self.metric.slack


def compare(before: dict[str, float], after: dict[str, float],
            limits: dict[str, float]) -> list[Row]:
    return [Row(m, before.get(m.key), after.get(m.key), limits[m.key]) for m in METRICS]


def fmt(value: float | None, metric: Metric) -> str:
    if value is None:
        return "not measured"
    text = f"{value:.{metric.digits}f}"
    return f"${text}/h" if metric.unit == "$/h" else f"{text} {metric.unit}".strip()


def fmt_ratio(row: Row) -> str:
    return "—" if row.ratio is None else "∞" if math.isinf(row.ratio) else f"{row.ratio:.2f}"


def breaches(rows: list[Row], from_v: str, to_v: str) -> list[str]:
    """One gate reason per figure over its limit or not measured, with the figures."""
    out = []
    for r in rows:
        if r.ok:
            continue
        if r.ratio is None:
            missing = [v for v, x in ((from_v, r.before), (to_v, r.after)) if x is None]
            out.append(f"perf: {r.metric.key} not measured on {' and '.join(missing)}")
        else:
            out.append(f"perf: {r.metric.key} TO/FROM = {fmt_ratio(r)} > {r.limit:g} "
                       f"({from_v} {fmt(r.before, r.metric)}, {to_v} {fmt(r.after, r.metric)})")
    return out


def markdown(rows: list[Row], from_v: str, to_v: str) -> str:
    lines = [f"| figure | {from_v} | {to_v} | TO/FROM | limit | |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.metric.label} | {fmt(r.before, r.metric)} | "
                     f"{fmt(r.after, r.metric)} | {fmt_ratio(r)} | {r.limit:g} | "
                     f"{'ok' if r.ok else '**over**'} |")
    return "\n".join(lines) + "\n"


def load(path: Path) -> dict:
    """The scale-perf measurement file: ``path`` itself, or the one in a run's timings dir."""
    files = [path] if path.is_file() else sorted(path.glob("**/timings/*.json"))
    found = [json.loads(f.read_text()) for f in files]
    found = [f for f in found if f.get("scenario") == SCENARIO]
    if not found:
        raise FileNotFoundError(f"no {SCENARIO} measurements in {path}")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e perf", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before", type=Path, help="FROM's measurements (file or run directory)")
    p.add_argument("after", type=Path, help="TO's measurements (file or run directory)")
    p.add_argument("--max-ratio", type=float, default=1.5)
    p.add_argument("--ratios", default="", help="per-metric limits, e.g. nodes=1.2")
    p.add_argument("--chart", type=Path, default=None, metavar="OUT.png",
                   help="also draw the two runs and the ratios here")
    args = p.parse_args(argv)
    try:
        limits = parse_limits(args.max_ratio, args.ratios)
        before, after = load(args.before), load(args.after)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = compare(before["values"], after["values"], limits)
    names = (before.get("notes", {}).get("karpenter", "FROM"),
             after.get("notes", {}).get("karpenter", "TO"))
    print(markdown(rows, *names), end="")
    for reason in breaches(rows, *names):
        print(reason)
    if args.chart:
        from karpenter_e2e.rendering import perf_chart  # matplotlib, and it imports this module
        print(perf_chart.render(list(zip(names, (before, after), strict=True)), rows, args.chart))
    return 0 if all(r.ok for r in rows) else 1
