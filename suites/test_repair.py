"""Node repair (karpenter.sh "Disruption" docs, NodeRepair; upstream's
test/suites/disruption/repair_test.go): a node whose condition matches one of the cloud
provider's repair policies for longer than the policy's toleration is replaced.

The fault is the KWOK provider's own simulated one (KWOKUnhealthy=True: toleration 30s,
replace), the condition upstream's KWOK e2e injects: its Ready=False policy tolerates 10
minutes. kwok leaves a condition it does not manage in place until the node's next heartbeat
status rewrite, 10-20 minutes after the node starts (kwokctl's default stages), far past
this scenario.
"""

from datetime import UTC, datetime

import allure
import pytest

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


@pytest.mark.modes("local", reason="drives the KWOK provider's simulated repair fault "
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
    with allure.step("given a pool with one inflate pod on one node"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
        node = next(iter(expect.pods_on(expect.eventually_pods_running(inflate, 1))))
        claims = {c["metadata"]["name"] for c in expect.nodeclaims(pool)}

    with allure.step(f"set {FAULT}=True on the node"):
        since = inject_fault(expect.kube, node)
        eligible = since + TOLERATION_S
        timeline.mark(since, f"{FAULT}=True")

    with allure.step(f"expect nothing disrupted for the {TOLERATION_S}s toleration, then the "
                     f"node replaced within {ACT_S}s"):
        timeline.band(since, eligible - 1, f"toleration {TOLERATION_S}s: nothing disrupted")
        timeline.band(eligible - 1, eligible + ACT_S, f"repaired within {ACT_S}s")
        acted = expect.consistently_untouched_then_acted(
            pool, claims, eligible, ACT_S, f"{FAULT}=True on {node} passed its {TOLERATION_S}s "
                                           f"toleration")

    with allure.step("expect the unhealthy node gone and the pod Running elsewhere"):
        expect.watch_nodes_gone({node}, timeout=60, what=f"unhealthy node {node} to be gone")
        pods = expect.eventually_pods_running(inflate, 1)
        assert node not in expect.pods_on(pods), f"the pod is still on unhealthy {node}"
    timings.record(fault_to_act_s=round(acted - since, 1), toleration_s=TOLERATION_S)
