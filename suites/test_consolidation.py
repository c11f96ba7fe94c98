"""Consolidation (workshop 003): empty nodes go after consolidateAfter; underused ones shrink."""

import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    CAPACITY_TYPE,
    DELETION_COST,
    DISRUPTION_TOLERANCE_S as TOLERANCE,
    INSTANCE_TYPE,
    NODEPOOL,
    NOMINATION_WINDOW_S,
    POD_EVENT_DEDUPE_S as DEDUPE,
    ROOMY_CPU,
    Observation,
    describe_claims,
    narrow,
    require,
    step,
    timestamp,
    turned_at,
    view,
)

# These scenarios wait on Karpenter's disruption loop, which acts on one command at a time for
# the whole cluster: one of them at a time per Karpenter (the runner's lanes; README).
pytestmark = pytest.mark.disruption_loop

CONSOLIDATE_AFTER = 30  # seconds, the workshop's consolidateAfter


def last_pod_event(claims) -> float:
    return max((timestamp(view.status(c).get("lastPodEventTime")) or 0.0) for c in claims)


def emptying_recorded(claims, bound: float) -> bool:
    """Every NodeClaim's lastPodEventTime is past the binding's (``bound``): Karpenter recorded
    the pods going. One it marks Consolidatable, deletes or lets go before that ran its
    consolidateAfter from the binding, not the emptying: that is decided, not waited out."""
    if not claims:
        raise AssertionError("the NodeClaims were gone before Karpenter recorded the emptying "
                             f"(lastPodEventTime never past the binding's {bound:.0f})")
    for c in claims:
        early = (view.condition(c, "Consolidatable") or {}).get("status") == "True" \
            or view.deleting(c)
        assert not (early and last_pod_event([c]) <= bound), \
            f"NodeClaim {view.name(c)} went Consolidatable or deleting with lastPodEventTime " \
            f"still the binding's ({view.status(c).get('lastPodEventTime')}): Karpenter never " \
            f"recorded its pods going, so consolidateAfter ran from their binding (the " \
            f"podevents race of kubernetes-sigs/karpenter#3147, docs/findings.md): " \
            f"{describe_claims([c])}"
    return all(last_pod_event([c]) > bound for c in claims)


@pytest.mark.scenario("consolidation-empty")
@pytest.mark.covers("nodepool.consolidationPolicy.WhenEmpty", "nodepool.consolidateAfter")
def test_empty_node_is_removed_after_consolidate_after(nodepool_factory, inflate_factory, expect,
                                                       timings, timeline):
    """WhenEmpty, consolidateAfter 30s; scale to 0: the node stays ~30s, then goes in time."""
    with step("given a WhenEmpty pool (consolidateAfter 30s) and inflate at 3"):
        pool = nodepool_factory("default", spec={"disruption": {
            "consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{CONSOLIDATE_AFTER}s"}})
        # A grace period, as most apps have: with the workshop's 0 the API server deletes the
        # pods at once and Karpenter may miss the emptying (podevents race, docs/findings.md).
        inflate = inflate_factory(replicas=3, node_selector=pool.template_labels,
                                  extra_pod_spec={"terminationGracePeriodSeconds": 30})
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 3)))

        # Karpenter records a node's last pod event at most once per 10s (podevents dedupe);
        # let that window pass so the emptying below is recorded, not folded into the binding.
        bound = last_pod_event(expect.eventually_nodeclaims(
            pool, lambda cs: bool(cs) and time.time() - last_pod_event(cs) > DEDUPE,
            f"{DEDUPE}s to pass since the nodes' last pod event"))

    with step("scale inflate to 0"):
        inflate.scale(0)
        expect.eventually_pods_running(inflate, 0)

    with step("expect the empty nodes to be gone within consolidateAfter + tolerance"):
        # Karpenter's own record of when the nodes emptied starts its consolidateAfter clock.
        claims = expect.eventually_nodeclaims(
            pool, lambda cs: emptying_recorded(cs, bound), "the NodeClaims to record the emptying")
        emptied = last_pod_event(claims)
        deadline = emptied + CONSOLIDATE_AFTER + TOLERANCE
        timeline.mark(emptied, "emptied (lastPodEventTime)")
        timeline.band(emptied + CONSOLIDATE_AFTER - 1, deadline, f"consolidateAfter "
                      f"{CONSOLIDATE_AFTER}s … +{TOLERANCE}s: Consolidatable, deleted, gone")
        ends = expect.watch_nodeclaims_end(
            pool, {view.name(c) for c in claims}, timeout=max(deadline - time.time(), 1),
            what=f"empty NodeClaims of nodes {sorted(nodes)} to be consolidated")
        gone_at = expect.watch_nodes_gone(nodes, timeout=max(deadline - time.time(), 1),
                                          what=f"empty nodes {sorted(nodes)} to be removed")

    with step("expect Karpenter to have decided only once consolidateAfter had passed"):
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
@pytest.mark.covers("nodepool.consolidationPolicy.WhenEmptyOrUnderutilized")
@pytest.mark.launch_latency
def test_underutilized_nodes_are_replaced_by_cheaper_ones(nodepool_factory, inflate_factory,
                                                          expect, timings, timeline,
                                                          launch_latency):
    """WhenEmptyOrUnderutilized; scale 10 -> 2: a cheaper replacement, pods keep running.
    Nodes launch as slowly as a cloud's (the harness's launch latency): the old node must
    wait for its replacement to come up."""
    with step("given the default pool (limit raised to 100 CPU) and inflate at 10"):
        pool = nodepool_factory("default", spec={"limits": {"cpu": "0"}})
        inflate = inflate_factory(replicas=10, node_selector=pool.template_labels)
        expect.planned_together(inflate, 10, lambda: nodepool_factory.patch(
            pool, {"spec": {"limits": {"cpu": ROOMY_CPU}}}))
        before = expect.pods_on(expect.eventually_pods_running(inflate, 10))
        cost_before = sum(expect.price(n) for n in before.values())
        old_claims = {view.name(c) for c in expect.nodeclaims(pool)}
        # Karpenter packs a batch of pending pods onto as few nodes as fit them.
        assert len(old_claims) == 1, f"10 one-CPU pods on {len(old_claims)} NodeClaims, not one"

    with step("scale inflate to 2"):
        inflate.scale(2)
        scaled = time.time()
        # consolidateAfter, a disruption poll, the 15s validation, a replacement launched and
        # initialized, the old node drained: measured 53-56s in all with KWOK's instant
        # launch; the launch latency on top.
        bound = CONSOLIDATE_AFTER + 90 + launch_latency
        timeline.band(scaled, scaled + bound, f"underused NodeClaims replaced "
                      f"(consolidateAfter + 90s + {launch_latency:g}s launch)")

    with step("expect Karpenter to replace the underused nodes with cheaper ones"):
        ends = expect.watch_nodeclaims_end(pool, old_claims, timeout=bound,
                                           what=f"underused NodeClaims {sorted(old_claims)} to go")
        pods = expect.eventually_pods_running(inflate, 2)
        after = list(expect.pods_on(pods).values())
        claims = expect.nodeclaims(pool)
        cost_after = sum(expect.price(n) for n in expect.nodes(pool))
        assert cost_after < cost_before, \
            f"the pool costs ${cost_after:.4f}/h after consolidation, ${cost_before:.4f}/h before"
        assert len(claims) <= len(old_claims), \
            f"{len(claims)} NodeClaims after consolidation, {len(old_claims)} before"
        # 10 one-CPU pods fit on one node, which no deletion alone can empty while 2 pods
        # remain: Karpenter must launch a cheaper replacement, ready before the old one went.
        ready = sorted(turned_at(c, "Initialized") for c in claims
                       if view.name(c) not in old_claims
                       and (view.condition(c, "Initialized") or {}).get("status") == "True")
        first_deleted = min(e.deleting_at for e in ends.values() if e.deleting_at)
        assert ready, f"no replacement NodeClaim: {describe_claims(claims)}"
        assert ready[0] <= first_deleted + 1, \
            f"an underused NodeClaim was deleted {first_deleted - scaled:.0f}s after the scale-in, " \
            f"before its replacement initialized ({ready[0] - scaled:.0f}s)"
    timings.record(scale_in_to_consolidated_s=round(max(e.gone_at for e in ends.values()) - scaled, 1),
                   cost_before_per_h=round(cost_before, 4), cost_after_per_h=round(cost_after, 4),
                   nodes_before=len(before), nodes_after=len(after))
    timings.notes["types"] = (f"{sorted(n.metadata.labels[INSTANCE_TYPE] for n in before.values())}"
                              f" -> {sorted(n.metadata.labels[INSTANCE_TYPE] for n in after)}")


def spot_node_left_underused(nodepool_factory, inflate_factory, expect):
    """The default pool on spot alone (limit raised to 100 CPU), inflate at 10 on one spot
    NodeClaim, then scaled to 2: the node is underused, and only a spot node may replace it."""
    with step("given the default pool on spot only (limit 100 CPU) and inflate at 10"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(CAPACITY_TYPE, "In", "spot"), replacing=(CAPACITY_TYPE,))
        pool = nodepool_factory(spec, spec={"limits": {"cpu": "0"}})
        inflate = inflate_factory(replicas=10, node_selector=pool.template_labels)
        expect.planned_together(inflate, 10, lambda: nodepool_factory.patch(
            pool, {"spec": {"limits": {"cpu": ROOMY_CPU}}}))
        before = expect.pods_on(expect.eventually_pods_running(inflate, 10))
        old = {view.name(c) for c in expect.nodeclaims(pool)}
        assert len(old) == 1, f"10 one-CPU pods on {len(old)} NodeClaims, not one"
    with step("scale inflate to 2"):
        inflate.scale(2)
    return pool, inflate, before, old, time.time()


@pytest.mark.scenario("spot-to-spot-consolidation")
@pytest.mark.covers("gates.SpotToSpotConsolidation")
@pytest.mark.karpenter_settings(SpotToSpotConsolidation="true")
@pytest.mark.karpenter_feature("spot-to-spot-consolidation")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's feature gates in local and kind mode")
def test_spot_to_spot_replaces_an_underused_spot_node(nodepool_factory, inflate_factory,
                                                      expect):
    """SpotToSpotConsolidation on; a spot node left with 2 of its 10 pods: Karpenter replaces
    it with a cheaper spot node (ready before the old one is deleted), pods kept running."""
    pool, inflate, before, old, scaled = spot_node_left_underused(nodepool_factory,
                                                                  inflate_factory, expect)
    with step("expect a cheaper spot replacement, ready before the old node went"):
        ends = expect.watch_nodeclaims_end(pool, old, timeout=CONSOLIDATE_AFTER + 90,
                                           what=f"underused spot NodeClaim {sorted(old)} to go")
        after = list(expect.pods_on(expect.eventually_pods_running(inflate, 2)).values())
        claims = [c for c in expect.nodeclaims(pool) if view.name(c) not in old]
        assert claims, "no replacement NodeClaim: the 2 pods could not have stayed"
        types = {n.metadata.name: n.metadata.labels.get(CAPACITY_TYPE) for n in after}
        assert set(types.values()) == {"spot"}, f"replacement nodes' capacity types: {types}"
        cost_before, cost_after = sum(expect.price(n) for n in before.values()), \
            sum(expect.price(n) for n in expect.nodes(pool))
        assert cost_after < cost_before, \
            f"the pool costs ${cost_after:.4f}/h after, ${cost_before:.4f}/h before"
        ready = sorted(turned_at(c, "Initialized")
                       for c in claims if view.is_true(c, "Initialized"))
        deleted = min(e.deleting_at for e in ends.values() if e.deleting_at)
        assert ready and ready[0] <= deleted + 1, \
            f"the old spot NodeClaim was deleted {deleted - scaled:.0f}s after the scale-in, " \
            f"before a replacement initialized ({describe_claims(claims)})"


@pytest.mark.scenario("spot-to-spot-disabled")
@pytest.mark.covers("gates.SpotToSpotConsolidation")
def test_without_spot_to_spot_an_underused_spot_node_stays(nodepool_factory, inflate_factory,
                                                           expect):
    """SpotToSpotConsolidation off (the default); the same underused spot node: Karpenter
    says it cannot replace a spot node with a spot node, and keeps it."""
    pool, _, before, old, _ = spot_node_left_underused(nodepool_factory, inflate_factory,
                                                       expect)
    with step("expect Karpenter to say spot-to-spot is disabled, and keep the node"):
        names = old | {n.metadata.name for n in before.values()}
        expect.eventually_karpenter_says(
            r"SpotToSpotConsolidation is disabled", about=names,
            timeout=CONSOLIDATE_AFTER + 60)
        expect.consistently_nodeclaims_untouched(pool, old, 20)


# pkg/controllers/pod/deletioncost/controller.go: the ranking runs once a minute, and only when
# the cluster's consolidation state changed since its last run.
DELETION_COST_INTERVAL_S = 60


@pytest.mark.scenario("pod-deletion-cost")
@pytest.mark.covers("gates.PodDeletionCostManagement")
@pytest.mark.karpenter_settings(PodDeletionCostManagement="true")
@pytest.mark.karpenter_feature("pod-deletion-cost")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's feature gates in local and kind mode")
def test_pods_on_the_node_karpenter_would_disrupt_first_get_the_lowest_deletion_cost(
        nodepool_factory, inflate_factory, expect, timeline, timings):
    """PodDeletionCostManagement on; a 3-CPU ReplicaSet pod on one pool's node and a 1-CPU one
    on another's, both pools' budgets 0, then 100%: with 0 no pod gets a deletion cost; then
    the pod on the dearer node gets -2 and the other -1 (Karpenter's consolidation order:
    savings ratio, price over reschedule cost), so a scale-in removes the pod whose node
    Karpenter would free first."""
    with step("given two pools with a disruption budget of 0, a 3-CPU pod on one and a "
              "1-CPU pod on the other"):
        closed = {"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}
        pools = {size: nodepool_factory("default", name=f"cost-{size}", **closed)
                 for size in ("big", "small")}
        # One pool per pod, so each pod's node is Karpenter's pick for it alone, never the
        # kube-scheduler's choice between two new nodes.
        work = {size: inflate_factory(size, replicas=1, cpu=cpu,
                                      node_selector={NODEPOOL: pools[size].name})
                for size, cpu in (("big", "3"), ("small", "1"))}
        pods = {size: expect.eventually_pods_running(w, 1)[0] for size, w in work.items()}
        node = {size: n for size in pods for n in expect.pods_on([pods[size]]).values()}
        price = {size: expect.price(n) for size, n in node.items()}
        assert price["big"] > price["small"], \
            f"the big pod's node costs ${price['big']}/h, the small one's " \
            f"${price['small']}/h: the order this scenario asserts needs them apart"

    def costs() -> dict[str, str | None]:
        return {size: (p.metadata.annotations or {}).get(DELETION_COST)
                for size, w in work.items() for p in expect.live_pods(w)}

    def none_annotated() -> Observation:
        now = costs()
        return Observation(not any(now.values()), f"deletion costs {now}")

    with step("expect no deletion cost while the budgets allow no disruption, until "
              "Karpenter's nominations have run out"):
        # A nominated node ranks as "cleanup only", like one the budget leaves out, and a
        # nomination running out is no state change; so the budgets change once the window
        # from the last binding has passed (as balanced-approves does).
        bound = max(c.last_transition_time.timestamp() for p in pods.values()
                    for c in p.status.conditions if c.type == "PodScheduled")
        expect.consistently(none_annotated, "no pod to carry a deletion cost under budget 0",
                            max(bound + NOMINATION_WINDOW_S + 2 - time.time(), 1))

    with step("open both budgets to 100%: expect -2 on the dearer node's pod, -1 on "
              "the other"):
        for pool in pools.values():
            nodepool_factory.patch(pool, {"spec": {"disruption": {"budgets": [
                {"nodes": "100%"}]}}})
        changed = time.time()
        timeline.band(changed, changed + DELETION_COST_INTERVAL_S + 30,
                      f"ranked within {DELETION_COST_INTERVAL_S}s + 30s")
        want = {"big": "-2", "small": "-1"}
        expect.eventually(lambda: Observation(costs() == want, f"deletion costs {costs()}"),
                          f"Karpenter's pod deletion costs {want} (its consolidation order)",
                          DELETION_COST_INTERVAL_S + 30)
    timings.record(budget_to_ranked_s=round(time.time() - changed, 1))
