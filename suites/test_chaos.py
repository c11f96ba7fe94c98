"""Chaos (upstream's test/suites/regression/chaos_test.go, "Runaway Scale-Up"): a cluster
add-on taints every new node NoExecute as it appears, so the one pod is evicted from, or
never lands on, each node Karpenter launches for it. Karpenter keeps launching, one node at a
time, and takes back the nodes left empty: the pool grows, but does not run away.
"""

import time

import allure
import pytest

from karpenter_e2e.fixtures.adversary import NodeTainter
from karpenter_e2e.fixtures.expect import condition
from karpenter_e2e.clusters.waits import Observation

pytestmark = pytest.mark.nightly

CHAOS_S = 300  # upstream's window: five minutes
# Upstream's bound: fewer than 35 nodes at any time in the window (on EC2, a launch a minute).
# kwok launches every 12-14 s here, and the default budget (10%) lets consolidation take back
# one empty node per 25-30 s, so even the pinned Karpenter grows the pool (19 nodes after 5
# minutes, measured); the launch-speed-free bound is the second one.
MAX_NODES = 35
# The adversary taints each node as it appears, before the pod can bind, so the one pod stays
# Pending and Karpenter launches again for it once the node it waited for is tainted: one
# NodeClaim in flight (launched, its node not yet tainted) at a time, two in the moment one
# hands over to the next. A runaway launches again for a pod already waiting on a launch.
MAX_IN_FLIGHT = 2


@pytest.mark.scenario("chaos-runaway")
def test_no_runaway_scale_up_when_every_node_is_tainted(nodepool_factory, inflate_factory, expect,
                                                        timings, timeline):
    """WhenEmptyOrUnderutilized (consolidateAfter 0s), spot, one pod; an adversary taints every
    new node NoExecute for five minutes: Karpenter launches node after node for the evicted
    pod, one launch in flight at a time, and the pool stays under upstream's 35 nodes."""
    with allure.step("given a spot WhenEmptyOrUnderutilized pool (consolidateAfter 0s) and an "
                     "adversary tainting each of its nodes NoExecute"):
        spec = nodepool_factory.spec("default")
        spec["spec"]["template"]["spec"]["requirements"] = [
            r for r in spec["spec"]["template"]["spec"].get("requirements", [])
            if r["key"] != "karpenter.sh/capacity-type"] + [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
        spec["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                      "consolidateAfter": "0s"}
        # No limit that would cap a runaway before the bound does (the workshop pool's 10 CPU
        # stops at 5 nodes).
        spec["spec"]["limits"] = {"cpu": "1000"}
        pool = nodepool_factory(spec)
        seen = {"nodes": 0, "in_flight": 0, "claims": set()}

        def bounded() -> Observation:
            nodes = {n.metadata.name: n for n in expect.nodes(pool)}
            claims = expect.nodeclaims(pool)
            in_flight = sorted(
                c["metadata"]["name"] for c in claims if not c["metadata"].get("deletionTimestamp")
                and not adversary.bitten(nodes.get(c.get("status", {}).get("nodeName", ""))))
            seen["nodes"] = max(seen["nodes"], len(nodes))
            seen["in_flight"] = max(seen["in_flight"], len(in_flight))
            seen["claims"] |= {c["metadata"]["name"] for c in claims}
            return Observation(len(nodes) < MAX_NODES and len(in_flight) <= MAX_IN_FLIGHT,
                               f"{len(nodes)} nodes in {pool.name} (peak {seen['nodes']}); "
                               f"{len(in_flight)} NodeClaims in flight: {in_flight}")

    with NodeTainter(expect.kube, pool.node_selector) as adversary:
        with allure.step(f"create inflate with 1 pod; expect fewer than {MAX_NODES} nodes and at "
                         f"most {MAX_IN_FLIGHT} NodeClaims in flight throughout {CHAOS_S}s"):
            inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
            started = time.time()
            timeline.band(started, started + CHAOS_S, f"adversary: < {MAX_NODES} nodes, <= "
                                                      f"{MAX_IN_FLIGHT} launches in flight")
            expect.consistently(bounded, f"NodePool {pool.name} to hold fewer than {MAX_NODES} "
                                         f"nodes and at most {MAX_IN_FLIGHT} NodeClaims in "
                                         f"flight", CHAOS_S)

    with allure.step("adversary stopped: expect the pod Running and no launch left in flight"):
        # Also keeps teardown from deleting the pool under a launch not yet registered, whose
        # node the KWOK provider then leaves behind (seen once, as a leaked node).
        expect.eventually_pods_running(inflate, 1)
        expect.eventually_nodeclaims(pool, lambda claims: all(
            (condition(c, "Initialized") or {}).get("status") == "True" for c in claims),
            f"every NodeClaim of {pool.name} Initialized")

    with allure.step("expect the adversary to have bitten again and again"):
        assert len(adversary.tainted) >= 3, \
            f"the adversary tainted only {sorted(adversary.tainted)} in {CHAOS_S}s: Karpenter " \
            f"did not launch again for the pod, so the bounds prove nothing"
    timings.record(nodes_tainted=len(adversary.tainted), peak_nodes=seen["nodes"],
                   peak_in_flight=seen["in_flight"], nodeclaims=len(seen["claims"]), window_s=CHAOS_S)
