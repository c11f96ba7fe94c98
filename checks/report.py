"""The check's outcome three ways: a terminal table, Markdown and JSON in the run's report
directory, and Allure results (one per expectation, plus the report with the timeline and
node-packing pictures) that `make report RESULTS=...` turns into HTML.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from karpenter_e2e.checks.observe import Snapshot, pool_summary, workload_summary
from karpenter_e2e.clusters.karpenter import settings as ksettings


def summarise(snap: Snapshot) -> dict:
    """Per workload and per NodePool, from one snapshot."""
    pools = []
    for p in snap.pools:
        pools.append({"name": p.name, **pool_summary(snap, p.name), "limits": p.limits,
                      "counted": {k: p.resources.get(k, "0") for k in p.limits},
                      "consolidation": p.consolidation})
    costs = [p["cost_per_hour"] for p in pools]
    return {"workloads": [{"workload": w, **workload_summary(snap, w)} for w in snap.workloads()],
            "nodepools": pools,
            "cost_per_hour": None if None in costs else round(sum(costs), 4)}


def _counts(d: dict) -> str:
    return ", ".join(f"{k}×{v}" for k, v in d.items()) or "–"


def _money(v) -> str:
    return "n/a" if v is None else f"${v:.4f}"


def price_sources(mode: str, catalogue: str | None = None) -> dict[str, list[str]]:
    """Where a node's price label comes from in each mode, per capacity type: [a word or two
    for a node's label in a picture, the sentence]. Spot prices are modelled in both modes
    (and in every local catalogue selection, ``catalogue``)."""
    if mode in ("local", "kind"):  # the same KWOK provider and catalogue
        from karpenter_e2e.clusters.infra.catalogue import SPOT_DISCOUNT as RANGE
        from karpenter_e2e.clusters.infra.catalogue_full import on_demand_source
        return {"on-demand": ["list price", on_demand_source(catalogue)],
                "spot": ["modelled", f"modelled, {RANGE[0]:.0%}-{RANGE[1]:.0%} of on-demand per "
                                     "type and zone (not EC2's spot prices)"]}
    if mode == "aws-sim":
        from karpenter_e2e.clusters.awssim.moto_ext import SPOT_DISCOUNT, ZONE_SPREAD
        return {"on-demand": ["price table", "the AWS provider's static on-demand price table"],
                "spot": ["modelled", f"modelled by the fake AWS, {SPOT_DISCOUNT:.0%} of "
                                     f"on-demand ±{ZONE_SPREAD:.0%} per zone (not EC2's spot "
                                     "prices)"]}
    return {}


def tables(result: dict, pictures: bool = False) -> str:
    """Markdown tables (read as they are in a terminal too); ``pictures``: with the run
    directory's pictures (check.md, which sits beside them)."""
    out = [f"# check {result['folder']}", "",
           f"{result['mode']} cluster `{result['cluster']}`, Karpenter "
           f"{result['karpenter_version']}; scale {result.get('scale') or 'as written'}; "
           f"{'settled' if result['settled'] else 'DID NOT SETTLE: ' + result['settle_error']}"
           f" after {result['timings'].get('settle_s', 0):.1f}s", ""]
    out += stopped_early(result)
    if ran := result.get("ran"):
        out += [f"Ran: Karpenter {ran['karpenter']} ({ran['karpenter_build']} build, sha256 "
                f"{ran['karpenter_sha256'][:12]}) on Kubernetes {ran['kubernetes']}; feature "
                f"gates turned on: {', '.join(ran['feature_gates']) or 'none'}; settings: "
                f"{ksettings.render(ran.get('settings') or {})}; catalogue: {ran['catalogue']}", ""]
    if "karpenter_log" in result:
        out += [f"Karpenter's log while the check ran: "
                f"{result['karpenter_log'] or 'no panic, no error logged 3 times or more'}", ""]
    out += _oracles(result.get("oracles"))
    out += _phase_tables(result["scale_out"], "After scale-out")
    files = result.get("files") or {}
    if pictures and files.get("packing"):
        out += ["## After scale-out: which pods sit on which node", "",
                "One bar per node, as long as its allocatable CPU, one segment per pod's "
                "request; Pending pods are listed under it.", "",
                f"![node packing after scale-out]({Path(files['packing']).name})", ""]
    if pictures and files.get("timeline"):
        out += ["## Timeline of the whole check", "",
                f"![timeline]({Path(files['timeline']).name})", ""]
    if result.get("steps"):
        out += _steps(result)
    elif result.get("scale_in_result"):  # a check.json from before steps
        out += _phase_tables(result["scale_in_result"], f"After scale-in {result['scale_in']}")
        out += _consolidation(result["consolidation"])
    out += ["## Expectations", ""]
    if result.get("default_expectations"):
        out += ["No `expect:` items: judged by the default, every workload's pods run.", ""]
    if result["expectations"]:
        out += ["| | expectation | seen |", "|---|---|---|"]
        out += [f"| {'PASS' if e['ok'] else 'FAIL'} | {e['expectation']}"
                + (f" ({e['phase']})" if e["phase"] != "scale-out" else "")
                + f" | {_cell(e['seen'])} |" for e in result["expectations"]]
    else:
        out.append("(no expectation was judged)")
    t = result["timings"]
    out += ["", "Wall time: " + ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f}s"
                                          for k, v in t.items()),
            "", f"**{'PASSED' if result['passed'] else 'FAILED'}**", ""]
    return "\n".join(out)


def stopped_early(result: dict) -> list[str]:
    """The line saying the check stopped waiting once its verdict was decided, and why."""
    stop = result.get("stopped_early")
    if not stop:
        return []
    when = [f"{stop['decided_at'] - stop.get('applied_at', result['started']):.0f}s after the "
            f"{'apply' if 'applied_at' in stop else 'check began'}"]
    if stop.get("evidence_logged_at"):
        when.append(f"{stop['decided_at'] - stop['evidence_logged_at']:.0f}s after Karpenter "
                    "logged it")
    return [f"**Stopped early**, {', '.join(when)}: [{stop['oracle']}] {stop['what']}. That "
            "finding decides the verdict whatever happens next, so the waits after it ended "
            "at once instead of running out their timeouts.", ""]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _phase_tables(s: dict, title: str) -> list[str]:
    out = [f"## {title}: workloads", "",
           "| workload | pods | Running | Pending | requests per pod (as Karpenter counts) | "
           "NodePools | capacity types | instance types | diagnosis of Pending or missing |",
           "|---|---|---|---|---|---|---|---|---|"]
    for w in s["workloads"]:
        why = "; ".join(filter(None, [w["diagnosis"], w.get("not_created", "")]))
        out.append(f"| {w['workload']} | {w['pods']} | {w.get('running', 0)} | "
                   f"{w.get('pending', 0)} | {' / '.join(w.get('requests', [])) or '–'} | "
                   f"{', '.join(w['nodepools']) or '–'} | "
                   f"{_counts(w['capacity_types'])} | {_counts(w['instance_types'])} | "
                   f"{_cell(why) or '–'} |")
    out += ["", f"## {title}: NodePools", "",
            "| NodePool | nodes | instance types | capacity types | zones | cost/h | limits "
            "(counted/limit) |", "|---|---|---|---|---|---|---|"]
    for p in s["nodepools"]:
        limits = ", ".join(f"{k} {p['counted'][k]}/{v}" for k, v in p["limits"].items()) or "none"
        out.append(f"| {p['name']} | {p['nodes']} | {_counts(p['instance_types'])} | "
                   f"{_counts(p['capacity_types'])} | {_counts(p['zones'])} | "
                   f"{_money(p['cost_per_hour'])} | {limits} |")
    out += ["", f"Total cost: {_money(s['cost_per_hour'])}/h (the catalogue's prices, "
                "from each node's price label)", ""]
    return out


def _steps(result: dict) -> list[str]:
    """The steps in order, each with its outcome and duration; then, for each expect step
    that ran, the tables of its state and what Karpenter did in its phase."""
    out = ["## Steps", "", "| step | line | what | outcome | seconds | detail |",
           "|---|---|---|---|---|---|"]
    out += [f"| {s['label']} | {s['line'] or '–'} | {s['kind']}: {_cell(s['text'])} | "
            f"{s['outcome'] if s['outcome'] in ('ok', 'not run') else s['outcome'].upper()} | "
            f"{s['seconds']:.1f} | {_cell(s['detail'])} |" for s in result["steps"]]
    out.append("")
    for s in result["steps"]:
        if s["kind"] != "expect" or "tables" not in s:
            continue
        if s["label"] == "scale-in":
            out += _phase_tables(s["tables"], f"After scale-in {result['scale_in']}")
            out += _consolidation(s["happened"])
        else:
            out += _phase_tables(s["tables"], f"After {s['label']}")
            out += _consolidation(s["happened"], s["label"])
    return out


def _consolidation(c: dict, label: str = "") -> list[str]:
    """What consolidation did after the scale-in; with ``label``, what Karpenter did in that
    expect step's phase (from the first step after the previous expect)."""
    since = "the phase began" if label else "scale-in"
    when = (f"judged {c['judged_after_s']:.1f}s after the phase began." if label
            else f"settled {c['settled_after_s']:.1f}s after the scale-in.")
    out = [f"## What Karpenter did before {label}" if label else "## What consolidation did",
           "", f"Nodes {c['nodes_before']} → {c['nodes_after']}, cost "
           f"{_money(c['cost_before'])}/h → {_money(c['cost_after'])}/h; {when}", ""]
    if c["steps"]:
        out += [f"| seconds after {since} | what |", "|---|---|"]
        out += [f"| {s['t']:+.1f} | {_cell(s['what'])} |" for s in c["steps"]]
    else:
        out.append("Karpenter removed and replaced nothing.")
    return out + [""]


def write(result: dict, directory: Path) -> None:
    """check.md and check.json (the names ``result['files']`` gives)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "check.md").write_text(tables(result, pictures=True))
    (directory / "check.json").write_text(json.dumps(result, indent=1, default=str))


def junit(result: dict) -> str:
    """JUnit XML: one testcase for settling and one per expectation (each phase's), a
    failure carrying what was seen."""
    from xml.etree import ElementTree as ET
    suite_name = f"check {result['folder']}"
    cases: list[tuple[str, bool | None, str]] = [
        ("settled", result["settled"], result.get("settle_error") or "")]
    cases += [(f"{e['phase']}: {e['expectation']}", e["ok"], f"seen: {e['seen']}")
              for e in result["expectations"]]
    # Each step (None: not run, a skipped testcase); an expect step's items are above.
    cases += [(f"step {s['label']}: {s['kind']}: {s['text']}",
               None if s["outcome"] == "not run" else s["outcome"] == "ok", s["detail"])
              for s in result.get("steps") or []]
    verdict = result.get("oracles")
    if verdict:  # every check is judged by the oracles (docs/oracles.md)
        found = verdict.get("findings") or []
        cases.append(("oracles", not found, "\n".join(
            f"[{f['oracle']}] {f['what']}: " + "; ".join(f["evidence"][:3]) for f in found)))
    compared = result.get("compare")
    if compared:  # --compare-version: what the two releases decided (docs/differential.md)
        suspect = [d for d in compared["differences"] if d["status"] == "suspect"]
        cases.append((f"decisions: {compared['a']['release']} -> {compared['b']['release']}",
                      not suspect, "; ".join(f"{d['field']}{' ' + d['key'] if d['key'] else ''}: "
                                            f"{d['a']} -> {d['b']}" for d in suspect)))
    suite = ET.Element("testsuite", name=suite_name, tests=str(len(cases)),
                       failures=str(sum(ok is False for _, ok, _ in cases)), errors="0",
                       skipped=str(sum(ok is None for _, ok, _ in cases)),
                       time=f"{result['finished'] - result['started']:.1f}")
    for name, ok, seen in cases:
        case = ET.SubElement(suite, "testcase", classname=suite_name, name=name)
        if ok is None:
            ET.SubElement(case, "skipped", message=seen[:500])
        elif not ok:
            ET.SubElement(case, "failure", message=seen[:500]).text = seen
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def junit_error(folder: str, message: str) -> str:
    """JUnit XML for a check that reached no verdict (bad input, a cluster error): one
    testcase in error, so a CI job's test report says why rather than showing nothing."""
    from xml.etree import ElementTree as ET
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name=f"check {folder}", tests="1", failures="0",
                          errors="1")
    case = ET.SubElement(suite, "testcase", classname=f"check {folder}", name="check")
    ET.SubElement(case, "error", message=message.splitlines()[0][:500]).text = message
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_allure(result: dict, results_dir: Path, timeline_png: Path | None,
                 packing_png: Path | None = None) -> None:
    """One Allure test result per expectation (passed/failed with what was seen), and one
    for the check itself carrying the report, the timeline and the node-packing picture."""
    from allure_commons.logger import AllureFileLogger
    from allure_commons.model2 import Attachment, Label, Status, StatusDetails, TestResult

    logger = AllureFileLogger(str(results_dir))
    start, stop = int(result["started"] * 1000), int(result["finished"] * 1000)
    suite = f"check {result['folder']}"
    labels = [Label("epic", "Karpenter e2e"), Label("feature", "check"),
              Label("story", suite), Label("suite", suite), Label("tag", result["mode"])]

    def attach(body: str | bytes, name: str, mime: str, ext: str) -> Attachment:
        source = f"{uuid.uuid4()}-attachment.{ext}"
        logger.report_attached_data(body, source)
        return Attachment(name=name, source=source, type=mime)

    attachments = [attach(tables(result), "check.md", "text/markdown", "md"),
                   attach(json.dumps(result, indent=1, default=str), "check.json",
                          "application/json", "json")]
    for name, png in (("timeline", timeline_png), ("node packing", packing_png)):
        if png and png.exists():
            attachments.append(attach(png.read_bytes(), name, "image/png", "png"))
    whole = TestResult(uuid=str(uuid.uuid4()), name=f"{suite}: settled",
                       fullName=f"{suite}::settled", historyId=f"{suite}::settled",
                       start=start, stop=stop, labels=labels, attachments=attachments,
                       status=Status.PASSED if result["settled"] else Status.FAILED,
                       statusDetails=StatusDetails(message=result["settle_error"] or None))
    logger.report_result(whole)
    outcomes = [(f"{e['phase']}: {e['expectation']}",
                 Status.PASSED if e["ok"] else Status.FAILED, f"seen: {e['seen']}")
                for e in result["expectations"]]
    outcomes += [(f"step {s['label']}: {s['kind']}: {s['text']}",
                  Status.SKIPPED if s["outcome"] == "not run" else
                  Status.PASSED if s["outcome"] == "ok" else Status.FAILED, s["detail"])
                 for s in result.get("steps") or []]
    for name, status, message in outcomes:
        logger.report_result(TestResult(
            uuid=str(uuid.uuid4()), name=name, fullName=f"{suite}::{name}",
            historyId=f"{suite}::{name}", start=start, stop=stop, labels=labels,
            status=status, statusDetails=StatusDetails(message=message)))


def _oracles(verdict: dict | None) -> list[str]:
    """The oracles' verdict on the whole check (fixtures/oracles/): each oracle's outcome,
    then each finding with its evidence."""
    if verdict is None:
        return []
    from karpenter_e2e.fixtures.oracles import ORACLES
    n = len(verdict["findings"])
    out = [f"## Oracles: {'FAILED, ' + str(n) + ' finding(s)' if n else 'all held'}", "",
           "| oracle | what it judges | outcome |", "|---|---|---|"]
    for o in ORACLES:
        if o.name in verdict["not_applicable"]:
            outcome = f"not applicable: {verdict['not_applicable'][o.name]}"
        else:
            k = sum(f["oracle"] == o.name for f in verdict["findings"])
            outcome = f"**FAILED** ({k})" if k else "held"
        out.append(f"| {o.name} | {o.title} | {outcome} |")
    for f in verdict["findings"]:
        out += ["", f"- **{f['oracle']}**: {f['what']}"] + [f"  - `{e}`" for e in f["evidence"][:10]]
    return out + [""]


def write_comparison(a: dict, b: dict, title: str, floor_of: Path | None = None) -> str:
    """compare.md and compare.json beside the second side's report (``b``'s json file): what
    each side decided (their ``decisions``), and the diff; ``b`` gains ``compare`` and the two
    files. Returns the markdown. check --compare-version and a replay's both write it.

    ``floor_of`` (check --floor-of, explore's noise floor): an earlier comparison of the same
    folder; compare.json's ``varies`` lists the fields on which two runs of one release differ
    beyond tolerance, among that comparison's runs and these two (varies_between, per
    release): the pair run again gives each release two runs, one release against itself
    gives it three."""
    from karpenter_e2e.fixtures import decisions
    da, db = (decisions.Decisions.from_dict(r["decisions"]) for r in (a, b))
    found = decisions.diff(da, db)
    out = Path(b["files"]["json"]).parent
    text = decisions.markdown(da, db, found, title)
    b["compare"] = {"a": da.to_dict(), "b": db.to_dict(), "a_files": a["files"],
                    "differences": [d.to_dict() for d in found],
                    "suspect": len(decisions.suspects(found))}
    if floor_of is not None:
        runs: dict[str, list] = {}
        for r in [*earlier_records(floor_of), da, db]:
            runs.setdefault(r.release, []).append(r)
        varies = sorted(set().union(*(varies_between(rs) for rs in runs.values())))
        b["compare"].update(floor_of=str(floor_of), varies=varies)
        text += ("\nBetween two runs of one release ("
                 + ", ".join(f"{release} {len(rs)}" for release, rs in runs.items())
                 + f", these and {floor_of}'s), beyond tolerance: "
                 f"{', '.join(varies) or 'nothing'}.\n")
    (out / "compare.md").write_text(text)
    (out / "compare.json").write_text(json.dumps(b["compare"], indent=1, default=str))
    b["files"].update({"compare_markdown": str(out / "compare.md"),
                       "compare_json": str(out / "compare.json")})
    return text


def earlier_records(reports: Path) -> list:
    """Both sides' decision records in the compare.json files an earlier check wrote into
    ``reports``; none without them."""
    from karpenter_e2e.fixtures.decisions import Decisions
    return [Decisions.from_dict(json.loads(path.read_text())[side])
            for path in sorted(Path(reports).glob("runs/check-*/compare.json"))
            for side in ("a", "b")]


def varies_between(runs: list) -> set[str]:
    """The fields on which two of ``runs`` (decision records of one release) differ beyond
    the diff's tolerance, every pair of them. One pair alone misses an either-or about half
    the time: v1.11.2 -> v1.12.0's explore case 0 kept a c6g.2xlarge ($0.408/h) or not
    ($0.204/h) as the ReplicaSet's scale-in kept its do-not-disrupt pod or not
    (records/release-diffs-20261206.md); its floor drew $0.408 twice, the comparison's
    v1.12.0 run $0.204."""
    from karpenter_e2e.fixtures import decisions
    return {d.field for i, x in enumerate(runs) for y in runs[i + 1:]
            for d in decisions.suspects(decisions.diff(x, y))}
