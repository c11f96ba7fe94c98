"""Timelines: the recorder's reductions from watch events, and the picture drawn from them."""

from __future__ import annotations

import datetime as dt
import json
import struct
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api import informer as informer_module
from karpenter_e2e.fixtures import timeline as timeline_module
from karpenter_e2e.fixtures.timeline import (
    Recording,
    Timeline,
    karpenter_events,
    machines,
    nodeclaim_series,
    pod_series,
    scale_marks,
)
from karpenter_e2e.rendering import charts, timeline_chart

T0 = 1_790_000_000.0  # the test's start, wall clock
DATA = Path(__file__).parent / "data"


def iso(t: float) -> str:
    return dt.datetime.fromtimestamp(int(t), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, phase: str, created: float, deleting: float | None = None) -> dict:
    meta = {"name": name, "creationTimestamp": iso(created)}
    if deleting:
        meta["deletionTimestamp"] = iso(deleting)
    return {"metadata": meta, "status": {"phase": phase}}


def claim(name: str, created: float, node: str = "", deleting: float | None = None,
          **conditions: float | tuple[bool, float]) -> dict:
    """conditions: type=time it turned True, or type=(status, time)."""
    meta = {"name": name, "creationTimestamp": iso(created),
            "labels": {"node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                       "karpenter.sh/capacity-type": "on-demand"}}
    if deleting:
        meta["deletionTimestamp"] = iso(deleting)
    conds = []
    for ctype, value in conditions.items():
        status, when = value if isinstance(value, tuple) else (True, value)
        conds.append({"type": ctype, "status": "True" if status else "False",
                      "lastTransitionTime": iso(when)})
    return {"metadata": meta, "status": {"nodeName": node, "conditions": conds}}


def node(name: str, created: float, ready: float | None, capacity: str = "on-demand",
         deleting: float | None = None) -> dict:
    meta = {"name": name, "creationTimestamp": iso(created),
            "labels": {"node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                       "karpenter.sh/capacity-type": capacity}}
    if deleting:
        meta["deletionTimestamp"] = iso(deleting)
    conds = [{"type": "Ready", "status": "True", "lastTransitionTime": iso(ready)}] if ready else []
    return {"metadata": meta, "status": {"conditions": conds}}


def event(uid: str, reason: str, kind: str, name: str, at: float, message: str = "",
          namespace: str = "", count: int = 1) -> dict:
    return {"metadata": {"uid": uid, "namespace": namespace or "default"}, "reason": reason,
            "message": message, "count": count, "lastTimestamp": iso(at),
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace}}


def empty_node_consolidated() -> Recording:
    """consolidation-empty as the watches see it: 2 pods on one node, scaled to 0 at 40s,
    the node Consolidatable at 70s, deleted at 80s, gone at 84s; recorder stopped at 90s."""
    rec = Recording("abc123", T0, namespace="e2e-abc123")
    t = T0
    rec.observe("deployments", "ADDED", {"metadata": {"name": "inflate",
                                                      "creationTimestamp": iso(t + 2)},
                                         "spec": {"replicas": 2}}, t + 2)
    for p in ("p1", "p2"):
        rec.observe("pods", "ADDED", pod(p, "Pending", t + 2), t + 2)
    rec.observe("nodeclaims", "ADDED", claim("nc1", t + 3), t + 3)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", t + 3, Launched=t + 4), t + 4)
    rec.observe("nodes", "ADDED", node("n1", t + 5, None), t + 5)
    rec.observe("nodes", "MODIFIED", node("n1", t + 5, t + 7), t + 7)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", t + 3, "n1", Launched=t + 4,
                                                Registered=t + 6, Initialized=t + 8), t + 8)
    for p in ("p1", "p2"):
        rec.observe("pods", "MODIFIED", pod(p, "Running", t + 2), t + 9)
    rec.observe("deployments", "MODIFIED", {"metadata": {"name": "inflate"},
                                            "spec": {"replicas": 0}}, t + 40)
    for p in ("p1", "p2"):
        rec.observe("pods", "MODIFIED", pod(p, "Running", t + 2, deleting=t + 40), t + 40)
        rec.observe("pods", "DELETED", pod(p, "Running", t + 2, deleting=t + 40), t + 41)
    ready = dict(Launched=t + 4, Registered=t + 6, Initialized=t + 8)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", t + 3, "n1", Consolidatable=t + 70,
                                                **ready), t + 70)
    rec.observe("events", "ADDED", event("e1", "DisruptionTerminating", "NodeClaim", "nc1",
                                         t + 80, "Disrupting NodeClaim: Empty"), t + 80)
    rec.observe("events", "ADDED", event("e2", "DisruptionTerminating", "Node", "n1", t + 80,
                                         "Disrupting Node: Empty"), t + 80)
    rec.observe("events", "ADDED", event("e3", "DisruptionTerminating", "Node", "other-node",
                                         t + 80, "Disrupting Node: Empty"), t + 80)
    rec.observe("events", "ADDED", event("e4", "Nominated", "Pod", "p9", t + 20, "elsewhere",
                                         namespace="e2e-other"), t + 20)
    rec.observe("events", "ADDED", event("e5", "DisruptionBlocked", "NodePool",
                                         "default-zzz999", t + 20), t + 20)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", t + 3, "n1", deleting=t + 80,
                                                Consolidatable=t + 70, **ready), t + 80)
    rec.observe("nodes", "MODIFIED", node("n1", t + 5, t + 7, deleting=t + 81), t + 81)
    rec.observe("nodes", "DELETED", node("n1", t + 5, t + 7, deleting=t + 81), t + 84)
    rec.observe("nodeclaims", "DELETED", claim("nc1", t + 3, "n1", deleting=t + 80), t + 85)
    rec.stop(t + 90)
    rec.observe("pods", "ADDED", pod("late", "Pending", t + 91), t + 91)  # after stop: ignored
    return rec


def value_at(series: dict, state: str, t: float) -> float:
    """The step function's value at ``t`` seconds."""
    i = max(i for i, x in enumerate(series["t"]) if x <= t)
    return series[state][i]


def test_pods_by_phase_from_watch_events():
    s = pod_series(empty_node_consolidated())
    assert value_at(s, "Pending", 3) == 2 and value_at(s, "Running", 3) == 0
    assert value_at(s, "Running", 20) == 2 and value_at(s, "Pending", 20) == 0
    assert value_at(s, "Terminating", 40.5) == 2
    assert value_at(s, "Running", 50) == 0 and value_at(s, "Terminating", 50) == 0
    assert s["t"][-1] == 90  # up to the recorder's stop; the pod seen after it is not counted
    assert max(s["Pending"]) == 2


def test_nodeclaims_by_state_and_their_condition_spells():
    rec = empty_node_consolidated()
    s = nodeclaim_series(rec)
    assert value_at(s, "launching", 5) == 1 and value_at(s, "ready", 5) == 0
    assert value_at(s, "ready", 30) == 1
    assert value_at(s, "Consolidatable", 69) == 0 and value_at(s, "Consolidatable", 75) == 1
    assert value_at(s, "deleting", 82) == 1 and value_at(s, "ready", 82) == 0
    assert value_at(s, "deleting", 86) == 0  # gone at 85


def test_a_nodeclaim_and_its_node_are_one_machine_timed_by_the_cluster():
    (m,) = machines(empty_node_consolidated())
    assert (m.claim, m.node, m.capacity_type) == ("nc1", "n1", "on-demand")
    assert m.created == T0 + 3
    assert m.ready == T0 + 7  # the node's Ready, before Karpenter's Initialized (8)
    assert m.deleting == T0 + 80  # the NodeClaim's deletionTimestamp, before the node's
    assert m.gone == T0 + 85 and m.consolidatable == [T0 + 70] and m.drifted == []


def test_only_the_tests_own_karpenter_events_are_kept():
    events = karpenter_events(empty_node_consolidated())
    assert [(e["reason"], e["kind"], e["name"]) for e in events] == [
        ("DisruptionTerminating", "NodeClaim", "nc1"), ("DisruptionTerminating", "Node", "n1")]
    assert events[0]["t"] == T0 + 80


def test_an_event_counted_again_is_a_new_occurrence_a_repeat_is_not():
    rec = Recording("abc123", T0)
    blocked = event("e1", "DisruptionBlocked", "NodePool", "default-abc123", T0 + 10)
    rec.observe("events", "ADDED", blocked, T0 + 10)
    rec.observe("events", "MODIFIED", blocked, T0 + 11)  # the same occurrence again
    rec.observe("events", "MODIFIED", {**blocked, "count": 2, "lastTimestamp": iso(T0 + 70)},
                T0 + 70)
    rec.stop(T0 + 80)
    assert [e["t"] - T0 for e in karpenter_events(rec)] == [10, 70]


def test_scale_marks_come_from_the_deployments_replicas():
    marks = scale_marks(empty_node_consolidated())
    assert [(m.t - T0, m.label) for m in marks] == [(2, "inflate created (2)"),
                                                    (40, "inflate 2→0")]


def test_a_relist_ends_what_went_while_nobody_watched():
    rec = Recording("abc123", T0)
    rec.observe("nodes", "LISTED", node("n1", T0 + 1, T0 + 2), T0 + 2)
    rec.observe("nodes", "LISTED", node("n2", T0 + 1, T0 + 2), T0 + 2)
    rec.relisted("nodes", {"n2"}, T0 + 30)
    rec.stop(T0 + 40)
    gone = {m.node: m.gone for m in machines(rec)}
    assert gone == {"n1": T0 + 30, "n2": None}


def test_drift_turns_true_and_back():
    rec = Recording("abc123", T0)
    rec.observe("nodeclaims", "ADDED", claim("nc1", T0, Initialized=T0 + 5), T0 + 5)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", T0, Initialized=T0 + 5, Drifted=T0 + 20),
                T0 + 20)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", T0, Initialized=T0 + 5,
                                                Drifted=(False, T0 + 30)), T0 + 30)
    rec.stop(T0 + 40)
    (m,) = machines(rec)
    assert m.spells["Drifted"] == [(T0 + 20, T0 + 30)] and m.drifted == [T0 + 20]


def test_each_version_keeps_the_last_pod_event_and_the_pools_consolidate_after():
    """What the it-settles oracle judges a marking by: the lastPodEventTime of the version
    that turned Consolidatable, and the pool's consolidateAfter as it changed."""
    marked = claim("nc1", T0, Initialized=T0 + 5, Consolidatable=T0 + 50)
    marked["status"]["lastPodEventTime"] = iso(T0 + 20)
    item = timeline_module.compact("nodeclaims", marked)
    assert item["last_pod_event"] == int(T0 + 20) and item["conditions"]["Consolidatable"] == \
        [True, int(T0 + 50)]
    assert timeline_module.compact("nodeclaims", claim("nc2", T0))["last_pod_event"] is None
    pool = {"metadata": {"name": "default"},
            "spec": {"disruption": {"consolidateAfter": "30s", "budgets": [{"nodes": "1"}]}}}
    assert timeline_module.compact("nodepools", pool)["consolidate_after"] == "30s"


def test_snapshot_is_relative_to_the_start_and_round_trips_through_json():
    tl = Timeline("consolidation-empty", "suites/test_consolidation.py::test_x", "abc123",
                  started=T0)
    tl.recording = empty_node_consolidated()
    tl.call = (T0 + 1, T0 + 86)
    tl.band(T0 + 69, T0 + 110, "consolidateAfter 30s … + 35s tolerance")
    tl.mark(T0 + 40, "scaled to 0")
    snap = json.loads(json.dumps(tl.snapshot("passed")))
    assert snap["call"] == [1, 86] and snap["duration"] == 90
    assert snap["bands"] == [{"start": 69, "end": 110,
                              "label": "consolidateAfter 30s … + 35s tolerance"}]
    assert {"t": 40, "label": "scaled to 0"} in snap["marks"]
    assert snap["machines"][0]["consolidatable"] == [70]
    replayed = Recording.from_dict(snap["recording"])
    assert pod_series(replayed) == snap["pods"]
    again = Timeline.from_snapshot(snap).snapshot("passed")
    assert {k: v for k, v in again.items() if k != "recording"} == \
        {k: v for k, v in snap.items() if k != "recording"}


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.mark.parametrize("outcome", ["passed", "failed"])
def test_render_draws_every_lane_into_a_png(tmp_path, outcome):
    tl = Timeline("consolidation-empty", "suites/test_consolidation.py::test_x", "abc123",
                  started=T0)
    tl.recording = empty_node_consolidated()
    tl.call = (T0 + 1, T0 + 86)
    tl.band(T0 + 69, T0 + 110, "consolidateAfter 30s … + 35s tolerance")
    if outcome == "failed":
        tl.failure = "NodeClaim nc1 marked Consolidatable 15s after it emptied"
    snap = tl.snapshot(outcome)
    drawn = {}
    path = timeline_chart.render(snap, tmp_path / "t.png", inspect=drawn)
    width, height = png_size(path)
    assert width >= 900 and height >= 500
    assert path.stat().st_size < 200_000
    assert drawn["lanes"] == ["pods", "NodeClaims", "NodeClaims / nodes", "Karpenter\nevents"]
    assert drawn["title"] == f"consolidation-empty: {outcome.upper()}"
    assert drawn["title_colour"] == timeline_chart.OUTCOME_COLOURS[outcome]
    assert "consolidateAfter 30s … + 35s tolerance" in drawn["legend"]
    assert ("test body ended (failed)" in drawn["legend"]) == (outcome == "failed")
    # What failed it, in words, over the top lane.
    assert ("NodeClaim nc1 marked" in " ".join(drawn["texts"])) == (outcome == "failed")


def test_render_copes_with_nothing_recorded(tmp_path):
    tl = Timeline("provisioning", "suites/test_provisioning.py::test_x", "abc123", started=T0)
    drawn = {}
    timeline_chart.render(tl.snapshot("failed"), tmp_path / "empty.png", inspect=drawn)
    assert drawn["lanes"] == ["pods", "NodeClaims", "NodeClaims / nodes"]


SCENARIO = '''
import time

import pytest

from karpenter_e2e.fixtures import reporting
from karpenter_e2e.fixtures.timeline import Recording, Timeline


@pytest.fixture
def timeline(request):
    t = Timeline("demo", request.node.nodeid, "abc123")
    t.recording = Recording("abc123", t.started)
    request.node.stash[reporting.TIMELINE] = t
    yield t
    t.recording.stop()


@pytest.mark.scenario("demo")
def test_fails(timeline):
    timeline.band(time.time(), time.time() + 5, "a bound")
    assert False, "boom"


@pytest.mark.scenario("demo")
def test_skips(timeline):
    pytest.skip("not in this mode")
'''


def test_every_scenario_that_ran_gets_its_picture_on_its_allure_result(pytester, tmp_path):
    """Through the real hooks (no cluster): the PNG lands on the test's own Allure result
    (not a fixture's teardown) and in the run's timelines/; a skipped test gets none."""
    pytester.makeconftest('pytest_plugins = ["karpenter_e2e.fixtures.reporting", '
                          '"karpenter_e2e.fixtures.plugin"]')
    pytester.makepyfile(test_demo=SCENARIO)
    alluredir, reports = tmp_path / "allure", tmp_path / "reports"
    result = pytester.runpytest_subprocess(f"--alluredir={alluredir}", f"--karpenter-reports-dir={reports}",
                                           "-p", "no:cacheprovider", "--karpenter-cluster-name", "unused")
    result.assert_outcomes(failed=1, skipped=1)
    results = {r["name"]: r for r in (json.loads(f.read_text())
                                      for f in alluredir.glob("*-result.json"))}
    pictures = [a for a in results["test_fails"]["attachments"] if a["name"] == "timeline"]
    assert len(pictures) == 1 and pictures[0]["type"] == "image/png"
    png_size(alluredir / pictures[0]["source"])
    assert not [a for a in results["test_skips"].get("attachments", []) if a["name"] == "timeline"]
    (drawn,) = reports.glob("runs/*/timelines/*.png")
    assert drawn.name.endswith("test_fails.png")
    snap = json.loads(drawn.with_suffix(".json").read_text())
    assert snap["outcome"] == "failed" and snap["bands"][0]["label"] == "a bound"
    assert snap["failure"] == "boom"


class FakeKube:
    """List functions the recorder calls: a first call fails (an apiserver hiccup), then
    each lists its objects; the watch streams scripted events, then nothing."""

    def __init__(self, objects: dict[str, list[dict]], events: dict[str, list[dict]]):
        self.calls = Counter()
        self.events = events

        def lister(source: str):
            def fn(*args, **kwargs):
                if kwargs.get("watch"):
                    raise AssertionError("watches go through the patched Watch")
                self.calls[source] += 1
                if self.calls[source] == 1:
                    raise ApiException(status=500, reason="etcd leader changed")
                body = {"metadata": {"resourceVersion": "10"}, "items": objects.get(source, [])}
                return SimpleNamespace(data=json.dumps(body).encode())
            fn.source = source
            return fn

        self.core = SimpleNamespace(list_namespaced_pod=lister("pods"),
                                    list_node=lister("nodes"),
                                    list_event_for_all_namespaces=lister("events"))
        self.apps = SimpleNamespace(list_namespaced_deployment=lister("deployments"))
        claims = lister("nodeclaims")
        self.custom = SimpleNamespace(list_cluster_custom_object=lambda *a, **kw: claims(**kw))
        self.custom.list_cluster_custom_object.source = "nodeclaims"


def test_the_recorder_survives_api_errors_and_records_lists_and_watches(monkeypatch):
    kube = FakeKube({"nodes": [node("n1", T0, T0 + 1)]},
                    {"pods": [{"type": "ADDED", "object": pod("p1", "Pending", T0)}],
                     "events": [{"type": "ADDED", "object": event(
                         "e1", "DisruptionBlocked", "NodePool", "default-abc123", T0)}]})

    class Watch:
        def stream(self, fn, **kwargs):
            source = getattr(fn, "source", None) or getattr(fn.func, "source", None)
            yield from kube.events.pop(source, [])

        def stop(self):
            pass

    monkeypatch.setattr(informer_module.watch, "Watch", Watch)
    monkeypatch.setattr(timeline_module, "WINDOW", 0)
    rec = Recording("abc123", T0)
    recorder = timeline_module.TimelineRecorder(kube, "karpenter-e2e/test=abc123",
                                                lambda: "e2e-abc123", rec).start()
    deadline = time.time() + 10
    while time.time() < deadline and not (rec.entries("pods") and rec.entries("events")
                                          and rec.entries("nodes")):
        time.sleep(0.05)
    began = time.monotonic()
    recorder.stop()
    assert time.monotonic() - began < 1.0  # a stop never waits for a watch window (5 s)
    assert rec.errors["nodes: ApiException"] == 1  # counted, ridden out (the one rule)
    assert not recorder.errors
    assert [i["name"] for _, _, i in rec.entries("pods")] == ["p1"]
    assert [i["name"] for _, _, i in rec.entries("nodes")] == ["n1"]
    assert [i["reason"] for _, _, i in rec.entries("events")] == ["DisruptionBlocked"]
    assert rec.namespace == "e2e-abc123"


def test_a_timeline_in_a_traceback_is_one_line():
    tl = Timeline("drift", "suites/test_drift.py::test_x", "abc123", started=T0)
    tl.recording = empty_node_consolidated()
    tl.band(T0, T0 + 60, "Drifted within 60s")
    assert repr(tl) == f"Timeline(drift, 1 bands, 0 marks, {len(tl.recording.log)} observations)"


def recorded_consolidation_empty() -> Timeline:
    """consolidation-empty as a local run's recorder saw it (tests/data: its watch log)."""
    data = json.loads((DATA / "timeline-consolidation-empty.json").read_text())
    tl = Timeline(data["scenario"], data["nodeid"], data["test_id"], started=data["started"])
    tl.recording = Recording.from_dict(data["recording"])
    tl.call = tuple(data["call"])
    for band in data["bands"]:
        tl.band(band["start"], band["end"], band["label"])
    return tl


def test_a_recorded_run_reduces_to_what_the_scenario_asserted():
    tl = recorded_consolidation_empty()
    snap = tl.snapshot("passed")
    (band,) = snap["bands"]
    (m,) = snap["machines"]  # 3 one-CPU pods on one node
    assert m["capacity_type"] == "on-demand" and m["instance_type"]
    assert band["start"] <= m["consolidatable"][0] <= m["deleting"] <= m["gone"] <= band["end"]
    assert max(snap["pods"]["Running"]) == 3 and snap["pods"]["Running"][-1] == 0
    assert [mk["label"] for mk in snap["marks"]][:2] == ["inflate created (3)", "inflate 3→0"]
    empty = [e for e in snap["events"] if e["reason"] == "DisruptionTerminating"]
    assert {e["kind"] for e in empty} == {"Node", "NodeClaim"}
    assert all(e["message"].endswith(": Empty") for e in empty)
    assert band["start"] <= empty[0]["t"] <= band["end"]
    assert not snap["errors"]


def test_a_recorded_run_renders(tmp_path):
    drawn = {}
    path = timeline_chart.render(recorded_consolidation_empty().snapshot("passed"),
                                 tmp_path / "t.png", inspect=drawn)
    png_size(path)
    assert drawn["lanes"][-1] == "Karpenter\nevents"


def test_a_saved_recording_is_drawn_again_on_the_command_line(tmp_path):
    """`karpenter-e2e chart timeline X.json X.png`: the JSON written beside each picture."""
    saved = tmp_path / "t.json"
    saved.write_text(json.dumps(recorded_consolidation_empty().snapshot("passed")))
    assert timeline_chart.load(saved)["declared"]  # a recording: reduced again, as render takes it
    assert charts.main(["timeline", str(saved), str(tmp_path / "t.png")]) == 0
    png_size(tmp_path / "t.png")


def test_with_xdist_workers_the_pictures_reach_the_runs_allure_results_too(pytester, tmp_path):
    """--karpenter-reports-dir alone, -n 2: each worker writes its tests' Allure results (with their
    timelines) into the run's allure-results, as a serial run does."""
    pytester.makeconftest('pytest_plugins = ["karpenter_e2e.fixtures.reporting", '
                          '"karpenter_e2e.fixtures.plugin"]')
    skip = 'def test_skips(timeline):\n    pytest.skip("not in this mode")'
    pytester.makepyfile(test_demo=SCENARIO.replace(skip, "def test_passes(timeline):\n    pass"))
    reports = tmp_path / "reports"
    result = pytester.runpytest_subprocess("-n", "2", f"--karpenter-reports-dir={reports}",
                                           "-p", "no:cacheprovider", "--karpenter-cluster-name", "unused")
    result.assert_outcomes(failed=1, passed=1)
    results = [json.loads(f.read_text())
               for f in reports.glob("runs/*/allure-results/*-result.json")]
    assert sorted((r["name"], [a["name"] for a in r.get("attachments", [])].count("timeline"))
                  for r in results) == [("test_fails", 1), ("test_passes", 1)]


def test_whole_second_stamps_are_sharpened_by_when_the_watch_saw_them():
    """deletionTimestamp says 80 (80.0-80.99); the watch saw it at 80.6: 80.6. A stamp seen
    much later (a re-list) stays within its second."""
    rec = Recording("abc123", T0)
    rec.observe("nodeclaims", "ADDED", claim("nc1", T0 + 3), T0 + 3.4)
    rec.observe("nodeclaims", "MODIFIED", claim("nc1", T0 + 3, deleting=T0 + 80), T0 + 80.6)
    rec.observe("nodes", "LISTED", node("n1", T0 + 5, T0 + 7), T0 + 30)
    rec.stop(T0 + 90)
    by_name = {m.claim or m.node: m for m in machines(rec)}
    assert by_name["nc1"].created == T0 + 3.4 and by_name["nc1"].deleting == T0 + 80.6
    assert by_name["n1"].created == T0 + 6 and by_name["n1"].ready == T0 + 8


def _waiting(name: str, phase: str, created: float, scheduled: str = "False",
             **extra) -> dict:
    body = pod(name, phase, created)
    body["status"]["conditions"] = [{"type": "PodScheduled", "status": scheduled,
                                     "reason": "Unschedulable" if scheduled == "False" else "",
                                     "lastTransitionTime": iso(created)}]
    body.update(extra)
    return body


def test_pending_to_running_is_the_slowest_pod_that_waited_for_karpenter():
    """The run summary's column (every scenario's, from its timeline): the pods kube-scheduler
    found no room for, creation to Running; a pod that never waited, one that never ran and
    one deleted while waiting are not in it."""
    from karpenter_e2e.fixtures.timeline import pending_to_running
    rec = Recording("t1", T0)
    assert pending_to_running(rec) is None  # nothing waited: the summary shows –
    for name, created, running in (("a", T0, T0 + 9.4), ("b", T0 + 1, T0 + 21.3)):
        rec.observe("pods", "ADDED", _waiting(name, "Pending", created), created + 0.5)
        rec.observe("pods", "MODIFIED", _waiting(name, "Running", created, "True"), running)
    rec.observe("pods", "ADDED", _waiting("fits", "Running", T0, "True"), T0 + 2)  # no wait
    rec.observe("pods", "ADDED", _waiting("never", "Pending", T0), T0 + 1)
    rec.observe("pods", "ADDED", _waiting("gone", "Pending", T0), T0 + 1)
    rec.observe("pods", "DELETED", _waiting("gone", "Pending", T0), T0 + 3)
    rec.observe("pods", "ADDED", _waiting("gone", "Running", T0 + 40, "True"), T0 + 90)
    assert pending_to_running(rec) == 20.3  # b: created T0+1, Running seen at T0+21.3
