"""consolidationPolicy Balanced: a consolidation move only where its savings outweigh the
disruption it causes. Karpenter scores a move as (savings / the pool's cost) over (the
move's disruption / the pool's disruption), one per node plus one per pod it evicts, and
makes it only at a score of at least 1/k = 0.5 (pkg/controllers/disruption/balanced.go)."""

import re
import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    FAMILY,
    INSTANCE_TYPE,
    NOMINATION_WINDOW_S,
    NodePoolFactory,
    Observation,
    describe_claims,
    narrow,
    require,
    step,
    view,
)

pytestmark = [pytest.mark.disruption_loop, pytest.mark.karpenter_feature("balanced-consolidation")]

CONSOLIDATE_AFTER = 10  # seconds
# One family, whose price doubles with each size: the moves' savings are whole fractions.
FAMILY_ONLY = require(FAMILY, "In", "c6i")
SCORE = re.compile(r"score (?P<score>[\d.]+) >= threshold (?P<threshold>[\d.]+) \(k: (?P<k>\d+), "
                   r"savings (?P<savings>[\d.]+)%, disruption (?P<disruption>[\d.]+)%\)")


def pool_spec(policy: str) -> dict:
    spec = narrow(NodePoolFactory.spec("default"), FAMILY_ONLY)
    spec["spec"]["disruption"] = {"consolidationPolicy": policy,
                                  "consolidateAfter": f"{CONSOLIDATE_AFTER}s"}
    spec["spec"]["limits"] = {"cpu": "200"}
    return spec


def placement(expect, pool, *workloads) -> str:
    """Each node of the pool, its type and how many pods of each workload it runs."""
    on: dict[str, list[str]] = {}
    for w in workloads:
        for p in w.pods():
            on.setdefault(p.spec.node_name or "", []).append(w.name)
    return "; ".join(f"{n.metadata.name} {n.metadata.labels.get(INSTANCE_TYPE)} "
                     f"{sorted(on.get(n.metadata.name, []))}" for n in expect.nodes(pool))


@pytest.mark.scenario("balanced-approves")
@pytest.mark.covers("nodepool.consolidationPolicy.Balanced")
def test_balanced_replaces_a_node_whose_move_saves_more_than_it_disrupts(
        nodepool_factory, inflate_factory, expect, timings, timeline):
    """A Balanced pool of one node: 10 pods -> 2 leaves it mostly idle; replacing it saves
    most of the pool's cost for all of its disruption, a score above 0.5: Karpenter says
    so (ConsolidationApproved, with the score) and replaces it."""
    with step("given a Balanced pool and inflate at 10 on one node"):
        pool = nodepool_factory(pool_spec("Balanced"), name="balanced", spec={"limits": {"cpu": "0"}})
        inflate = inflate_factory(replicas=10, node_selector=pool.template_labels)
        expect.planned_together(inflate, 10, lambda: nodepool_factory.patch(
            pool, {"spec": {"limits": {"cpu": "200"}}}))
        before = expect.pods_on(expect.eventually_pods_running(inflate, 10))
        old_claims = {view.name(c) for c in expect.nodeclaims(pool)}
        assert len(old_claims) == 1, f"10 one-CPU pods on {len(old_claims)} NodeClaims, not one"
        cost_before = sum(expect.price(n) for n in before.values())

    with step("scale inflate to 2"):
        inflate.scale(2)
        scaled = time.time()
        timeline.band(scaled, scaled + CONSOLIDATE_AFTER + 90, "the approved replacement")

    with step("expect Karpenter to approve the move with its score, and replace the node"):
        ends = expect.watch_nodeclaims_end(pool, old_claims, timeout=CONSOLIDATE_AFTER + 90,
                                           what=f"the underused NodeClaim {sorted(old_claims)} to go")
        message = expect.eventually_karpenter_says(r"^score [\d.]+ >= threshold", about=old_claims,
                                                   timeout=10)
        scored = SCORE.search(message)
        assert scored, f"ConsolidationApproved message not in Karpenter's format: {message!r}"
        score, threshold = float(scored["score"]), float(scored["threshold"])
        assert (int(scored["k"]), threshold) == (2, 0.5), message
        assert score >= threshold, message
        # The pool is this one node, so the move's disruption is all of the pool's.
        assert float(scored["disruption"]) == 100.0, message
        pods = expect.eventually_pods_running(inflate, 2)
        after = list(expect.pods_on(pods).values())
        cost_after = sum(expect.price(n) for n in expect.nodes(pool))
        saved = 100 * (cost_before - cost_after) / cost_before
        # Karpenter scores the cheapest replacement it may launch; it launches that one here
        # (one family, one capacity type), so its savings are what the pool's price fell by.
        assert abs(float(scored["savings"]) - saved) < 1, \
            f"Karpenter scored savings of {scored['savings']}%, the pool's price fell {saved:.1f}%"
        assert score == pytest.approx(saved / 100, abs=0.01), message
        claims = expect.nodeclaims(pool)
        ready = [c for c in claims if view.name(c) not in old_claims
                 and (view.condition(c, "Initialized") or {}).get("status") == "True"]
        assert ready, f"no replacement NodeClaim: {describe_claims(claims)}"
    timings.record(scale_in_to_replaced_s=round(max(e.gone_at for e in ends.values()) - scaled, 1),
                   score=score, cost_before_per_h=round(cost_before, 4),
                   cost_after_per_h=round(cost_after, 4))
    timings.notes["types"] = (f"{sorted(n.metadata.labels[INSTANCE_TYPE] for n in before.values())}"
                              f" -> {sorted(n.metadata.labels[INSTANCE_TYPE] for n in after)}")


@pytest.mark.scenario("balanced-rejects")
@pytest.mark.covers("nodepool.consolidationPolicy.Balanced")
def test_balanced_keeps_a_node_whose_move_disrupts_more_than_it_saves(
        nodepool_factory, inflate_factory, expect, timings, timeline):
    """Two pools alike but for the policy, each with a small node of 6 pods and a big node
    whose spare room fits them. WhenEmptyOrUnderutilized deletes the small node. Balanced
    keeps it: deleting it saves a fifth of the pool's cost for 7/9 of its disruption (the
    small node and its 6 pods), a score of 0.26."""
    pools, small, big = {}, {}, {}
    with step("given a WhenEmptyOrUnderutilized and a Balanced pool, each with 6 pods "
              "on a small node, then one 20-CPU pod on a big node"):
        for policy in ("WhenEmptyOrUnderutilized", "Balanced"):
            pools[policy] = nodepool_factory(pool_spec(policy), name=policy.lower())
            small[policy] = inflate_factory(f"small-{policy.lower()}", replicas=6,
                                            node_selector=pools[policy].own_nodes)
        for policy, pool in pools.items():
            expect.eventually_pods_running(small[policy], 6)
            big[policy] = inflate_factory(f"big-{policy.lower()}", replicas=1, cpu="20",
                                          node_selector=pool.own_nodes)
        claims, small_claims = {}, {}
        for policy, pool in pools.items():
            expect.eventually_pods_running(big[policy], 1)
            claims[policy] = {view.name(c) for c in expect.nodeclaims(pool)}
            assert len(claims[policy]) == 2, \
                f"{policy}: {placement(expect, pool, small[policy], big[policy])}, not a small and a big node"
            (node,) = expect.pods_on(expect.eventually_pods_running(small[policy], 6)).values()
            small_claims[policy] = view.name(expect.eventually_nodeclaim_of(pool, node))
        settled = time.time()

    with step("once Karpenter has marked all four nodes Consolidatable and its "
              "nominations have run out, change the Balanced pool's limits"):
        expect.eventually(lambda: all_consolidatable(expect, pools.values()),
                          "every NodeClaim of both pools to be Consolidatable",
                          timeout=CONSOLIDATE_AFTER + 30)
        # A node is nominated (no disruption candidate) for NOMINATION_WINDOW_S after the last
        # pass that placed a pending pod on it, and a consolidation pass that finds nothing
        # marks the cluster consolidated until its state changes, or 5 minutes; a nomination
        # running out is no change (docs/troubleshooting.md, node-overlay-price). So: wait out
        # the window from the last pod's binding, then change the Balanced pool; a NodePool
        # spec change is a state change (limits are not drift), and the pass after it sees
        # all four nodes as candidates, none nominated.
        quiet_until = last_scheduled(*small.values(), *big.values()) + NOMINATION_WINDOW_S + 2
        expect.consistently_nodeclaims_untouched(pools["Balanced"], claims["Balanced"],
                                                 quiet_until - time.time())
        nodepool_factory.patch(pools["Balanced"], {"spec": {"limits": {"cpu": "300"}}})
        changed = time.time()
        timeline.band(changed, changed + 90, "the small nodes' fate")

    with step("expect WhenEmptyOrUnderutilized to delete its small node"):
        ends = expect.watch_nodeclaims_end(
            pools["WhenEmptyOrUnderutilized"], {small_claims["WhenEmptyOrUnderutilized"]},
            timeout=60, what="the WhenEmptyOrUnderutilized pool's small node to go")
        removed = max(e.gone_at for e in ends.values())

    with step("expect Balanced to keep both its nodes, for 30s more"):
        balanced = pools["Balanced"]
        deleting = [c for c in expect.nodeclaims(balanced) if view.deleting(c)]
        assert not deleting, f"Balanced pool: {describe_claims(deleting)}"
        expect.consistently_nodeclaims_untouched(balanced, claims["Balanced"], 30)
    timings.record(settled_to_changed_s=round(changed - settled, 1),
                   changed_to_other_removed_s=round(removed - changed, 1))


def last_scheduled(*workloads) -> float:
    """When the last of the workloads' pods was bound (its PodScheduled transition)."""
    return max(c.last_transition_time.timestamp() for w in workloads for p in w.pods()
               for c in p.status.conditions if c.type == "PodScheduled")


def all_consolidatable(expect, pools) -> Observation:
    claims = [c for pool in pools for c in expect.nodeclaims(pool)]
    waiting = [view.name(c) for c in claims
               if (view.condition(c, "Consolidatable") or {}).get("status") != "True"]
    return Observation(len(claims) == 4 and not waiting,
                       f"not yet Consolidatable: {waiting}; of {describe_claims(claims)}")
