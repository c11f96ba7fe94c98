"""A replay's "what Karpenter did in the window" section (replay.md; checks/replay.py runs it):
the cost before and after, what was launched and disrupted, and the nodes Karpenter left
alone, grouped by the reason it gave with a count each, the per-node list folded below (a
500-node snapshot leaves some 450 alone: one line each buried the rest). Data in, Markdown
out.
"""

from __future__ import annotations

import re
from collections import Counter

# serrors appends the objects an error names as "(Key=value, ...)": the reason is the rest
_NAMED = re.compile(r"\s*\((?:[\w./-]+=[^()=]*?(?:, )?)+\)")


def reason_of(message: str) -> str:
    """A DisruptionBlocked message without the objects it names: 'Pdb prevents pod evictions
    (PodDisruptionBudget=[team-05/app-005])' is the reason 'Pdb prevents pod evictions'."""
    return _NAMED.sub("", message).strip() or message


def left_alone(blocked: dict[str, list[str]]) -> list[str]:
    """Markdown lines: the reasons with how many nodes gave each (most first), then every node
    and its messages, folded (a <details> block: GitHub and the docs site fold it, a terminal
    shows it as is)."""
    if not blocked:
        return []
    by_reason = Counter(r for msgs in blocked.values() for r in {reason_of(m) for m in msgs})
    lines = [f"Left alone: {len(blocked)} node(s), by the reason Karpenter gave (its "
             "DisruptionBlocked events; a node may give several):", "",
             "| nodes | reason |", "|---|---|"]
    lines += [f"| {n} | {_cell(reason)} |"
              for reason, n in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += ["", f"<details><summary>Each node left alone, and why ({len(blocked)})</summary>",
              ""]
    lines += [f"- {node}: {'; '.join(msgs)}" for node, msgs in sorted(blocked.items())]
    return lines + ["", "</details>"]


def acted(result: dict, window_s: float) -> str:
    d = result["decisions"]
    lines = [f"## What Karpenter did in {window_s:.0f}s", "",
             f"Cost per hour: ${result['cost_before']:.4f} before, ${result['cost_after']:.4f} "
             f"after. NodeClaims launched: {d['nodeclaims']}"
             + (f" ({', '.join(f'{n} {t}' for t, n in d['instance_types'].items())})"
                if d["instance_types"] else "") + ".", ""]
    if d["disruptions"]:
        lines += ["Disrupted, by reason:", ""] + [f"- {why}: {n}" for why, n in d["disruptions"].items()]
    else:
        lines.append("Nothing disrupted.")
    if result["blocked"]:
        lines += [""] + left_alone(result["blocked"])
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
