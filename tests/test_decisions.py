"""The decision record and its diff, on recorded runs made by hand: what a record counts, and
how the diff classifies what differs between two releases."""

import json

from test_oracles import T0, UNSCHED, claim, event, pod, recording

from karpenter_e2e.clusters.karpenter.features import CHANGES
from karpenter_e2e.fixtures import decisions
from karpenter_e2e.fixtures.decisions import Decisions, diff
from karpenter_e2e.fixtures.oracles import Record, judge

ROUND = json.dumps({"level": "INFO", "time": "2023-11-14T22:13:25.000Z",
                    "message": "found provisionable pod(s)", "Pods": "ns/web-7d9f-a, ns/web-7d9f-b",
                    "duration": "12.5ms"})


def _node(name, t, price):
    return {"name": name, "created": int(t), "deleting": None, "instance_type": "m5.large",
            "capacity_type": "on-demand", "ready": int(t), "price": price}


def run(release="v1.15.0", itype="m5.large"):
    rec = recording(
        (T0 + 1, "pods", "ADDED", pod("web-7d9f-a", T0 + 1, owner_name="web-7d9f", sched=UNSCHED)),
        (T0 + 1, "pods", "ADDED", pod("web-7d9f-b", T0 + 1, owner_name="web-7d9f", sched=UNSCHED)),
        (T0 + 2, "nodeclaims", "ADDED", claim("c1", T0 + 2, node="n1", itype=itype)),
        (T0 + 8, "nodes", "ADDED", _node("n1", T0 + 8, "0.096")),
        (T0 + 9, "pods", "MODIFIED", pod("web-7d9f-a", T0 + 1, owner_name="web-7d9f", node="n1",
                                         phase="Running")),
        (T0 + 9, "pods", "MODIFIED", pod("web-7d9f-b", T0 + 1, owner_name="web-7d9f", node="n1",
                                         phase="Running")),
        (T0 + 10, "pods", "ADDED", pod("batch-x1", T0 + 10, owner="Job", owner_name="batch",
                                       sched=UNSCHED)),
        (T0 + 11, "events", "ADDED", event("FailedScheduling", "Pod", "batch-x1", T0 + 11,
                                           "Failed to schedule pod, incompatible")),
        (T0 + 2, "events", "ADDED", event("Nominated", "Pod", "web-7d9f-a", T0 + 2,
                                          "Pod should schedule on: nodeclaim/c1")))
    r = Record(rec, log_text=ROUND, karpenter_version=release)
    return decisions.record(r, judge(r))


def test_a_record_folds_run_specific_names_into_counts():
    d = run()
    assert d.nodeclaims == 1 and d.instance_types == {"m5.large": 1}
    assert d.capacity_types == {"on-demand": 1} and d.zones == {"us-west-2a": 1}
    assert d.cost_per_hour == 0.096
    assert d.pending == {"Job/batch": 1} and d.pending_why == {"Job/batch": "Insufficient cpu"}
    assert d.to_running_s == {"web": 9.0}  # created at T0, bound at +9; the hash aside
    assert d.rounds == 1
    assert d.events == {"FailedScheduling": 1, "Nominated": 1}
    assert Decisions.from_dict(json.loads(json.dumps(d.to_dict()))) == d


def test_the_same_decisions_on_two_releases_differ_in_nothing():
    assert diff(run("v1.14.3"), run("v1.15.0")) == []


def test_a_difference_no_behaviour_change_names_is_suspect_and_one_it_names_is_expected():
    a, b = run("v1.14.3"), run("v1.15.0", itype="m5.xlarge")
    found = {(d.field, d.key): d for d in diff(a, b)}
    assert found[("instance_types", "m5.large")].status == "suspect"
    assert found[("instance_types", "m5.xlarge")].a is None
    assert decisions.suspects(list(found.values()))
    # across v1.14.0, DaemonSet overhead groups change the sizing of workloads with daemons:
    # expected, cited; without a DaemonSet the same difference is suspect
    a, b = run("v1.13.0"), run("v1.14.0", itype="m5.xlarge")
    assert {x.status for x in diff(a, b) if x.field == "instance_types"} == {"suspect"}
    a.traits = b.traits = ["daemonsets"]
    d = {(x.field, x.key): x for x in diff(a, b)}[("instance_types", "m5.xlarge")]
    assert d.status == "expected" and "buildDaemonOverheadGroups" in d.why
    # the direction does not matter: a downgrade straddles the same change
    assert {x.status for x in diff(b, a) if x.field == "instance_types"} == {"expected"}


def test_a_capacity_buffers_packing_across_v1_14_1_is_expected_only_with_a_buffer():
    """The gate's v1.14.0 -> v1.14.3 capacity-buffer diff: 1 NodeClaim against 3 (v1.14.1's
    virtual pods carry the template's labels, so its anti-affinity applies)."""
    a, b = run("v1.14.0"), run("v1.14.3", itype="c6g.large")
    assert {x.status for x in diff(a, b) if x.field == "instance_types"} == {"suspect"}
    a.traits = b.traits = ["capacity-buffers"]
    d = {(x.field, x.key): x for x in diff(a, b)}[("instance_types", "c6g.large")]
    assert d.status == "expected" and "BuildVirtualPods" in d.why
    # a buffer's record says so: the trait comes from the CapacityBuffers gathered
    r = Record(recording(), buffers=[{"metadata": {"name": "spare"}}])
    assert "capacity-buffers" in decisions.traits(r)


def test_tolerances_come_from_karpenters_clock_and_the_catalogue():
    a, b = run(), run()
    b.to_running_s = {"web": a.to_running_s["web"] + decisions.TIME_TOLERANCE_S - 1}
    b.cost_per_hour = a.cost_per_hour * 1.005
    b.zones = {"us-west-2b": 1}
    assert {x.status for x in diff(a, b)} == {"noted"}
    b.to_running_s = {"web": a.to_running_s["web"] + decisions.TIME_TOLERANCE_S + 1}
    assert [x.field for x in diff(a, b) if x.status == "suspect"] == ["to_running_s"]


def test_every_behaviour_change_names_fields_the_record_has_and_cites_code():
    known = set(Decisions.__dataclass_fields__)
    for c in CHANGES:
        assert set(c.fields) <= known, c
        assert c.ref and c.since.startswith("v1."), c


def test_the_diff_reads_as_a_table_suspect_first():
    text = decisions.markdown(run("v1.14.3"), run("v1.15.0", itype="m5.xlarge"),
                              diff(run("v1.14.3"), run("v1.15.0", itype="m5.xlarge")))
    assert "v1.14.3 -> v1.15.0" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| suspect") or ln.startswith("| noted")]
    assert rows[0].startswith("| suspect")
    assert "Both decided the same." in decisions.markdown(run(), run(), [])


def test_a_workload_whose_pods_were_made_on_one_side_only_is_noted_not_suspect():
    """A replay's consolidation moved app-5's pods on one release and not the other: which
    pods move is what disruptions and pending compare; their time to running is not comparable."""
    a, b = run(), run()
    b.to_running_s["app-5"] = 0.9
    (d,) = decisions.diff(a, b)
    assert (d.field, d.key, d.status) == ("to_running_s", "app-5", "noted")


def test_one_writer_of_compare_files_serves_check_and_replay(tmp_path):
    from karpenter_e2e.checks.report import write_comparison
    a = {"decisions": run("v1.14.3").to_dict(), "files": {"json": str(tmp_path / "a.json")}}
    b = {"decisions": run("v1.15.0", itype="m5.xlarge").to_dict(),
         "files": {"json": str(tmp_path / "b.json")}}
    text = write_comparison(a, b, "What the two releases decided")
    assert "v1.14.3 -> v1.15.0" in text and (tmp_path / "compare.md").read_text() == text
    assert b["compare"]["suspect"] == len([d for d in b["compare"]["differences"]
                                           if d["status"] == "suspect"]) > 0
    assert b["files"]["compare_json"] == str(tmp_path / "compare.json")


def test_a_disruptions_reason_reads_the_same_on_releases_that_word_the_event_differently():
    """v1.5.5's event says "Disrupting NodeClaim: Empty/Delete", v1.6.4's "...: Empty"
    (release-diffs v1.5.5 -> v1.6.4 read that as a suspect difference)."""
    def disrupted(message):
        rec = recording((T0 + 2, "nodeclaims", "ADDED", claim("c1", T0 + 2, node="n1")),
                        (T0 + 5, "events", "ADDED",
                         event("DisruptionTerminating", "NodeClaim", "c1", T0 + 5, message)))
        r = Record(rec, log_text=ROUND, karpenter_version="v1.5.5")
        return decisions.record(r, judge(r)).disruptions
    assert disrupted("Disrupting NodeClaim: Empty/Delete") == {"Empty": 1}
    assert disrupted("Disrupting NodeClaim: Empty") == {"Empty": 1}


def test_the_v1_11_spread_domain_change_moves_sizing_too():
    """examples/findings/v1.11-spread-domains: v1.11.0 -> v1.11.1 differ in instance types,
    requests and cost as well as pending; each is that change's, cited."""
    a, b = run("v1.11.0"), run("v1.11.1", itype="m6a.xlarge")
    found = {(x.field, x.key): x for x in diff(a, b)}
    assert found[("instance_types", "m6a.xlarge")].status == "expected"
    assert "topologydomaingroup.go" in found[("instance_types", "m6a.xlarge")].why
