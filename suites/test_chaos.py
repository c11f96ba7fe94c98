"""Chaos (upstream's test/suites/regression/chaos_test.go, "Runaway Scale-Up"): a cluster
add-on taints every new node NoExecute as it appears, so the one pod is evicted from, or
never lands on, each node Karpenter launches for it. Karpenter keeps launching, one node at a
time, and takes back the nodes left empty: the pool grows, but does not run away.
"""

import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    CAPACITY_TYPE,
    DISRUPTION_ROUND_S,
    MAX_IN_FLIGHT,
    MAX_NODES,
    ROOMY_CPU,
    TAKE_BACK_GAP_S,
    NodeTainter,
    RunawayMonitor,
    narrow,
    require,
    step,
    view,
)

pytestmark = [pytest.mark.nightly, pytest.mark.disruption_loop]

CHAOS_S = 300  # upstream's window: five minutes


@pytest.mark.scenario("chaos-runaway")
@pytest.mark.covers("node.taints")
@pytest.mark.parametrize("policy, after_s, capacity", [
    ("WhenEmptyOrUnderutilized", 0, "spot"),  # upstream: "when consolidation is enabled"
    ("WhenEmpty", 30, "on-demand"),  # upstream: "when emptiness is enabled"
], ids=["consolidation", "emptiness"])
def test_no_runaway_scale_up_when_every_node_is_tainted(nodepool_factory, inflate_factory, expect,
                                                        timings, timeline, policy, after_s,
                                                        capacity):
    """A pool with consolidation (WhenEmptyOrUnderutilized, 0s, spot) or emptiness (WhenEmpty,
    30s) and one pod; an adversary taints every new node NoExecute for five minutes:
    Karpenter launches node after node for the evicted pod, one launch in flight at a time,
    takes back the nodes left empty as it goes, and the pool stays under upstream's 35 nodes."""
    take_back_gap = after_s + TAKE_BACK_GAP_S
    with step(f"given a {capacity} {policy} pool (consolidateAfter {after_s}s) and an "
              f"adversary tainting each of its nodes NoExecute"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(CAPACITY_TYPE, "In", capacity), replacing=(CAPACITY_TYPE,))
        spec["spec"]["disruption"] = {"consolidationPolicy": policy,
                                      "consolidateAfter": f"{after_s}s"}
        # No limit that would cap a runaway before the bound does (the workshop pool's 10 CPU
        # stops at 5 nodes).
        spec["spec"]["limits"] = {"cpu": ROOMY_CPU}
        pool = nodepool_factory(spec)
    with NodeTainter(expect.kube, pool.node_selector) as adversary:
        monitor = RunawayMonitor(expect, pool, adversary, take_back_gap)
        with step(f"create inflate with 1 pod; expect fewer than {MAX_NODES} nodes and at "
                  f"most {MAX_IN_FLIGHT} NodeClaims in flight throughout {CHAOS_S}s"):
            inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
            started = time.time()
            timeline.band(started, started + CHAOS_S,
                          f"adversary: < max({MAX_NODES}, launch-scaled) nodes, <= "
                          f"{MAX_IN_FLIGHT} launches in flight")
            expect.consistently(monitor.bounded, f"NodePool {pool.name} to hold fewer than "
                                         f"max({MAX_NODES}, 1.3 x 10 x {DISRUPTION_ROUND_S}s / launch "
                                         f"interval) nodes, at most {MAX_IN_FLIGHT} NodeClaims in "
                                         f"flight, and an empty tainted node taken back at "
                                         f"least every {take_back_gap}s", CHAOS_S)

    with step("adversary stopped: expect the pod Running and no launch left in flight"):
        # Also keeps teardown from deleting the pool under a launch not yet registered, whose
        # node the KWOK provider then leaves behind (seen once, as a leaked node).
        expect.eventually_pods_running(inflate, 1)
        expect.eventually_nodeclaims(pool, lambda claims: all(
            (view.condition(c, "Initialized") or {}).get("status") == "True" for c in claims),
            f"every NodeClaim of {pool.name} Initialized")

    with step("expect the adversary to have bitten again and again"):
        assert len(adversary.tainted) >= 3, \
            f"the adversary tainted only {sorted(adversary.tainted)} in {CHAOS_S}s: Karpenter " \
            f"did not launch again for the pod, so the bounds prove nothing"
    timings.record(**monitor.record(), window_s=CHAOS_S)
