"""The upgrade gate's own logic: version checks and the verdict from JUnit results."""

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.rendering.upgrade_gate import markdown
from karpenter_e2e.runners.upgrade_gate import check_versions, verdict

JUNIT_FAIL = """<testsuites><testsuite name="pytest">
<testcase classname="suites.test_upgrade" name="test_upgrade_disrupts_no_node_and_no_pod">
<failure message="karpenter_e2e.clusters.api.waits.ConsistencyViolated: expected the upgrade to v1.15.0 to disrupt nothing to hold, but after 12.0s saw: changed: none; Drifted NodeClaims: ['default-abc-x']">trace</failure>
</testcase><testcase classname="suites.test_x" name="test_ok"/></testsuite></testsuites>"""  # noqa: E501
JUNIT_PASS = '<testsuites><testsuite name="pytest"><testcase name="test_ok"/></testsuite></testsuites>'


@pytest.mark.parametrize("from_v,to_v,message", [
    ("v1.15.0", "v1.14.3", "downgrade"),
    ("v1.15.0", "v1.15.0", "downgrade or no change"),
    ("v1.14.3", "v9.9.9", "Karpenter v9.9.9 is not served by the Go module proxy .*nearest "
                          "served: v1.15.0"),
    ("v0.37.0", "v1.15.0", "older than v1.0.0: the harness needs Karpenter's v1 APIs"),
    ("v1.12.2", "v1.15.0", "nearest served: v1.12.1 and v1.13.0"),
    ("latest", "v1.15.0", "unknown version"),
])
def test_bad_version_requests_are_refused_before_anything_runs(from_v, to_v, message, tmp_path,
                                                                 monkeypatch):
    import json
    import time
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))  # the proxy's list, planted
    (tmp_path / "karpenter-versions.json").write_text(json.dumps(
        {"module": "sigs.k8s.io/karpenter", "fetched": time.time(),
         "versions": ["v1.0.8", "v1.12.1", "v1.13.0", "v1.14.3", "v1.15.0"]}))
    with pytest.raises(ClusterError, match=message):
        check_versions("local", from_v, to_v)
    assert not (tmp_path / "bin").exists()  # refused before anything was built


def test_verdict_names_the_disruption(tmp_path):
    (tmp_path / "u.xml").write_text(JUNIT_FAIL)
    (tmp_path / "s.xml").write_text(JUNIT_PASS)
    v = verdict({"upgrade": (1, tmp_path / "u.xml"), "suites": (0, tmp_path / "s.xml")},
                "v1.14.3", "v1.15.0")
    assert v["verdict"] == "fail"
    assert v["reasons"] == ["upgrade: test_upgrade_disrupts_no_node_and_no_pod: "
                            "karpenter_e2e.clusters.api.waits.ConsistencyViolated: "
                            "expected the upgrade to v1.15.0 to disrupt "
                            "nothing to hold, but after 12.0s saw: changed: none; Drifted "
                            "NodeClaims: ['default-abc-x']"]
    assert markdown(v).startswith("# Upgrade gate v1.14.3 -> v1.15.0: FAIL")


def test_verdict_passes_only_when_every_phase_passed(tmp_path):
    (tmp_path / "s.xml").write_text(JUNIT_PASS)
    assert verdict({"suites": (0, tmp_path / "s.xml")}, "a", "b")["verdict"] == "pass"
    crashed = verdict({"suites": (2, tmp_path / "missing.xml")}, "a", "b")
    assert crashed["verdict"] == "fail" and "no results" in crashed["reasons"][0]


def test_skips_are_not_passes(tmp_path):
    (tmp_path / "s.xml").write_text(
        '<testsuites><testsuite name="pytest"><testcase name="test_a"><skipped message="eks only"/>'
        '</testcase><testcase name="test_b"><skipped message="eks only"/></testcase>'
        '</testsuite></testsuites>')
    v = verdict({"suites": (0, tmp_path / "s.xml")}, "a", "b")
    assert v["verdict"] == "fail"
    assert v["reasons"] == ["suites: no test executed (2 skipped)"]
    assert v["tests"]["suites"] == {"executed": 0, "skipped": 2, "failed": 0}


def test_the_differential_phase_checks_every_example_and_the_teams_folders(tmp_path):
    from karpenter_e2e.runners.upgrade_gate import EXAMPLES, diff_folders
    team = tmp_path / "team"
    chosen = diff_folders([team], examples=True)
    assert chosen[0] == team
    names = [d.name for d in chosen[1:]]
    assert "workshop-basic" in names and "plugin-project" not in names
    assert all((EXAMPLES / n).is_dir() for n in names)
    assert diff_folders([team], examples=False) == [team]


def test_a_diff_phase_with_a_suspect_difference_fails_the_gate(tmp_path):
    from karpenter_e2e.checks import report
    r = {"folder": "examples/workshop-basic", "settled": True, "expectations": [],
         "started": 0.0, "finished": 1.0,
         "compare": {"a": {"release": "v1.14.3"}, "b": {"release": "v1.15.0"}, "differences": [
             {"field": "rounds", "key": "", "a": 1, "b": 2, "status": "suspect", "why": ""}]}}
    junit = tmp_path / "diff-workshop-basic.xml"
    junit.write_text(report.junit(r))
    v = verdict({"diff workshop-basic": (1, junit)}, "v1.14.3", "v1.15.0")
    assert v["verdict"] == "fail"
    assert v["reasons"] == ["diff workshop-basic: decisions: v1.14.3 -> v1.15.0: rounds: 1 -> 2"]


def test_an_example_from_fails_and_to_passes_is_fixed_by_the_upgrade_not_a_failure(tmp_path):
    """The gate v1.14.0 -> v1.14.3 (2026-12-06, again): capacity-buffer's check exited 1 as
    v1.14.0 failed its own `nodes: 3` (the virtual pods' labels, fixed in v1.14.1), its
    difference expected, TO passing; the verdict read it as "exited 1"."""
    import json

    from karpenter_e2e.runners.upgrade_gate import failed_on_from
    reports = tmp_path / "diff" / "capacity-buffer"
    for run, version, ok in (("check-1", "v1.14.0", False), ("check-2", "v1.14.3", True)):
        (reports / "runs" / run).mkdir(parents=True)
        (reports / "runs" / run / "check.json").write_text(json.dumps({
            "karpenter_version": version, "passed": ok, "oracles": {"findings": []},
            "expectations": [{"expectation": "nodes: 3", "ok": ok,
                              "seen": "3 nodes" if ok else "1 nodes: c6g.xlarge"}]}))
    assert failed_on_from(reports, "v1.14.0") == ["nodes: 3: 1 nodes: c6g.xlarge"]
    assert failed_on_from(reports, "v1.14.3") == []
    (tmp_path / "d.xml").write_text(JUNIT_PASS)
    v = verdict({"diff capacity-buffer": (0, tmp_path / "d.xml")}, "v1.14.0", "v1.14.3",
                fixed={"capacity-buffer": failed_on_from(reports, "v1.14.0")})
    assert v["verdict"] == "pass"
    assert "- capacity-buffer: nodes: 3: 1 nodes: c6g.xlarge" in markdown(v)
    assert "Fixed by the upgrade (v1.14.0 fails them, v1.14.3 passes" in markdown(v)


def test_an_example_a_release_lacks_a_feature_for_is_listed_not_diffed_and_not_failed(tmp_path):
    """The gate v1.13.0 -> v1.15.0 (2026-12-06) failed on capacity-buffer as bad input: v1.13.0
    has no CapacityBuffer. Such an example is not diffed, and the verdict says why."""
    from karpenter_e2e.checks import needs
    from karpenter_e2e.runners.upgrade_gate import EXAMPLES
    why = needs.lacking(EXAMPLES / "capacity-buffer", "v1.13.0", "v1.15.0")
    assert len(why) == 1 and "v1.13.0 lacks CapacityBuffer" in why[0] and "v1.14.0" in why[0]
    assert needs.lacking(EXAMPLES / "capacity-buffer", "v1.14.0", "v1.15.0") == []
    (tmp_path / "s.xml").write_text(JUNIT_PASS)
    v = verdict({"suites": (0, tmp_path / "s.xml")}, "v1.13.0", "v1.15.0",
                not_diffed={"capacity-buffer": why})
    assert v["verdict"] == "pass" and v["not_diffed"] == {"capacity-buffer": why}
    assert "- capacity-buffer: Karpenter v1.13.0 lacks CapacityBuffer" in markdown(v)


def test_a_teams_folder_a_release_lacks_a_feature_for_is_refused_before_anything_starts(
        tmp_path, capsys):
    import shutil

    from karpenter_e2e.runners import upgrade_gate
    team = tmp_path / "team"  # the workshop's folder, its pool made Balanced (v1.14.0 on)
    shutil.copytree(upgrade_gate.EXAMPLES / "workshop-basic", team)
    pool = team / "nodepool.yaml"
    pool.write_text(pool.read_text().replace("WhenEmptyOrUnderutilized", "Balanced"))
    code = upgrade_gate.main(["--from", "v1.13.0", "--to", "v1.15.0", "--diff", str(team),
                              "--out", str(tmp_path / "out")])
    assert code == 2
    assert "v1.13.0 lacks consolidationPolicy Balanced" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
