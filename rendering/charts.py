"""`karpenter-e2e chart timeline|packing DATA.json OUT.png`: a picture a run drew, drawn again
from the data it kept beside it, with this version's drawing: ``timeline`` from a scenario's
``timelines/<test>.json`` (its recording reduced again), ``packing`` from a check's
``check.json`` (by cpu, or the RESOURCE named). The upgrade gate's performance picture is
``karpenter-e2e perf FROM TO --chart OUT.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from karpenter_e2e.rendering import packing_chart, timeline_chart


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e chart", description=__doc__)
    charts = p.add_subparsers(dest="chart", required=True)
    timeline = charts.add_parser("timeline", help="a scenario's timeline")
    timeline.add_argument("data", type=Path, metavar="SNAPSHOT.json")
    timeline.add_argument("out", type=Path, metavar="OUT.png")
    packing = charts.add_parser("packing", help="check's node packing")
    packing.add_argument("data", type=Path, metavar="CHECK.json")
    packing.add_argument("out", type=Path, metavar="OUT.png")
    packing.add_argument("resource", nargs="?", default="cpu", choices=packing_chart.UNITS,
                         metavar="RESOURCE", help=f"what the bars measure: "
                         f"{', '.join(packing_chart.UNITS)} (default: cpu)")
    args = p.parse_args(argv)
    try:
        data = timeline_chart.load(args.data) if args.chart == "timeline" else \
            json.loads(args.data.read_text())
    except (OSError, ValueError) as exc:
        print(f"chart {args.chart}: {args.data}: {exc}", file=sys.stderr)
        return 2
    if args.chart == "timeline":
        print(timeline_chart.render(data, args.out))
    else:
        print(packing_chart.render_result(data, args.out, args.resource))
    return 0
