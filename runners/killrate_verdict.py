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
    # a decisive finding stopped the run (fixtures/decided.py): what it decided is of a run
    # cut short, so its diff says nothing (a NodeClaim never launched reads as a change)
    stopped_early: str = ""

    @property
    def done(self) -> bool:
        return self.code is not None or bool(self.error)


def read_run(run: Run, path: Path | None = None) -> Run:
    """What the check wrote into its reports: its oracles' findings (check.json: ``path``,
    else the last in the run's reports) and, for a mutant, its diff against the control
    (compare.json beside it). Judged only with check.json."""
    found = [path] if path is not None else sorted(Path(run.reports).glob("runs/check-*/check.json"))
    if not found:
        run.judged = False
        return run
    result = json.loads(found[-1].read_text())
    run.judged = bool(result.get("oracles")) and run.code in (0, 1)
    run.oracles = sorted({f["oracle"] for f in (result.get("oracles") or {}).get("findings") or []})
    stop = result.get("stopped_early") or {}
    run.stopped_early = f"[{stop.get('oracle', '?')}] {stop.get('what', '')}" if stop else ""
    compare = found[-1].parent / "compare.json"
    if compare.exists():
        c = json.loads(compare.read_text())
        said = [(d["status"], f"{d['field']}{' ' + d['key'] if d['key'] else ''}: "
                              f"{d['a']} -> {d['b']}") for d in c["differences"]]
        run.suspect = [s for status, s in said if status == "suspect"]
        run.noted = [s for status, s in said if status != "suspect"]
        run.varies = sorted(set(c.get("varies") or []) | set(c.get("like_a_baseline_run") or []))
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
    field of the diff is the oracles' (counted as theirs, not as the differential's), and a
    run stopped early by a decisive finding is judged by the oracles alone."""
    w = mutant.workload
    judged_controls = [c for c in controls if c.judged]
    if not mutant.judged:
        return Verdict(w, False, [], [], f"no verdict: {mutant.error or f'check exit {mutant.code}'}")
    if not judged_controls:
        return Verdict(w, False, [], [], "no verdict: no control run of this workload reached one")
    on_control = set().union(*(c.oracles for c in judged_controls))
    oracles = sorted(set(mutant.oracles) - on_control)
    noise = set(mutant.varies)
    beyond = [] if mutant.stopped_early else [
        s for s in mutant.suspect if field_of(s) not in noise and field_of(s) != "oracles"]
    fields = sorted({field_of(s) for s in beyond})
    if oracles or fields:
        return Verdict(w, True, oracles, fields,
                       "; ".join([f"oracle {o}" for o in oracles] + [f"suspect {s}" for s in beyond]))
    return Verdict(w, False, [], [], _survived(mutant, on_control, noise))


def needs_again(mutant: Run, controls: list[Run]) -> bool:
    """A kill by the differential alone is confirmed by a second run of the mutant: two
    control runs miss an either-or about half the time (docs/differential.md), and one
    mutant run on the wrong side of it reads as a change (rounds 2 -> 1 on ml-platform, by
    limits-exhaustion-ignored, whose pools never reach their limits)."""
    v = judge(mutant, controls)
    return v.killed and not v.oracles


def confirmed(first: Run, again: Run, controls: list[Run]) -> Run:
    """The first run with only the suspect differences whose field the second run also finds
    suspect (beyond the control's noise); its ``again`` note says what the second saw."""
    kept = set(judge(again, controls).fields)
    dropped = [s for s in first.suspect if field_of(s) not in kept]
    first.suspect = [s for s in first.suspect if field_of(s) in kept]
    first.noted = first.noted + [f"{s} (not again in a second run)" for s in dropped]
    return first


def _survived(mutant: Run, on_control: set[str], noise: set[str]) -> str:
    """Why nothing saw the mutant on this workload, from what its run and the control's did."""
    parts = [f"stopped early ({mutant.stopped_early}), so its diff was not read"] \
        if mutant.stopped_early else []
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
    """Several results as one: shards (each ran its share of the mutants, with its own
    controls), or runs of the same mutants on other workloads (a mutant is killed when it
    is killed on any workload: its verdicts are put together). Every control run is kept."""
    rows: dict[str, MutantResult] = {}
    controls: list[Run] = []
    for res in results:
        controls += [Run(**c) for c in res["controls"]]
        for m in res["mutants"]:
            row = MutantResult(**m)
            had = rows.get(row.name)
            if had is None or had.status in ("not run", "pending"):
                rows[row.name] = row
            elif row.verdicts:  # a workload judged in both: the later result's verdict
                later = {v["workload"] for v in row.verdicts}
                rows[row.name] = conclude(had, [Verdict(**v) for v in had.verdicts
                                                if v["workload"] not in later]
                                          + [Verdict(**v) for v in row.verdicts])
    first = results[0]
    workloads = list(dict.fromkeys(w for r in results for w in r.get("workloads") or []))
    meta = {k: first[k] for k in ("version", "controls_per_workload") if k in first}
    meta.update(workloads=workloads, shards=len(results),
                wall_s=sum(r.get("wall_s", 0) for r in results), sample=first.get("sample"))
    return summary(sorted(rows.values(), key=lambda r: (r.family, r.name)), controls, meta)




AGAIN = ".again"  # a mutant's second run on a workload: WORKLOAD.again beside WORKLOAD


def from_reports(run: Run, index: int = -1) -> Run:
    """A run read from the reports a check left (its exit code from whether it passed):
    ``index`` of the check.json files there, oldest first (a control's runs share a folder)."""
    found = sorted(Path(run.reports).glob("runs/check-*/check.json"),
                   key=lambda p: (json.loads(p.read_text()).get("judged_at") or 0.0, str(p)))
    if not found or index >= len(found):
        return run
    path = found[index]
    result = json.loads(path.read_text())
    run.code = 0 if result.get("passed") else 1
    return read_run(run, path)


def rejudge(result: dict, out: Path) -> dict:
    """The verdicts again from the runs' reports under ``out`` (as the rules read them now),
    without running anything: every control run and each mutant's run on each workload it
    ran on. A run that left no check.json keeps the verdict it had (no verdict)."""
    controls: list[Run] = []
    for c in result["controls"]:
        k = sum(1 for d in controls if d.reports == c["reports"])
        controls.append(from_reports(Run(**{**c, "oracles": [], "suspect": [], "noted": [],
                                            "varies": []}), k))
    by_key: dict[tuple[str, str], list[Run]] = {}
    for c in controls:
        by_key.setdefault((c.workload, c.setup), []).append(c)
    rows = []
    for m in result["mutants"]:
        row = MutantResult(**m)
        if row.verdicts and row.status != "invalid":
            verdicts = []
            for v in row.verdicts:
                reports = out / "mutants" / row.name / v["workload"]
                found = sorted(reports.glob("runs/check-*/check.json"))
                if not found:
                    verdicts.append(Verdict(**v))
                    continue
                mine = by_key.get((v["workload"], row.setup), [])
                run = from_reports(Run(row.name, v["workload"], row.setup, str(reports)))
                again = reports.with_name(reports.name + AGAIN)
                if needs_again(run, mine) and any(again.glob("runs/check-*/check.json")):
                    run = confirmed(run, from_reports(Run(row.name, v["workload"], row.setup,
                                                          str(again))), mine)
                verdicts.append(judge(run, mine))
            row = conclude(row, verdicts)
        rows.append(row)
    meta = {k: v for k, v in result.items() if k not in (
        "killed", "decided", "rate", "per_oracle", "per_family", "per_workload", "controls",
        "mutants")}
    return summary(rows, controls, meta)
