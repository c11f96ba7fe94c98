"""The mutant kill matrix as Markdown (``reports/mutants/matrix.md``, also the Allure run's
global attachment): the score, each control, and per mutant each scenario's result and failing
assert, then the mutants not killed. ``karpenter-e2e mutants`` (runners/mutant_matrix.py) runs
the mutants and reaches the verdicts; this writes them. Data in, Markdown out.
"""

from __future__ import annotations


def markdown(result: dict) -> str:
    mode = result.get("mode", "local")
    lines = [f"# Mutant kill matrix{f' ({mode} mode)' if mode != 'local' else ''}: "
             f"{result['score']} killed",
             "", f"Wall time {result['wall_s'] / 60:.1f} min with {result['jobs']} clusters at "
                 "a time. A mutant is killed when every scenario its header names fails on an "
                 "assertion (or, for `expect: aborted`, stops with Karpenter not running) while "
                 "the unmutated build (the control) passes the same scenarios in this run.", ""]
    for bare in result.get("without_oracles") or []:
        cells = ", ".join(f"{s}={c['status']}" for s, c in bare["cells"].items())
        lines.append(f"- {bare['name']} (the oracle mutant with the oracles off; its scenarios "
                     f"must survive): {cells}, {bare['run_s']}s")
    for loose in result.get("asserts_off") or []:
        cells = ", ".join(f"{s}={c['status']} ({c['message'][:160]})"
                          for s, c in loose["cells"].items())
        lines.append(f"- {loose['name']} (the generic mutant with its scenarios' own asserts "
                     f"off; each must fail naming its oracle): {cells}, {loose['run_s']}s")
    for control in result["controls"]:
        cells = ", ".join(f"{s}={c['status']}" for s, c in control["cells"].items())
        lines.append(f"- {control['name']} ({control['regression']}): **{control['status']}** "
                     f"({cells}), {control['run_s']}s")
    lines += ["",
             "| mutant | regression | status | scenario | result | failing assert | build s | run s |",
             "|---|---|---|---|---|---|---|---|"]
    for m in result["mutants"]:
        results = list(m["cells"].items()) or [("", {"status": "", "message": m["error"]})]
        for i, (scenario, cell) in enumerate(results):
            head = [m["name"], m["regression"], f"**{m['status']}**"] if i == 0 else ["", "", ""]
            text = cell["message"] or ""
            tail = [str(m["build_s"]), str(m["run_s"])] if i == 0 else ["", ""]
            lines.append("| " + " | ".join(head + [scenario, cell["status"],
                                                    _cell_text(text)] + tail) + " |")
    bad = [m for m in result["mutants"] if m["status"] != "killed"]
    if bad:
        lines += ["", "## Findings", ""]
        lines += [f"- **{m['name']}** {m['status']}: {m['error'] or 'claimed by ' + ', '.join(m['claimed'])}"
                  for m in bad]
    return "\n".join(lines) + "\n"


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:220]
