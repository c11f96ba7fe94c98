"""What the kill rate's runs found and what it means (runners/killrate.py runs them): a
check's oracles and its diff against the control read from its reports, a mutant judged on
each workload against the control's runs there, and the rate per oracle, family and workload.
Pure: a run's files in, verdicts out (unit-tested from recorded results).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from karpenter_e2e.runners.explore import field_of

PLAIN = "plain"  # the set-up key of a mutant without one


@dataclass
class Run:
    """One check: a mutant's (or the control's, mutant '') on one workload."""

    mutant: str
    workload: str
    setup: str
    reports: str
    code: int | None = None
    seconds: float = 0.0
    oracles: list[str] = field(default_factory=list)  # the oracles that failed
    # compare.json (a mutant's): status -> fields, and the control's noise
    suspect: list[str] = field(default_factory=list)  # "field key: a -> b"
    noted: list[str] = field(default_factory=list)
    varies: list[str] = field(default_factory=list)
    judged: bool = False
    error: str = ""

    @property
    def done(self) -> bool:
        return self.code is not None or bool(self.error)


def read_run(run: Run) -> Run:
    """What the check wrote into its reports: its oracles' findings (check.json) and, for a
    mutant, its diff against the control (compare.json). Judged only with check.json."""
    reports = Path(run.reports)
    found = sorted(reports.glob("runs/check-*/check.json"))
    if not found:
        run.judged = False
        return run
    result = json.loads(found[-1].read_text())
    run.judged = bool(result.get("oracles")) and run.code in (0, 1)
    run.oracles = sorted({f["oracle"] for f in (result.get("oracles") or {}).get("findings") or []})
    compare = found[-1].parent / "compare.json"
    if compare.exists():
        c = json.loads(compare.read_text())
        said = [(d["status"], f"{d['field']}{' ' + d['key'] if d['key'] else ''}: "
                              f"{d['a']} -> {d['b']}") for d in c["differences"]]
        run.suspect = [s for status, s in said if status == "suspect"]
        run.noted = [s for status, s in said if status != "suspect"]
        run.varies = list(c.get("varies") or [])
    return run


@dataclass
class Verdict:
    """A mutant on one workload, against the control's runs there."""

    workload: str
    killed: bool
    oracles: list[str]  # failed on the mutant, on none of the control's runs
    fields: list[str]  # suspect beyond the control's noise
    why: str  # killed: the evidence; survived: why nothing saw it


def judge(mutant: Run, controls: list[Run]) -> Verdict:
    """Killed when an oracle fails on the mutant and on none of the control's runs of the
    workload, or a field is suspect beyond the control's own variation. The ``oracles``
    field of the diff is the oracles' (counted as theirs, not as the differential's)."""
    w = mutant.workload
    judged_controls = [c for c in controls if c.judged]
    if not mutant.judged:
        return Verdict(w, False, [], [], f"no verdict: {mutant.error or f'check exit {mutant.code}'}")
    if not judged_controls:
        return Verdict(w, False, [], [], "no verdict: no control run of this workload reached one")
    on_control = set().union(*(c.oracles for c in judged_controls))
    oracles = sorted(set(mutant.oracles) - on_control)
    noise = set(mutant.varies)
    beyond = [s for s in mutant.suspect if field_of(s) not in noise and field_of(s) != "oracles"]
    fields = sorted({field_of(s) for s in beyond})
    if oracles or fields:
        return Verdict(w, True, oracles, fields,
                       "; ".join([f"oracle {o}" for o in oracles] + [f"suspect {s}" for s in beyond]))
    return Verdict(w, False, [], [], _survived(mutant, on_control, noise))


def _survived(mutant: Run, on_control: set[str], noise: set[str]) -> str:
    """Why nothing saw the mutant on this workload, from what its run and the control's did."""
    parts = []
    shared = sorted(set(mutant.oracles) & on_control)
    if shared:
        parts.append(f"{', '.join(shared)} failed on the control too")
    hidden = [s for s in mutant.suspect if field_of(s) in noise]
    if hidden:
        parts.append("differed only where the control's own runs differ: " + "; ".join(hidden[:3]))
    elif mutant.noted:
        parts.append("differed only within tolerance or in noted fields: "
                     + "; ".join(mutant.noted[:3]))
    return "; ".join(parts) or "decided as the control did (every field the same, every oracle held)"


@dataclass
class MutantResult:
    name: str
    family: str
    regression: str
    setup: str = PLAIN
    status: str = "pending"  # killed, survived, no verdict, invalid, not run
    killers: list[str] = field(default_factory=list)  # oracles and "differential"
    verdicts: list[dict] = field(default_factory=list)
    error: str = ""


def conclude(m: MutantResult, verdicts: list[Verdict]) -> MutantResult:
    m.verdicts = [asdict(v) for v in verdicts]
    if any(v.killed for v in verdicts):
        m.status = "killed"
    elif all(v.why.startswith("no verdict") for v in verdicts):
        m.status = "no verdict"
    else:
        m.status = "survived"
    m.killers = sorted({o for v in verdicts for o in v.oracles}
                       | ({"differential"} if any(v.fields for v in verdicts) else set()))
    return m


def summary(rows: list[MutantResult], controls: list[Run], meta: dict) -> dict:
    """The whole result: the rate over the mutants that reached a verdict, per oracle (each
    killer, and killed by it alone), per family, per workload; the control's own findings."""
    decided = [r for r in rows if r.status in ("killed", "survived")]
    killed = [r for r in decided if r.status == "killed"]
    per_oracle: dict[str, dict] = {}
    for r in killed:
        for k in r.killers:
            e = per_oracle.setdefault(k, {"killed": 0, "alone": 0})
            e["killed"] += 1
            e["alone"] += len(r.killers) == 1
    per_family: dict[str, dict] = {}
    for r in decided:
        e = per_family.setdefault(r.family, {"run": 0, "killed": 0})
        e["run"] += 1
        e["killed"] += r.status == "killed"
    per_workload: dict[str, dict] = {}
    for r in decided:
        for v in r.verdicts:
            e = per_workload.setdefault(v["workload"], {"run": 0, "killed": 0})
            e["run"] += not v["why"].startswith("no verdict")
            e["killed"] += v["killed"]
    return {**meta, "killed": len(killed), "decided": len(decided),
            "rate": round(len(killed) / len(decided), 3) if decided else None,
            "per_oracle": dict(sorted(per_oracle.items())),
            "per_family": dict(sorted(per_family.items())),
            "per_workload": per_workload,
            "controls": [asdict(c) for c in controls],
            "mutants": [asdict(r) for r in rows]}


def join(results: list[dict]) -> dict:
    """Several shards' results (each ran its share of the mutants, with its own controls) as
    one: every mutant once, every control run kept."""
    rows, controls, seen = [], [], set()
    for res in results:
        controls += [Run(**c) for c in res["controls"]]
        for m in res["mutants"]:
            if m["name"] not in seen:
                seen.add(m["name"])
                rows.append(MutantResult(**m))
    first = results[0]
    meta = {k: first[k] for k in ("version", "workloads", "controls_per_workload") if k in first}
    meta.update(shards=len(results), wall_s=max(r.get("wall_s", 0) for r in results),
                sample=first.get("sample"))
    return summary(sorted(rows, key=lambda r: (r.family, r.name)), controls, meta)


