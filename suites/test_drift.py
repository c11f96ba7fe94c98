"""Drift and expiration (workshop 003, seed 004): Karpenter replaces nodes that no longer match."""

import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    CAPACITY_TYPE,
    DISRUPTION_TOLERANCE_S,
    DRIFT_MARK_S,
    INSTANCE_TYPE,
    POLLING_PERIOD_S,
    TERMINATE_FIRST_GATES,
    DriftProbe,
    ExpirationPacing,
    created_at,
    describe_claims,
    drift_of,
    require,
    static,
    static_refill_s,
    step,
    turned_at,
    view,
)

# These scenarios wait on Karpenter's disruption loop, which acts on one command at a time for
# the whole cluster: one of them at a time per Karpenter (the runner's lanes; README).
pytestmark = pytest.mark.disruption_loop

DO_NOT_DISRUPT = {"karpenter.sh/do-not-disrupt": "true"}
HOLD_S = 60  # drift-blocked: how long nothing may happen while do-not-disrupt stands


def nodeclass_of(claim: dict) -> str:
    return claim["spec"]["nodeClassRef"]["name"]


# drift-kinds: the label, annotation and taint key the scenario changes on the pool's template.
KIND_KEY = "example.com/drift-kind"
# Karpenter's drift reasons (pkg/controllers/nodeclaim/disruption/drift.go, v1.15.0):
# areStaticFieldsDrifted compares the NodePool's karpenter.sh/nodepool-hash (NodePool.Hash over
# spec.template, requirements hash:"ignore") with the NodeClaim's; areRequirementsDrifted checks
# the NodeClaim's labels against the pool's requirements.
NODEPOOL_DRIFTED, REQUIREMENTS_DRIFTED = "NodePoolDrifted", "RequirementsDrifted"
# The hold for a change that must not drift: this many times the slowest mark or clear the
# same test measured, and never less than HOLD_FLOOR_S.
HOLD_FACTOR, HOLD_FLOOR_S = 5, 15


def template(**fields) -> dict:
    return {"spec": {"template": {"spec": fields}}}


def template_meta(**fields) -> dict:
    return {"spec": {"template": {"metadata": fields}}}


@pytest.mark.scenario("drift")
@pytest.mark.covers("nodepool.template.nodeClassRef")
@pytest.mark.launch_latency
def test_nodeclass_change_replaces_drifted_nodes(nodepool_factory, inflate_factory, expect,
                                                 timings, timeline):
    """NodeClasses oldnode/newnode; 5 pods on oldnode; nodeClassRef -> newnode: nodes replaced,
    each replacement up (launching as slowly as a cloud's) before its drifted node goes."""
    with step("given NodeClasses oldnode and newnode, and 5 pods on an oldnode pool"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=5, node_selector=pool.template_labels)
        old_nodes = set(expect.pods_on(expect.eventually_pods_running(inflate, 5)))
        # Karpenter disrupts initialized nodes only: one still initializing when the pool
        # drifts is no candidate but room, and the others' pods may be moved onto it.
        old_claims = {view.name(c) for c in expect.eventually_nodeclaims(
            pool, lambda cs: bool(cs) and all(view.is_true(c, "Initialized") for c in cs),
            "every NodeClaim of the pool initialized")}

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        patched = float(int(time.time()))  # the 1s resolution of condition timestamps
        timeline.band(patched, patched + DRIFT_MARK_S, f"Drifted within {DRIFT_MARK_S}s")

    with step("expect the old NodeClaims to be marked Drifted"):
        drifted = expect.eventually_drifted(pool, old_claims)
        drifted_at = max(turned_at(c, "Drifted")
                         for c in drifted if view.name(c) in old_claims)

    with step("expect them replaced by nodes of newnode, with all 5 pods Running"):
        ends = expect.watch_nodeclaims_end(pool, old_claims,
                                           what=f"drifted NodeClaims {sorted(old_claims)} to be replaced")
        expect.watch_nodes_gone(old_nodes, what=f"drifted nodes {sorted(old_nodes)} to be gone")
        pods = expect.eventually_pods_running(inflate, 5)
        claims = expect.eventually_nodeclaims(pool, lambda cs: bool(cs) and all(
            nodeclass_of(c) == new for c in cs), f"every NodeClaim of the pool to use {new}")
        on_old = sorted(set(expect.pods_on(pods)) & old_nodes)
        assert not on_old, f"pods still on drifted nodes {on_old}"

    with step("expect each replacement ready before Karpenter deleted a drifted node"):
        # Drift replaces, it does not just delete: the first old NodeClaim may only be deleted
        # once a replacement has initialized (1s timestamp resolution).
        ready = sorted(turned_at(c, "Initialized") for c in claims
                       if (view.condition(c, "Initialized") or {}).get("status") == "True")
        first_deleted = min(e.deleting_at for e in ends.values() if e.deleting_at)
        assert ready and ready[0] <= first_deleted + 1, \
            f"a drifted NodeClaim was deleted {first_deleted - patched:.0f}s after the patch, " \
            f"before any replacement initialized ({[round(t - patched) for t in ready]}s)"
    timings.record(patch_to_drifted_s=round(drifted_at - patched, 1),
                   patch_to_replaced_s=round(time.time() - patched, 1))


def drifting_changes(own: str, other: str, requirements: list[dict],
                     instance_type: str) -> list[tuple[str, dict, dict, str]]:
    """drift-kinds' table of changes that drift: (field, change, change back, Karpenter's
    reason): every hashed template field, and a requirement the node's labels break."""
    def taint(field_):
        return template(**{field_: [{"key": KIND_KEY, "value": "b", "effect": "NoSchedule"}]})
    return [
        ("labels", template_meta(labels={KIND_KEY: "b"}), template_meta(labels={KIND_KEY: "a"}),
         NODEPOOL_DRIFTED),
        ("annotations", template_meta(annotations={KIND_KEY: "b"}),
         template_meta(annotations={KIND_KEY: "a"}), NODEPOOL_DRIFTED),
        ("taints", taint("taints"), template(taints=None), NODEPOOL_DRIFTED),
        ("startupTaints", taint("startupTaints"), template(startupTaints=None), NODEPOOL_DRIFTED),
        ("nodeClassRef", template(nodeClassRef={"name": other}),
         template(nodeClassRef={"name": own}), NODEPOOL_DRIFTED),
        ("expireAfter", template(expireAfter="720h"), template(expireAfter="Never"),
         NODEPOOL_DRIFTED),
        ("terminationGracePeriod", template(terminationGracePeriod="1h"),
         template(terminationGracePeriod=None), NODEPOOL_DRIFTED),
        ("requirements", template(requirements=[*requirements, require(
            INSTANCE_TYPE, "NotIn", instance_type)]), template(requirements=requirements),
         REQUIREMENTS_DRIFTED),
    ]


def changes_outside_the_hash(requirements: list[dict]) -> dict[str, dict]:
    """drift-kinds' table of changes that must not drift: fields outside the template hash,
    and requirements the node still meets."""
    widened = [{**r, "values": ["on-demand", "spot"]} if r["key"] == CAPACITY_TYPE else r
               for r in requirements]
    return {
        "weight": {"spec": {"weight": 50}},
        "limits": {"spec": {"limits": {"cpu": "20"}}},
        "consolidateAfter": {"spec": {"disruption": {"consolidateAfter": "5m"}}},
        "consolidationPolicy": {"spec": {"disruption": {"consolidationPolicy": "WhenEmpty"}}},
        "budgets": {"spec": {"disruption": {"budgets": [{"nodes": "0%"}]}}},
        "requirements the node meets (capacity-type on-demand -> on-demand, spot)":
            template(requirements=widened),
    }


@pytest.mark.scenario("drift-kinds")
@pytest.mark.covers("nodepool.template.drift", "nodepool.template.annotations",
                    "nodepool.template.nodeClassRef", "nodepool.requirements.drift",
                    "nodepool.outsideHash")
def test_each_kind_of_nodepool_change_drifts_or_not(nodepool_factory, inflate_factory, expect,
                                                    timings, timeline):
    """One node, budget nodes "0" (never replaced); each template field changed in turn (labels,
    annotations, taints, startupTaints, nodeClassRef, expireAfter, terminationGracePeriod):
    Drifted=True NodePoolDrifted, cleared once changed back; requirements its labels break:
    RequirementsDrifted, then cleared; weight, limits, consolidateAfter, consolidationPolicy,
    budgets and requirements it still meets: no Drifted for 5x the slowest mark (>= 15 s), then
    a template change still drifts and clears."""
    with step('given a pool with budget nodes "0", template label and annotation '
              f'{KIND_KEY}=a, a second NodeClass, and one pod on one node'):
        other = nodepool_factory.nodeclass("othernode")
        pool = nodepool_factory("default", spec={
            "template": {"metadata": {"labels": {KIND_KEY: "a"}, "annotations": {KIND_KEY: "a"}}},
            "disruption": {"budgets": [{"nodes": "0"}]}})
        inflate = inflate_factory(replicas=1, node_selector={
            k: v for k, v in pool.template_labels.items() if k != KIND_KEY})
        expect.eventually_pods_running(inflate, 1)
        claims = expect.nodeclaims(pool)
        assert len(claims) == 1, f"one pod, {describe_claims(claims)}"
        name, instance_type = view.name(claims[0]), view.labels(claims[0])[INSTANCE_TYPE]
        got = view.meta(claims[0]).get("annotations", {}).get(KIND_KEY)
        assert got == "a", f"NodeClaim {name} carries {KIND_KEY}={got!r}, the template says 'a'"
        assert drift_of(claims[0]) is None, f"NodeClaim {name} Drifted before any change"
        requirements, probe = pool.requirements, DriftProbe(expect, nodepool_factory, timeline,
                                                            pool, name)

    # Every step below runs with the pool holding exactly this NodeClaim, never deleting: the
    # budget keeps Karpenter's drift replacement off, so only the Drifted condition is observed.
    with expect.throughout(probe.alone, f"NodePool {pool.name} to keep NodeClaim {name} "
                                        f"alone, never deleting (budget nodes \"0\", later \"0%\")"):
        for kind, change, revert, reason in drifting_changes(pool.nodeclass, other, requirements,
                                                             instance_type):
            probe.marks_and_clears(kind, change, revert, reason)
        # A negative needs a positive barrier: the drift controller reconciles on every NodePool
        # event, and each change above was marked (and cleared) within the slowest of these.
        slowest = max(probe.took.values())
        hold = max(HOLD_FLOOR_S, HOLD_FACTOR * slowest)
        unchanged = changes_outside_the_hash(requirements)
        with step(f"change {', '.join(unchanged)} in turn: expect no Drifted for {hold:.0f}s "
                  f"after the last ({HOLD_FACTOR}x the slowest mark or clear, "
                  f"{slowest:.1f}s; at least {HOLD_FLOOR_S}s)"):
            with expect.throughout(lambda: probe.drift_is(None), f"NodeClaim {name} never "
                                   f"Drifted by a change outside the template hash", poll=0.25):
                first = time.time()
                for body in unchanged.values():
                    nodepool_factory.patch(pool, body)
                last = time.time()
                expect.consistently(lambda: probe.drift_is(None), f"NodeClaim {name} not "
                                    f"Drifted after {', '.join(unchanged)} changed", hold)
            timeline.band(first, last + hold, f"no Drifted for {hold:.0f}s")
        # The barrier after the hold: with every change above in place, the controller still
        # marks a template change, and clearing it means it found the rest not drifted.
        probe.marks_and_clears("barrier", template_meta(annotations={KIND_KEY: "c"}),
                               template_meta(annotations={KIND_KEY: "a"}), NODEPOOL_DRIFTED,
                               " (annotations again, every non-drift change in place)")
    timings.record(hold_s=round(hold, 1), slowest_s=slowest, **probe.took)


@pytest.mark.scenario("drift-blocked")
@pytest.mark.covers("pod.doNotDisrupt")
def test_do_not_disrupt_holds_a_drifted_node_until_removed(nodepool_factory, inflate_factory,
                                                            expect, timings, timeline):
    """As drift, but pods say karpenter.sh/do-not-disrupt: drifted, kept, replaced once lifted."""
    with step("given 2 do-not-disrupt pods on an oldnode pool"):
        old, new = nodepool_factory.nodeclass("oldnode"), nodepool_factory.nodeclass("newnode")
        pool = nodepool_factory("default", nodeclass=old)
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels,
                                  annotations=DO_NOT_DISRUPT)
        pods = expect.eventually_pods_running(inflate, 2)
        old_claims = {view.name(c) for c in expect.nodeclaims(pool)}
        old_nodes = set(expect.pods_on(pods))

    with step("point the pool's nodeClassRef at newnode"):
        nodepool_factory.point_at(pool, new)
        expect.eventually_drifted(pool, old_claims)

    with step(f"expect no replacement and no deletion while the annotation stands ({HOLD_S}s)"):
        # Karpenter's first act of a drift replacement is a new NodeClaim (seconds after the
        # Drifted mark); the whole replacement took 29-44s unblocked. Watching for the first
        # act over 60s gives a wide margin.
        held = time.time()
        timeline.band(held, held + HOLD_S, f"do-not-disrupt: nothing changes for {HOLD_S}s")
        expect.consistently_nodeclaims_untouched(pool, old_claims, HOLD_S)
        expect.consistently_nodes_present(old_nodes, duration=1)

    with step("remove the annotation from the pods"):
        for pod in pods:
            inflate.annotate_pod(pod.metadata.name, {"karpenter.sh/do-not-disrupt": None})
        lifted = time.time()
        timeline.mark(lifted, "do-not-disrupt removed")

    with step("expect the nodes replaced and the pods Running again"):
        expect.watch_nodes_gone(old_nodes, what=f"drifted nodes {sorted(old_nodes)} to be replaced")
        expect.eventually_pods_running(inflate, 2)
    timings.record(lifted_to_replaced_s=round(time.time() - lifted, 1))


@pytest.mark.scenario("expiration")
@pytest.mark.covers("nodepool.template.expireAfter", "pdb.budget")
@pytest.mark.karpenter_feature("template-expire-after")
def test_expired_nodes_are_replaced(nodepool_factory, inflate_factory, expect, cluster, timings,
                                    timeline):
    """expireAfter (60s locally, longer where nodes take longer to join): nodes are replaced
    once they expire; the pods end Running. The pods have a PDB, as most workloads do:
    expiration is forceful, yet its drain goes through the eviction API, so the budget paces
    it (the protection-holds oracle judges that; this scenario reads the expiry's clock)."""
    # Expiration is Karpenter's own timer on the NodeClaim (requeued at expiry); the deletion
    # it then issues is immediate. Measured 65.1s created -> node deleted for expireAfter 60s.
    pace = ExpirationPacing.for_cluster(cluster.info)
    expire_after = pace.expire_after
    with step(f"given a pool whose nodes expire after {expire_after}s, and inflate at 2 "
              f"under a PDB maxUnavailable 1"):
        pool = nodepool_factory("default", spec={"template": {"spec": {
            "expireAfter": f"{expire_after}s"}}})
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        inflate_factory.pdb(inflate, max_unavailable=1)
        pods = expect.eventually_pods_running(inflate, 2)
        claims = {view.name(c): created_at(c) for c in expect.nodeclaims(pool)}
        first_nodes = set(expect.pods_on(pods))
        timeline.band(min(claims.values()) + expire_after - 1, max(claims.values()) + expire_after
                      + pace.tolerance, f"expireAfter {expire_after}s … +{pace.tolerance}s: "
                                        f"NodeClaims deleted")

    with step(f"expect each NodeClaim deleted once expired: between {expire_after}s and "
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

    with step("expect the pods Running on new nodes"):
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
    with step(f"given a NodeClass on {old_ami} (previous minor) and 3 pods on it"):
        nodeclass = nodepool_factory.nodeclass("ami", spec=cluster.backend.ami_spec(old_ami))
        pool = nodepool_factory("default", nodeclass=nodeclass)
        inflate = inflate_factory(replicas=3, node_selector=pool.template_labels)
        old_nodes = expect.pods_on(expect.eventually_pods_running(inflate, 3))
        amis = {aws_checks.instance_for_node(n.spec.provider_id).ami for n in old_nodes.values()}
        assert amis == {old_ami}, f"instances run {amis}"

    with step(f"pin the NodeClass to {new_ami} (current minor)"):
        nodepool_factory.patch_nodeclass(nodeclass, cluster.backend.ami_spec(new_ami))
        patched = time.time()

    with step("expect the nodes drifted, replaced, and the new instances on the new AMI"):
        expect.watch_nodes_gone(set(old_nodes), what="nodes on the old AMI to be replaced")
        new_nodes = expect.pods_on(expect.eventually_pods_running(inflate, 3))
        amis = {aws_checks.instance_for_node(n.spec.provider_id).ami for n in new_nodes.values()}
        assert amis == {new_ami}, f"replacement instances run {amis}"
    timings.record(patch_to_replaced_s=round(time.time() - patched, 1))


# Static pools at their node limit (replicas 2 = limits.nodes 2): Karpenter's static drift
# reserves a node for each replacement it stages (staticdrift.go, ReserveNodeCount counts active,
# deleting and pending-disruption nodes), so a pool at its limit cannot replace first.
STATIC_HOLD_S = 3 * POLLING_PERIOD_S  # three disruption passes that could have acted


def static_pool_at_its_limit(nodepool_factory, expect):
    """A static pool: replicas 2, limits.nodes 2, no workload; its 2 NodeClaims."""
    pool = nodepool_factory(static(nodepool_factory.spec("default"), replicas=2, node_limit=2))
    return pool, {view.name(c) for c in expect.eventually_static_pool_full(pool, 2)}


@pytest.mark.scenario("static-drift-held-at-limit")
@pytest.mark.covers("gates.TerminateFirstDrift", "nodepool.limits.nodes.static",
                    "nodepool.template.labels")
@pytest.mark.karpenter_feature("static-capacity")
@pytest.mark.feature_gate("StaticCapacity")
def test_a_static_pool_at_its_node_limit_keeps_its_drifted_nodes(nodepool_factory, expect,
                                                                 timeline):
    """TerminateFirstDrift off (the default); a static pool at its node limit (replicas 2,
    limits.nodes 2) drifts: both NodeClaims are Drifted, and Karpenter neither stages a 3rd
    nor deletes one."""
    with step("given a static pool at its node limit: replicas 2, limits nodes 2"):
        pool, old = static_pool_at_its_limit(nodepool_factory, expect)

    with step("change the pool's template labels (drift)"):
        nodepool_factory.patch(pool, template_meta(labels={KIND_KEY: "changed"}))
        timeline.mark(time.time(), "template labels changed")
        expect.eventually_drifted(pool, old)

    with step(f"expect both kept, no replacement staged, for {STATIC_HOLD_S}s"):
        held = time.time()
        timeline.band(held, held + STATIC_HOLD_S, f"at its limit: nothing for {STATIC_HOLD_S}s")
        expect.consistently_nodeclaims_untouched(pool, old, STATIC_HOLD_S)


@pytest.mark.scenario("static-drift-terminate-first")
@pytest.mark.covers("gates.TerminateFirstDrift", "nodepool.limits.nodes.static",
                    "nodepool.template.labels")
@pytest.mark.karpenter_settings(**TERMINATE_FIRST_GATES)
@pytest.mark.karpenter_feature("static-capacity")
@pytest.mark.karpenter_feature("terminate-first-drift")
@pytest.mark.feature_gate("StaticCapacity")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's feature gates in local and kind mode")
def test_terminate_first_replaces_a_drifted_static_pool_within_its_limit(
        nodepool_factory, expect, cluster, timeline, timings):
    """TerminateFirstDrift on; the same static pool at its limit drifts: Karpenter deletes
    each drifted NodeClaim first ("Disrupting NodeClaim: Drifted") and the pool refills to 2
    NodeClaims of the new template, never holding more than 2."""
    with step("given a static pool at its node limit: replicas 2, limits nodes 2"):
        pool, old = static_pool_at_its_limit(nodepool_factory, expect)

    with expect.throughout(expect.nodeclaims_at_most(pool, 2),
                           f"NodePool {pool.name} to hold at most 2 NodeClaims (limits.nodes), "
                           "deleting ones included"):
        with step("change the pool's template labels (drift)"):
            nodepool_factory.patch(pool, template_meta(labels={KIND_KEY: "changed"}))
            patched = time.time()
            timeline.mark(patched, "template labels changed")

        with step("expect each drifted NodeClaim deleted first, then the pool refilled"):
            # One at a time (the default budget, 10% of 2 nodes rounded up): per NodeClaim a
            # disruption pass and its termination, and a static refill between them.
            refill = static_refill_s(cluster.info)
            expect.watch_nodeclaims_end(pool, old, timeout=2 * DISRUPTION_TOLERANCE_S + refill,
                                        what=f"drifted NodeClaims {sorted(old)} to go")
            expect.eventually_karpenter_says(r"Disrupting NodeClaim: Drifted", about=old,
                                             timeout=10)
            claims = expect.eventually_static_pool_full(pool, 2, refill)
            stale = [view.name(c) for c in claims
                     if view.labels(c).get(KIND_KEY) != "changed" or view.name(c) in old]
            assert not stale, f"NodeClaims without the new template: {describe_claims(claims)}"
    timings.record(patch_to_refilled_s=round(time.time() - patched, 1))
