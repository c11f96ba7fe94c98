"""Many disruptions at once (karpenter.sh "Disruption" docs: expiration is forceful, drift
and consolidation are graceful, all drain through the eviction API): consolidation, drift and
expiration hit one pool together. A PodDisruptionBudget is the only thing pacing them, so the
pods it covers stay served while the pool converges to its new spec.
"""

import re
import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    ONE_PER_NODE,
    ROOMY_CPU,
    Observation,
    created_at,
    pod_phase,
    step,
    view,
)

# 2.5 min: the expiry, then four one-at-a-time replacements
pytestmark = [pytest.mark.nightly, pytest.mark.disruption_loop]

SERVED = 4  # inflate replicas, one per node, under a PDB maxUnavailable 1
# The first nodes' expireAfter. The act comes ACT_BEFORE_EXPIRY_S before the first expiry, so
# that expiration lands while drift and consolidation have only begun: acting as soon as the
# pods ran (about 50 s before it), drift replaced all 5 nodes one by one before any expired, no
# two drains overlapped and the PDB was never asked (a drain that deletes the pods the PDB
# protects then passed). Which method takes which node stays Karpenter's race.
EXPIRE_S = 60
ACT_BEFORE_EXPIRY_S = 10
# Old NodeClaims draining at once for the PDB to have paced them: with the spare's node among
# them, at least two hold one of inflate's pods. (Karpenter's "evicting pod violates a PDB"
# event cannot tell: it shares its dedupe key, reason and node, with the "pods are waiting to
# be evicted" event the node's first drain attempt publishes, and is dropped for 2 minutes.)
DRAINS_AT_ONCE = 3
# From the act: the old nodes go one eviction at a time (the PDB), each a launch and a drain:
# measured 94 s with expireAfter 60s (README); four minutes leaves a wide margin.
CONVERGE_S = 240
DISRUPTING = re.compile(r"Disrupting NodeClaim: (\w+)")


def served(inflate) -> Observation:
    pods = inflate.pods()
    ready = [p for p in pods if pod_phase(p) == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
    return Observation(len(ready) >= SERVED - 1, f"{len(ready)} of {SERVED} pods Running and "
                       f"Ready ({', '.join(sorted(pod_phase(p) for p in pods))})")


def most_at_once(ends) -> int:
    """The most NodeClaims that were between their deletionTimestamp and gone at one time."""
    spans = [(e.deleting_at, e.gone_at) for e in ends if e.deleting_at and e.gone_at]
    return max((sum(1 for a, b in spans if a <= t < b) for t, _ in spans), default=0)


def converged_on(new: str):
    """The pool converged: SERVED NodeClaims, each of NodeClass ``new``, Initialized, staying."""
    def converged(now: list[dict]) -> bool:
        return len(now) == SERVED and all(
            c["spec"]["nodeClassRef"]["name"] == new
            and (view.condition(c, "Initialized") or {}).get("status") == "True"
            and not view.deleting(c) for c in now)
    return converged


def ended_by(expect, claims: dict[str, float], ends: dict) -> dict[str, str]:
    """What ended each old NodeClaim: Karpenter's disruption decision (its DisruptionTerminating
    event), or expiring, which deletes the NodeClaim with no event and never before its time."""
    said = {}
    for e in expect.karpenter_events():
        m = DISRUPTING.search(e.message or "")
        if m and e.involved_object.kind == "NodeClaim" and e.involved_object.name in claims:
            said[e.involved_object.name] = m.group(1)
    reasons = {}
    for name, end in ends.items():
        assert end.deleting_at, f"NodeClaim {name} gone without a deletion seen"
        if name in said:
            reasons[name] = said[name]
            continue
        due = claims[name] + EXPIRE_S
        assert end.deleting_at >= due - 1, \
            f"NodeClaim {name} was deleted {due - end.deleting_at:.0f}s before it expired, " \
            f"with no disruption decision from Karpenter"
        reasons[name] = "Expired"
    return reasons


def given_old_nodes_under_a_pdb(nodepool_factory, inflate_factory, expect):
    """An oldnode pool (expireAfter EXPIRE_S, budget 100%), SERVED pods one per node under a
    PDB maxUnavailable 1, and a spare pod on a node of its own. Returns the pool, the newnode
    NodeClass's name, both workloads and the NodeClaims' creation times."""
    with step(f"given an oldnode pool (expireAfter {EXPIRE_S}s, budget 100%), {SERVED} "
              f"pods one per node under a PDB maxUnavailable 1, and a spare pod's node"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old, spec={
            "limits": {"cpu": ROOMY_CPU},
            "template": {"spec": {"expireAfter": f"{EXPIRE_S}s"}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}})
        inflate = inflate_factory(replicas=SERVED, node_selector=pool.template_labels,
                                  extra_pod_spec={"affinity": ONE_PER_NODE})
        inflate_factory.pdb(inflate, max_unavailable=1)
        # The spare pod keeps off inflate's nodes (their anti-affinity), so it has its own.
        spare = inflate_factory("spare", replicas=1, node_selector=pool.template_labels,
                                extra_pod_spec={"affinity": ONE_PER_NODE})
        expect.eventually_pods_running(inflate, SERVED)
        expect.eventually_pods_running(spare, 1)
        claims = {view.name(c): created_at(c) for c in expect.nodeclaims(pool)}
        assert len(claims) == SERVED + 1, f"{SERVED} pods one per node and a spare on " \
                                          f"{len(claims)} NodeClaims"
    return pool, new, inflate, spare, claims


@pytest.mark.scenario("concurrent-disruption")
@pytest.mark.covers("pdb.budget", "nodepool.template.expireAfter", "nodepool.template.nodeClassRef")
@pytest.mark.karpenter_feature("template-expire-after")
def test_consolidation_drift_and_expiration_at_once_keep_pods_served(
        nodepool_factory, inflate_factory, expect, timings, timeline):
    """An oldnode pool (budget 100%) whose nodes expire 60s after launch, 4 pods one per node
    under a PDB maxUnavailable 1, and a fifth node with a spare pod. At once: the spare pod
    goes (consolidation: Empty), the pool moves to newnode (drift), 10s before the first nodes
    expire. Never fewer than 3 of the 4 pods Running, watched throughout; the pool converges to
    4 newnode nodes, every old NodeClaim ended by a disruption decision or by expiring on time
    (which method took which node is Karpenter's race; it is recorded); and the drains
    overlapped (3 old NodeClaims deleting at once), so the PDB paced them."""
    pool, new, inflate, spare, claims = given_old_nodes_under_a_pdb(
        nodepool_factory, inflate_factory, expect)
    first_expiry = min(claims.values()) + EXPIRE_S
    with expect.throughout(lambda: served(inflate), f"at least {SERVED - 1} of {SERVED} pods of "
                                                    f"{inflate.name} Running throughout"):
        with step(f"{ACT_BEFORE_EXPIRY_S}s before the first expiry, at once: point the "
                  f"pool at newnode (and expireAfter Never for the new nodes), scale the "
                  f"spare to 0"):
            # Held until then on Karpenter's clock (the NodeClaims' age); the pods stay served.
            expect.consistently(lambda: served(inflate), f"{SERVED} pods served until the act",
                                duration=max(0.0, first_expiry - ACT_BEFORE_EXPIRY_S - time.time()))
            nodepool_factory.patch(pool, {"spec": {"template": {"spec": {
                "nodeClassRef": {"name": new}, "expireAfter": "Never"}}}})
            spare.scale(0)
            acted = time.time()
            timeline.mark(first_expiry, f"first NodeClaim expires ({EXPIRE_S}s)")
            timeline.band(acted, acted + CONVERGE_S, f"converged within {CONVERGE_S}s; "
                                                     f">= {SERVED - 1} pods Running throughout")

        with step(f"expect every old NodeClaim gone within {CONVERGE_S}s"):
            ends = expect.watch_nodeclaims_end(pool, set(claims), timeout=CONVERGE_S,
                                               what=f"old NodeClaims {sorted(claims)} to be "
                                                    f"consolidated, drifted or expired")

        with step(f"expect the pool converged: {SERVED} newnode NodeClaims, "
                  f"{SERVED} pods Running"):
            expect.eventually_nodeclaims(pool, converged_on(new), f"{SERVED} Initialized newnode "
                                         f"NodeClaims and no other",
                                         timeout=acted + CONVERGE_S - time.time())
            expect.eventually_pods_running(inflate, SERVED, timeout=30)

    with step("expect each old NodeClaim ended by a disruption method or by expiring, "
              "not before its time"):
        reasons = ended_by(expect, claims, ends)
    with step(f"expect the drains to have overlapped ({DRAINS_AT_ONCE} old NodeClaims "
              f"deleting at once), so that the PDB paced them"):
        at_once = most_at_once(ends.values())
        assert at_once >= DRAINS_AT_ONCE, (
            f"at most {at_once} of the old NodeClaims were being deleted at once (from their "
            f"deletionTimestamp until gone), so the PDB never had to pace two drains (ended by: "
            f"{reasons})")
    timings.record(reasons=reasons, drains_at_once=at_once,
                   act_to_converged_s=round(time.time() - acted, 1),
                   act_to_first_expiry_s=round(first_expiry - acted, 1))
