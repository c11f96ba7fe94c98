"""Consolidation (workshop 003): empty nodes go after consolidateAfter; underused ones shrink."""

import time

import allure
import pytest

from fixtures.expect import INSTANCE_TYPE, price
from fixtures.timings import timestamp
from fixtures.waits import Observation

CONSOLIDATE_AFTER = 30  # seconds, the workshop's consolidateAfter
# Karpenter's own loop periods bound how late an empty node may go (pkg/controllers/disruption):
# the disruption loop polls every 10s, then an emptiness command waits 15s before it is
# re-validated and executed; deleting a KWOK node takes a few seconds more.
POLLING_PERIOD, VALIDATION_DELAY, TERMINATION = 10, 15, 10
TOLERANCE = POLLING_PERIOD + VALIDATION_DELAY + TERMINATION
DEDUPE = 10  # pkg/controllers/nodeclaim/podevents: lastPodEventTime is written at most every 10s


def last_pod_event(claims) -> float:
    return max((timestamp(c.get("status", {}).get("lastPodEventTime")) or 0.0) for c in claims)


@pytest.mark.scenario("consolidation-empty")
def test_empty_node_is_removed_after_consolidate_after(nodepool_factory, inflate_factory, expect,
                                                       timings):
    """WhenEmpty, consolidateAfter 30s; scale to 0: the node stays ~30s, then goes in time."""
    with allure.step("given a WhenEmpty pool (consolidateAfter 30s) and inflate at 3"):
        pool = nodepool_factory("default", spec={"disruption": {
            "consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{CONSOLIDATE_AFTER}s"}})
        inflate = inflate_factory(replicas=3, node_selector=pool.template_labels)
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 3)))

        # Karpenter records a node's last pod event at most once per 10s (podevents dedupe);
        # let that window pass so the emptying below is recorded, not folded into the binding.
        bound = last_pod_event(expect.eventually_nodeclaims(
            pool, lambda cs: bool(cs) and time.time() - last_pod_event(cs) > DEDUPE,
            f"{DEDUPE}s to pass since the nodes' last pod event"))

    with allure.step("scale inflate to 0"):
        inflate.scale(0)
        expect.eventually_pods_running(inflate, 0)

    with allure.step("expect the empty nodes to be gone within consolidateAfter + tolerance"):
        # Karpenter's own record of when the nodes emptied starts its consolidateAfter clock.
        claims = expect.eventually_nodeclaims(
            pool, lambda cs: last_pod_event(cs) > bound, "the NodeClaims to record the emptying")
        emptied = last_pod_event(claims)
        deadline = emptied + CONSOLIDATE_AFTER + TOLERANCE
        ends = expect.watch_nodeclaims_end(
            pool, {c["metadata"]["name"] for c in claims}, timeout=max(deadline - time.time(), 1),
            what=f"empty NodeClaims of nodes {sorted(nodes)} to be consolidated")
        gone_at = expect.watch_nodes_gone(nodes, timeout=max(deadline - time.time(), 1),
                                          what=f"empty nodes {sorted(nodes)} to be removed")

    with allure.step("expect Karpenter to have decided only once consolidateAfter had passed"):
        # Its decision points, not the deletion that follows them: the Consolidatable condition
        # (set when consolidateAfter has passed since the last pod event) and the NodeClaim's
        # deletionTimestamp. Both timestamps have 1s resolution: allow that much.
        for end in ends.values():
            assert end.consolidatable_at is not None and end.deleting_at is not None, \
                f"NodeClaim {end.name} was removed without being seen Consolidatable and " \
                f"deleting: {end}"
            marked, deleted = end.consolidatable_at - emptied, end.deleting_at - emptied
            assert marked >= CONSOLIDATE_AFTER - 1, \
                f"NodeClaim {end.name} marked Consolidatable {marked:.0f}s after it emptied, " \
                f"before consolidateAfter={CONSOLIDATE_AFTER}s"
            assert deleted >= CONSOLIDATE_AFTER - 1, \
                f"NodeClaim {end.name} deleted {deleted:.0f}s after it emptied, " \
                f"before consolidateAfter={CONSOLIDATE_AFTER}s"
        waited = gone_at - emptied
    decided = max(e.deleting_at for e in ends.values()) - emptied
    timings.record(empty_to_consolidatable_s=round(max(e.consolidatable_at for e in ends.values())
                                                   - emptied, 1),
                   empty_to_decided_s=round(decided, 1), empty_to_deleted_s=round(waited, 1),
                   consolidate_after_s=CONSOLIDATE_AFTER, tolerance_s=TOLERANCE)


@pytest.mark.scenario("consolidation-underutilized")
def test_underutilized_nodes_are_replaced_by_cheaper_ones(nodepool_factory, inflate_factory,
                                                          expect, timings):
    """WhenEmptyOrUnderutilized; scale 10 -> 2: fewer or cheaper nodes, pods keep running."""
    with allure.step("given the default pool (limit raised to 100 CPU) and inflate at 10"):
        pool = nodepool_factory("default", spec={"limits": {"cpu": "100"}})
        inflate = inflate_factory(replicas=10, node_selector=pool.template_labels)
        before = expect.pods_on(expect.eventually_pods_running(inflate, 10))
        cost_before = sum(price(n) for n in before.values())

    with allure.step("scale inflate to 2"):
        inflate.scale(2)
        scaled = time.time()

    with allure.step("expect Karpenter to consolidate: cheaper nodes, both pods Running"):
        def cheaper() -> Observation:
            nodes = expect.nodes(pool)
            cost = sum(price(n) for n in nodes)
            pods = expect.live_pods(inflate)
            running = [p for p in pods if p.status.phase == "Running"]
            ok = cost < cost_before and len(nodes) <= len(before) and len(running) == 2
            return Observation(ok, f"{len(nodes)} nodes costing ${cost:.4f}/h "
                                   f"({', '.join(n.metadata.labels[INSTANCE_TYPE] for n in nodes)}); "
                                   f"{len(running)} Running pods", nodes)

        after = expect.eventually(cheaper, f"nodes cheaper than ${cost_before:.4f}/h running "
                                            f"the 2 remaining pods", timeout=240)
        expect.eventually_pods_running(inflate, 2)
    timings.record(scale_in_to_consolidated_s=round(time.time() - scaled, 1),
                   cost_before_per_h=round(cost_before, 4),
                   cost_after_per_h=round(sum(price(n) for n in after), 4),
                   nodes_before=len(before), nodes_after=len(after))
    timings.notes["types"] = (f"{sorted(n.metadata.labels[INSTANCE_TYPE] for n in before.values())}"
                              f" -> {sorted(n.metadata.labels[INSTANCE_TYPE] for n in after)}")
