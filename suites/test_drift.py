"""Drift and expiration (workshop 003, seed 004): Karpenter replaces nodes that no longer match."""

import time

import allure
import pytest

from karpenter_e2e.fixtures.expect import DRIFT_MARK_S, condition
from karpenter_e2e.fixtures.pacing import ExpirationPacing
from karpenter_e2e.fixtures.timings import timestamp

# These scenarios wait on Karpenter's disruption loop, which acts on one command at a time for
# the whole cluster: one of them at a time per Karpenter (the runner's lanes; README).
pytestmark = pytest.mark.disruption_loop

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
HOLD_S = 60  # drift-blocked: how long nothing may happen while do-not-disrupt stands


def nodeclass_of(claim: dict) -> str:
    return claim["spec"]["nodeClassRef"]["name"]


@pytest.mark.scenario("drift")
@pytest.mark.covers("nodepool.template.nodeClassRef")
def test_nodeclass_change_replaces_drifted_nodes(nodepool_factory, inflate_factory, expect,
                                                 timings, timeline):
    """NodeClasses oldnode/newnode; 5 pods on oldnode; nodeClassRef -> newnode: nodes replaced."""
    with allure.step("given NodeClasses oldnode and newnode, and 5 pods on an oldnode pool"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=5, node_selector=pool.template_labels)
        old_nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 5)))
        old_claims = {c["metadata"]["name"] for c in expect.nodeclaims(pool)}

    with allure.step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        patched = float(int(time.time()))  # the 1s resolution of condition timestamps
        timeline.band(patched, patched + DRIFT_MARK_S, f"Drifted within {DRIFT_MARK_S}s")

    with allure.step("expect the old NodeClaims to be marked Drifted"):
        drifted = expect.eventually_drifted(pool, old_claims)
        drifted_at = max(timestamp(condition(c, "Drifted")["lastTransitionTime"])
                         for c in drifted if c["metadata"]["name"] in old_claims)

    with allure.step("expect them replaced by nodes of newnode, with all 5 pods Running"):
        ends = expect.watch_nodeclaims_end(pool, old_claims,
                                           what=f"drifted NodeClaims {sorted(old_claims)} to be replaced")
        expect.watch_nodes_gone(old_nodes, what=f"drifted nodes {sorted(old_nodes)} to be gone")
        pods = expect.eventually_pods_running(inflate, 5)
        claims = expect.eventually_nodeclaims(pool, lambda cs: bool(cs) and all(
            nodeclass_of(c) == new for c in cs), f"every NodeClaim of the pool to use {new}")
        on_old = sorted(set(expect.pods_on(pods)) & old_nodes)
        assert not on_old, f"pods still on drifted nodes {on_old}"

    with allure.step("expect each replacement ready before Karpenter deleted a drifted node"):
        # Drift replaces, it does not just delete: the first old NodeClaim may only be deleted
        # once a replacement has initialized (1s timestamp resolution).
        ready = sorted(timestamp(condition(c, "Initialized")["lastTransitionTime"]) for c in claims
                       if (condition(c, "Initialized") or {}).get("status") == "True")
        first_deleted = min(e.deleting_at for e in ends.values() if e.deleting_at)
        assert ready and ready[0] <= first_deleted + 1, \
            f"a drifted NodeClaim was deleted {first_deleted - patched:.0f}s after the patch, " \
            f"before any replacement initialized ({[round(t - patched) for t in ready]}s)"
    timings.record(patch_to_drifted_s=round(drifted_at - patched, 1),
                   patch_to_replaced_s=round(time.time() - patched, 1))


@pytest.mark.scenario("drift-blocked")
@pytest.mark.covers("pod.doNotDisrupt")
def test_do_not_disrupt_holds_a_drifted_node_until_removed(nodepool_factory, inflate_factory,
                                                            expect, timings, timeline):
    """As drift, but pods say karpenter.sh/do-not-disrupt: drifted, kept, replaced once lifted."""
    with allure.step("given 2 do-not-disrupt pods on an oldnode pool"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels,
                                  annotations=DO_NOT_DISRUPT)
        pods = expect.eventually_pods_running(inflate, 2)
        old_claims = {c["metadata"]["name"] for c in expect.nodeclaims(pool)}
        old_nodes = set(expect.pods_on(pods))

    with allure.step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        expect.eventually_drifted(pool, old_claims)

    with allure.step(f"expect no replacement and no deletion while the annotation stands ({HOLD_S}s)"):
        # Karpenter's first act of a drift replacement is a new NodeClaim (seconds after the
        # Drifted mark); the whole replacement took 29-44s unblocked. Watching for the first
        # act over 60s gives a wide margin.
        held = time.time()
        timeline.band(held, held + HOLD_S, f"do-not-disrupt: nothing changes for {HOLD_S}s")
        expect.consistently_nodeclaims_untouched(pool, old_claims, HOLD_S)
        expect.consistently_nodes_present(old_nodes, duration=1)

    with allure.step("remove the annotation from the pods"):
        for pod in pods:
            inflate.annotate_pod(pod.metadata.name, {"karpenter.sh/do-not-disrupt": None})
        lifted = time.time()
        timeline.mark(lifted, "do-not-disrupt removed")

    with allure.step("expect the nodes replaced and the pods Running again"):
        expect.watch_nodes_gone(old_nodes, what=f"drifted nodes {sorted(old_nodes)} to be replaced")
        expect.eventually_pods_running(inflate, 2)
    timings.record(lifted_to_replaced_s=round(time.time() - lifted, 1))


@pytest.mark.scenario("expiration")
@pytest.mark.covers("nodepool.template.expireAfter")
@pytest.mark.karpenter_feature("template-expire-after")
def test_expired_nodes_are_replaced(nodepool_factory, inflate_factory, expect, cluster, timings,
                                    timeline):
    """expireAfter (60s locally, longer where nodes take longer to join): nodes are replaced
    once they expire; the pods end Running."""
    # Expiration is Karpenter's own timer on the NodeClaim (requeued at expiry); the deletion
    # it then issues is immediate. Measured 65.1s created -> node deleted for expireAfter 60s.
    pace = ExpirationPacing.for_cluster(cluster.info)
    expire_after = pace.expire_after
    with allure.step(f"given a pool whose nodes expire after {expire_after}s, and inflate at 2"):
        pool = nodepool_factory("default", spec={"template": {"spec": {
            "expireAfter": f"{expire_after}s"}}})
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        pods = expect.eventually_pods_running(inflate, 2)
        claims = {c["metadata"]["name"]: timestamp(c["metadata"]["creationTimestamp"])
                  for c in expect.nodeclaims(pool)}
        first_nodes = set(expect.pods_on(pods))
        timeline.band(min(claims.values()) + expire_after - 1, max(claims.values()) + expire_after
                      + pace.tolerance, f"expireAfter {expire_after}s … +{pace.tolerance}s: "
                                        f"NodeClaims deleted")

    with allure.step(f"expect each NodeClaim deleted once expired: between {expire_after}s and "
                     f"{expire_after + pace.tolerance}s after its creation"):
        ends = expect.watch_nodeclaims_end(
            pool, set(claims), timeout=max(claims.values()) + expire_after + pace.tolerance
            + pace.termination - time.time(), what=f"expired NodeClaims {sorted(claims)} to be gone")
        lived = {n: ends[n].deleting_at - born for n, born in claims.items() if ends[n].deleting_at}
        assert set(lived) == set(claims), f"NodeClaims gone without a deletion seen: {ends}"
        for name, age in lived.items():
            # creationTimestamp and deletionTimestamp have 1s resolution.
            assert expire_after - 1 <= age <= expire_after + pace.tolerance, \
                f"NodeClaim {name} deleted {age:.0f}s after creation; expireAfter={expire_after}s"
        expect.watch_nodes_gone(first_nodes, timeout=pace.termination,
                                what=f"expired nodes {sorted(first_nodes)} to be gone")

    with allure.step("expect the pods Running on new nodes"):
        pods = expect.eventually_pods_running(inflate, 2)
        on_old = sorted(set(expect.pods_on(pods)) & first_nodes)
        assert not on_old, f"pods still on expired nodes {on_old}"
    timings.record(created_to_expired_s=round(max(lived.values()), 1), expire_after_s=expire_after)


@pytest.mark.scenario("drift")
@pytest.mark.covers("provider.ec2nodeclass.amiSelectorTerms")
@pytest.mark.modes("eks", "aws-sim", reason="AMIs exist only on EC2; local nodes have no image")
def test_new_ami_replaces_nodes_running_the_old_one(nodepool_factory, inflate_factory, expect,
                                                   cluster, aws_checks, timings):
    """EC2NodeClass pinned to the EKS AL2023 AMI of minor-1, then the current one: nodes move."""
    old_ami, new_ami = aws_checks.drift_amis(cluster.info.versions["kubernetes"])
    with allure.step(f"given a NodeClass on {old_ami} (previous minor) and 3 pods on it"):
        nodeclass = nodepool_factory.nodeclass("ami", spec=cluster.backend.ami_spec(old_ami))
        pool = nodepool_factory("default", nodeclass=nodeclass)
        inflate = inflate_factory(replicas=3, node_selector=pool.template_labels)
        old_nodes = expect.pods_on(expect.eventually_pods_running(inflate, 3))
        amis = {aws_checks.instance_for_node(n.spec.provider_id).ami for n in old_nodes.values()}
        assert amis == {old_ami}, f"instances run {amis}"

    with allure.step(f"pin the NodeClass to {new_ami} (current minor)"):
        nodepool_factory.patch_nodeclass(nodeclass, cluster.backend.ami_spec(new_ami))
        patched = time.time()

    with allure.step("expect the nodes drifted, replaced, and the new instances on the new AMI"):
        expect.watch_nodes_gone(set(old_nodes), what="nodes on the old AMI to be replaced")
        new_nodes = expect.pods_on(expect.eventually_pods_running(inflate, 3))
        amis = {aws_checks.instance_for_node(n.spec.provider_id).ami for n in new_nodes.values()}
        assert amis == {new_ami}, f"replacement instances run {amis}"
    timings.record(patch_to_replaced_s=round(time.time() - patched, 1))
