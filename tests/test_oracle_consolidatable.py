"""it-settles, in its time (fixtures/oracles/consolidatable.py): a NodeClaim is marked
Consolidatable only once its pool's consolidateAfter has passed since its last pod event, and
consolidation takes only NodeClaims so marked. Records shaped as the timeline records them:
a NodeClaim's versions (conditions with their lastTransitionTime, lastPodEventTime), its
pool's versions, Karpenter's events."""

import json
from pathlib import Path

from test_oracles import T0, TID, claim, event, recording

from karpenter_e2e.fixtures.oracles import Record, judge
from karpenter_e2e.fixtures.oracles.consolidatable import judge_consolidatable
from karpenter_e2e.fixtures.timeline import Recording

POOL = f"default-{TID}"
INIT = T0 + 10  # the NodeClaim's Initialized stamp
BOUND = T0 + 20  # its pods bound: the podevents controller's lastPodEventTime
EARLY = "a NodeClaim was marked Consolidatable before its consolidateAfter had passed"
UNMARKED = "consolidation took a NodeClaim it had not marked Consolidatable"


def pool(t, after="30s", kind="ADDED"):
    return (t, "nodepools", kind, {"name": POOL, "created": int(T0), "deleting": None,
                                   "budgets": [], "consolidate_after": after, "ready": int(T0)})


def version(t, *, lpe=BOUND, marked=None, kind="MODIFIED", name="c1", deleting=None):
    """One version of the NodeClaim as the watch saw it at ``t``: initialized at INIT, its
    lastPodEventTime ``lpe`` and, when ``marked``, Consolidatable since then (whole seconds,
    as the API writes them)."""
    conds = {"Launched": [True, float(int(INIT) - 3)], "Registered": [True, float(int(INIT) - 1)],
             "Initialized": [True, float(int(INIT))]}
    if marked is not None:
        conds["Consolidatable"] = [True, float(int(marked))]
    return (t, "nodeclaims", kind, {**claim(name, T0 + 1, node="n1", deleting=deleting),
                                    "conditions": conds,
                                    "last_pod_event": None if lpe is None else float(int(lpe))})


def launched(t=T0 + 1, name="c1"):
    """Created, then up with its pods bound (no Consolidatable yet)."""
    return [(t, "nodeclaims", "ADDED", {**claim(name, t), "last_pod_event": None}),
            version(BOUND + 0.4, name=name)]


def early(*entries, pools=(), end=T0 + 300):
    found = [f for f in judge(Record(recording(*entries, end=end), pools=list(pools))).findings
             if f.oracle == "it-settles"]
    return [(f.what, f.evidence) for f in found]


def test_a_marking_once_consolidate_after_has_passed_holds_and_the_halved_one_is_a_finding():
    for gap in (30, 31, 29):  # 29: the stamps' one second (STAMP_S)
        assert early(pool(T0), *launched(), version(BOUND + gap + 0.3, marked=BOUND + gap)) == []
    # consolidateAfter honoured at half its value (mutant consolidate-after-halved)
    [(what, evidence)] = early(pool(T0), *launched(), version(BOUND + 15.3, marked=BOUND + 15))
    assert what == EARLY
    assert evidence == (f"c1 ({POOL}): Consolidatable at 22:13:55.0, 15s after its "
                        "lastPodEventTime 22:13:40.0; consolidateAfter 30s",)
    # one second short of the allowance
    assert early(pool(T0), *launched(), version(BOUND + 28.3, marked=BOUND + 28))[0][0] == EARLY


def test_without_a_pod_event_consolidate_after_counts_from_the_initialization():
    up = [(T0 + 1, "nodeclaims", "ADDED", {**claim("c1", T0 + 1), "last_pod_event": None}),
          version(INIT + 0.5, lpe=None)]
    assert early(pool(T0), *up, version(INIT + 30.2, lpe=None, marked=INIT + 30)) == []
    [(_, evidence)] = early(pool(T0), *up, version(INIT + 15.2, lpe=None, marked=INIT + 15))
    assert "15s after its initialization (no lastPodEventTime) 22:13:30.0" in evidence[0]


def test_a_pod_event_after_the_marking_clears_it_and_the_next_counts_from_the_newer_time():
    moved = BOUND + 40  # a pod goes: lastPodEventTime moves on while the condition still holds
    before = [pool(T0), *launched(), version(BOUND + 30.3, marked=BOUND + 30),
              version(moved + 0.2, lpe=moved, marked=BOUND + 30),  # not a marking: no verdict
              version(moved + 0.4, lpe=moved)]  # Karpenter clears it
    assert early(*before, version(moved + 30.3, lpe=moved, marked=moved + 30)) == []
    # marked again 15 s after the newer event: judged against it, not the first
    [(_, evidence)] = early(*before, version(moved + 15.3, lpe=moved, marked=moved + 15))
    assert evidence == (f"c1 ({POOL}): Consolidatable at 22:14:35.0, 15s after its "
                        "lastPodEventTime 22:14:20.0; consolidateAfter 30s",)


def test_an_old_spell_written_back_from_a_stale_copy_is_no_marking():
    """disruption/queue.go and the lifecycle controller merge-patch the conditions from their
    cached copy: one that still held the cleared condition writes it back, old stamp and all,
    beside the newer lastPodEventTime the patch leaves alone."""
    moved = BOUND + 40
    assert early(pool(T0), *launched(), version(BOUND + 30.3, marked=BOUND + 30),
                 version(moved + 0.2, lpe=moved, marked=BOUND + 30),
                 version(moved + 0.4, lpe=moved),
                 version(moved + 0.5, lpe=moved, marked=BOUND + 30)) == []


def test_a_pool_whose_consolidate_after_is_never_marks_nothing():
    never = [pool(T0, "Never"), *launched()]
    assert early(*never) == []
    [(what, evidence)] = early(*never, version(BOUND + 100.3, marked=BOUND + 100))
    assert what == EARLY
    assert evidence == (f"c1 ({POOL}): Consolidatable at 22:15:20.0 while its pool's "
                        "consolidateAfter was Never",)
    # set to a duration just before: Karpenter may have read either; the duration is judged
    changed = [pool(T0, "Never"), *launched(), pool(BOUND + 99.5, "30s", "MODIFIED")]
    assert early(*changed, version(BOUND + 100.3, marked=BOUND + 100)) == []


def test_a_changed_consolidate_after_is_read_the_generous_way_within_the_state_lag():
    # shortened to 30s, seen by the watch 1.5 s after Karpenter marked by it
    shortened = [pool(T0, "5m"), *launched(), pool(BOUND + 31.5, "30s", "MODIFIED")]
    assert early(*shortened, version(BOUND + 30.3, marked=BOUND + 30)) == []
    [(_, evidence)] = early(*shortened, version(BOUND + 25.3, marked=BOUND + 25))
    assert evidence[0].endswith("25s after its lastPodEventTime 22:13:40.0; consolidateAfter 5m")
    # lengthened to 5m just before the marking: Karpenter may still have read 30s
    lengthened = [pool(T0, "30s"), *launched(), pool(BOUND + 29.5, "5m", "MODIFIED")]
    assert early(*lengthened, version(BOUND + 30.3, marked=BOUND + 30)) == []
    # long after the change: the 5m holds
    [(_, evidence)] = early(*lengthened, version(BOUND + 80.3, marked=BOUND + 80))
    assert evidence[0].endswith("80s after its lastPodEventTime 22:13:40.0; consolidateAfter 5m")


def test_a_marking_the_watch_did_not_see_happen_is_not_judged():
    # first seen already marked (the recording began after), or after a re-list
    assert early(pool(T0), version(BOUND + 15.3, marked=BOUND + 15, kind="LISTED")) == []
    assert early(pool(T0), *launched(),
                 version(BOUND + 15.3, marked=BOUND + 15, kind="LISTED")) == []
    # recorded before lastPodEventTime was: what Karpenter counted from is unknown
    old = version(BOUND + 15.3, marked=BOUND + 15)
    del old[3]["last_pod_event"]
    assert early(pool(T0), *launched(), old) == []


def test_a_pool_the_watch_did_not_record_is_read_as_at_the_end_only_if_its_spec_never_changed():
    def at_end(generation):  # check watches no NodePool: its pools are read at the end
        return {"metadata": {"name": POOL, "generation": generation},
                "spec": {"disruption": {"consolidateAfter": "30s"}}}
    marked = [*launched(), version(BOUND + 15.3, marked=BOUND + 15)]
    assert early(*marked, pools=[at_end(1)])[0][0] == EARLY
    assert early(*marked, pools=[at_end(2)]) == []  # a step may have changed consolidateAfter
    assert early(*marked) == []  # no pool at all


def _terminating(t, message="Disrupting NodeClaim: Empty"):
    return (t + 0.3, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "c1", t,
                                               message))


def test_a_nodeclaim_consolidated_unmarked_is_a_finding():
    gone = BOUND + 60
    deleted = version(gone + 0.2, deleting=int(gone))
    [(what, evidence)] = early(pool(T0), *launched(), deleted, _terminating(gone))
    assert what == UNMARKED
    assert evidence == (f"c1 ({POOL}): Disrupting NodeClaim: Empty at 22:14:40.0, never marked "
                        "Consolidatable before",)
    marked = [pool(T0), *launched(), version(BOUND + 30.3, marked=BOUND + 30)]
    assert early(*marked, version(gone + 0.2, marked=BOUND + 30, deleting=int(gone)),
                 _terminating(gone)) == []
    # cleared by a pod event after the command chose it: marked before, so it holds
    assert early(*marked, version(BOUND + 45.2, lpe=BOUND + 45), deleted,
                 _terminating(gone, "Disrupting NodeClaim: Underutilized")) == []
    # drift takes a node whatever its marking
    assert early(pool(T0), *launched(), deleted,
                 _terminating(gone, "Disrupting NodeClaim: Drifted")) == []
    # versions a re-list broke: a marking may be missed
    assert early(pool(T0), *launched(), (deleted[0], "nodeclaims", "LISTED", deleted[3]),
                 _terminating(gone)) == []


def test_a_real_consolidation_empty_record_marked_its_nodeclaims_before_taking_them():
    """A kind run's recording (made before lastPodEventTime was recorded: no marking is
    judged); its emptied NodeClaims were marked before Karpenter took them as Empty."""
    data = json.loads((Path(__file__).parent / "data" / "timeline-consolidation-empty.json")
                      .read_text())
    rec = Record(Recording.from_dict(data["recording"]))
    assert any("Empty" in e["message"] for evs in rec.events.values() for e in evs
               if e["reason"] == "DisruptionTerminating")
    assert judge_consolidatable(rec) == []
