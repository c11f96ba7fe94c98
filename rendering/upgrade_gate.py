"""The upgrade gate's verdict as Markdown (``verdict.md``, also the Allure run's global
attachment): pass or fail, the reasons, each phase's tests, and the performance table when the
perf phases ran. ``karpenter-e2e upgrade-gate`` (runners/upgrade_gate.py) reaches the verdict;
this writes it. Data in, Markdown out.
"""

from __future__ import annotations


def markdown(v: dict) -> str:
    lines = [f"# Upgrade gate {v['from']} -> {v['to']}: {v['verdict'].upper()}", ""]
    lines += [f"- {r}" for r in v["reasons"]] or ["- the upgrade disrupted nothing and every "
                                                  "scenario passed on the new version"]
    lines += ["", "| phase | executed | skipped | failed |", "|---|---|---|---|"]
    lines += [f"| {name} | {c['executed']} | {c['skipped']} | {c['failed']} |"
              for name, c in v.get("tests", {}).items()]
    if v.get("not_diffed"):
        lines += ["", "Not diffed (a release lacks what they use):", ""]
        lines += [f"- {name}: {'; '.join(why)}" for name, why in v["not_diffed"].items()]
    if v.get("fixed"):
        lines += ["", f"Fixed by the upgrade ({v['from']} fails them, {v['to']} passes, "
                  "nothing suspect between them):", ""]
        lines += [f"- {name}: {'; '.join(why)}" for name, why in v["fixed"].items()]
    if v.get("perf"):
        lines += ["", f"## Performance, {v['from']} vs {v['to']}", "", v["perf"]["table"].rstrip()]
    return "\n".join(lines) + "\n"
