"""Disruption controls (karpenter.sh "Disruption" docs; upstream's disruption suites): NodePool
budgets, the pod-level do-not-disrupt annotation and PodDisruptionBudgets decide whether, and
how fast, Karpenter may take nodes away. Each scenario first shows Karpenter found a node it
would disrupt, then that the control held it, then (the control lifted) that it went.
"""

import itertools
import math
import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    DELETION_COST,
    DISRUPTION_ACT_S,
    DRIFT_MARK_S,
    ONE_PER_NODE,
    ROOMY_CPU,
    TERMINATION_S,
    Observation,
    launch_s,
    step,
    view,
)

# These scenarios wait on Karpenter's disruption loop, which acts on one command at a time for
# the whole cluster: one of them at a time per Karpenter (the runner's lanes; README).
pytestmark = pytest.mark.disruption_loop

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
EMPTY_AT_ONCE = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}
# Unblocked, an empty node with consolidateAfter 0s is deleted within a disruption round (a
# poll and the command's validation); a replacement's first act (a new NodeClaim) comes about
# as soon. Held this long without either, the disruption is blocked.
HOLD_S = DISRUPTION_ACT_S
# Once lifted: a poll, the validation, and for replacements a launch and a drain: measured
# 53-56s for underutilized consolidation (consolidation-underutilized).
UNBLOCKED_S = 120
BLOCKED_BY_BUDGET = "No allowed disruptions for disruption reason {} due to blocking budget"
# Karpenter's per-node "DisruptionBlocked" events (do-not-disrupt pods, PDBs) are deduplicated
# per node for 2 minutes whatever their message (pkg/events/recorder.go): the first reason
# published hides the rest, so they cannot be asserted. The pool-level budget event is keyed
# by pool and reason, so it can.


def names(claims: list[dict]) -> set[str]:
    return {view.name(c) for c in claims}


def consolidatable(claims: list[dict]) -> bool:
    return bool(claims) and all((view.condition(c, "Consolidatable") or {}).get("status") == "True"
                                for c in claims)


def expect_held(expect, timeline, pool, claims: set[str], since: float, what: str) -> None:
    """Karpenter finds NodeClaims ``claims`` Consolidatable (it would disrupt them), yet adds
    none and deletes none until HOLD_S after ``since``: ``what`` holds them."""
    expect.eventually_nodeclaims(pool, consolidatable, f"NodeClaims {sorted(claims)} to be "
                                 f"Consolidatable", timeout=HOLD_S)
    timeline.band(since, since + HOLD_S, f"{what}: nothing disrupted for {HOLD_S}s")
    expect.consistently_nodeclaims_untouched(pool, claims, since + HOLD_S - time.time())


def given_an_emptied_pool(nodepool_factory, inflate_factory, expect, budgets: list[dict],
                          what: str) -> tuple:
    """The budget scenarios' first steps: a WhenEmpty pool (consolidateAfter 0s) with
    ``budgets``, 2 pods on it, then scaled to 0. Returns the pool, its nodes, its NodeClaims'
    names and when it emptied."""
    with step(f"given a WhenEmpty pool (consolidateAfter 0s, {what}), inflate at 2"):
        pool = nodepool_factory("default", spec={"disruption": {
            **EMPTY_AT_ONCE, "budgets": budgets}})
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 2)))
        claims = names(expect.nodeclaims(pool))

    with step("scale inflate to 0"):
        inflate.scale(0)
        expect.eventually_pods_running(inflate, 0)
        return pool, nodes, claims, time.time()


@pytest.mark.scenario("budget-blocks")
@pytest.mark.covers("nodepool.budgets.nodes")
def test_zero_budget_blocks_consolidation_until_lifted(nodepool_factory, inflate_factory, expect,
                                                       timings, timeline):
    """Budget nodes "0": Karpenter finds the empty node Consolidatable, says the budget blocks
    it, and leaves it; budget raised to 100%: the node goes."""
    pool, nodes, claims, emptied = given_an_emptied_pool(
        nodepool_factory, inflate_factory, expect, [{"nodes": "0"}], 'budget nodes: "0"')

    with step(f"expect the node Consolidatable, the budget named, nothing disrupted ({HOLD_S}s)"):
        expect.eventually_nodeclaims(pool, consolidatable, f"NodeClaims {sorted(claims)} to be "
                                     f"Consolidatable", timeout=HOLD_S)
        expect.eventually_karpenter_says(BLOCKED_BY_BUDGET.format("Empty"), about=[pool.name],
                                         timeout=HOLD_S)
        timeline.band(emptied, emptied + HOLD_S, f'budget nodes "0": nothing disrupted for {HOLD_S}s')
        expect.consistently_nodeclaims_untouched(pool, claims, emptied + HOLD_S - time.time())

    with step("raise the budget to 100%"):
        nodepool_factory.patch(pool, {"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}})
        lifted = time.time()

    with step("expect the empty node gone"):
        expect.watch_nodeclaims_end(pool, claims, timeout=UNBLOCKED_S,
                                    what=f"NodeClaims {sorted(claims)} to go once the budget allows")
        expect.watch_nodes_gone(nodes, timeout=30, what=f"empty nodes {sorted(nodes)} to be gone")
    timings.record(held_s=HOLD_S, lifted_to_consolidated_s=round(time.time() - lifted, 1))


@pytest.mark.scenario("budget-by-reason")
@pytest.mark.covers("nodepool.budgets.reasons")
@pytest.mark.karpenter_feature("budget-reasons")
def test_budget_for_drift_does_not_block_empty_consolidation(nodepool_factory, inflate_factory,
                                                             expect, timings):
    """A budget nodes "0" for reason Drifted only: Karpenter consolidates the empty node
    (reason Empty) as if no budget were there, and never says a budget blocks Empty."""
    pool, nodes, claims, emptied = given_an_emptied_pool(
        nodepool_factory, inflate_factory, expect, [{"nodes": "0", "reasons": ["Drifted"]}],
        'its only budget nodes: "0" for Drifted')

    with step("expect the empty node consolidated as if unbudgeted"):
        expect.watch_nodeclaims_end(pool, claims, timeout=UNBLOCKED_S,
                                    what=f"empty NodeClaims {sorted(claims)} to be consolidated")
        expect.watch_nodes_gone(nodes, timeout=30, what=f"empty nodes {sorted(nodes)} to be gone")
        blocked = [e.message for e in expect.karpenter_events()
                   if e.involved_object.name == pool.name
                   and BLOCKED_BY_BUDGET.format("Empty") in (e.message or "")]
        assert not blocked, f"Karpenter blocked Empty for {pool.name} by a Drifted-only budget: {blocked}"
    timings.record(emptied_to_consolidated_s=round(time.time() - emptied, 1))


@pytest.mark.scenario("budget-one-at-a-time")
@pytest.mark.covers("nodepool.budgets.nodes")
def test_budget_of_one_disrupts_one_node_at_a_time(nodepool_factory, inflate_factory, expect,
                                                   timings):
    """Budget nodes "1", three empty nodes: Karpenter deletes them one after another, never
    starting the next before the last is gone (watched on every NodeClaim change)."""
    with step('given a WhenEmpty pool (consolidateAfter 0s, budget nodes: "1") and 3 '
              'pods one per node'):
        pool = nodepool_factory("default", spec={"disruption": {
            **EMPTY_AT_ONCE, "budgets": [{"nodes": "1"}]}})
        inflate = inflate_factory(replicas=3, node_selector=pool.template_labels,
                                  extra_pod_spec={"affinity": ONE_PER_NODE})
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 3)))
        claims = names(expect.nodeclaims(pool))
        assert len(claims) == 3, f"3 pods one per node on {len(claims)} NodeClaims"

    with step("scale inflate to 0"):
        inflate.scale(0)
        emptied = time.time()

    with step("expect all three gone, each deleted only after the one before was gone"):
        ends = expect.watch_nodeclaims_end(pool, claims, timeout=3 * UNBLOCKED_S / 2,
                                           what=f"empty NodeClaims {sorted(claims)} to go one by one")
        order = one_after_another(ends)
        expect.watch_nodes_gone(nodes, timeout=30, what=f"empty nodes {sorted(nodes)} to be gone")
    timings.record(emptied_to_all_gone_s=round(max(e.gone_at for e in order) - emptied, 1),
                   gaps_s=[round(b.deleting_at - a.gone_at, 1) for a, b in itertools.pairwise(order)])


def one_after_another(ends: dict) -> list:
    """The NodeClaims' ends in the order they were deleted, each deleted only once the one
    before was gone (a budget of 1 watched on every NodeClaim change)."""
    order = sorted(ends.values(), key=lambda e: e.deleting_at or 0)
    assert all(e.deleting_at for e in order), f"NodeClaims gone without a deletion seen: {order}"
    for before, after in itertools.pairwise(order):
        # deletionTimestamp has 1s resolution; gone_at is when the watch saw it vanish.
        assert after.deleting_at >= before.gone_at - 1, \
            f"NodeClaim {after.name} was deleted {before.gone_at - after.deleting_at:.0f}s " \
            f"before {before.name} was gone: two disrupted at once under a budget of 1"
    return order


# budget-one-at-a-time with replacements: the template label the scenario changes (drift).
DRIFT_KEY = "example.com/budget-drift"


@pytest.mark.scenario("budget-one-at-a-time")
@pytest.mark.covers("nodepool.budgets.nodes")
@pytest.mark.launch_latency
def test_budget_of_one_replaces_drifted_nodes_one_at_a_time(nodepool_factory, inflate_factory,
                                                            expect, cluster, launch_latency,
                                                            timings, timeline):
    """Budget nodes "1", two nodes with a pod each, the pool's template changed (drift):
    Karpenter replaces one node (its replacement launching as slowly as a cloud's, the
    harness's launch latency) and only then the other, each deleted only after the one before
    was gone. That no second disruption began while the first replacement was still
    launching, the window a budget must hold across, is plans-honest's budget check, which
    judges every disruption start of every run."""
    launch = launch_s(cluster.info, launch_latency)
    with step(f'given a pool (budget nodes: "1"; nodes Ready {launch_latency:g}s after launch) '
              f'and 2 pods one per node'):
        # WhenEmpty, the workshop's 30s: no consolidation command beside drift's, and a
        # replacement waiting for the pods it was launched for is not taken as empty.
        pool = nodepool_factory("default", spec={"disruption": {
            "consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
            "budgets": [{"nodes": "1"}]}})
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels,
                                  extra_pod_spec={"affinity": ONE_PER_NODE})
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 2)))
        claims = names(expect.eventually_nodeclaims(
            pool, lambda cs: bool(cs) and all(view.is_true(c, "Initialized") for c in cs),
            "every NodeClaim of the pool initialized"))
        assert len(claims) == 2, f"2 pods one per node on {len(claims)} NodeClaims"

    with step("change the pool's template labels: both nodes drift"):
        nodepool_factory.patch(pool, {"spec": {"template": {"metadata": {
            "labels": {DRIFT_KEY: "changed"}}}}})
        patched = time.time()
        timeline.mark(patched, "template labels changed")

    with step("expect both replaced, each deleted only after the one before was gone"):
        # Per node: Drifted, a disruption pass, the replacement's launch, the drain.
        per_node = DISRUPTION_ACT_S + launch + TERMINATION_S
        ends = expect.watch_nodeclaims_end(pool, claims, timeout=DRIFT_MARK_S + 2 * per_node,
                                           what=f"drifted NodeClaims {sorted(claims)} to be "
                                                f"replaced one by one")
        order = one_after_another(ends)
        if cluster.info.launch_latency_simulated:
            # Drift replaces first: the first deletion waits for a replacement that took the
            # latency to launch, which is what holds a disruption in flight that long.
            assert order[0].deleting_at >= patched + launch_latency - 1, \
                f"NodeClaim {order[0].name} deleted {order[0].deleting_at - patched:.0f}s after " \
                f"the patch: its replacement cannot have launched for {launch_latency:g}s"
        pods = expect.eventually_pods_running(inflate, 2)
        on_old = sorted(set(expect.pods_on(pods)) & nodes)
        assert not on_old, f"pods still on the drifted nodes {on_old}"
    timings.record(patch_to_replaced_s=round(time.time() - patched, 1),
                   gaps_s=[round(b.deleting_at - a.gone_at, 1) for a, b in itertools.pairwise(order)])


@pytest.mark.scenario("pod-do-not-disrupt")
@pytest.mark.covers("pod.doNotDisrupt")
def test_do_not_disrupt_pods_keep_an_underused_node(nodepool_factory, inflate_factory, expect,
                                                    timings, timeline):
    """Pods annotated karpenter.sh/do-not-disrupt on underused nodes: Karpenter finds them
    Consolidatable and leaves them; annotation removed: they are consolidated."""
    with step("given a WhenEmptyOrUnderutilized pool (consolidateAfter 0s), 10 "
              "do-not-disrupt pods"):
        pool = nodepool_factory("default", spec={"limits": {"cpu": ROOMY_CPU}, "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}})
        inflate = inflate_factory(replicas=10, node_selector=pool.template_labels)
        running = expect.eventually_pods_running(inflate, 10)
        # On the pods, not the template: a pod recreated after one node's consolidation must
        # not bring the annotation back and hold the node it lands on. Karpenter may plan the
        # 10 pods onto two nodes (they turn pending over a second or more), and a scale-in by
        # the ReplicaSet's ranking may empty one (3/7 became 2/0, Empty consolidation, on kind):
        # one pod per node is the last the ReplicaSet deletes, so every node stays underused.
        first = {p.spec.node_name: p.metadata.name for p in reversed(running)}
        for pod in running:
            inflate.annotate_pod(pod.metadata.name, DO_NOT_DISRUPT | (
                {DELETION_COST: "1000"} if pod.metadata.name in first.values() else {}))
        nodes = set(expect.pods_on(running))
        claims = names(expect.nodeclaims(pool))

    with step("scale inflate to 2: the nodes are underused"):
        keep = max(2, len(nodes))
        inflate.scale(keep)
        pods = expect.eventually_pods_running(inflate, keep)
        scaled = time.time()

    with step(f"expect the node Consolidatable and nothing disrupted ({HOLD_S}s)"):
        expect_held(expect, timeline, pool, claims, scaled, "do-not-disrupt")

    with step("remove the annotation from the pods"):
        for pod in pods:
            inflate.annotate_pod(pod.metadata.name, {"karpenter.sh/do-not-disrupt": None})
        lifted = time.time()

    with step("expect the node replaced and the pods Running elsewhere"):
        # The disruption deadline, not UNBLOCKED_S: a replace waits for a quiet cluster too.
        # Karpenter's consolidation simulates every pending pod in the cluster, and while
        # another test's pods wait for nodes a one-node replace "can't remove without
        # creating 2 candidates" (seen once in 11 runs with -n 4 outlasting 120 s).
        expect.watch_nodeclaims_end(pool, claims,
                                    what=f"NodeClaims {sorted(claims)} to be consolidated")
        pods = expect.eventually_pods_running(inflate, 2)
        on_old = sorted(set(expect.pods_on(pods)) & nodes)
        assert not on_old, f"pods still on the consolidated nodes {on_old}"
    timings.record(held_s=HOLD_S, lifted_to_consolidated_s=round(time.time() - lifted, 1))


@pytest.mark.scenario("pdb-blocks")
@pytest.mark.covers("pdb.budget")
def test_pdb_with_no_disruptions_allowed_holds_a_drifted_node(nodepool_factory, inflate_factory,
                                                              expect, timings, timeline):
    """A PodDisruptionBudget maxUnavailable 0 over the pods of a drifted node: Karpenter marks
    it Drifted and leaves it; PDB deleted: the node is replaced."""
    with step("given 2 pods with a PDB maxUnavailable 0 on an oldnode pool"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        pdb = inflate_factory.pdb(inflate, max_unavailable=0)
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 2)))
        claims = names(expect.nodeclaims(pool))

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        drifted = time.time()
        expect.eventually_drifted(pool, claims)

    with step(f"expect no replacement and no deletion while the PDB stands ({HOLD_S}s)"):
        timeline.band(drifted, drifted + HOLD_S, f"PDB maxUnavailable 0: nothing disrupted for {HOLD_S}s")
        expect.consistently_nodeclaims_untouched(pool, claims, drifted + HOLD_S - time.time())

    with step("delete the PDB"):
        inflate_factory.delete_pdb(pdb)
        lifted = time.time()

    with step("expect the drifted nodes replaced and the pods Running again"):
        expect.watch_nodes_gone(nodes, timeout=UNBLOCKED_S,
                                what=f"drifted nodes {sorted(nodes)} to be replaced")
        expect.eventually_pods_running(inflate, 2)
    timings.record(held_s=HOLD_S, lifted_to_replaced_s=round(time.time() - lifted, 1))


TGP_S = 30  # the pool's terminationGracePeriod
# The pods' own grace, shorter than the node's: the drain force-deletes a protected pod only
# once its grace would outlast the node's termination time (terminator needsForceDelete),
# TGP_S - POD_GRACE_S after the node's deletion; at the default 30 s it would be at once.
POD_GRACE_S = 5


@pytest.mark.scenario("termination-grace")
@pytest.mark.covers("nodepool.template.terminationGracePeriod")
@pytest.mark.karpenter_feature("termination-grace-period")
def test_termination_grace_period_bounds_a_blocked_drain(nodepool_factory, inflate_factory,
                                                         expect, timings, timeline):
    """terminationGracePeriod 30s; do-not-disrupt pods (5 s of grace of their own) on a
    drifted node: Karpenter still replaces it (the grace period bounds the wait), and the node
    goes once the period is over: not before (the pods held it), not long after. When the
    drain deleted the pods is the protection-holds oracle's to judge (their Disrupted event)."""
    with step(f"given 2 do-not-disrupt pods ({POD_GRACE_S}s of grace) on an oldnode pool with "
              f"terminationGracePeriod {TGP_S}s"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old, spec={"template": {"spec": {
            "terminationGracePeriod": f"{TGP_S}s"}}})
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels,
                                  annotations=DO_NOT_DISRUPT,
                                  extra_pod_spec={"terminationGracePeriodSeconds": POD_GRACE_S})
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 2)))
        claims = names(expect.nodeclaims(pool))

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        expect.eventually_drifted(pool, claims)

    with step(f"expect each drifted NodeClaim gone {TGP_S}s after Karpenter deleted it"):
        # A replacement launch, then the deletion; the drain waits on the protected pods
        # until the grace period runs out, then Karpenter deletes them and the node.
        ends = expect.watch_nodeclaims_end(pool, claims, timeout=UNBLOCKED_S + TGP_S,
                                           what=f"drifted NodeClaims {sorted(claims)} to go "
                                                f"within terminationGracePeriod")
        for end in ends.values():
            assert end.deleting_at, f"NodeClaim {end.name} gone without a deletion seen: {end}"
            timeline.band(end.deleting_at + TGP_S - 1, end.deleting_at + TGP_S + 20,
                          f"{end.name} gone: terminationGracePeriod {TGP_S}s -1s … +20s")
            held = end.gone_at - end.deleting_at
            # deletionTimestamp has 1s resolution; the last 20s are termination's own steps.
            assert TGP_S - 1 <= held <= TGP_S + 20, \
                f"NodeClaim {end.name} was gone {held:.0f}s after its deletion; " \
                f"terminationGracePeriod={TGP_S}s"
        expect.watch_nodes_gone(nodes, timeout=30, what=f"drifted nodes {sorted(nodes)} to be gone")
        expect.eventually_pods_running(inflate, 2)
    timings.record(deletion_to_gone_s=[round(e.gone_at - e.deleting_at, 1) for e in ends.values()],
                   termination_grace_period_s=TGP_S)


# Unblocked, Karpenter acts within a disruption round, and what a busy machine adds to it.
ACT_S = DISRUPTION_ACT_S


@pytest.mark.nightly  # the window ends on a minute: 35-95 s of hold, 2-3 min in all
@pytest.mark.scenario("budget-window")
@pytest.mark.covers("nodepool.budgets.schedule")
def test_scheduled_budget_blocks_only_inside_its_window(nodepool_factory, inflate_factory, expect,
                                                        timings, timeline):
    """A budget nodes "0" with a cron schedule and a duration whose window is open now: the
    empty node is held until the window closes, and consolidated right after (not before)."""
    pool, nodes, claims, emptied = given_an_emptied_pool(
        nodepool_factory, inflate_factory, expect, [{"nodes": "0"}], 'budget nodes: "0"')

    with step("replace the budget by nodes \"0\" on a schedule whose window opened this "
              "minute and closes on a minute at least 35s away"):
        # Cron has minute resolution and Karpenter reads it in UTC: the window is
        # [start, start + duration), with start the current minute.
        now = time.time()
        start = now - now % 60
        minutes = math.ceil((now + 35 - start) / 60)
        closes = start + 60 * minutes
        schedule = time.strftime("%M %H * * *", time.gmtime(start))
        nodepool_factory.patch(pool, {"spec": {"disruption": {"budgets": [
            {"nodes": "0", "schedule": schedule, "duration": f"{minutes}m"}]}}})

    with step(f"expect the node Consolidatable, nothing disrupted until the window "
              f"closes ({closes - time.time():.0f}s), then consolidated within {ACT_S}s"):
        expect.eventually_nodeclaims(pool, consolidatable, f"NodeClaims {sorted(claims)} to be "
                                     f"Consolidatable", timeout=closes - time.time())
        timeline.band(emptied, closes - 1, f"budget window ({schedule}, {minutes}m): nothing disrupted")
        timeline.band(closes - 1, closes + ACT_S, f"window closed: consolidated within {ACT_S}s")
        acted = expect.consistently_untouched_then_acted(pool, claims, closes, ACT_S,
                                                         "the budget's window closed")

    with step("expect the empty node gone"):
        expect.watch_nodes_gone(nodes, timeout=30, what=f"empty nodes {sorted(nodes)} to be gone")
    timings.record(held_s=round(closes - emptied, 1), window_end_to_act_s=round(acted - closes, 1))


DND_FOR_S = 60  # the pods' do-not-disrupt duration


@pytest.mark.scenario("pod-do-not-disrupt-duration")
@pytest.mark.covers("pod.doNotDisrupt.duration")
@pytest.mark.karpenter_feature("do-not-disrupt-duration")
def test_do_not_disrupt_duration_protects_only_that_long(nodepool_factory, inflate_factory, expect,
                                                         timings, timeline):
    """Pods annotated karpenter.sh/do-not-disrupt: "60s" on a drifted node: Karpenter leaves
    the node until its pods are 60s old (counted from each pod's startTime), then replaces
    it: not before, not long after."""
    with step(f'given 2 pods annotated do-not-disrupt: "{DND_FOR_S}s" on an oldnode pool'):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels,
                                  annotations={"karpenter.sh/do-not-disrupt": f"{DND_FOR_S}s"})
        pods = expect.eventually_pods_running(inflate, 2)
        nodes = set(expect.pods_on(pods))
        claims = names(expect.nodeclaims(pool))
        # A node is protected until the youngest pod on it is DND_FOR_S old; the first node
        # free to go decides when Karpenter may first act.
        youngest: dict[str, float] = {}
        for p in pods:
            youngest[p.spec.node_name] = max(youngest.get(p.spec.node_name, 0),
                                             p.status.start_time.timestamp())
        until = min(youngest.values()) + DND_FOR_S

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        expect.eventually_drifted(pool, claims)
        drifted = time.time()
        assert until - drifted > 30, f"the pods' protection ends {until - drifted:.0f}s after " \
                                     f"the drift: too soon to tell protected from not"

    with step(f"expect nothing disrupted while protected ({until - time.time():.0f}s), "
              f"then the node replaced within {ACT_S}s"):
        timeline.band(drifted, until - 1, f"do-not-disrupt {DND_FOR_S}s: nothing disrupted")
        timeline.band(until - 1, until + ACT_S, f"protection over: acted within {ACT_S}s")
        acted = expect.consistently_untouched_then_acted(
            pool, claims, until, ACT_S, f"the pods' {DND_FOR_S}s do-not-disrupt ran out")

    with step("expect the drifted nodes gone and the pods Running on new ones"):
        expect.watch_nodes_gone(nodes, timeout=60, what=f"drifted nodes {sorted(nodes)} to be gone")
        pods = expect.eventually_pods_running(inflate, 2)
        on_old = sorted(set(expect.pods_on(pods)) & nodes)
        assert not on_old, f"pods still on the drifted nodes {on_old}"
    timings.record(protected_s=round(until - drifted, 1), protection_end_to_act_s=round(acted - until, 1))


@pytest.mark.scenario("pdb-unhealthy-evictable")
@pytest.mark.covers("pdb.unhealthyPodEvictionPolicy")
def test_unhealthy_pods_pdb_does_not_hold_a_drifted_node(nodepool_factory, inflate_factory, expect,
                                                         timings, timeline):
    """A PDB minAvailable 2 with unhealthyPodEvictionPolicy AlwaysAllow over 2 pods that are
    not Ready: the PDB allows no disruption, yet its unhealthy pods may be evicted, so
    Karpenter replaces the drifted node instead of waiting forever."""
    with step("given 2 not-Ready pods on an oldnode pool, a PDB minAvailable 2 with "
              "unhealthyPodEvictionPolicy AlwaysAllow"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        pods = expect.eventually_pods_running(inflate, 2)
        nodes = set(expect.pods_on(pods))
        claims = names(expect.nodeclaims(pool))
        for pod in pods:
            inflate.set_pod_unready(pod.metadata.name)
        pdb = inflate_factory.pdb(inflate, min_available=2, unhealthy_pod_eviction_policy="AlwaysAllow")

    with step("expect the PDB to allow no disruption (0 of 2 pods healthy)"):
        def blocking():
            st = inflate_factory.pdb_status(pdb)
            return Observation(st.observed_generation is not None and st.current_healthy == 0
                               and st.disruptions_allowed == 0,
                               f"currentHealthy={st.current_healthy} "
                               f"disruptionsAllowed={st.disruptions_allowed}")
        expect.eventually(blocking, f"PDB {pdb} to count 0 healthy pods and allow 0 disruptions",
                          timeout=30)

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        expect.eventually_drifted(pool, claims)
        drifted = time.time()

    with step(f"expect the drifted nodes replaced within {UNBLOCKED_S}s"):
        timeline.band(drifted, drifted + UNBLOCKED_S, f"drifted: replaced within {UNBLOCKED_S}s")
        expect.watch_nodes_gone(nodes, timeout=UNBLOCKED_S,
                                what=f"drifted nodes {sorted(nodes)} with unhealthy pods to be "
                                     f"replaced")
        expect.eventually_pods_running(inflate, 2)
    timings.record(drifted_to_replaced_s=round(time.time() - drifted, 1))


@pytest.mark.scenario("node-do-not-disrupt")
@pytest.mark.covers("node.doNotDisrupt")
def test_do_not_disrupt_node_is_kept_until_unannotated(nodepool_factory, inflate_factory, expect,
                                                       timings, timeline):
    """An empty node annotated karpenter.sh/do-not-disrupt (on the Node itself, no pod
    protected): Karpenter finds it Consolidatable and leaves it; annotation removed: it is
    consolidated within a disruption poll, not before."""
    with step("given a WhenEmpty pool (consolidateAfter 0s), inflate at 1, its node "
              "annotated do-not-disrupt"):
        pool = nodepool_factory("default", spec={"disruption": EMPTY_AT_ONCE})
        inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)
        nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 1)))
        claims = names(expect.nodeclaims(pool))
        for node in nodes:  # while its pod runs: not yet a candidate
            expect.kube.annotate_node(node, DO_NOT_DISRUPT)

    with step("scale inflate to 0"):
        inflate.scale(0)
        expect.eventually_pods_running(inflate, 0)
        emptied = time.time()

    with step(f"expect the node Consolidatable and nothing disrupted ({HOLD_S}s)"):
        expect_held(expect, timeline, pool, claims, emptied, "node do-not-disrupt")

    with step("remove the annotation from the node"):
        for node in nodes:
            expect.kube.annotate_node(node, {"karpenter.sh/do-not-disrupt": None})
        lifted = time.time()

    with step(f"expect Karpenter to delete the empty node within {ACT_S}s of the removal"):
        ends = expect.watch_nodeclaims_end(pool, claims, timeout=UNBLOCKED_S,
                                           what=f"NodeClaims {sorted(claims)} to be consolidated")
        timeline.band(lifted - 1, lifted + ACT_S, f"annotation removed: deleted within {ACT_S}s")
        for end in ends.values():
            assert end.deleting_at, f"NodeClaim {end.name} gone without a deletion seen: {end}"
            # deletionTimestamp has 1s resolution.
            assert lifted - 1 <= end.deleting_at <= lifted + ACT_S, \
                f"Karpenter deleted NodeClaim {end.name} {end.deleting_at - lifted:+.0f}s from " \
                f"the annotation's removal (expected 0 .. +{ACT_S}s)"
        expect.watch_nodes_gone(nodes, timeout=30, what=f"empty nodes {sorted(nodes)} to be gone")
    timings.record(held_s=round(lifted - emptied, 1),
                   lifted_to_deleted_s=[round(e.deleting_at - lifted, 1) for e in ends.values()])
