"""Chaos (upstream's test/suites/regression/chaos_test.go, "Runaway Scale-Up"): a cluster
add-on taints every new node NoExecute as it appears, so the one pod is evicted from, or
never lands on, each node Karpenter launches for it. Karpenter keeps launching, one node at a
time, and takes back the nodes left empty: the pool grows, but does not run away.
"""

import itertools
import math
import time
from typing import Any

import pytest

from karpenter_e2e.fixtures.scenario import (
    CAPACITY_TYPE,
    POLLING_PERIOD_S,
    ROOMY_CPU,
    VALIDATION_DELAY_S,
    NodeTainter,
    Observation,
    narrow,
    require,
    step,
    view,
)

pytestmark = [pytest.mark.nightly, pytest.mark.disruption_loop]

CHAOS_S = 300  # upstream's window: five minutes
# Upstream's bound: fewer than 35 nodes at any time in the window. It holds only for slow
# enough launches. With the default budget (10%), a disruption round (a 10 s poll plus the
# 15 s validation) takes back at most ceil(nodes/10) empty nodes. With one launch every L
# seconds, the pool settles near 10 * 25 / L nodes. kwok launched every 12-14 s in one
# sitting (peaks 19-27), but every 5.4 s in another: 56 launches in 5 minutes, and the pinned
# Karpenter reached 35 while taking back 26. So the bound is upstream's 35, or 1.3x that
# settling size when launches come faster. The launch interval is the adversary's, measured
# as the median gap between its bites.
MAX_NODES = 35
ROUND_S = POLLING_PERIOD_S + VALIDATION_DELAY_S  # a disruption poll and the command's validation
BUDGET_SHARE = 0.10  # the default budget


def node_bound(bites: list[float]) -> int:
    """Fewer nodes than this at any moment: upstream's 35, or 1.3x the pool size at which the
    default budget's take-backs balance the launches, whichever is larger."""
    if len(bites) < 4:
        return MAX_NODES
    gaps = sorted(b - a for a, b in itertools.pairwise(bites))
    launch_every = max(gaps[len(gaps) // 2], 0.5)
    return max(MAX_NODES, math.ceil(1.3 * ROUND_S / launch_every / BUDGET_SHARE))
# The adversary taints each node as it appears, before the pod can bind, so the one pod stays
# Pending and Karpenter launches again for it once the node it waited for is tainted: one
# NodeClaim in flight (launched, its node not yet tainted) at a time, two in the moment one
# hands over to the next. A runaway launches again for a pod already waiting on a launch.
MAX_IN_FLIGHT = 2
# What keeps the pool bounded is Karpenter taking back the nodes left empty. Once
# consolidateAfter has passed, that takes a disruption poll (10 s) and the command's 15 s
# validation: measured at most 24.5 s past consolidateAfter in both variants (matrix control,
# 2026-11-30). While a tainted, empty node is left, Karpenter must take one of them back at
# least every consolidateAfter + 60 s. A Karpenter that stops taking them back grows the pool
# without end: 31 nodes in 5 minutes, none taken back, which stays under 35.
TAKE_BACK_GAP_S = 60


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
        seen: dict[str, Any] = {"nodes": 0, "in_flight": 0, "claims": set(), "gap": 0.0,
                                "bound": MAX_NODES}
        taken: dict[str, float] = {}  # node -> when Karpenter began taking it back

        def bounded() -> Observation:
            now = time.time()
            nodes = {n.metadata.name: n for n in expect.nodes(pool)}
            claims = expect.nodeclaims(pool)
            in_flight = sorted(
                view.name(c) for c in claims if not view.deleting(c)
                and not adversary.bitten(nodes.get(view.status(c).get("nodeName", ""))))
            for name in list(adversary.tainted):
                node = nodes.get(name)
                if name not in taken and (node is None or node.metadata.deletion_timestamp):
                    taken[name] = now
            # Tainted nodes Karpenter has left (empty: the pod cannot stay), and since when
            # it last took one back (or since the oldest of them was left, if later).
            left = [when for name, when in adversary.tainted.items() if name not in taken]
            waited = now - max([min(left)] + [t for t in taken.values() if t >= min(left)]) \
                if left else 0.0
            seen["nodes"] = max(seen["nodes"], len(nodes))
            seen["in_flight"] = max(seen["in_flight"], len(in_flight))
            seen["claims"] |= {view.name(c) for c in claims}
            seen["gap"] = max(seen["gap"], waited)
            seen["bound"] = bound = node_bound(sorted(adversary.tainted.values()))
            return Observation(len(nodes) < bound and len(in_flight) <= MAX_IN_FLIGHT
                               and waited <= take_back_gap,
                               f"{len(nodes)} nodes in {pool.name} (peak {seen['nodes']}, "
                               f"bound {bound}); "
                               f"{len(in_flight)} NodeClaims in flight: {in_flight}; "
                               f"{len(left)} tainted nodes left, none taken back for "
                               f"{waited:.0f}s ({len(taken)} taken back so far)")

    with NodeTainter(expect.kube, pool.node_selector) as adversary:
        with step(f"create inflate with 1 pod; expect fewer than {MAX_NODES} nodes and at "
                  f"most {MAX_IN_FLIGHT} NodeClaims in flight throughout {CHAOS_S}s"):
            inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
            started = time.time()
            timeline.band(started, started + CHAOS_S,
                          f"adversary: < max({MAX_NODES}, launch-scaled) nodes, <= "
                          f"{MAX_IN_FLIGHT} launches in flight")
            expect.consistently(bounded, f"NodePool {pool.name} to hold fewer than "
                                         f"max({MAX_NODES}, 1.3 x 10 x {ROUND_S}s / launch "
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
    timings.record(nodes_tainted=len(adversary.tainted), taken_back=len(taken),
                   longest_wait_for_take_back_s=round(seen["gap"], 1), peak_nodes=seen["nodes"],
                   node_bound=seen["bound"],
                   peak_in_flight=seen["in_flight"], nodeclaims=len(seen["claims"]), window_s=CHAOS_S)
