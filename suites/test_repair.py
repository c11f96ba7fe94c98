"""Node repair (karpenter.sh "Disruption" docs, NodeRepair; upstream's
test/suites/disruption/repair_test.go): a node whose condition matches one of the cloud
provider's repair policies for longer than the policy's toleration is replaced.

The fault is the KWOK provider's own simulated one (KWOKUnhealthy=True: toleration 30s,
replace), the condition upstream's KWOK e2e injects: its Ready=False policy tolerates 10
minutes. kwok leaves a condition it does not manage in place until the node's next heartbeat
status rewrite, 10-20 minutes after the node starts (kwokctl's default stages), far past
this scenario.
"""

import time
from datetime import UTC, datetime

import pytest

from karpenter_e2e.fixtures.scenario import (
    TERMINATE_FIRST_GATES,
    static,
    static_refill_s,
    step,
    view,
)

FAULT = "KWOKUnhealthy"  # kwok/cloudprovider KWOKUnhealthyCondition
TOLERATION_S = 30  # its RepairPolicy's TolerationDuration
# Repair is a disruption method: a disruption poll (10s) and the command's launch; 20 s
# more for a busy 2-core machine.
ACT_S = 40


def inject_fault(kube, node: str) -> float:
    """Set the simulated fault on ``node``, as a node problem detector would; returns its
    lastTransitionTime (whole seconds, as the API keeps it)."""
    now = datetime.now(UTC).replace(microsecond=0)
    kube.core.patch_node_status(node, {"status": {"conditions": [{
        "type": FAULT, "status": "True", "reason": "SimulatedFault",
        "message": "injected by karpenter-e2e", "lastHeartbeatTime": now.isoformat(),
        "lastTransitionTime": now.isoformat()}]}}, _request_timeout=kube.timeout)
    return now.timestamp()


@pytest.mark.modes("local", "kind", reason="drives the KWOK provider's simulated repair fault "
                                    "(aws-sim's and EKS's policies tolerate Ready=False 10+ min)")
@pytest.mark.scenario("node-repair")
@pytest.mark.disruption_loop  # repair is a disruption method: it waits on the loop
@pytest.mark.covers("node.conditions", "gates.NodeRepair")
@pytest.mark.karpenter_feature("node-repair")
@pytest.mark.karpenter_feature("kwok-unhealthy-fault")
def test_unhealthy_node_is_replaced_after_the_toleration(nodepool_factory, inflate_factory, expect,
                                                         timings, timeline):
    """A node of a one-pod pool turns unhealthy (KWOKUnhealthy=True, a repair policy with a
    30s toleration): Karpenter leaves it for the toleration, then replaces it: not before,
    not long after; the pod runs on the new node."""
    with step("given a pool with one inflate pod on one node"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
        node = next(iter(expect.pods_on(expect.eventually_pods_running(inflate, 1))))
        claims = {view.name(c) for c in expect.nodeclaims(pool)}

    with step(f"set {FAULT}=True on the node"):
        since = inject_fault(expect.kube, node)
        eligible = since + TOLERATION_S
        timeline.mark(since, f"{FAULT}=True")

    with step(f"expect nothing disrupted for the {TOLERATION_S}s toleration, then the "
              f"node replaced within {ACT_S}s"):
        timeline.band(since, eligible - 1, f"toleration {TOLERATION_S}s: nothing disrupted")
        timeline.band(eligible - 1, eligible + ACT_S, f"repaired within {ACT_S}s")
        acted = expect.consistently_untouched_then_acted(
            pool, claims, eligible, ACT_S, f"{FAULT}=True on {node} passed its {TOLERATION_S}s "
                                           f"toleration")

    with step("expect the unhealthy node gone and the pod Running elsewhere"):
        expect.watch_nodes_gone({node}, timeout=60, what=f"unhealthy node {node} to be gone")
        pods = expect.eventually_pods_running(inflate, 1)
        assert node not in expect.pods_on(pods), f"the pod is still on unhealthy {node}"
    timings.record(fault_to_act_s=round(acted - since, 1), toleration_s=TOLERATION_S)


# Static pools at their node limit (replicas 2 = limits.nodes 2): repair reserves a node for the
# replacement it stages (disruption/repair.go, ReserveNodeCount), so it cannot replace first.
def static_pool_with_an_unhealthy_node(nodepool_factory, expect, timeline):
    """A static pool at its limit (replicas 2, limits.nodes 2), the fault set on one of its
    nodes: the pool, all its NodeClaims, the sick one's NodeClaim and node, and when the
    fault's toleration ends."""
    pool = nodepool_factory(static(nodepool_factory.spec("default"), replicas=2, node_limit=2))
    claims = expect.eventually_static_pool_full(pool, 2)
    sick = claims[0]
    node = view.status(sick)["nodeName"]
    since = inject_fault(expect.kube, node)
    timeline.mark(since, f"{FAULT}=True on {node}")
    return pool, {view.name(c) for c in claims}, view.name(sick), node, since + TOLERATION_S


@pytest.mark.modes("local", "kind", reason="drives the KWOK provider's simulated repair fault")
@pytest.mark.scenario("static-repair-held-at-limit")
@pytest.mark.disruption_loop
@pytest.mark.covers("gates.TerminateFirstRepair", "nodepool.limits.nodes.static")
@pytest.mark.karpenter_feature("node-repair")
@pytest.mark.karpenter_feature("kwok-unhealthy-fault")
@pytest.mark.karpenter_feature("static-capacity")
@pytest.mark.feature_gate("StaticCapacity")
def test_a_static_pool_at_its_node_limit_keeps_its_unhealthy_node(nodepool_factory, expect,
                                                                  timeline):
    """TerminateFirstRepair off (the default); a node of a static pool at its node limit
    (replicas 2, limits.nodes 2) turns unhealthy: Karpenter keeps both NodeClaims through the
    30s toleration and the window in which node-repair shows it replacing a node (40s)."""
    with step(f"given a static pool at its node limit, {FAULT}=True on one node"):
        pool, claims, _, _, eligible = static_pool_with_an_unhealthy_node(
            nodepool_factory, expect, timeline)

    with step(f"expect nothing disrupted through the toleration and {ACT_S}s after it"):
        # Karpenter's word for this, "static NodePool is at its node limit and cannot stage a
        # replacement", is a DisruptionBlocked event, and its recorder drops a DisruptionBlocked
        # event about a node for 2 minutes after the last one (the key is the reason and the
        # node's UID, not the message): a fresh node's "isn't initialized nor registered" hides
        # it until then. So the scenario holds for the window a repair would act in instead.
        timeline.band(eligible - 1, eligible + ACT_S, f"kept for {ACT_S}s after the toleration")
        expect.consistently_nodeclaims_untouched(pool, claims, eligible + ACT_S - time.time())


@pytest.mark.modes("local", "kind", reason="drives the KWOK provider's simulated repair fault")
@pytest.mark.scenario("static-repair-terminate-first")
@pytest.mark.disruption_loop
@pytest.mark.covers("gates.TerminateFirstRepair", "nodepool.limits.nodes.static")
@pytest.mark.karpenter_settings(**TERMINATE_FIRST_GATES)
@pytest.mark.karpenter_feature("node-repair")
@pytest.mark.karpenter_feature("kwok-unhealthy-fault")
@pytest.mark.karpenter_feature("static-capacity")
@pytest.mark.karpenter_feature("terminate-first-repair")
@pytest.mark.feature_gate("StaticCapacity")
def test_terminate_first_repairs_a_static_pool_within_its_limit(nodepool_factory, expect, cluster,
                                                                timeline, timings):
    """TerminateFirstRepair on; the same unhealthy node: after the toleration Karpenter deletes
    its NodeClaim first and the pool refills to 2 NodeClaims, never holding more than 2."""
    with step(f"given a static pool at its node limit, {FAULT}=True on one node"):
        pool, claims, sick, node, eligible = static_pool_with_an_unhealthy_node(
            nodepool_factory, expect, timeline)

    with expect.throughout(expect.nodeclaims_at_most(pool, 2),
                           f"NodePool {pool.name} to hold at most 2 NodeClaims (limits.nodes), "
                           "deleting ones included"):
        with step(f"expect the unhealthy NodeClaim deleted (not replaced first) within "
                  f"{ACT_S}s of the toleration, then the pool refilled"):
            timeline.band(eligible - 1, eligible + ACT_S, f"deleted within {ACT_S}s")
            acted = expect.consistently_untouched_then_acted(
                pool, claims, eligible, ACT_S, f"{FAULT}=True on {node} passed its "
                                               f"{TOLERATION_S}s toleration", going={sick})
            fresh = expect.eventually_static_pool_full(pool, 2, static_refill_s(cluster.info))
            kept = {view.name(c) for c in fresh} & claims
            assert kept == claims - {sick}, \
                f"the healthy NodeClaim should stay: {sorted(kept)} of {sorted(claims)} left"
    timings.record(fault_to_act_s=round(acted - (eligible - TOLERATION_S), 1))
