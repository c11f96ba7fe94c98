"""The oracles on recorded runs made by hand: each fires on what it names and stays quiet on
a healthy record."""

import json

import pytest

from karpenter_e2e.clusters.karpenter.clock import DAEMON_RETRY_S, DECISION_BOUND_S
from karpenter_e2e.fixtures import oracles
from karpenter_e2e.fixtures.oracles import Record, judge
from karpenter_e2e.fixtures.timeline import Recording

T0 = 1_700_000_000.0
TID = "abc123"


def pod(name, t, *, node="", sched=None, owner="ReplicaSet", owner_name="inflate-x", target="",
        dnd=False, deleting=None, phase="Pending", labels=None):
    return {"name": name, "created": int(T0), "deleting": deleting, "phase": phase, "node": node,
            "owner": owner, "owner_name": owner_name, "labels": labels or {"app": "inflate"},
            "target": target, "dnd": dnd, "ready": phase == "Running",
            "scheduled": [*sched, float(int(t))] if sched else None}


UNSCHED = ("False", "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")


def claim(name, t, *, node="", pool=f"default-{TID}", itype="m5.large", capacity=None,
          deleting=None, conditions=None):
    return {"name": name, "created": int(t), "deleting": deleting, "node": node,
            "instance_type": itype, "capacity_type": "on-demand", "nodepool": pool,
            "conditions": conditions or {}, "zone": "us-west-2a", "requests": {},
            "allocatable": {}, "capacity": capacity or {"cpu": "2", "memory": "8Gi"}}


def consolidatable(t):
    """Initialized at ``t`` and marked Consolidatable 30 s later, as Karpenter marks every
    NodeClaim it consolidates (the it-settles oracle reads the marking)."""
    return {"Initialized": [True, float(int(t))], "Consolidatable": [True, float(int(t) + 30)]}


def event(reason, kind, name, t, message="", count=1, uid=None):
    return {"uid": uid or f"{reason}-{name}-{t}", "count": count, "t": float(int(t)),
            "reason": reason, "kind": kind, "name": name, "namespace": "ns", "message": message}


def recording(*entries, end=T0 + 120):
    rec = Recording(TID, T0, namespace="ns")
    for t, source, kind, item in entries:
        rec.log.append([t, source, kind, item])
    rec.stopped = end
    return rec


def findings(rec, **kw):
    return [f.oracle for f in judge(Record(rec, **kw)).findings]


# ---- no pod ignored -----------------------------------------------------------------------------
def test_a_pod_without_a_decision_is_a_finding_and_one_with_an_event_is_not():
    silent = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)))
    verdict = judge(Record(silent))
    assert [f.oracle for f in verdict.findings] == ["no-pod-ignored"]
    assert "p1: unschedulable since" in verdict.findings[0].evidence[0]
    told = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
                     (T0 + 5, "events", "ADDED", event("FailedScheduling", "Pod", "p1", T0 + 5,
                                                       "Failed to schedule pod, ...")))
    assert findings(told) == []
    placed = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
                       (T0 + 9, "pods", "MODIFIED", pod("p1", T0 + 1, node="n1",
                                                        phase="Running")))
    assert findings(placed) == []


def test_a_decision_after_the_bound_is_too_late_and_a_pod_waiting_less_is_not_judged():
    late = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
                     (T0 + 3 + DECISION_BOUND_S, "events", "ADDED",
                      event("Nominated", "Pod", "p1", T0 + 3 + DECISION_BOUND_S)))
    assert findings(late) == ["no-pod-ignored"]
    young = recording((T0 + 100, "pods", "ADDED", pod("p1", T0 + 100, sched=UNSCHED)),
                      end=T0 + 100 + DECISION_BOUND_S - 1)
    assert findings(young) == []


def round_line(t, pods, took=0.2):
    """Karpenter's log line for a scheduling round that planned NodeClaims, ending at ``t``."""
    stamp = __import__("datetime").datetime.fromtimestamp(t, __import__("datetime").timezone.utc)
    return json.dumps({"level": "INFO", "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "message": "found provisionable pod(s)", "Pods": pods,
                       "duration": f"{took * 1000:.0f}ms"})


def _many(n, at=T0 + 1):
    return [(at, "pods", "ADDED", pod(f"w{i}", at, sched=UNSCHED)) for i in range(n)]


def test_a_round_that_took_a_pod_is_its_decision_though_the_rate_limiter_ate_its_event():
    """explore, v1.6.4 (2026-12-06): 21 pods planned in one round, the log naming 5 "and 16
    other(s)"; two pods got neither a Nominated event (PodNominationRateLimiter, 5/s burst 10)
    nor the node planned for them, and were read as ignored."""
    named = ", ".join(f"ns/w{i}" for i in range(5))
    covered = round_line(T0 + 3, f"{named} and 7 other(s)")
    assert findings(recording(*_many(12)), log_text=covered) == []
    complete = round_line(T0 + 3, ", ".join(f"ns/w{i}" for i in range(12)))
    assert findings(recording(*_many(12)), log_text=complete) == []


def test_a_round_does_not_decide_the_pods_it_could_not_have_taken():
    named = ", ".join(f"ns/w{i}" for i in range(5))
    short = judge(Record(recording(*_many(12)), log_text=round_line(T0 + 3,
                                                                     f"{named} and 3 other(s)")))
    # 8 taken of 12 waiting: only the 5 it names are known to be taken
    assert [f.oracle for f in short.findings] == ["no-pod-ignored"]
    assert short.findings[0].what.startswith("7 pending pod(s)")
    left = judge(Record(recording(*_many(3)), log_text=round_line(T0 + 3, "ns/w0, ns/w1")))
    assert [e.split(":")[0] for e in left.findings[0].evidence] == ["w2"]
    # a round that began before the pods waited took other pods, not these
    early = round_line(T0 + 0.5, "ns/x0, ns/x1, ns/x2", took=0.1)
    assert findings(recording(*_many(3)), log_text=early) == ["no-pod-ignored"]


def _refused_line(t, name):
    stamp = __import__("datetime").datetime.fromtimestamp(t, __import__("datetime").timezone.utc)
    return json.dumps({"level": "ERROR", "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "message": "could not schedule pod", "controller": "provisioner",
                       "Pod": {"name": name, "namespace": "ns"},
                       "error": "all available instance types exceed limits for nodepool"})


def test_a_round_is_no_decision_for_a_pod_it_could_not_place():
    """Issue 51: a pod the round refused is told only by its FailedScheduling event; a
    Karpenter that logs "could not schedule pod" (known noise of the log oracle) and drops
    the event leaves the pod silent (mutant failed-scheduling-event-dropped)."""
    took = round_line(T0 + 3, "ns/w0, ns/w1")
    refused = "\n".join([took, _refused_line(T0 + 3.01, "w1")])
    verdict = judge(Record(recording(*_many(2)), log_text=refused))
    assert [f.oracle for f in verdict.findings] == ["no-pod-ignored"]
    assert [e.split(":")[0] for e in verdict.findings[0].evidence] == ["w1"]
    told = recording(*_many(2), (T0 + 3, "events", "ADDED", event(
        "FailedScheduling", "Pod", "w1", T0 + 3, "Failed to schedule pod, all available "
        "instance types exceed limits for nodepool")))
    assert findings(told, log_text=refused) == []
    # refused in an earlier round, taken by this one: the round decides
    earlier = "\n".join([_refused_line(T0 - 30, "w1"), took])
    assert findings(recording(*_many(2)), log_text=earlier) == []


def test_a_round_after_the_bound_is_a_late_decision():
    """What the pod-trigger-delayed mutant does: the pods' round comes 25 s late."""
    late = round_line(T0 + 3 + DECISION_BOUND_S, "ns/w0, ns/w1")
    assert findings(recording(*_many(2), end=T0 + 120), log_text=late) == ["no-pod-ignored"]


def test_a_pod_without_an_event_decided_by_the_nodeclaim_it_lands_on():
    """Karpenter rate-limits Nominated events: the NodeClaim a pod lands on is the decision."""
    def case(claim_at):
        return findings(recording(
            (T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
            (claim_at, "nodeclaims", "ADDED", claim("c1", claim_at, node="n1")),
            (claim_at + 30, "pods", "MODIFIED", pod("p1", T0 + 1, node="n1", phase="Running"))),
            end=claim_at + 40)
    assert case(T0 + 12) == []
    assert case(T0 + 4 + DECISION_BOUND_S) == ["no-pod-ignored"]


def test_daemonset_pods_are_not_the_provisioners_to_answer():
    ds = recording((T0 + 1, "pods", "ADDED", pod("d1", T0 + 1, sched=UNSCHED, owner="DaemonSet")))
    assert findings(ds) == []


# ---- daemons fit -------------------------------------------------------------------------------
def _daemon_case(ds_created, pending_for, planned=None, bound=0, nominated=0, elsewhere=0,
                 late_daemon=False):
    """A daemon pending ``pending_for`` on n1, whose NodeClaim Karpenter planned for
    ``planned`` pods (daemons included), while ``bound`` other pods were bound there: the
    first ``nominated`` of them named c1 in Karpenter's Nominated event, the next
    ``elsewhere`` another NodeClaim. ``late_daemon``: one of the bound pods is a daemon
    whose DaemonSet came after the NodeClaim."""
    node = "n1"
    insufficient = ("False", "Unschedulable", "0/5 nodes are available: 1 Insufficient memory.")
    c1 = claim("c1", T0 + 2, node=node)
    if planned:
        c1["requests"] = {"cpu": "1500m", "pods": str(planned)}
    others = [(T0 + 4, "pods", "ADDED", pod(f"w{i}", T0 + 3, node=node, phase="Running"))
              for i in range(bound)]
    if late_daemon:
        others[-1] = (T0 + 4, "pods", "ADDED", pod("late", T0 + 3, node=node, phase="Running",
                                                   owner="DaemonSet", owner_name="late",
                                                   target=node))
    said = [(T0 + 2, "events", "ADDED", event("Nominated", "Pod", f"w{i}", T0 + 2,
                                              "Pod should schedule on: nodeclaim/"
                                              + ("c1" if i < nominated else "c2")))
            for i in range(nominated + elsewhere)]
    rec = recording(
        (T0 + 2, "nodeclaims", "ADDED", c1), *said, *others,
        (T0 + 3, "nodes", "ADDED", {"name": node, "created": int(T0 + 3), "deleting": None,
                                    "instance_type": "m5.large", "capacity_type": "on-demand",
                                    "ready": int(T0 + 4), "price": "0.096"}),
        (T0 + 5, "pods", "ADDED", pod("d1", T0 + 5, sched=insufficient, owner="DaemonSet",
                                      owner_name="logs", target=node)),
        (T0 + 5 + pending_for, "pods", "MODIFIED", pod("d1", T0 + 5, node=node,
                                                       owner="DaemonSet", owner_name="logs",
                                                       target=node, phase="Running")))
    ds = [{"metadata": {"name": "logs", "creationTimestamp": _iso(ds_created)}},
          {"metadata": {"name": "late", "creationTimestamp": _iso(T0 + 30)}}]
    return findings(rec, daemonsets=ds)


def _iso(t):
    import datetime as dt
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_daemon_pending_for_room_on_a_node_karpenter_sized_is_a_finding():
    assert _daemon_case(T0, DAEMON_RETRY_S + 5) == ["daemons-fit"]
    assert _daemon_case(T0, 2) == []  # a retry away
    assert _daemon_case(T0 + 30, DAEMON_RETRY_S + 5) == []  # came after the node was sized


def test_a_daemon_whose_room_kube_scheduler_gave_to_another_pod_is_not_karpenters_failure():
    """Karpenter planned the node for 4 pods and the daemon; kube-scheduler bound 5 pods there
    (one Karpenter had nominated elsewhere): the plan held the daemon, the binding did not."""
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=5, bound=5) == []
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=5, bound=5, nominated=4,
                        elsewhere=1) == []
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=5, bound=4) == ["daemons-fit"]
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=5, bound=4, nominated=4) == ["daemons-fit"]


def test_a_plan_that_left_the_daemon_out_is_never_overfilled():
    """The excuse must not swallow the failure the oracle is for (issue 51, mutant
    daemonset-overhead-ignored): a NodeClaim planned for its pods alone holds them and the
    daemon finds no room. The daemon waiting is not a pod the node held; the pods Karpenter
    nominated there and the daemon are more than it planned: Karpenter's failure."""
    # one pod planned, its own; the daemon left out of requests.pods
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=1, bound=1, nominated=1) == ["daemons-fit"]
    # Nominated events lost (rate-limited): a new NodeClaim still holds at least one pod
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=1, bound=1) == ["daemons-fit"]
    # three pods nominated there, planned for three: no room for the daemon was kept
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=3, bound=3, nominated=3) == ["daemons-fit"]
    # the same plan with the daemon counted (4), kube-scheduler binding a 4th pod: overfilled
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=4, bound=4, nominated=3, elsewhere=1) == []


def test_a_daemon_that_came_after_the_nodeclaim_takes_room_karpenter_did_not_plan():
    """A later DaemonSet's pod bound on the node counts as a pod the plan did not hold."""
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=3, bound=3, nominated=2,
                        late_daemon=True) == []
    assert _daemon_case(T0, DAEMON_RETRY_S + 5, planned=3, bound=2, nominated=2) == ["daemons-fit"]


# ---- Karpenter's log ---------------------------------------------------------------------------
def _line(level, message, error="", **extra):
    return json.dumps({"level": level, "message": message, "error": error, **extra})


def test_a_panic_a_repeated_error_and_a_refused_create_are_findings():
    rec = recording()
    panic = _line("ERROR", "Observed a panic", "runtime error: index out of range [3]")
    assert findings(rec, log_text=panic) == ["karpenter-log-clean"]
    repeated = "\n".join(_line("ERROR", "Reconciler error", f"ec2 throttled after {n}ms",
                               controller="nodeclaim.lifecycle") for n in (10, 20, 30))
    assert findings(rec, log_text=repeated) == ["karpenter-log-clean"]
    twice = "\n".join(repeated.splitlines()[:2])
    assert findings(rec, log_text=twice) == []
    refused = _line("ERROR", "failed launching nodeclaim", 'creating nodeclaim, admission '
                    'webhook "validation.karpenter.sh" denied the request')
    verdict = judge(Record(rec, log_text=refused))
    assert "refused 1 NodeClaim create" in verdict.findings[0].what


def test_lines_about_another_tests_objects_are_theirs():
    rec = recording()
    other = "\n".join(_line("ERROR", "Reconciler error", "boom", reconcileID=f"r{i}",
                            NodePool={"name": "default-ffffff"}) for i in range(3))
    assert findings(rec, log_text=other) == []
    mine = other.replace("ffffff", TID)
    assert findings(rec, log_text=mine) == ["karpenter-log-clean"]


# ---- plans are honest --------------------------------------------------------------------------
def test_nodeclaims_breaking_their_pools_requirements_or_limits_are_findings():
    pool = {"metadata": {"name": f"default-{TID}"}, "spec": {
        "limits": {"cpu": "3"},
        "template": {"spec": {"requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 3}]}}}}
    c = {"metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": f"default-{TID}",
                                               "karpenter.sh/capacity-type": "on-demand",
                                               "node.kubernetes.io/instance-type": "m5.large"}},
         "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                    "values": ["m5.large", "m5.xlarge"]}],
                  "resources": {"requests": {"cpu": "3"}}},
         "status": {"allocatable": {"cpu": "1930m"}}}
    rec = recording(*[(T0 + i, "nodeclaims", "ADDED", claim(f"c{i}", T0 + i)) for i in (1, 10, 20)])
    verdict = judge(Record(rec, pools=[pool], claims=[c]))
    whats = [f.what for f in verdict.findings]
    assert "NodeClaims break their NodePool's requirements" in whats
    assert any("capacity-type" in e for f in verdict.findings for e in f.evidence)
    assert any("minValues 3" in e for f in verdict.findings for e in f.evidence)
    assert "NodeClaims planned for more than their instance type holds" in whats
    assert "a NodePool's limits were exceeded" in whats  # c20 created while 2 x 2 cpu > 3 were in use


def _created_line(t, claim_name, pool=f"default-{TID}", controller="provisioner"):
    stamp = __import__("datetime").datetime.fromtimestamp(t, __import__("datetime").timezone.utc)
    return json.dumps({"level": "INFO", "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                       "message": "created nodeclaim", "controller": controller,
                       "NodePool": {"name": pool}, "NodeClaim": {"name": claim_name}})


def _limit_case(round_claims, *, logged=True, controller="provisioner"):
    """limits cpu 10; five one-CPU NodeClaims launched long before; one round at T0 + 60
    creates ``round_claims`` more, one CPU each, within a second of each other."""
    pool = {"metadata": {"name": f"default-{TID}"}, "spec": {"limits": {"cpu": "10"}}}
    one = {"cpu": "1", "memory": "2Gi"}
    early = [(T0 + i, "nodeclaims", "ADDED", claim(f"e{i}", T0 + i, capacity=one))
             for i in range(1, 6)]
    batch = [(T0 + 60.5, "nodeclaims", "ADDED", claim(f"r{i}", T0 + 60, capacity=one))
             for i in range(round_claims)]
    text = "\n".join([round_line(T0 + 60, "ns/w0, ns/w1")]
                     + [_created_line(T0 + 60.2, f"r{i}", controller=controller)
                        for i in range(round_claims)]) if logged else ""
    return judge(Record(recording(*early, *batch), pools=[pool], log_text=text)).findings


def test_the_nodeclaims_of_one_round_fit_together_in_what_the_limits_leave():
    """Issue 51: the same-round allowance (Karpenter's docs: an overrun by one round) let a
    round launch past the limit unseen (mutant limits-exhaustion-ignored). Within a round
    Karpenter's scheduler subtracts every new NodeClaim from what the limits leave, so the
    round's NodeClaims and the pool's known nodes together stay within the limits."""
    over = _limit_case(7)
    assert [f.what for f in over] == ["a NodePool's limits were exceeded"]
    assert "7 > limit 10" not in over[0].evidence[0] and "12 > limit 10" in over[0].evidence[0]
    assert _limit_case(5) == []  # 5 + 5 fits
    # without the round in Karpenter's log, the allowance stands (no verdict on the round)
    assert _limit_case(7, logged=False) == []
    # a disruption's replacement is not the provisioner's round
    assert _limit_case(7, controller="disruption") == []


def test_a_relaxed_nodeclaim_is_excused_only_under_best_effort():
    """Issue 51: the relaxed annotation excused a NodeClaim short of minValues whatever the
    policy; under MIN_VALUES_POLICY Strict Karpenter may never relax (mutant
    strict-read-as-best-effort: relaxes and says so)."""
    pool = {"metadata": {"name": f"default-{TID}"}, "spec": {"template": {"spec": {
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                          "values": ["c5.large", "m5.large", "r5.large", "c5.xlarge",
                                     "m5.xlarge"], "minValues": 3}]}}}}
    c = {"metadata": {"name": "c1", "annotations": {"karpenter.sh/nodeclaim-min-values-relaxed":
                                                        "true"},
                      "labels": {"karpenter.sh/nodepool": f"default-{TID}",
                                 "node.kubernetes.io/instance-type": "m5.xlarge"}},
         "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                    "values": ["c5.xlarge", "m5.xlarge"]}]}}

    def case(settings):
        return findings(recording(), pools=[pool], claims=[c], karpenter_settings=settings)
    assert case({}) == ["plans-honest"]  # the release's default: Strict
    assert case({"MIN_VALUES_POLICY": "Strict"}) == ["plans-honest"]
    assert case({"MIN_VALUES_POLICY": "BestEffort"}) == []
    assert case(None) == []  # settings unknown (eks): Karpenter's word stands


def test_a_node_without_a_label_its_pool_requires_to_exist_breaks_the_requirement():
    """Issue 51: a requirement Exists on a key the node lacks was skipped as unreadable; but
    Karpenter labels every key a pool requires to exist (a custom one with a value of its
    own), so the node lacking it is the plan breaking its pool (mutant
    exists-as-does-not-exist: a plain type for a pool requiring the GPU-count label)."""
    gpu = "karpenter.k8s.aws/instance-gpu-count"
    pool = {"metadata": {"name": f"default-{TID}"}, "spec": {"template": {"spec": {
        "requirements": [{"key": gpu, "operator": "Exists"},
                         {"key": "example.com/team", "operator": "NotIn", "values": ["a"]}]}}}}

    def case(labels):
        c = {"metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": f"default-{TID}",
                                                   **labels}}}
        return findings(recording(), pools=[pool], claims=[c])
    assert case({}) == ["plans-honest"]
    assert case({gpu: "1"}) == []  # NotIn on a key the node lacks: met


def test_a_daemon_whose_host_port_a_pod_took_does_not_fit():
    insufficient = ("False", "Unschedulable", "0/5 nodes are available: 1 node(s) didn't have "
                    "free ports for the requested pod ports.")
    assert oracles.pods.INSUFFICIENT.search(insufficient[2])


def test_a_round_at_the_node_limit_creates_no_nodeclaim():
    """limits.nodes 2: a round may create NodeClaims only while the pool holds fewer than 2
    (mutant node-limit-off-by-one: a third at the limit). Karpenter's launch-time guard
    (usage > limit) lets it through, so the check reads the round."""
    pool = {"metadata": {"name": f"default-{TID}"}, "spec": {"limits": {"nodes": "2"}}}

    def case(existing, disrupted=False):
        entries = [(T0 + i, "nodeclaims", "ADDED", claim(f"e{i}", T0 + i)) for i in
                   range(1, existing + 1)]
        if disrupted:
            entries += [(T0 + 50, "nodes", "ADDED", {**_node("n1", T0 + 2, "0.1"),
                                                     "disrupted": True})]
            entries[0] = (T0 + 1, "nodeclaims", "ADDED", claim("e1", T0 + 1, node="n1"))
        entries.append((T0 + 60.5, "nodeclaims", "ADDED", claim("r0", T0 + 60)))
        text = "\n".join([round_line(T0 + 60, "ns/w0"), _created_line(T0 + 60.2, "r0")])
        return [f.what for f in judge(Record(recording(*entries), pools=[pool],
                                             log_text=text)).findings]
    assert case(2) == ["a NodePool's limits were exceeded"]
    assert case(1) == []
    assert case(2, disrupted=True) == []  # one of them marked for deletion: not counted


def test_a_nodeclaim_planned_for_a_resource_its_type_lacks_holds_more_than_it_has():
    """Issue 51: a request for a resource the NodeClaim's allocatable does not list (GPUs on a
    plain type) was skipped; the type has none of it (mutant gpu-resource-ignored)."""
    def case(allocatable):
        c = {"metadata": {"name": "c1", "labels": {"node.kubernetes.io/instance-type": "c5.large"}},
             "spec": {"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
             "status": {"allocatable": allocatable}}
        return findings(recording(), claims=[c])
    assert case({"cpu": "1930m", "memory": "3Gi"}) == ["plans-honest"]
    assert case({"cpu": "1930m", "nvidia.com/gpu": "1"}) == []
    assert case({}) == []  # not launched yet: nothing to compare
    # gone before the run is judged (consolidated in the settle window): the recording holds it
    gone = claim("c2", T0 + 1)
    gone.update(requests={"cpu": "1", "nvidia.com/gpu": "1"},
                allocatable={"cpu": "1900m", "memory": "4086Mi", "pods": "110"})
    assert findings(recording((T0 + 1, "nodeclaims", "ADDED", gone),
                              (T0 + 50, "nodeclaims", "DELETED", gone))) == ["plans-honest"]
    # Karpenter's KWOK provider lists what a NodeClaim asked among its allocatable: the
    # catalogue says what the type has
    kwok = claim("c3", T0 + 1, itype="c5.large")
    kwok.update(requests={"cpu": "1", "nvidia.com/gpu": "1"},
                allocatable={"cpu": "1900m", "nvidia.com/gpu": "1"})
    catalogue = {"c5.large": {"cpu": "2", "memory": "4096Mi", "pods": "110"},
                 "g4dn.xlarge": {"cpu": "4", "nvidia.com/gpu": "1"}}
    assert findings(recording((T0 + 1, "nodeclaims", "ADDED", kwok)),
                    type_resources=catalogue) == ["plans-honest"]
    overlay = {"metadata": {"name": "dongles"}, "spec": {"capacity": {"nvidia.com/gpu": "1"}}}
    assert findings(recording((T0 + 1, "nodeclaims", "ADDED", kwok)), type_resources=catalogue,
                    overlays=[overlay]) == []  # a NodeOverlay gives the type the resource
    kwok.update(instance_type="g4dn.xlarge")
    assert findings(recording((T0 + 1, "nodeclaims", "ADDED", kwok)),
                    type_resources=catalogue) == []


def test_pods_pending_together_planned_in_two_rounds_are_a_finding():
    def case(second_round_at):
        entries = [(T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1)),
                   (second_round_at, "nodeclaims", "ADDED", claim("c2", second_round_at))]
        for i, c in ((1, "c1"), (2, "c2")):
            entries.append((T0 + 0.5, "pods", "ADDED", pod(f"p{i}", T0, sched=UNSCHED)))
            entries.append((T0 + 1, "events", "ADDED", event(
                "Nominated", "Pod", f"p{i}", T0 + 1, f"Pod should schedule on: nodeclaim/{c}")))
        return findings(recording(*entries))
    assert case(T0 + 1.5) == []
    assert case(T0 + 12) == ["plans-honest"]


# ---- disruption budgets ---------------------------------------------------------------------------
def _budget_case(budgets, second_at, *, first_gone=None, pool=f"default-{TID}", later=None):
    """Three ready nodes of one pool; n1 tainted at T0+50 for Underutilized, n2 at second_at."""
    entries = [(T0, "nodepools", "ADDED", {"name": pool, "created": int(T0), "deleting": None,
                                           "budgets": budgets})]
    if later:
        entries.append((later[0], "nodepools", "MODIFIED",
                        {"name": pool, "created": int(T0), "deleting": None, "budgets": later[1]}))
    for i in (1, 2, 3):
        entries += [(T0 + 1, "nodeclaims", "ADDED", claim(f"c{i}", T0 + 1, node=f"n{i}",
                                                          conditions=consolidatable(T0 + 2))),
                    (T0 + 2, "nodes", "ADDED", _node(f"n{i}", T0 + 2, "0.1"))]
    for name, at in (("n1", T0 + 50), ("n2", second_at)):
        entries += [(at, "nodes", "MODIFIED", {**_node(name, T0 + 2, "0.1"), "disrupted": True}),
                    (at + 3, "events", "ADDED", event("DisruptionTerminating", "NodeClaim",
                                                      "c" + name[1:], at + 3,
                                                      "Disrupting NodeClaim: Underutilized"))]
    if first_gone:
        entries += [(first_gone, "nodeclaims", "DELETED", claim("c1", T0 + 1, node="n1")),
                    (first_gone, "nodes", "DELETED", _node("n1", T0 + 2, "0.1"))]
    return [f.what for f in judge(Record(recording(*entries, end=T0 + 200))).findings]


EXCEEDED = "a NodePool's disruption budgets were exceeded"


def test_a_second_disruption_while_a_budget_of_one_is_spent_is_a_finding():
    assert _budget_case([{"nodes": "1"}], T0 + 80) == [EXCEEDED]
    assert _budget_case([{"nodes": "1"}], T0 + 80, first_gone=T0 + 70) == []  # the first done
    assert _budget_case([{"nodes": "2"}], T0 + 80) == []
    # a percentage rounds up: 34 % of 3 nodes is 2
    assert _budget_case([{"nodes": "34%"}], T0 + 80) == []
    assert _budget_case([{"nodes": "33%"}], T0 + 80) == [EXCEEDED]
    # a budget for another reason does not hold Underutilized
    assert _budget_case([{"nodes": "1", "reasons": ["Drifted"]}], T0 + 80) == []
    # a scheduled budget holds inside its window (T0 is 2023-11-14 22:13:20 UTC): issue 51,
    # mutant budget-window-never-opens; outside it, it does not
    assert _budget_case([{"nodes": "1", "schedule": "13 22 * * *", "duration": "10m"}],
                        T0 + 80) == [EXCEEDED]
    assert _budget_case([{"nodes": "1", "schedule": "@daily", "duration": "10m"}], T0 + 80) == []
    # a window that closes within the state lag of the disruption: the generous reading
    assert _budget_case([{"nodes": "1", "schedule": "12 22 * * *", "duration": "2m"}],
                        T0 + 39) == []


def test_a_budget_opened_before_the_disruption_allows_it():
    assert _budget_case([{"nodes": "1"}], T0 + 80, later=(T0 + 60, [{"nodes": "100%"}])) == []
    # closed again after the second began: judged by what held when it began
    assert _budget_case([{"nodes": "100%"}], T0 + 80, later=(T0 + 90, [{"nodes": "0"}])) == []
    assert _budget_case([{"nodes": "100%"}], T0 + 80, later=(T0 + 60, [{"nodes": "1"}])) == \
        [EXCEEDED]


def test_allowed_disruptions_follows_karpenter():
    assert oracles.allowed_disruptions([], 10, "Drifted") == float("inf")
    assert oracles.allowed_disruptions([{"nodes": "10%"}], 5, "Drifted") == 1
    assert oracles.allowed_disruptions([{"nodes": "0%"}], 5, "Drifted") == 0
    assert oracles.allowed_disruptions([{"nodes": "3"}, {"nodes": "50%", "reasons": ["Empty"]}],
                                       4, "Empty") == 2


# ---- it settles, protection holds --------------------------------------------------------------
def _node(name, t, price):
    return {"name": name, "created": int(t), "deleting": None, "instance_type": "m5.large",
            "capacity_type": "on-demand", "ready": int(t), "price": price}


def test_a_consolidation_that_does_not_lower_the_price_is_a_finding():
    def case(new_price):
        return findings(recording(
            (T0 + 1, "nodeclaims", "ADDED", claim("old", T0 + 1, node="n-old",
                                                  conditions=consolidatable(T0 + 1))),
            (T0 + 1, "nodes", "ADDED", _node("n-old", T0 + 1, "0.10")),
            (T0 + 50, "nodeclaims", "ADDED", claim("new", T0 + 50, node="n-new")),
            (T0 + 51, "nodes", "ADDED", _node("n-new", T0 + 51, new_price)),
            (T0 + 50, "events", "ADDED", event("DisruptionLaunching", "NodeClaim", "new", T0 + 50,
                                               "Launching NodeClaim: Underutilized/Replace")),
            (T0 + 60, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "old",
                                               T0 + 60, "Disrupting NodeClaim: "
                                                        "Underutilized/Replace"))))
    assert case("0.05") == []
    assert case("0.10") == ["it-settles"]


def _pool(consolidate_after="30s", expire_after=None):
    spec = {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": consolidate_after}}
    if expire_after:
        spec["template"] = {"spec": {"expireAfter": expire_after}}
    return {"metadata": {"name": f"default-{TID}"}, "spec": spec}


def test_the_settle_window_is_the_longest_consolidate_after_plus_karpenters_margin():
    margin = oracles.SETTLE_MARGIN_S
    assert oracles.settle_window([_pool("30s"), _pool("1m")]) == (60 + margin, "")
    assert oracles.settle_window([_pool("Never"), _pool("0s")]) == (margin, "")
    assert oracles.settle_window([_pool("Never")])[0] is None
    window, why = oracles.settle_window([_pool("0s", expire_after="60s")])
    assert window is None and "expires its nodes after 60s" in why
    assert oracles.settle_window([_pool("0s", expire_after="720h")]) == (margin, "")
    # budgets that allow no voluntary disruption: the pool consolidates nothing
    closed = _pool("5m")
    for budgets in ([{"nodes": "0"}], [{"nodes": "0%"}, {"nodes": "3"}]):
        closed["spec"]["disruption"] = {"consolidateAfter": "5m", "budgets": budgets}
        window, why = oracles.settle_window([closed])
        assert window is None and "budgets that allow no disruption" in why
        assert oracles.settle_window([closed, _pool("30s")]) == (30 + margin, "")
    for budgets in ([{"nodes": "0", "reasons": ["Drifted"]}], [{"nodes": "10%"}],
                    [{"nodes": "0", "schedule": "@daily", "duration": "1h"}]):
        closed["spec"]["disruption"] = {"consolidateAfter": "5m", "budgets": budgets}
        assert oracles.settle_window([closed]) == (300 + margin, ""), budgets
    with pytest.raises(ValueError, match="not a Go duration"):
        oracles.settle_window([_pool("30 seconds")])


def test_a_cluster_that_keeps_changing_after_the_body_did_not_settle():
    # the body ended at T0 + 100; the window is 40 s, so the watch lasts at most 120 s
    def up(name, t, **kw):  # created initialized, as KWOK's nodes come up within the second
        return {**claim(name, t, **kw), "conditions": {"Initialized": [True, int(t)]}}

    def case(*churn):
        entries = [(T0 + 1, "nodeclaims", "ADDED", up("c0", T0 + 1, node="n0"))]
        for i, t in enumerate(churn):
            entries.append((t, "nodeclaims", "ADDED", up(f"c{i + 1}", t)))
        rec = Record(recording(*entries, end=T0 + 100 + 120), settle_from=T0 + 100, settle_s=40)
        return [f for f in judge(rec).findings if f.oracle == "it-settles"]
    assert case() == []
    assert case(T0 + 110, T0 + 150) == []  # converging: quiet from +50 s for 40 s
    churning = case(T0 + 130, T0 + 165, T0 + 200)
    assert len(churning) == 1 and "never stayed unchanged for 40s" in churning[0].what
    assert churning[0].evidence == ("+30.0s nodeclaim c1 created", "+65.0s nodeclaim c2 created",
                                    "+100.0s nodeclaim c3 created")
    # a change after the watch ended (the cleanup) is not the settle window's
    assert case(T0 + 230) == []


def test_a_nodeclaim_turning_initialized_is_a_change():
    # consolidateAfter counts from a node's initialization: a replacement launching for 45 s
    # cannot be left alone before it is up, so the quiet begins there, not at its creation
    launching = claim("c1", T0 + 10, node="n1")
    up = {**launching, "conditions": {"Initialized": [True, int(T0 + 55)]}}
    rec = recording((T0 + 10, "nodeclaims", "ADDED", launching),
                    (T0 + 55, "nodeclaims", "MODIFIED", up),
                    (T0 + 60, "nodeclaims", "MODIFIED", {**up, "node": "n1"}))
    assert oracles.changes(rec, T0) == [(T0 + 10, "nodeclaim c1 created"),
                                        (T0 + 55, "nodeclaim c1 initialized")]
    # a node relaunched every 50 s, each launch 45 s, deleted 4 s after it is up: 45 s
    # without a change while each launches, yet Karpenter never left the cluster alone
    entries = []
    for i, t in enumerate((T0 + 100, T0 + 150, T0 + 200)):
        c = claim(f"r{i}", t, node=f"n{i}")
        entries += [(t, "nodeclaims", "ADDED", c),
                    (t + 45, "nodeclaims", "MODIFIED",
                     {**c, "conditions": {"Initialized": [True, int(t + 45)]}}),
                    (t + 49, "nodeclaims", "DELETED", {"name": f"r{i}"})]
    churn = recording(*entries, end=T0 + 260)
    moved = oracles.changes(churn, T0 + 90)
    spans = oracles.launching(churn)
    assert spans == [(T0 + 100, T0 + 145), (T0 + 150, T0 + 195), (T0 + 200, T0 + 245)]
    assert oracles.quiet_from(moved, T0 + 90, 40, T0 + 260, spans) is None
    assert oracles.quiet_from(moved, T0 + 90, 40, T0 + 260) == T0 + 100  # launches as quiet
    # the last one stays: quiet from its initialization
    settled = recording(*entries[:-1], end=T0 + 300)
    assert oracles.quiet_from(oracles.changes(settled, T0 + 90), T0 + 90, 40, T0 + 300,
                              oracles.launching(settled)) == T0 + 245


def test_a_pod_moving_is_a_change_and_a_status_update_is_not():
    rec = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, node="n1", phase="Running")),
                    (T0 + 20, "pods", "MODIFIED", pod("p1", T0 + 1, node="n1", phase="Failed")),
                    (T0 + 30, "pods", "MODIFIED", pod("p1", T0 + 1, node="n1", phase="Running",
                                                      deleting=int(T0 + 30))),
                    (T0 + 31, "pods", "DELETED", {"name": "p1"}),
                    (T0 + 32, "pods", "ADDED", pod("p2", T0 + 32)),
                    (T0 + 33, "pods", "MODIFIED", pod("p2", T0 + 32, node="n2")))
    assert oracles.changes(rec, T0 + 10) == [
        (T0 + 30, "pod p1 deleting"), (T0 + 31, "pod p1 gone"), (T0 + 32, "pod p2 created"),
        (T0 + 33, "pod p2 bound to n2")]


def test_a_do_not_disrupt_pod_evicted_by_consolidation_is_a_finding():
    def case(reason):
        return findings(recording(
            (T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1",
                                                  conditions=consolidatable(T0 + 1))),
            (T0 + 40, "nodeclaims", "MODIFIED", claim("c1", T0 + 1, node="n1",
                                                      deleting=int(T0 + 40),
                                                      conditions=consolidatable(T0 + 1))),
            (T0 + 2, "pods", "ADDED", pod("p1", T0 + 2, node="n1", dnd=True, phase="Running")),
            (T0 + 42, "pods", "MODIFIED", pod("p1", T0 + 2, node="n1", dnd=True,
                                              deleting=int(T0 + 42), phase="Running")),
            (T0 + 40, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "c1",
                                               T0 + 40, f"Disrupting NodeClaim: {reason}"))))
    assert case("Underutilized/Delete") == ["protection-holds"]
    assert case("Expired") == []  # expiration is forceful by design


# ---- the verdict ---------------------------------------------------------------------------------
def test_not_applicable_oracles_are_not_judged_and_unknown_names_are_refused():
    silent = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)))
    verdict = judge(Record(silent), {"no-pod-ignored": "provokes silence on purpose"})
    assert verdict.findings == [] and "no-pod-ignored" not in verdict.judged
    assert "n/a   no-pod-ignored: provokes silence on purpose" in verdict.summary()
    with pytest.raises(ValueError, match="unknown oracle"):
        judge(Record(silent), {"no-such": "x"})


def test_every_oracle_has_a_title_and_the_names_are_unique():
    assert len(set(oracles.NAMES)) == len(oracles.ORACLES) >= 6
    assert all(o.title for o in oracles.ORACLES)


def test_the_oracles_page_is_up_to_date():
    from karpenter_e2e.rendering import pages
    assert pages.main(["--check", "oracles"]) == 0, \
        "docs/oracles.md is stale: run karpenter-e2e pages"


def test_a_pod_a_pdb_covers_taken_from_a_draining_node_without_an_eviction_is_a_finding():
    pdb = {"metadata": {"name": "keep-1"},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "inflate"}}}}

    def case(how, pdbs=(pdb,), events=()):
        p = pod("p1", T0 + 2, node="n1", deleting=int(T0 + 41), phase="Running")
        p["disruption"] = how
        entries = [(T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1")),
                   (T0 + 40, "nodeclaims", "MODIFIED", claim("c1", T0 + 1, node="n1",
                                                             deleting=int(T0 + 40))),
                   (T0 + 2, "pods", "ADDED", pod("p1", T0 + 2, node="n1", phase="Running")),
                   (T0 + 41, "pods", "MODIFIED", p), *events]
        return findings(recording(*entries), pdbs=list(pdbs))
    assert case("EvictionByEvictionAPI") == []  # the API server held the budget
    assert case("") == ["protection-holds"]  # deleted: the PDB was never asked
    assert case("DeletionByPodGC") == ["protection-holds"]  # its node went before its drain
    assert case("", pdbs=()) == []  # no PDB covers it
    # deleted at the node's terminationGracePeriod: documented to bypass the PDB
    assert case("", events=[(T0 + 41, "events", "ADDED", event(
        "Disrupted", "Pod", "p1", T0 + 41, "Deleting the pod to accommodate the "
                                           "terminationTime"))]) == []
    # the event's own numbers: node terminating at +70, the pod's grace 30 s: due at +40
    assert case("", events=[(T0 + 41, "events", "ADDED", event(
        "Disrupted", "Pod", "p1", T0 + 41, _forced(T0 + 70, 30)))]) == []


def _forced(deadline, grace):
    """Karpenter's Disrupted event (terminator/events DisruptPodDelete) for a node whose
    termination time is ``deadline``, about a pod of ``grace`` s terminationGracePeriod."""
    import datetime as dt
    when = dt.datetime.fromtimestamp(deadline, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (f"Deleting the pod to accommodate the terminationTime {when}123 +0000 UTC of the "
            f"node. The pod was granted {deadline - T0 - 41:.0f} seconds of grace-period of its "
            f"{grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the "
            f"do-not-disrupt annotation.")


def test_a_force_delete_before_the_grace_period_runs_out_is_no_excuse():
    """Issue 51: a "Disrupted" event excused a protected pod's deletion whenever it came; the
    drain may force-delete a pod only once its own grace would outlast the node's termination
    time (mutant force-delete-before-grace: at once, with the node's whole grace)."""
    def case(deleted_at, deadline, grace):
        p = pod("p1", T0 + 2, node="n1", deleting=int(deleted_at), phase="Running", dnd=True)
        entries = [(T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1")),
                   (T0 + 40, "nodeclaims", "MODIFIED", claim("c1", T0 + 1, node="n1",
                                                             deleting=int(T0 + 40))),
                   (T0 + 40, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "c1",
                                                      T0 + 40, "Disrupting NodeClaim: Drifted")),
                   (T0 + 2, "pods", "ADDED", pod("p1", T0 + 2, node="n1", phase="Running",
                                                 dnd=True)),
                   (deleted_at, "events", "ADDED", event("Disrupted", "Pod", "p1", deleted_at,
                                                         _forced(deadline, grace))),
                   (deleted_at, "pods", "MODIFIED", p)]
        return findings(recording(*entries))
    assert case(T0 + 65, T0 + 70, 5) == []  # due at +65: at the grace period
    assert case(T0 + 41, T0 + 70, 5) == ["protection-holds"]  # 24 s early
    assert case(T0 + 41, T0 + 70, 30) == []  # its own grace outlasts the node's: due at once


def test_a_pod_whose_annotation_was_lifted_before_its_node_went_was_not_protected():
    rec = recording(
        (T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1",
                                              conditions=consolidatable(T0 + 1))),
        (T0 + 2, "pods", "ADDED", pod("p1", T0 + 2, node="n1", dnd=True, phase="Running")),
        (T0 + 30, "pods", "MODIFIED", pod("p1", T0 + 2, node="n1", dnd=False, phase="Running")),
        (T0 + 40, "nodeclaims", "MODIFIED", claim("c1", T0 + 1, node="n1",
                                                  deleting=int(T0 + 40),
                                                  conditions=consolidatable(T0 + 1))),
        (T0 + 42, "pods", "MODIFIED", pod("p1", T0 + 2, node="n1", dnd=False,
                                          deleting=int(T0 + 42), phase="Running")),
        (T0 + 40, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "c1", T0 + 40,
                                           "Disrupting NodeClaim: Underutilized")))
    assert findings(rec) == []


def test_karpenters_report_of_a_pod_it_cannot_place_is_known_noise():
    line = _line("ERROR", "could not schedule pod", "all available instance types exceed "
                 "limits for nodepool", controller="provisioner")
    assert findings(recording(), log_text="\n".join([line] * 5)) == []


def test_every_oracle_mutant_names_a_known_oracle():
    from karpenter_e2e.clusters.karpenter.mutants import load
    named = {m.name: m.oracle for m in load() if m.oracle}
    assert named, "no mutant proves an oracle"
    assert all(o in oracles.NAMES for o in named.values()), named


def test_a_consolidation_is_priced_as_karpenter_sees_it_through_a_node_overlay():
    rec = recording(
        (T0 + 1, "nodeclaims", "ADDED", claim("old", T0 + 1, node="n-old", itype="c5.large",
                                              conditions=consolidatable(T0 + 1))),
        (T0 + 1, "nodes", "ADDED", _node("n-old", T0 + 1, "0.085")),
        (T0 + 50, "nodeclaims", "ADDED", claim("new", T0 + 50, node="n-new", itype="m5.large")),
        (T0 + 51, "nodes", "ADDED", _node("n-new", T0 + 51, "0.096")),
        (T0 + 50, "events", "ADDED", event("DisruptionLaunching", "NodeClaim", "new", T0 + 50,
                                           "Launching NodeClaim: Underutilized")),
        (T0 + 60, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "old", T0 + 60,
                                           "Disrupting NodeClaim: Underutilized")))
    assert findings(rec) == ["it-settles"]
    overlay = {"metadata": {"name": "cheaper"}, "spec": {"price": "0.001", "requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}
    assert findings(rec, overlays=[overlay]) == []


def test_karpenters_estimate_is_not_overlaid_again():
    """A node without a price label is priced by Karpenter's own estimate (prices.py), which
    has the NodeOverlays in already: the oracle applies them to a label's price only. Here
    the old c5.large costs 0.085 - 0.01 as Karpenter sees it and its replacement 0.07: a
    saving; taking off the overlay's 0.01 again would call it a rise."""
    def rec(**source):
        old, new = _node("n-old", T0 + 1, "0.075"), _node("n-new", T0 + 51, "0.07")
        return recording(
            (T0 + 1, "nodeclaims", "ADDED", claim("old", T0 + 1, node="n-old", itype="c5.large",
                                                  conditions=consolidatable(T0 + 1))),
            (T0 + 1, "nodes", "ADDED", {**old, **source}),
            (T0 + 50, "nodeclaims", "ADDED", claim("new", T0 + 50, node="n-new",
                                                   itype="m5.large")),
            (T0 + 51, "nodes", "ADDED", {**new, **source}),
            (T0 + 50, "events", "ADDED", event("DisruptionLaunching", "NodeClaim", "new", T0 + 50,
                                               "Launching NodeClaim: Underutilized")),
            (T0 + 60, "events", "ADDED", event("DisruptionTerminating", "NodeClaim", "old",
                                               T0 + 60, "Disrupting NodeClaim: Underutilized")))
    overlay = {"metadata": {"name": "c5-cheaper"}, "spec": {"priceAdjustment": "-0.01",
               "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                 "values": ["c5.large"]}]}}
    assert findings(rec(price_from="metric"), overlays=[overlay]) == []
    assert findings(rec(), overlays=[overlay]) == ["it-settles"]  # labels: overlaid here


def test_gte_and_lte_are_inclusive_bounds():
    from karpenter_e2e.clusters.karpenter.requirements import satisfies
    cpu = "karpenter.k8s.aws/instance-cpu"
    assert satisfies({cpu: "8"}, {"key": cpu, "operator": "Gte", "values": ["8"]})
    assert not satisfies({cpu: "4"}, {"key": cpu, "operator": "Gte", "values": ["8"]})
    assert satisfies({cpu: "16"}, {"key": cpu, "operator": "Lte", "values": ["16"]})
    assert not satisfies({cpu: "32"}, {"key": cpu, "operator": "Lte", "values": ["16"]})


def test_a_pod_left_out_of_a_round_it_was_waiting_for_is_a_finding():
    start = T0 + 10

    def case(names):
        rec = recording(*[(T0 + 1, "pods", "ADDED", pod(f"p{i}", T0 + 1, sched=UNSCHED))
                          for i in (1, 2)],
                        *[(T0 + 11, "events", "ADDED", event("Nominated", "Pod", f"p{i}", T0 + 11,
                                                             "Pod should schedule on: nodeclaim/c"))
                          for i in (1, 2)], end=T0 + 60)
        log = _line("INFO", "found provisionable pod(s)", Pods=names, duration="2ms",
                    time=_iso_ms(start + 0.002))
        return findings(rec, log_text=log)
    assert case("ns/p1, ns/p2") == []
    assert case("ns/p1") == ["plans-honest"]
    assert case("ns/p1, ns/a, ns/b, ns/c, ns/d and 3 other(s)") == []  # not all named: no verdict


def test_a_pod_kube_scheduler_nominated_a_node_is_not_left_out_of_karpenters_round():
    """Seen in make e2e (volume-zones): kube-scheduler set the pod's nominatedNodeName while
    its binding waited for the volume; pod.IsProvisionable leaves such a pod out of Karpenter's
    rounds, rightly."""
    start = T0 + 10

    def case(nominated_at):
        waiting = pod("p2", T0 + 1, sched=UNSCHED)
        entries = [(T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
                   (T0 + 1, "pods", "ADDED", waiting),
                   *[(T0 + 11, "events", "ADDED", event("Nominated", "Pod", f"p{i}", T0 + 11,
                                                        "Pod should schedule on: nodeclaim/c"))
                     for i in (1, 2)]]
        if nominated_at is not None:
            entries.append((nominated_at, "pods", "MODIFIED", {**waiting, "nominated": "n9"}))
        log = _line("INFO", "found provisionable pod(s)", Pods="ns/p1", duration="2ms",
                    time=_iso_ms(start + 0.002))
        return findings(recording(*entries, end=T0 + 60), log_text=log)
    assert case(None) == ["plans-honest"]
    assert case(T0 + 8) == []
    assert case(T0 + 30) == ["plans-honest"]  # nominated long after the round: no excuse


def _iso_ms(t):
    import datetime as dt
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def test_one_reconcile_logging_an_error_per_candidate_is_one_occurrence():
    """Seen in soak 19 run 5: the disruption pass right after a restart logged "node overlays
    are not applied" once per candidate, 6 lines of one reconcile."""
    one_pass = "\n".join(_line("ERROR", "skipping, node overlays are not applied",
                               'applying nodeoverlays, nodepool "x" is awaiting evaluation',
                               controller="disruption", reconcileID="r1") for _ in range(6))
    assert findings(recording(), log_text=one_pass) == []
    loop = "\n".join(_line("ERROR", "skipping, node overlays are not applied", "awaiting",
                           controller="disruption", reconcileID=f"r{i}") for i in range(3))
    assert findings(recording(), log_text=loop) == ["karpenter-log-clean"]


def test_where_a_pod_without_a_nomination_landed_is_no_witness_of_its_round():
    """Seen in soak 20 run 3: a pod with no Nominated event (rate-limited) bound by
    kube-scheduler to a node of the next round; Karpenter had planned it in the first."""
    entries = [(T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1")),
               (T0 + 5, "nodeclaims", "ADDED", claim("c2", T0 + 5, node="n2")),
               (T0 + 0.5, "pods", "ADDED", pod("p1", T0, sched=UNSCHED)),
               (T0 + 0.5, "pods", "ADDED", pod("p2", T0, sched=UNSCHED)),
               (T0 + 1, "events", "ADDED", event("Nominated", "Pod", "p1", T0 + 1,
                                                 "Pod should schedule on: nodeclaim/c1")),
               (T0 + 3, "pods", "MODIFIED", pod("p1", T0, node="n1", phase="Running")),
               (T0 + 7, "pods", "MODIFIED", pod("p2", T0, node="n2", phase="Running"))]
    assert findings(recording(*entries)) == []


def test_a_line_about_another_tests_nodeclass_is_theirs():
    """Seen in aws-sim: the missing-AMI scenario's EC2NodeClass errors, named only by the
    EC2NodeClass field, were counted against the provisioning test running beside it."""
    theirs = "\n".join(_line("ERROR", "Reconciler error", "failed to discover any AMIs",
                             controller="nodeclass", reconcileID=f"r{i}",
                             EC2NodeClass={"name": "missing-ami-ffffff"}) for i in range(4))
    assert findings(recording(), log_text=theirs) == []
    assert findings(recording(), log_text=theirs.replace("ffffff", TID)) == ["karpenter-log-clean"]


def test_a_pod_bound_just_before_a_round_is_not_left_out_of_it():
    """Seen in soak 21 (volume-topology, there a deletion): the pod left the pending set as a
    round began; our watch saw it 0.3 s after the round's start."""
    start = T0 + 10
    rec = recording((T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED)),
                    (T0 + 1.5, "events", "ADDED", event("Nominated", "Pod", "p1", T0 + 1.5,
                                                        "Pod should schedule on: nodeclaim/c")),
                    (start + 0.3, "pods", "MODIFIED", pod("p1", T0 + 1, node="n1",
                                                          phase="Running")), end=T0 + 60)
    log = _line("INFO", "found provisionable pod(s)", Pods="other/x", duration="2ms",
                time=_iso_ms(start + 0.002))
    assert findings(rec, log_text=log) == []


def test_no_nodepools_found_while_a_nodeclass_is_replaced_is_known_noise():
    """Seen in soak 21 (drift): 3 reconciles in 33 ms, then the pool was ready."""
    burst = "\n".join(_line("ERROR", "Reconciler error", "disrupting, computing disruption "
                            "decision, creating scheduler, no nodepools found (drifted=reason)",
                            controller="disruption", reconcileID=f"r{i}") for i in range(3))
    assert findings(recording(), log_text=burst) == []


def test_noise_a_race_explains_counts_once_it_outlasts_the_race():
    """Issue 51: a noise pattern excused its error however long it went on; the race it
    stands for resolves in milliseconds, so a disruption controller that finds no pool in a
    loop (mutant disruption-finds-no-nodepools) logs past NOISE_RACE_S, and counts."""
    from karpenter_e2e.clusters.karpenter.clock import NOISE_QUIET_S, NOISE_RACE_S

    def lines(times):
        return "\n".join(_line("ERROR", "Reconciler error", "disrupting, computing disruption "
                               "decision, creating scheduler, no nodepools found",
                               controller="disruption", reconcileID=f"r{i}", time=_iso_ms(T0 + t))
                         for i, t in enumerate(times))
    assert findings(recording(), log_text=lines([0, 0.01, 0.03])) == []  # the race
    backoff = [0.005 * (2 ** n - 1) for n in range(14)]  # controller-runtime's retries, 41 s
    assert findings(recording(), log_text=lines(backoff)) == ["karpenter-log-clean"]
    # two races a quiet minute apart are two races
    again = [0, 0.01, 0.03, NOISE_QUIET_S + 5, NOISE_QUIET_S + 5.01, NOISE_QUIET_S + 5.03]
    assert findings(recording(), log_text=lines(again)) == []
    # 3 reconciles past the race: a loop
    assert findings(recording(), log_text=lines([0, NOISE_RACE_S + 1, NOISE_RACE_S + 2,
                                                 NOISE_RACE_S + 4])) == ["karpenter-log-clean"]
    # a pod Karpenter cannot place is noise by nature, round after round
    refused = "\n".join(_line("ERROR", "could not schedule pod", "incompatible with nodepool",
                              controller="provisioner", reconcileID=f"r{i}",
                              time=_iso_ms(T0 + 10 * i)) for i in range(6))
    assert findings(recording(), log_text=refused) == []


def test_a_line_naming_a_list_of_pools_names_each():
    """A controller of every pool (cloudprovider.metrics) names them as a list: the line is
    about those pools, not cluster-wide."""
    line = _line("ERROR", "Reconciler error", "no subnets found", controller="cloudprovider.metrics",
                 NodePools=[{"name": "default-xyz"}, {"name": f"default-{TID}"}])
    (parsed,) = oracles.parse_log(line)
    assert parsed.names == ("default-xyz", f"default-{TID}")


def test_a_pool_ignored_as_not_ready_is_noise_only_while_it_was_not_ready():
    """Karpenter logs "ignoring nodepool, not ready" (ERROR) in every round while a pool's
    Ready condition is not True: honest before the pool turns Ready (a loaded machine logs it
    round after round), an error loop once the watch saw it Ready (a provisioner that ignores
    a Ready pool)."""
    pool = f"default-{TID}"

    def lines(times):
        return "\n".join(_line("ERROR", "ignoring nodepool, not ready", None,
                               controller="provisioner", reconcileID=f"r{i}",
                               NodePool={"name": pool}, time=_iso_ms(T0 + t))
                         for i, t in enumerate(times))

    def pools(ready_at, seen_after=0.4):
        item = {"name": pool, "created": int(T0), "deleting": None, "budgets": []}
        return [(T0, "nodepools", "ADDED", {**item, "ready": None}),
                (ready_at + seen_after, "nodepools", "MODIFIED", {**item, "ready": ready_at})]

    early = [1, 2, 3, 4, 5, 6, 7, 8]  # rounds a second apart until the pool is Ready at T0+9
    assert findings(recording(*pools(T0 + 9)), log_text=lines(early)) == []
    # the same lines after the pool turned Ready (past the cache's lag): a loop
    late = [12, 13, 14, 15]
    assert findings(recording(*pools(T0 + 9)), log_text=lines(early + late)) == [
        "karpenter-log-clean"]
    # a loaded machine: the watch saw the transition 3.5 s late, and so did Karpenter's cache
    # (seen: lines 2.2 s after the transition, at load 28)
    assert findings(recording(*pools(T0 + 9, seen_after=3.5)),
                    log_text=lines(early + [11.2, 11.5, 12])) == []
    # no watch of the pools (a diagnosis of the log alone): a race's bound
    assert findings(recording(), log_text=lines([0, 0.5, 1])) == []
    assert findings(recording(), log_text=lines(early + late)) == ["karpenter-log-clean"]


def test_judgments_open_when_the_body_ends_are_waited_for_up_to_their_bounds():
    waiting = pod("p1", T0 + 10, sched=UNSCHED)
    rec = recording((T0 + 10, "pods", "ADDED", waiting), end=T0 + 15)
    assert oracles.open_until(Record(rec)) == T0 + 10 + DECISION_BOUND_S + 1
    rec = recording((T0 + 10, "pods", "ADDED", waiting),
                    (T0 + 11, "events", "ADDED", event("FailedScheduling", "Pod", "p1", T0 + 11)),
                    end=T0 + 15)
    assert oracles.open_until(Record(rec)) is None  # decided: nothing to wait for
    daemon = pod("d1", T0 + 10, owner="DaemonSet", owner_name="agent", target="n1",
                 sched=("False", "Unschedulable", "0/3 nodes are available: 1 Insufficient memory."))
    rec = recording((T0 + 1, "nodeclaims", "ADDED", claim("c1", T0 + 1, node="n1")),
                    (T0 + 10, "pods", "ADDED", daemon), end=T0 + 15)
    assert oracles.open_until(Record(rec)) == T0 + 10 + DAEMON_RETRY_S + 1
    rec.stopped = T0 + 40  # past both bounds: the oracles judge it
    assert oracles.open_until(Record(rec)) is None


# ---- rounds as the log tells them, and pods pending together planned in one round ----------------
def round_lines(t, pods, *, rid="r1", told=(), planned=1, to_new=None, to_existing=0,
                created=("c1",), took=0.2):
    """One provisioning round's lines, as provisioner.go and Results.Record log them: the
    round (ending at ``t``), the pods it told why not, its counts, the NodeClaims it created."""
    base = {"level": "INFO", "controller": "provisioner", "reconcileID": rid}
    lines = [{**base, "level": "DEBUG", "time": _iso_ms(t - took),
              "message": "computing scheduling decision for provisionable pod(s)"},
             {**base, "time": _iso_ms(t), "message": "found provisionable pod(s)",
              "Pods": pods, "duration": f"{took * 1000:.0f}ms"}]
    lines += [{**base, "level": "ERROR", "time": _iso_ms(t), "message": "could not schedule pod",
               "error": "all available instance types exceed limits for nodepool",
               "Pod": {"namespace": "ns", "name": n}} for n in told]
    if to_new is None:
        to_new = len(pods.split(",")) - len(told) - to_existing
    lines.append({**base, "time": _iso_ms(t), "message": "computed new nodeclaim(s) to fit pod(s)",
                  "nodeclaims": planned, "pods": to_new})
    if to_existing:
        lines.append({**base, "time": _iso_ms(t), "pods": to_existing, "nodes": 1,
                      "message": "computed unready node(s) will fit pod(s)"})
    lines += [{**base, "time": _iso_ms(t + 0.05), "message": "created nodeclaim",
               "NodeClaim": {"name": c}, "NodePool": {"name": f"default-{TID}"}} for c in created]
    return "\n".join(json.dumps(x) for x in lines)


def test_a_rounds_lines_are_read_as_one_round():
    log = round_lines(T0 + 3, "ns/p1, ns/p2, ns/p3", told=("p3",), planned=2, to_existing=0,
                      created=("c1", "c2"))
    log += "\n" + _line("INFO", "created nodeclaim", controller="disruption", reconcileID="d1",
                        NodeClaim={"name": "c9"})
    old = json.dumps({"level": "INFO", "controller": "provisioner", "reconcileID": "r1",
                      "message": "computed 1 unready node(s) will fit 2 pod(s)"})
    (r,) = oracles.rounds_logged(log + "\n" + old)
    assert (r.listed, r.told, r.planned, r.to_new, r.to_existing, r.created) == (
        3, frozenset({"ns/p3"}), 2, 2, 2, ("c1", "c2"))
    assert r.unaccounted == -2 and r.placed_new("ns/p1") is False  # some went to existing


def test_a_round_that_drops_pods_or_nodeclaims_it_planned_is_a_finding():
    pods = [(T0 + 1, "pods", "ADDED", pod(f"p{i}", T0 + 1, sched=UNSCHED)) for i in (1, 2, 3)]
    claims = [(T0 + 4, "nodeclaims", "ADDED", claim("c1", T0 + 4))]

    def case(**kw):
        return judge(Record(recording(*pods, *claims, end=T0 + 60),
                            log_text=round_lines(T0 + 3, "ns/p1, ns/p2, ns/p3", **kw))).findings

    assert [f.what for f in case(planned=1, created=("c1",), to_new=3)] == []
    # planned 3 NodeClaims, created 1, no error (a create refused ends the reconcile in one)
    (dropped,) = case(planned=3, created=("c1",))
    assert "planned 3 NodeClaim(s) for 3 pod(s) and created 1" in dropped.evidence[0]
    # took 3 pods, placed 1, told none
    (silent,) = case(planned=1, to_new=1)
    assert "2 neither placed nor told" in silent.evidence[0]
    # Karpenter at info level: pods deferred for a reserved offering are not in its log
    info = "\n".join(x for x in round_lines(T0 + 3, "ns/p1, ns/p2, ns/p3", planned=1, to_new=1)
                     .splitlines() if '"DEBUG"' not in x)
    assert findings(recording(*pods, *claims, end=T0 + 60), log_text=info) == []
    # told why for the other two: the round's accounts hold; the pods it could not place are
    # told by their FailedScheduling events alone, which this record lacks
    (told,) = case(planned=1, to_new=1, told=("p2", "p3"))
    assert told.oracle == "no-pod-ignored" and [e.split(":")[0] for e in told.evidence] == [
        "p2", "p3"]


def test_a_pod_planned_again_while_its_nodeclaim_is_still_launching_is_a_finding():
    """What a Karpenter that launches one NodeClaim a round does to pods pending together
    (mutants/round-launches-one-nodeclaim.patch) when its log is read: the second pod was
    put on a new NodeClaim in the first round, and again in the next."""
    def case(ready_at, second_at=T0 + 6):
        entries = [(T0 + 1, "pods", "ADDED", pod(f"p{i}", T0 + 1, sched=UNSCHED)) for i in (1, 2)]
        c1 = claim("c1", T0 + 3, node="n1")
        entries += [(T0 + 3, "nodeclaims", "ADDED", c1),
                    (second_at, "nodeclaims", "ADDED", claim("c2", second_at, node="n2"))]
        if ready_at:
            entries.append((ready_at, "nodes", "ADDED", {**_node("n1", ready_at, "0.1"),
                                                         "ready": ready_at}))
        log = round_lines(T0 + 3, "ns/p1, ns/p2", planned=1, to_new=2, rid="a",
                          created=("c1",)) + "\n" + round_lines(second_at, "ns/p2", rid="b",
                                                                created=("c2",))
        return judge(Record(recording(*entries, end=T0 + 60), log_text=log)).findings
    whats = {f.what for f in case(None)}
    assert "pods pending together were planned over several provisioning rounds" in whats
    # its NodeClaim came up first: its room may have gone to another pod
    assert not any("several provisioning rounds" in f.what for f in case(T0 + 4))


# ---- launches make progress ------------------------------------------------------------------------
def _runaway(launches=5, *, lands=None, taint=None, every=17.0):
    """One pod waiting from T0+1; a round every ``every`` s puts it on a new NodeClaim, whose
    node is Ready 2 s later and taken by a daemon pod; the pod lands on the ``lands``-th one
    (None: never); ``taint``: another controller's taint on every node."""
    entries = [(T0 + 1, "pods", "ADDED", pod("p1", T0 + 1, sched=UNSCHED))]
    logs = []
    for i in range(1, launches + 1):
        t = T0 + 3 + (i - 1) * every
        node = {**_node(f"n{i}", t + 2, "0.1"), "ready": t + 2}
        if taint:
            node["taints"] = [taint]
        entries += [(t, "nodeclaims", "ADDED", claim(f"c{i}", t, node=f"n{i}")),
                    (t + 2, "nodes", "ADDED", node),
                    (t + 2.5, "pods", "ADDED", pod(f"d{i}", t + 2.5, node=f"n{i}", phase="Running",
                                                   owner="DaemonSet", target=f"n{i}"))]
        logs.append(round_lines(t, "ns/p1", rid=f"r{i}", created=(f"c{i}",)))
        if lands == i:
            entries.append((t + 3, "pods", "MODIFIED", pod("p1", T0 + 1, node=f"n{i}",
                                                           phase="Running")))
            break
    end = T0 + 3 + launches * every + 20
    return judge(Record(recording(*entries, end=end), log_text="\n".join(logs))).findings


def test_a_pod_launched_for_again_and_again_while_others_take_its_nodes_is_a_runaway():
    """The held-out case of issue 51: 35 NodeClaims in 180 s for one pending pod, each node
    taken by something else before the pod could land."""
    found = _runaway(5)
    assert {f.oracle for f in found} == {"launches-progress"}
    whats = [f.what for f in found]
    assert whats[0].startswith("NodeClaims launched again and again for a waiting pod")
    assert found[0].evidence[0].startswith("p1, still waiting 11s after each came up: 5 rounds' "
                                           "NodeClaims: c1 (m5.large) of the round at")
    assert "taken by d1 (DaemonSet)" in found[0].evidence[0]
    assert whats[1].startswith("the same pod put on a new NodeClaim again by more than 3 rounds")
    assert "p1: put on a new NodeClaim by 5 rounds" in found[1].evidence[0]
    assert whats[2].startswith("NodeClaims launched for waiting pods kept coming up, round after")
    assert "5 rounds' NodeClaims came up for p1" in found[2].evidence[0]


def test_a_few_launches_before_the_pod_lands_are_no_runaway():
    assert _runaway(3) == []  # three accidents: allowed
    assert _runaway(6, lands=3) == []  # it landed on the third
    assert _runaway(6, lands=4) == []  # landed on the fourth: its four launches are the rule's few


def test_nodes_another_controller_tainted_are_no_runaway_and_karpenters_own_taints_are():
    """Upstream's chaos suite: an add-on taints every new node, and Karpenter launching again
    for the pod is right; a taint of the pool's, Karpenter's or Kubernetes' own is no excuse."""
    assert _runaway(6, taint="chaos:NoExecute") == []
    assert {f.oracle for f in _runaway(6, taint="karpenter.sh/unregistered:NoExecute")} == \
        {"launches-progress"}
    assert {f.oracle for f in _runaway(6, taint="node.kubernetes.io/not-ready:NoSchedule")} == \
        {"launches-progress"}


def test_one_round_is_no_runaway_though_its_pods_land_late_and_elsewhere():
    """Seen in explore (v1.15.0, a machine at load 25): one round's 6 NodeClaims Ready within
    3 s, kube-scheduler binding their pods 17-20 s later, one NodeClaim never getting any;
    each NodeClaim Ready at once (two at the same instant: no order among them)."""
    entries = []
    names = [f"p{i}" for i in range(1, 7)]
    for i, name in enumerate(names, 1):
        node = f"n{i}" if i < 6 else "n1"
        entries += [(T0 + 1, "pods", "ADDED", pod(name, T0 + 1, sched=UNSCHED)),
                    (T0 + 3, "nodeclaims", "ADDED", claim(f"c{i}", T0 + 3, node=f"n{i}")),
                    (T0 + 5, "nodes", "ADDED", {**_node(f"n{i}", T0 + 5, "0.1"), "ready": T0 + 5}),
                    (T0 + 25, "pods", "MODIFIED", pod(name, T0 + 1, node=node, phase="Running"))]
    log = round_lines(T0 + 3, ", ".join(f"ns/{n}" for n in names[:5]) + " and 1 other(s)",
                      planned=6, to_new=6, created=tuple(f"c{i}" for i in range(1, 7)))
    assert findings(recording(*entries, end=T0 + 60), log_text=log) == []


def test_a_log_without_reconcile_ids_gives_each_round_the_lines_that_follow_it():
    log = round_lines(T0 + 3, "ns/p1, ns/p2", planned=2, created=("c1", "c2"))
    bare = "\n".join(json.dumps({k: v for k, v in json.loads(x).items() if k != "reconcileID"})
                     for x in log.splitlines())
    deferred = json.dumps({"level": "DEBUG", "controller": "provisioner", "message":
                           "deferring scheduling decision for provisionable pod(s) to future "
                           "simulation due to limited reserved offering capacity",
                           "Pods": "ns/p3"})
    (r,) = oracles.rounds_logged(bare + "\n" + deferred)
    assert (r.created, r.deferred, r.unaccounted) == (("c1", "c2"), 1, -1)
    assert not r.placed_new("ns/p1")  # a deferred pod: the round's accounts are not whole
