"""The generic verdict's kill rate (runners/killrate.py): which mutants run and how, the
deterministic sample, the judgment of a mutant against the control's runs, check's
--compare-to, the join of shards and the report. Pure: recorded check results, no cluster."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest

from karpenter_e2e.checks import report
from karpenter_e2e.clusters.karpenter import mutants as mutants_mod
from karpenter_e2e.fixtures.decisions import Decisions
from karpenter_e2e.rendering.killrate import markdown
from karpenter_e2e.runners import killrate as kr, killrate_verdict as kv

EVERY = mutants_mod.select(mutants_mod.load(), [], "local")
BY_NAME = {m.name: m for m in EVERY}


def test_a_mutants_setup_becomes_checks_options_and_what_check_cannot_run_says_why():
    assert kr.check_setup(BY_NAME["taints-ignored"]) == ((), "")
    assert kr.check_setup(BY_NAME["buffer-nodes-relaunched"]) == (
        ("--karpenter-setting", "CapacityBuffer=true"), "")
    assert kr.check_setup(BY_NAME["match-label-keys-ignored"])[0] == (
        "--kubernetes-version", "v1.33.13")
    options, why = kr.check_setup(BY_NAME["nodepool-hash-changed"])  # an upgrade
    assert options == () and "not one check runs" in why
    assert "fault breaks the cluster" in kr.check_setup(BY_NAME["karpenter-stopped"])[1]
    assert kr.setup_key(()) == kr.PLAIN
    assert kr.setup_key(("--karpenter-setting", "A=1")) != kr.setup_key(("--karpenter-setting", "A=2"))


def test_the_sample_is_stratified_by_family_the_same_everywhere_and_every_family_in_turn():
    plain = [m for m in EVERY if not kr.check_setup(m)[1] and not m.setup]
    sample = kr.stratified(plain, 30)
    assert len(sample) == 30 == len({m.name for m in sample})
    assert [m.name for m in kr.stratified(list(reversed(plain)), 30)] == [m.name for m in sample]
    sizes, got = Counter(m.family for m in plain), Counter(m.family for m in sample)
    assert set(got) == set(sizes)  # every family
    for family, n in got.items():  # in proportion, within one of its share
        assert abs(n - 30 * sizes[family] / len(plain)) < 1, (family, n)
    first = [m.family for m in sample[:len(sizes)]]  # a run cut short sampled each family
    assert sorted(first) == sorted(sizes)
    assert len(kr.stratified(plain, 500)) == len(plain)
    assert {m.family for m in kr.stratified(plain, 3)} <= set(sizes)
    assert len(kr.stratified(plain, 3)) == 3


def test_workloads_are_named_and_an_unknown_one_is_bad_input(tmp_path):
    assert kr.select_workloads("all") == list(kr.WORKLOADS)
    assert kr.select_workloads("nightly") == list(kr.NIGHTLY) == kr.select_workloads("")
    assert kr.select_workloads("workshop-basic,explore-killrate-17") == [
        "workshop-basic", "explore-killrate-17"]
    with pytest.raises(kr.PlanError, match="unknown workload nope"):
        kr.select_workloads("nope")
    for name, source in kr.WORKLOADS.items():
        if isinstance(source, str):
            assert (kr.ROOT / source / "expect.yaml").is_file() or (kr.ROOT / source).is_dir(), name
    folder = kr.workload_folder("explore-killrate-17", tmp_path, "v1.15.0")
    assert any(folder.glob("*.yaml"))


def run(name="", workload="w", code=1, oracles=(), suspect=(), noted=(), varies=()):
    return kv.Run(name, workload, kr.PLAIN, "r", code, 10.0, list(oracles), list(suspect),
                  list(noted), list(varies), judged=code in (0, 1))


def test_an_oracle_kills_only_when_it_held_on_every_control_run():
    controls = [run(oracles=["it-settles"]), run()]
    v = kv.judge(run("m", oracles=["daemons-fit", "it-settles"]), controls)
    assert v.killed and v.oracles == ["daemons-fit"] and v.fields == []
    v = kv.judge(run("m", oracles=["it-settles"]), controls)
    assert not v.killed and "it-settles failed on the control too" in v.why


def test_the_differential_kills_beyond_the_controls_own_variation_and_never_by_the_oracles_field():
    controls = [run(), run()]
    v = kv.judge(run("m", suspect=["nodeclaims: 1 -> 3", "zones x: 1 -> 2"], varies=["zones"]),
                 controls)
    assert v.killed and v.fields == ["nodeclaims"] and "suspect nodeclaims: 1 -> 3" in v.why
    v = kv.judge(run("m", suspect=["instance_types m5.large: 1 -> None"],
                     varies=["instance_types"]), controls)
    assert not v.killed and "where the control's own runs differ" in v.why
    v = kv.judge(run("m", suspect=["oracles: [] -> ['x']"]), controls)
    assert not v.killed  # the oracles' own finding is counted as theirs, above
    v = kv.judge(run("m", noted=["zones a: 1 -> 2"]), controls)
    assert not v.killed and "within tolerance or in noted fields" in v.why
    assert kv.judge(run("m"), controls).why.startswith("decided as the control did")


def test_no_verdict_is_never_a_kill():
    assert kv.judge(run("m", code=3), [run()]).why == "no verdict: check exit 3"
    assert kv.judge(run("m", oracles=["plans-honest"]), [run(code=3)]).why.startswith("no verdict")
    row = kv.conclude(kv.MutantResult("m", "placement", "r"),
                      [kv.judge(run("m", code=3), [run()])])
    assert row.status == "no verdict" and not row.killers


def mutant_row(name, family, *verdicts):
    return kv.conclude(kv.MutantResult(name, family, f"{name} breaks"), list(verdicts))


def killed_by(workload, oracles=(), fields=()):
    return kv.Verdict(workload, True, list(oracles), list(fields), "evidence")


def survived(workload):
    return kv.Verdict(workload, False, [], [], "decided as the control did")


def test_the_rate_per_oracle_family_and_workload_and_the_report():
    rows = [mutant_row("a", "placement", killed_by("w1", ["plans-honest"]), survived("w2")),
            mutant_row("b", "placement", killed_by("w1", ["plans-honest"], ["nodeclaims"])),
            mutant_row("c", "drift", survived("w1"), survived("w2")),
            kv.MutantResult("d", "drift", "d breaks", status="not run", error="an upgrade")]
    result = kv.summary(rows, [run(workload="w1", code=0, oracles=["it-settles"])],
                        {"version": "v1.15.0", "workloads": ["w1", "w2"],
                         "controls_per_workload": 2, "sample": 3, "wall_s": 60})
    assert (result["killed"], result["decided"], result["rate"]) == (2, 3, 0.667)
    assert result["per_oracle"] == {"differential": {"killed": 1, "alone": 0},
                                    "plans-honest": {"killed": 2, "alone": 1}}
    assert result["per_family"] == {"drift": {"run": 1, "killed": 0},
                                    "placement": {"run": 2, "killed": 2}}
    assert result["per_workload"]["w1"] == {"run": 3, "killed": 2}
    text = markdown(json.loads(json.dumps(result)))
    assert "2 of 3 mutants killed by the generic verdict alone (67 %; goal 80 %)" in text
    assert "| `plans-honest` | 2 | 1 |" in text and "| drift | 0/1 (0 %) |" in text
    assert "- **c** (drift, survived): c breaks" in text
    assert "- **d** (drift): an upgrade" in text
    assert "`it-settles` on w1" in text  # a false alarm on the control is named


def test_shards_join_into_one_table():
    def shard(name, killed):
        row = mutant_row(name, "limits", killed_by("w1", ["plans-honest"]) if killed
                         else survived("w1"))
        return json.loads(json.dumps(kv.summary([row], [run(workload="w1", code=0)], {
            "version": "v1.15.0", "workloads": ["w1"], "controls_per_workload": 2,
            "wall_s": 100})))
    joined = kv.join([shard("a", True), shard("b", False)])
    assert (joined["killed"], joined["decided"], joined["shards"]) == (1, 2, 2)
    assert len(joined["controls"]) == 2


def test_read_run_takes_the_oracles_and_the_diff_beyond_noise(tmp_path):
    out = tmp_path / "runs" / "check-1"
    out.mkdir(parents=True)
    (out / "check.json").write_text(json.dumps(
        {"oracles": {"findings": [{"oracle": "daemons-fit"}]}}))
    (out / "compare.json").write_text(json.dumps({"varies": ["zones"], "differences": [
        {"field": "nodeclaims", "key": "", "a": 1, "b": 2, "status": "suspect"},
        {"field": "events", "key": "Nominated", "a": 1, "b": 2, "status": "noted"}]}))
    got = kv.read_run(kv.Run("m", "w", kr.PLAIN, str(tmp_path), 1))
    assert got.judged and got.oracles == ["daemons-fit"]
    assert got.suspect == ["nodeclaims: 1 -> 2"] and got.noted == ["events Nominated: 1 -> 2"]
    assert got.varies == ["zones"]
    assert not kv.read_run(kv.Run("m", "w", kr.PLAIN, str(tmp_path / "none"), 3)).judged


def decision(itype="m5.large", n=1, release="v1.15.0"):
    return Decisions(release=release, nodeclaims=n, instance_types={itype: n},
                     rounds=1).to_dict()


def test_check_compare_to_diffs_against_the_first_earlier_run_with_their_noise(tmp_path):
    """A mutant against its control's two runs: the control's runs differ in instance type
    (its noise), the mutant also launched twice the NodeClaims (beyond it)."""
    earlier = []
    for i, itype in enumerate(("m5.large", "m6a.large")):
        d = tmp_path / "controls" / "runs" / f"check-{i}"
        d.mkdir(parents=True)
        r = {"decisions": decision(itype), "judged_at": 100.0 + i,
             "files": {"json": str(d / "check.json")}}
        (d / "check.json").write_text(json.dumps(r))
        earlier.append(r)
    got = report.earlier_results(tmp_path / "controls")
    assert [r["judged_at"] for r in got] == [100.0, 101.0]
    me = tmp_path / "mutant"
    me.mkdir()
    result = {"decisions": decision("m5.large", 2), "files": {"json": str(me / "check.json")}}
    text = report.compare_to(got, result)
    c = json.loads((me / "compare.json").read_text())
    assert c["varies"] == ["instance_types"]
    suspect = {d["field"] for d in c["differences"] if d["status"] == "suspect"}
    assert suspect == {"nodeclaims", "instance_types"} and c["beyond_noise"] == 1
    assert "baseline -> this run" in text


def test_check_refuses_compare_to_without_earlier_reports(tmp_path, capsys):
    from karpenter_e2e.checks import cli
    code = cli.main([str(kr.ROOT / "examples" / "workshop-basic"), "--compare-to",
                     str(tmp_path), "--reports-dir", str(tmp_path / "r")])
    assert code == 2 and "--compare-to" in capsys.readouterr().err


def test_the_plan_leaves_out_what_cannot_run_and_shards_share_the_rest():
    def args(**kw):
        base = dict(mutant_dir=mutants_mod.MUTANTS_DIR, mutants="", sample=0, shard=None,
                    workloads="workshop-basic", plain_only=False)
        return argparse.Namespace(**{**base, **kw})
    every = kr.plan(args())
    assert "nodepool-hash-changed" in every.not_run and "karpenter-stopped" in every.not_run
    assert len(every.mutants) + len(every.not_run) == len(EVERY)
    plain = kr.plan(args(plain_only=True))
    assert all(not o for o in plain.options.values())
    halves = [kr.plan(args(shard=f"{i}/2")).mutants for i in (1, 2)]
    assert sorted(m.name for h in halves for m in h) == sorted(m.name for m in every.mutants)
    with pytest.raises(kr.PlanError):
        kr.plan(args(mutants="no-such-mutant"))


def test_the_nightly_runs_every_mutant_sharded_and_joins_them():
    import yaml
    jobs = yaml.safe_load((Path(kr.ROOT) / ".github" / "workflows" / "nightly.yml").read_text())["jobs"]
    runs = " ".join(s.get("run", "") for s in jobs["killrate"]["steps"])
    assert "make killrate" in runs and "SAMPLE" not in runs
    assert "killrate --join" in " ".join(s.get("run", "") for s in jobs["killrate-join"]["steps"])


def test_the_verdict_fails_under_the_goal_or_with_a_control_without_a_verdict():
    ok = {"rate": 0.8, "controls": [{"judged": True}]}
    assert kr.verdict_code(ok) == 0
    assert kr.verdict_code({**ok, "rate": 0.79}) == 1
    assert kr.verdict_code({**ok, "rate": None}) == 1
    assert kr.verdict_code({**ok, "controls": [{"judged": False}]}) == 1


def test_a_second_pass_on_other_workloads_joins_verdicts_of_the_same_mutant():
    def result(workload, killed):
        row = mutant_row("a", "placement", killed_by(workload, ["plans-honest"]) if killed
                         else survived(workload))
        return json.loads(json.dumps(kv.summary([row], [run(workload=workload, code=0)], {
            "version": "v1.15.0", "workloads": [workload], "controls_per_workload": 2,
            "wall_s": 100})))
    joined = kv.join([result("w1", False), result("w2", True), result("w1", False)])
    (m,) = joined["mutants"]
    assert m["status"] == "killed" and sorted(v["workload"] for v in m["verdicts"]) == ["w1", "w2"]
    assert joined["workloads"] == ["w1", "w2"] and joined["wall_s"] == 300
    assert joined["per_workload"]["w1"] == {"run": 1, "killed": 0}


def test_a_run_stopped_early_is_judged_by_its_oracles_alone():
    """pod-metrics-panic on ml-platform: the log oracle stopped the check 2 s in, so nothing
    was launched, and its diff against the control (18 suspect fields) is of a cut run."""
    stopped = run("m", oracles=["karpenter-log-clean"], suspect=["nodeclaims: 5 -> 0"])
    stopped.stopped_early = "[karpenter-log-clean] a panic"
    v = kv.judge(stopped, [run()])
    assert v.killed and v.oracles == ["karpenter-log-clean"] and v.fields == []
    stopped.oracles = []
    v = kv.judge(stopped, [run()])
    assert not v.killed and "stopped early" in v.why


def test_judging_again_reads_the_runs_reports(tmp_path):
    control, mutant = tmp_path / "controls" / "plain" / "w", tmp_path / "mutants" / "m" / "w"
    for d, findings, passed in ((control, [], True), (mutant, [{"oracle": "plans-honest"}], False)):
        (d / "runs" / "check-1").mkdir(parents=True)
        (d / "runs" / "check-1" / "check.json").write_text(json.dumps(
            {"passed": passed, "oracles": {"findings": findings}}))
    row = mutant_row("m", "limits", kv.Verdict("w", False, [], [], "old rules"))
    before = kv.summary([row], [run(workload="w", code=0)], {"version": "v1.15.0"})
    before["controls"][0]["reports"] = str(control)
    after = kv.rejudge(json.loads(json.dumps(before)), tmp_path)
    assert after["mutants"][0]["status"] == "killed" and after["killed"] == 1
    assert after["version"] == "v1.15.0"


def test_a_kill_by_the_differential_alone_needs_a_second_run_that_agrees():
    controls = [run(), run()]
    first = run("m", suspect=["rounds: 2 -> 1", "nodeclaims: 1 -> 3"])
    assert kv.needs_again(first, controls)
    assert not kv.needs_again(run("m", oracles=["plans-honest"], suspect=["rounds: 2 -> 1"]),
                              controls)
    again = run("m", suspect=["nodeclaims: 1 -> 3"])  # one round this time, as the control
    v = kv.judge(kv.confirmed(first, again, controls), controls)
    assert v.killed and v.fields == ["nodeclaims"]
    first = run("m", suspect=["rounds: 2 -> 1"])
    v = kv.judge(kv.confirmed(first, run("m"), controls), controls)
    assert not v.killed and "rounds: 2 -> 1 (not again in a second run)" in v.why


def test_a_run_is_read_back_from_its_reports_in_the_order_it_was_judged(tmp_path):
    for name, at, passed, findings in (("check-b", 2.0, False, [{"oracle": "it-settles"}]),
                                       ("check-a", 1.0, True, [])):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "check.json").write_text(json.dumps(
            {"judged_at": at, "passed": passed, "oracles": {"findings": findings}}))
    first = kv.from_reports(kv.Run("", "w", kr.PLAIN, str(tmp_path)), 0)
    second = kv.from_reports(kv.Run("", "w", kr.PLAIN, str(tmp_path)), 1)
    assert (first.code, first.oracles) == (0, []) and (second.code, second.oracles) == (1, ["it-settles"])
    assert kv.from_reports(kv.Run("", "w", kr.PLAIN, str(tmp_path)), 2).code is None


def test_a_field_the_run_shares_with_one_baseline_run_is_no_change(tmp_path):
    """in-flight-disruption-uncounted on explore killrate/15: its slowest w1 pod ran 5 s after
    creation against the first control run's 26.9 s, and the second control run left that pod
    pending (its time noted, not a variation): the mutant decided as that second run did."""
    earlier = []
    for i, to_running in enumerate(({"w1": 26.9}, {})):
        d = tmp_path / "c" / "runs" / f"check-{i}"
        d.mkdir(parents=True)
        dec = Decisions(release="v1.15.0", nodeclaims=4, to_running_s=to_running).to_dict()
        earlier.append({"decisions": dec, "judged_at": float(i),
                        "files": {"json": str(d / "check.json")}})
    me = tmp_path / "m"
    me.mkdir()
    mine = Decisions(release="v1.15.0", nodeclaims=4, to_running_s={"w1": 5.1}).to_dict()
    report.compare_to(earlier, {"decisions": mine, "files": {"json": str(me / "check.json")}})
    c = json.loads((me / "compare.json").read_text())
    assert c["varies"] == [] and c["like_a_baseline_run"] == ["to_running_s"]
    assert c["beyond_noise"] == 0
    (me / "check.json").write_text(json.dumps({"passed": True, "oracles": {"findings": []}}))
    got = kv.read_run(kv.Run("m", "w", kr.PLAIN, str(me), 0), me / "check.json")
    assert got.varies == ["to_running_s"]  # the judge's noise: read from both lists
    assert not kv.judge(got, [run()]).killed
