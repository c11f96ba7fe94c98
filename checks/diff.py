"""`check --base`: two checks' outcomes side by side, base -> head, per NodePool and per
workload (nodes, instance types, capacity types, zones, cost per hour and per month,
Pending pods), as Markdown sized for a pull-request comment and as JSON.

Pure functions of two check results (``Check.run``'s dicts, or None for a base with nothing
to check): unit-tested from recorded results.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

HOURS_PER_MONTH = 730  # AWS's own convention for monthly prices (8760 h / 12)
FIELDS = ("nodes", "instance_types", "capacity_types", "zones", "cost_per_hour",
          "cost_per_month", "pending")
# A row's status, in the order the table lists them: what changed first.
ORDER = {"added": 0, "removed": 1, "changed": 2, "unchanged": 3}
MAX_TYPES = 3  # instance types shown per cell; the rest counted


def _month(per_hour: float | None) -> float | None:
    return None if per_hour is None else round(per_hour * HOURS_PER_MONTH, 2)


def _nodes_figures(nodes: list[dict], pending: int | None) -> dict:
    prices = [n.get("price") for n in nodes]
    per_hour = None if None in prices else round(sum(p or 0.0 for p in prices), 4)
    return {"nodes": len(nodes),
            "instance_types": dict(Counter(n["instance_type"] for n in nodes).most_common()),
            "capacity_types": dict(Counter(n["capacity_type"] for n in nodes).most_common()),
            "zones": dict(sorted(Counter(n["zone"] for n in nodes).items())),
            "cost_per_hour": per_hour, "cost_per_month": _month(per_hour), "pending": pending}


def figures(result: dict | None) -> dict[tuple[str, str], dict]:
    """(kind, name) -> the row's figures, from one check's scale-out snapshot. Kinds:
    'total', 'NodePool', 'workload'. A workload's nodes are the distinct nodes its pods run
    on, and its cost theirs (a node two workloads share counts in both); a NodePool has no
    Pending pods of its own (None)."""
    if result is None:
        return {}
    snap = result["snapshot"]
    nodes = {n["name"]: n for n in snap["nodes"]}
    pending = Counter(p["workload"] for p in snap["pods"] if p["phase"] == "Pending")
    out = {("total", "all"): _nodes_figures(list(nodes.values()), sum(pending.values()))}
    for pool in snap["pools"]:
        out[("NodePool", pool["name"])] = _nodes_figures(
            [n for n in nodes.values() if n["nodepool"] == pool["name"]], None)
    for w in sorted({p["workload"] for p in snap["pods"]}):
        used = sorted({p["node"] for p in snap["pods"] if p["workload"] == w and p["node"]})
        out[("workload", w)] = _nodes_figures([nodes[n] for n in used if n in nodes],
                                             pending.get(w, 0))
    return out


def compare(base: dict | None, head: dict) -> list[dict]:
    """Every NodePool and workload of either side (and the total), base -> head: its status
    (added, removed, changed, unchanged), both sides' figures (None where it does not exist)
    and the fields that differ; changed rows first, the total row on top."""
    b, h = figures(base), figures(head)
    rows: list[dict] = []
    for key in list(h) + [k for k in b if k not in h]:
        bv, hv = b.get(key), h.get(key)
        changed = [f for f in FIELDS if (bv or {}).get(f) != (hv or {}).get(f)]
        if key[0] == "total":
            status = "changed" if changed else "unchanged"
        else:
            status = ("added" if bv is None else "removed" if hv is None
                      else "changed" if changed else "unchanged")
        rows.append({"kind": key[0], "name": key[1], "status": status, "base": bv, "head": hv,
                     "changed": changed})
    rows.sort(key=lambda r: (r["kind"] != "total", ORDER[str(r["status"])], r["kind"],
                             r["name"]))
    return rows


def _verdict(result: dict | None) -> dict | None:
    if result is None:
        return None
    exps = result["expectations"]
    steps = result.get("steps") or []
    return {"passed": result["passed"], "settled": result["settled"],
            "held": sum(e["ok"] for e in exps), "expectations": len(exps),
            "failed": [e["expectation"] for e in exps if not e["ok"]],
            "settle_error": result.get("settle_error", ""), "run_id": result["run_id"],
            "folder": result["folder"],
            # each side runs its own steps (its expect.yaml's, or --expect's for both)
            "steps": len(steps), "steps_ok": sum(s["outcome"] == "ok" for s in steps),
            "steps_failed": [f"{s['label']} ({s['text']}) {s['outcome']}" for s in steps
                             if s["outcome"] not in ("ok", "not run")],
            # the oracles that failed on this side (a check.json from before them: none)
            "oracles_failed": sorted({f["oracle"] for f in
                                      (result.get("oracles") or {}).get("findings", [])})}


def summary(base: dict | None, head: dict, base_described: str, base_note: str = "",
            timings: dict | None = None) -> dict:
    """Everything --base reports, as the JSON it writes (diff.json)."""
    return {"head": _verdict(head), "base": _verdict(base), "base_ref": base_described,
            "base_note": base_note, "karpenter_version": head.get("karpenter_version"),
            "mode": head.get("mode"), "hours_per_month": HOURS_PER_MONTH,
            "rows": compare(base, head), "timings": timings or {},
            # each side's node-packing picture, in its own run directory
            "packing": {side: (r.get("files") or {}).get("packing") if r else None
                        for side, r in (("base", base), ("head", head))}}


# ---- Markdown -------------------------------------------------------------------------------
def _cell_value(field: str, v) -> str:
    if v is None:
        return "–"
    if field in ("cost_per_hour", "cost_per_month"):
        return f"${v:,.2f}" if field == "cost_per_month" else f"${v:.4f}"
    if isinstance(v, dict):
        if not v:
            return "–"
        items = list(v.items())
        shown = ", ".join(f"{k}×{n}" for k, n in items[:MAX_TYPES if field == "instance_types"
                                                        else len(items)])
        more = len(items) - MAX_TYPES if field == "instance_types" else 0
        return shown + (f" +{more} more" if more > 0 else "")
    return str(v)


def _cell(row: dict, field: str) -> str:
    b = _cell_value(field, (row["base"] or {}).get(field))
    h = _cell_value(field, (row["head"] or {}).get(field))
    if row["kind"] == "NodePool" and field == "pending":
        return ""
    return h if field not in row["changed"] else f"{b} → **{h}**"


def _label(row: dict) -> str:
    if row["kind"] == "total":
        return "**total**"
    status = "" if row["status"] in ("changed", "unchanged") else f" ({row['status']})"
    return f"{'pool' if row['kind'] == 'NodePool' else 'workload'} `{row['name']}`{status}"


def _side(v: dict | None, name: str) -> str:
    if v is None:
        return f"{name}: not checked"
    word = "PASSED" if v["passed"] else "FAILED"
    out = f"{name} {word} ({v['held']} of {v['expectations']} expectations held"
    if not v["settled"]:
        out += f"; did not settle: {v['settle_error']}"
    return out + ")"


def markdown(s: dict) -> str:
    """The pull-request comment: verdicts, one table (the total, then added, removed and
    changed rows), the unchanged rows in one line."""
    head, rows = s["head"], s["rows"]
    out = [f"### Karpenter check: `{head['folder']}` against {s['base_ref']}", "",
           f"**{_side(head, 'Head')}**; {_side(s['base'], 'base')}. Karpenter "
           f"{s['karpenter_version']} ({s['mode']} cluster), prices from the catalogue, "
           f"a month is {s['hours_per_month']} h."]
    if s["base_note"]:
        out += ["", f"Base: {s['base_note']}"]
    if head["failed"]:
        out += ["", "Failed on head: " + "; ".join(f"`{f}`" for f in head["failed"])]
    sides = [(name, v) for name, v in (("head", head), ("base", s["base"])) if v]
    out += ["", "Oracles: " + "; ".join(
        f"{name} " + (("broke " + ", ".join(f"`{o}`" for o in v["oracles_failed"]))
                      if v.get("oracles_failed") else "all held")
        for name, v in sides)]
    if any(v.get("steps") for _, v in sides):
        out += ["", "Steps: " + "; ".join(
            f"{name} {v.get('steps_ok', 0)} of {v.get('steps', 0)} ok"
            + "".join(f", {f}" for f in v.get("steps_failed") or []) for name, v in sides)
            + ". Each side ran its own steps after its folder settled (each side's check.md "
              "has them); the table compares the state before the first step."]
    shown = [r for r in rows if r["kind"] == "total" or r["status"] != "unchanged"]
    out += ["", "| | nodes | instance types | capacity | zones | $/h | $/month | Pending |",
            "|---|---|---|---|---|---|---|---|"]
    for r in shown:
        out.append(f"| {_label(r)} | " + " | ".join(_cell(r, f) for f in FIELDS) + " |")
    same = [r for r in rows if r["kind"] != "total" and r["status"] == "unchanged"]
    if same:
        out += ["", "Unchanged: " + "; ".join(
            f"{_label(r)} ({r['head']['nodes']} nodes, "
            f"{_cell_value('cost_per_hour', r['head']['cost_per_hour'])}/h"
            + (f", {r['head']['pending']} Pending" if r['head']['pending'] else "") + ")"
            for r in same) + "."]
    elif len(shown) == 1 and not shown[0]["changed"]:
        out += ["", "No NodePool or workload to compare."]
    pictures = s.get("packing") or {}
    if any(pictures.values()):
        out += ["", "Node packing: " + ", ".join(
            f"{side} `{'/'.join(Path(p).parts[-2:])}`" for side, p in pictures.items() if p)]
    t = s.get("timings") or {}
    if t:
        out += ["", "Wall time: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} "
                                              f"{v:.1f}s" for k, v in t.items())]
    return "\n".join(out) + "\n"
