"""The generic verdict's kill rate as Markdown (``reports/killrate/killrate.md``): the rate,
per oracle, per family and per workload, each mutant's verdict, the survivors with why, the
mutants not run and the control's own findings. ``karpenter-e2e killrate``
(runners/killrate.py) runs and judges; this writes. Data in, Markdown out.
"""

from __future__ import annotations

GOAL = 0.8  # issue 51: at least 80 % of the shipped mutants killed by the generic verdict alone


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.0f} %)" if n else "–"


def _cell(text: str, width: int = 220) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[:width - 1] + "…"


def markdown(result: dict) -> str:
    rate = result.get("rate")
    title = (f"{result['killed']} of {result['decided']} mutants killed by the generic "
             f"verdict alone ({100 * rate:.0f} %; goal {100 * GOAL:.0f} %)" if rate is not None
             else "no mutant reached a verdict")
    sample = f", a sample of {result['sample']} stratified by family" if result.get("sample") else ""
    shard = f", shard {result['shard']}" if result.get("shard") else ""
    lines = [f"# Kill rate of the generic verdict: {title}", "",
             f"Karpenter {result.get('version') or '?'}{sample}{shard}; workloads: "
             f"{', '.join(result.get('workloads') or [])}; {result.get('controls_per_workload')} "
             f"control run(s) per workload; {result.get('wall_s', 0) / 60:.1f} min"
             + (f" (the wall times of {result['shards']} parts, added)"
                if (result.get("shards") or 1) > 1 else "") + ". Only the "
             "oracles and the differential judge (no scenario asserts, no expectations): a mutant "
             "is killed on a workload when an oracle fails on it and on none of the control's "
             "runs, or a field of what it decided is suspect beyond the control's own variation "
             "(docs/killrate.md).", ""]
    lines += ["## Per oracle", "", "| killer | mutants killed | killed by it alone |",
              "|---|---|---|"]
    lines += [f"| `{k}` | {v['killed']} | {v['alone']} |"
              for k, v in (result.get("per_oracle") or {}).items()] or ["| – | 0 | 0 |"]
    lines += ["", "## Per family", "", "| family | killed |", "|---|---|"]
    lines += [f"| {f} | {_pct(v['killed'], v['run'])} |"
              for f, v in (result.get("per_family") or {}).items()]
    lines += ["", "## Per workload", "", "| workload | mutants killed on it |", "|---|---|"]
    lines += [f"| {w} | {_pct(v['killed'], v['run'])} |"
              for w, v in (result.get("per_workload") or {}).items()]
    mutants = result.get("mutants") or []
    lines += ["", "## Mutants", "", "| mutant | family | status | killed by | evidence |",
              "|---|---|---|---|---|"]
    for m in mutants:
        if m["status"] in ("not run", "pending"):
            continue
        evidence = "; ".join(f"{v['workload']}: {v['why']}" for v in m["verdicts"] if v["killed"])
        lines.append(f"| {m['name']} | {m['family']} | **{m['status']}** | "
                     f"{', '.join(m['killers']) or '–'} | {_cell(evidence or m['error'] or '–')} |")
    survivors = [m for m in mutants if m["status"] in ("survived", "no verdict", "invalid")]
    if survivors:
        lines += ["", "## Survivors, and why no oracle saw them", ""]
        for m in survivors:
            lines.append(f"- **{m['name']}** ({m['family']}, {m['status']}): {m['regression']}")
            lines += [f"  - {v['workload']}: {_cell(v['why'], 400)}" for v in m["verdicts"]]
            if m["error"]:
                lines.append(f"  - {_cell(m['error'], 400)}")
    not_run = [m for m in mutants if m["status"] == "not run"]
    if not_run:
        lines += ["", "## Not run here", ""]
        lines += [f"- **{m['name']}** ({m['family']}): {m['error']}" for m in not_run]
    controls = result.get("controls") or []
    lines += ["", "## The control (the unmutated build)", "",
              "| workload | set-up | exit | s | oracles failed |", "|---|---|---|---|---|"]
    lines += [f"| {c['workload']} | {c['setup']} | {c['code']} | {c['seconds']:.0f} | "
              f"{', '.join(c['oracles']) or ('no verdict' if not c['judged'] else 'none')} |"
              for c in controls]
    alarms = sorted({(c["workload"], o) for c in controls for o in c["oracles"]})
    if alarms:
        lines += ["", "An oracle failing on the unmutated build is a false alarm to fix at its "
                      "cause (or a finding about the release); no mutant is counted killed by "
                      "it on that workload: "
                  + "; ".join(f"`{o}` on {w}" for w, o in alarms) + "."]
    return "\n".join(lines) + "\n"
