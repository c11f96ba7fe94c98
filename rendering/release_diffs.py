"""The release-diffs table (``release-diffs.md``): per pair of releases, what was diffed and how
many differences were suspect, expected and noted, then every difference with both values and
why. ``karpenter-e2e release-diffs`` (runners/release_diffs.py) runs the pairs and writes it
with these, its JSON beside it. Data in, Markdown out.
"""

from __future__ import annotations

import json


def counts(rows: list[dict]) -> dict[str, int]:
    out = {"suspect": 0, "expected": 0, "noted": 0}
    for r in rows:
        for d in r["differences"]:
            out[d["status"]] += 1
        out["suspect"] += sum(1 for c in r.get("cases", []) if "suspect:" in c["found"])
    return out


def no_verdict(r: dict) -> list[str]:
    """What in a row reached no verdict: a check that did not end in one (its exit), one that
    wrote no report (a crash before judging exits 1 too), an explore case that did neither."""
    out = [f"{r['folder']} (exit {r['exit']})"] if r["exit"] not in (0, 1, None) else []
    out += [f"{r['folder']} (exit {r['exit']}, no report)"] if r.get("judged") is False else []
    return out + [f"{r['folder']} case {c['case']}" for c in r.get("cases", [])
                  if c["found"].startswith("no verdict")]


def markdown(pairs: dict[str, list[dict]], started: str) -> str:
    lines = ["# What changes between consecutive releases", "",
             f"{started}. Each release against the one before it, on the same workloads "
             "(docs/differential.md). Reproduce a row with the command in its check.log.", "",
             "| pair | workloads | suspect | expected | noted | oracles failing | no verdict |",
             "|---|---|---|---|---|---|---|"]
    for pair, rows in pairs.items():
        n = counts(rows)
        oracles = sorted({f"{o} on {rel} ({r['folder']})" for r in rows
                          for rel, names in r["oracles"].items() for o in names})
        broken = [why for r in rows for why in no_verdict(r)]
        diffed = sum(1 for r in rows if not r.get("not_diffed"))
        lines.append(f"| {pair} | {diffed} | {n['suspect']} | {n['expected']} | {n['noted']} | "
                     f"{'; '.join(oracles) or '–'} | {', '.join(broken) or '–'} |")
    for pair, rows in pairs.items():
        diffs = [(r["folder"], d) for r in rows for d in r["differences"]]
        found = [(r["folder"], c) for r in rows for c in r.get("cases", [])
                 if c["found"] != "clean"]
        lines += ["", f"## {pair}", ""]
        lines += [f"- {r['folder']}: not diffed: {'; '.join(r['not_diffed'])}"
                  for r in rows if r.get("not_diffed")]
        if not diffs and not found:
            lines.append("Both releases decided the same on every workload.")
            continue
        if diffs:
            lines += ["| workload | status | field | key | before | after | why |",
                      "|---|---|---|---|---|---|---|"]
            order = {"suspect": 0, "expected": 1, "noted": 2}
            for folder, d in sorted(diffs, key=lambda x: (order[x[1]["status"]], x[0])):
                lines.append(f"| {folder} | {d['status']} | {d['field']} | {d['key'] or '–'} | "
                             f"{_cell(d['a'])} | {_cell(d['b'])} | {d.get('why') or '–'} |")
        for folder, c in found:
            lines.append(f"- {folder}, case {c['case']}: {c['found']}"
                         + (f" (minimal: {c['minimal']})" if c["minimal"] else ""))
    return "\n".join(lines) + "\n"


def _cell(v) -> str:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)
