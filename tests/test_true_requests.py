"""plans-honest against the pods' true requests (issue 51): a pod's effective request as the
kube-scheduler counts it, and a NodeClaim's requests against the pods its round put there."""

import datetime as dt
import json
from decimal import Decimal

from test_oracles import T0, TID, claim, event, pod, recording

from karpenter_e2e.clusters.karpenter.resources import pod_requests, shown
from karpenter_e2e.fixtures.oracles import Record, judge
from karpenter_e2e.fixtures.timeline import compact

POOL = f"default-{TID}"


def _spec(containers=(), init=(), overhead=None, pod_level=None):
    def c(name, requests, always=False):
        return {"name": name, "resources": {"requests": requests},
                **({"restartPolicy": "Always"} if always else {})}
    spec = {"containers": [c(f"c{i}", r) for i, r in enumerate(containers)],
            "initContainers": [c(f"i{i}", r, always) for i, (r, always) in enumerate(init)]}
    if overhead:
        spec["overhead"] = overhead
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    return {"spec": spec}


def _cpu(p):
    return pod_requests(p).get("cpu")


def test_a_pods_requests_follow_the_kube_schedulers_rule():
    """component-helpers resource.PodRequests (KEP-753), what Karpenter's Ceiling calls."""
    assert _cpu(_spec([{"cpu": "100m"}, {"cpu": "200m"}])) == Decimal("0.3")
    # an init container larger than the containers: the larger of the two, not their sum
    assert _cpu(_spec([{"cpu": "100m"}], [({"cpu": "3"}, False)])) == 3
    # sidecars-and-overhead's pod: max(C + S, I + S) + O = 1.75
    sidecar = _spec([{"cpu": "100m"}], [({"cpu": "1"}, True), ({"cpu": "500m"}, False)],
                    overhead={"cpu": "250m"})
    assert _cpu(sidecar) == Decimal("1.75")
    # an init container started before the sidecar runs without it
    assert _cpu(_spec([{"cpu": "1"}], [({"cpu": "2"}, False), ({"cpu": "1"}, True)])) == 2
    # each init container runs beside the sidecars started before it, not the later ones
    assert _cpu(_spec([{"cpu": "500m"}], [({"cpu": "1"}, True), ({"cpu": "3"}, False),
                                          ({"cpu": "1"}, True)])) == 4
    # per resource: the init container's memory, the containers' CPU
    both = pod_requests(_spec([{"cpu": "2", "memory": "1Gi"}], [({"memory": "4Gi"}, False)]))
    assert both == {"cpu": 2, "memory": 4 * 2 ** 30}
    # pod-level requests replace the containers' cpu and memory, not the rest
    level = pod_requests(_spec([{"cpu": "1", "ephemeral-storage": "1Gi"}],
                               pod_level={"cpu": "2"}))
    assert level == {"cpu": 2, "ephemeral-storage": 2 ** 30}
    assert shown(level) == "cpu 2, ephemeral-storage 1Gi"


def test_the_recording_keeps_a_pods_effective_requests_and_a_nodeclaims_storage():
    obj = {"metadata": {"name": "p", "namespace": "ns"},
           **_spec([{"cpu": "100m", "ephemeral-storage": "8Gi", "hugepages-2Mi": "2Mi"}],
                   [({"cpu": "1"}, True)], overhead={"cpu": "250m"}),
           "status": {"phase": "Pending"}}
    assert compact("pods", obj)["requests"] == {"cpu": "1.35", "ephemeral-storage": "8589934592"}
    nc = {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {
          "cpu": "300m", "ephemeral-storage": "24Gi", "pods": "3"}}},
          "status": {"allocatable": {"cpu": "1900m", "ephemeral-storage": "20Gi"}}}
    item = compact("nodeclaims", nc)
    assert item["requests"]["ephemeral-storage"] == "24Gi"
    assert item["allocatable"]["ephemeral-storage"] == "20Gi"


def _line(t, name, controller="provisioner"):
    stamp = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"level": "INFO", "time": stamp, "message": "created nodeclaim",
                       "controller": controller, "NodePool": {"name": POOL},
                       "NodeClaim": {"name": name}})


def _round(t, pods):
    stamp = dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return json.dumps({"level": "INFO", "time": stamp, "message": "found provisionable pod(s)",
                       "Pods": pods, "duration": "100ms"})


def _pod(name, obj_spec):
    item = pod(name, T0 + 5)
    item["requests"] = compact("pods", {"metadata": {"name": name}, **obj_spec})["requests"]
    return (T0 + 5, "pods", "ADDED", item)


def _nominated(name, t, claim_name="c1"):
    return (t, "events", "ADDED", event("Nominated", "Pod", name, t,
                                        f"Pod should schedule on: nodeclaim/{claim_name}"))


CREATED = T0 + 10.3  # the "created nodeclaim" line; the round's nominations follow it
SIDECAR = _spec([{"cpu": "100m"}], [({"cpu": "1"}, True), ({"cpu": "500m"}, False)],
                overhead={"cpu": "250m"})  # 1.75
INIT = _spec([{"cpu": "100m"}], [({"cpu": "3"}, False)])  # 3
OVERHEAD = _spec([{"cpu": "500m", "memory": "512Mi"}], overhead={"cpu": "250m", "memory": "64Mi"})


def _plan(requests, *, pods=(("a", SIDECAR),), lost=(), later=(), controller="provisioner",
          settings=None, extra=()):
    """c1, created by the provisioner at CREATED with ``requests``; ``pods`` nominated there in
    its round (their events stamped in the line's second), ``lost`` planned there with their
    event eaten, ``later`` nominated there by a later round (in flight, 1.7 s on)."""
    c1 = claim("c1", CREATED)
    c1.update(requests=requests)
    entries = [(CREATED + 0.2, "nodeclaims", "ADDED", c1)]
    for name, spec in (*pods, *lost, *later):
        entries.append(_pod(name, spec))
    entries += [_nominated(name, CREATED + 0.01) for name, _ in pods]
    entries += [_nominated(name, CREATED + 1.7) for name, _ in later]
    text = "\n".join([_round(CREATED - 0.1, ", ".join(f"ns/{n}" for n, _ in pods)),
                      _line(CREATED, "c1", controller)])
    return judge(Record(recording(*entries, *extra), log_text=text,
                        karpenter_settings=settings)).findings


def _short(found):
    return [f for f in found if "less than the pods" in f.what]


def test_a_plan_that_holds_its_pods_true_requests_passes():
    """A sidecar pod (1.75), an init container larger than the containers (3), a RuntimeClass
    overhead (0.75 CPU, 576Mi), a pod whose Nominated event the rate limiter ate (planned
    there, 3, not counted), and a pod a later round put on the NodeClaim in flight (not in
    its requests, not counted): Karpenter's requests hold the round's pods, and a daemon's
    100m and memory on top."""
    healthy = {"cpu": "8600m", "memory": "1112Mi", "pods": "5"}
    assert _plan(healthy, pods=(("a", SIDECAR), ("b", INIT), ("c", OVERHEAD)),
                 lost=(("d", INIT),), later=(("e", INIT),)) == []
    # without the lost pod and the daemon, exactly the three: still honest
    assert _plan({"cpu": "5500m", "memory": "576Mi", "pods": "3"},
                 pods=(("a", SIDECAR), ("b", INIT), ("c", OVERHEAD))) == []


def test_the_mutants_miscounted_pods_are_findings_with_evidence():
    # init-container-requests-ignored: the init container's 3 CPU dropped
    (f,) = _short(_plan({"cpu": "100m", "pods": "1"}, pods=(("b", INIT),)))
    assert f.oracle == "plans-honest"
    assert f.evidence == ("c1 (pool default-abc123, m5.large): Karpenter's requests cpu 0.1, "
                          "what it was planned for asks cpu 3 (short cpu 2.9): b: cpu 3, pods 1",)
    # pod-overhead-ignored: 1.5 of the sidecar pod's 1.75
    (f,) = _short(_plan({"cpu": "1500m", "pods": "1"}))
    assert "short cpu 0.25" in f.evidence[0] and "a: cpu 1.75, pods 1" in f.evidence[0]
    # sidecars-as-init-containers: the sidecar taken as a plain init container, 1.25
    assert "short cpu 0.5" in _short(_plan({"cpu": "1250m", "pods": "1"}))[0].evidence[0]
    # overhead's memory dropped too
    (f,) = _short(_plan({"cpu": "750m", "memory": "512Mi", "pods": "1"},
                        pods=(("c", OVERHEAD),)))
    assert "short memory 64Mi" in f.evidence[0]


def test_only_the_creating_rounds_nominations_count():
    # a later round's nomination (after the batch window) is not the NodeClaim's plan
    assert _plan({"cpu": "1750m", "pods": "1"}, later=(("e", INIT),)) == []
    # a run whose batch stays open 3 s: nominations within 3 s of the line are the round's,
    # and the init pod planned there with the sidecar pod is counted
    widened = _plan({"cpu": "1750m", "pods": "1"}, later=(("e", INIT),),
                    settings={"BATCH_IDLE_DURATION": "3s", "BATCH_MAX_DURATION": "15s"})
    assert "e: cpu 3, pods 1" in _short(widened)[0].evidence[0]
    # the disruption controller's NodeClaims get no nominations at creation: not judged
    assert _plan({"cpu": "100m", "pods": "1"}, pods=(("b", INIT),), controller="disruption") == []
    # no log line for the NodeClaim: not judged
    c1 = claim("c1", CREATED)
    c1.update(requests={"cpu": "100m", "pods": "1"})
    rec = recording((CREATED, "nodeclaims", "ADDED", c1), _pod("b", INIT),
                    _nominated("b", CREATED))
    assert judge(Record(rec)).findings == []


def test_ephemeral_storage_past_the_disk_of_a_nodeclaim_gone_before_the_end_is_a_finding():
    """ephemeral-storage-not-fitted: three 8Gi pods planned onto a 20Gi type, the NodeClaim
    consolidated before the run is judged: the recording now keeps its storage."""
    nc = {"metadata": {"name": "c2", "creationTimestamp": "2023-11-14T22:13:30Z",
                       "labels": {"node.kubernetes.io/instance-type": "c6g.large"}},
          "spec": {"resources": {"requests": {"cpu": "300m", "ephemeral-storage": "24Gi",
                                              "pods": "3"}}},
          "status": {"allocatable": {"cpu": "1900m", "ephemeral-storage": "20Gi",
                                     "pods": "110"}}}
    item = compact("nodeclaims", nc)
    rec = recording((T0 + 1, "nodeclaims", "ADDED", item), (T0 + 50, "nodeclaims", "DELETED", item))
    (f,) = judge(Record(rec)).findings
    assert f.what == "NodeClaims planned for more than their instance type holds"
    assert f.evidence == ("c2 (c6g.large): planned ephemeral-storage 24Gi, allocatable 20Gi",)


TEAM = [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]


def _daemonset(name, *, memory="4Gi", tolerations=TEAM, created=T0, generation=1, selector=None):
    stamp = dt.datetime.fromtimestamp(created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "creationTimestamp": stamp, "generation": generation},
            "spec": {"template": {"spec": {
                "nodeSelector": selector or {"karpenter-e2e/test": TID},
                "tolerations": tolerations,
                "containers": [{"name": "d", "resources": {"requests": {
                    "cpu": "1", "memory": memory}}}]}}}}


def _daemon_plan(requests, daemonsets, *, pending=False):
    """daemonset-tolerations: c1 on the team pool (tainted team=ml), its round's one pod
    asking 1 CPU and 4Gi, and a daemon of each DaemonSet made for its node n1, Running there
    (or ``pending``)."""
    c1 = {"metadata": {"name": "c1", "labels": {"karpenter.sh/nodepool": POOL,
                                                "karpenter-e2e/test": TID,
                                                "node.kubernetes.io/instance-type": "m5.xlarge"}},
          "spec": {"taints": TEAM, "resources": {"requests": requests}},
          "status": {"nodeName": "n1", "allocatable": {"cpu": "3900m", "memory": "15Gi"}}}
    daemons = [(T0 + 20, "pods", "ADDED", pod(f"{ds}-n1", T0 + 20, owner="DaemonSet",
                                              owner_name=ds, target="n1",
                                              node="" if pending else "n1",
                                              phase="Pending" if pending else "Running"))
               for ds in (d["metadata"]["name"] for d in daemonsets)]
    text = "\n".join([_round(CREATED - 0.1, "ns/w"), _line(CREATED, "c1")])
    rec = recording(_pod("w", _spec([{"cpu": "1", "memory": "4Gi"}])),
                    _nominated("w", CREATED + 0.01), *daemons)
    return _short(judge(Record(rec, log_text=text, claims=[c1],
                               daemonsets=daemonsets)).findings)


def test_a_daemon_karpenter_surely_counted_is_part_of_the_plan():
    tolerating = _daemonset("tolerating")
    # daemon-memory-dropped: the daemon's CPU counted, its memory left out
    (f,) = _daemon_plan({"cpu": "2", "memory": "4Gi", "pods": "2"}, [tolerating])
    assert "short memory 4Gi" in f.evidence[0]
    assert "tolerating-n1 (DaemonSet tolerating): cpu 1, memory 4Gi, pods 1" in f.evidence[0]
    assert _daemon_plan({"cpu": "2", "memory": "8Gi", "pods": "2"}, [tolerating]) == []
    # the daemon left Pending for room (daemonset-tolerations under the mutant) is daemons-fit's
    # finding, its proof: this check stays out of it
    assert _daemon_plan({"cpu": "2", "memory": "4Gi", "pods": "2"}, [tolerating],
                        pending=True) == []
    # not surely counted, so not weighed: one that does not tolerate the pool's taint, one
    # created as the round began, one changed since, one selecting a label of the type
    for other in (_daemonset("untolerating", tolerations=[]),
                  _daemonset("late", created=CREATED - 1),
                  _daemonset("changed", generation=2),
                  _daemonset("arch", selector={"kubernetes.io/arch": "amd64"})):
        assert _daemon_plan({"cpu": "1", "memory": "4Gi", "pods": "1"}, [other]) == []
    # one tolerating every taint counts
    everything = _daemonset("everything", tolerations=[{"operator": "Exists"}])
    assert _daemon_plan({"cpu": "1", "memory": "4Gi", "pods": "1"}, [everything])
