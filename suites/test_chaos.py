"""Chaos (upstream's test/suites/regression/chaos_test.go, "Runaway Scale-Up"): a cluster
add-on taints every new node NoExecute, so the one pod is evicted from each node Karpenter
launches for it. Karpenter keeps launching, but must also take back the nodes it emptied:
the pool stays small instead of running away.
"""

import time

import allure
import pytest

from fixtures.adversary import NodeTainter
from fixtures.waits import Observation

pytestmark = pytest.mark.nightly

CHAOS_S = 300  # upstream's window: five minutes
# Upstream's bound: fewer than 35 nodes at any time in the window (on EC2, a launch a minute).
# kwok launches every 12-14 s here, and the default budget (10%) lets consolidation take back
# one empty node per 25-30 s, so even the pinned Karpenter grows the pool (peak measured in
# the README); the launch-speed-free bound is the second one: one launch per pending pod.
MAX_NODES = 35


@pytest.mark.scenario("chaos-runaway")
def test_no_runaway_scale_up_when_every_node_is_tainted(nodepool_factory, inflate_factory, expect,
                                                        timings, timeline):
    """WhenEmptyOrUnderutilized (consolidateAfter 0s), spot, one pod; an adversary taints every
    new node NoExecute for five minutes: Karpenter launches node after node for the evicted
    pod, never more than one per pending pod, and the pool stays under upstream's 35 nodes."""
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
        seen = {"nodes": 0, "claims": set(), "pods": set()}

        def bounded() -> Observation:
            count = len(expect.nodes(pool))
            seen["nodes"] = max(seen["nodes"], count)
            seen["claims"] |= {c["metadata"]["name"] for c in expect.nodeclaims(pool)}
            seen["pods"] |= {p.metadata.name for p in inflate.pods()}
            return Observation(count < MAX_NODES, f"{count} nodes in {pool.name} (peak "
                                                  f"{seen['nodes']}, {len(seen['claims'])} "
                                                  f"NodeClaims for {len(seen['pods'])} pods)")

    with NodeTainter(expect.kube, pool.node_selector) as adversary:
        with allure.step(f"create inflate with 1 pod; expect fewer than {MAX_NODES} nodes "
                         f"throughout {CHAOS_S}s"):
            inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
            started = time.time()
            timeline.band(started, started + CHAOS_S, f"adversary: fewer than {MAX_NODES} nodes")
            expect.consistently(bounded, f"NodePool {pool.name} to hold fewer than {MAX_NODES} "
                                         f"nodes", CHAOS_S)

    with allure.step("expect the adversary to have bitten, and one launch per pod it evicted"):
        assert len(adversary.tainted) >= 3, \
            f"the adversary tainted only {sorted(adversary.tainted)} in {CHAOS_S}s: Karpenter " \
            f"did not launch again for the evicted pod, so the bound proves nothing"
        # Each eviction leaves one new pod Pending, which deserves one new NodeClaim; polled
        # every second, and both live for many seconds (a launch takes 12-14 s here).
        assert len(seen["claims"]) <= len(seen["pods"]) + 1, \
            f"Karpenter launched {len(seen['claims'])} NodeClaims for {len(seen['pods'])} pods " \
            f"of one replica: more than one launch per pending pod"
    timings.record(nodes_tainted=len(adversary.tainted), peak_nodes=seen["nodes"],
                   nodeclaims=len(seen["claims"]), pods=len(seen["pods"]), window_s=CHAOS_S)
