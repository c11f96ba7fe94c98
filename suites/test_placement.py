"""Placement (workshop 003, seeds 000/004): pods land on the pool, zone, arch and types they ask for."""

import json
import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    ARCH,
    CAPACITY_TYPE,
    CATEGORY,
    CPUS,
    GENERATION,
    GPU_COUNT,
    HOSTNAME,
    INSTANCE_TYPE,
    NODEPOOL,
    ONE_PER_NODE,
    ROOMY_CPU,
    TEST_LABEL,
    ZONE,
    Observation,
    claim_requirement,
    describe_claims,
    narrow,
    one_per_node,
    require,
    stamp,
    step,
    untolerated,
    view,
)


def spread_over(key: str, app: str = "inflate") -> dict:
    """A workload's pods spread over ``key`` (maxSkew 1, DoNotSchedule), as a pod spec fragment."""
    return {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}}}]}


def running_in_default_pool(nodepool_factory, inflate_factory, expect, what: str,
                            pod_spec: dict, replicas: int, pool_spec: dict | None = None):
    """The placement scenarios' shared first steps: the default pool (``pool_spec`` merged
    in), inflate with ``pod_spec`` (a spread or an affinity), scaled to ``replicas`` and all
    Running."""
    with step(f"given the default pool and inflate {what}"):
        pool = nodepool_factory("default", spec=pool_spec) if pool_spec else \
            nodepool_factory("default")
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels,
                                  extra_pod_spec=pod_spec)

    with step(f"scale inflate to {replicas}"):
        inflate.scale(replicas)
        return pool, expect.eventually_pods_running(inflate, replicas)


def labels_of(nodes, key: str) -> list[str]:
    return sorted(n.metadata.labels.get(key, "<unset>") for n in nodes)


def assert_all_labelled(nodes, key: str, want: str, whose: str) -> None:
    """Every node carries ``key=want``; the message names the nodes that do not."""
    wrong = {n.metadata.name: n.metadata.labels.get(key, "<unset>") for n in nodes
             if n.metadata.labels.get(key) != want}
    assert not wrong, f"{whose}: expected {key}={want} on every node, but " + ", ".join(
        f"{name} has {value}" for name, value in sorted(wrong.items()))


@pytest.mark.scenario("weighting")
@pytest.mark.covers("nodepool.weight")
def test_weighted_pool_is_used_first(nodepool_factory, inflate_factory, expect, timings):
    """Weight-2 pool limited to the t family beside the default pool: new nodes are all t."""
    with step("given a spot default pool and the workshop weight-nodepool (weight 2, t family)"):
        # Only the weight may decide: the default pool is made the cheaper one (spot c/m/r
        # costs less per pod than on-demand t) and wins Karpenter's tie-break between equal
        # weights (names in descending order), so ignoring weight would pick it.
        default = nodepool_factory.spec("default")
        for req in default["spec"]["template"]["spec"]["requirements"]:
            if req["key"] == CAPACITY_TYPE:
                req["values"] = ["spot"]
        cheaper = nodepool_factory(default, name="default")
        weighted = nodepool_factory("weight", name="a-weighted")
        # The workshop's weight-workload selects no pool: only this test's nodes.
        inflate = inflate_factory(replicas=0, node_selector={}, memory="1Gi")
        # Both pools able to launch before any pod is pending, or the first Ready one wins.
        expect.eventually_nodepools_ready(cheaper, weighted)

    with step("scale inflate to 8"):
        inflate.scale(8)
        pods = expect.eventually_pods_running(inflate, 8)

    with step("expect every node from the weighted pool, all of category t"):
        nodes = list(expect.pods_on(pods).values())
        assert_all_labelled(nodes, NODEPOOL, weighted.name, "inflate's nodes")
        assert_all_labelled(nodes, CATEGORY, "t", "inflate's nodes")
        expect.expect_nodes_satisfy(weighted, nodes)
        others = expect.nodeclaims(cheaper)
        assert not others, f"NodeClaims launched from the unweighted pool: {describe_claims(others)}"
    timings.notes["instance_types"] = ", ".join(labels_of(nodes, INSTANCE_TYPE))


@pytest.mark.scenario("graviton")
@pytest.mark.covers("pod.nodeSelector")
def test_arm64_pods_run_on_graviton_nodes(nodepool_factory, inflate_factory, expect, timings):
    """A pool allowing amd64 and arm64; pods selecting arm64 run only on arm64 nodes, and pods
    selecting amd64 get amd64 nodes although Graviton types are the cheaper fit."""
    with step("given the workshop Graviton pool (amd64 + arm64)"):
        pool = nodepool_factory("graviton")
        arm = inflate_factory(replicas=0, memory="256M",
                              node_selector={**pool.template_labels, ARCH: "arm64"})
        amd = inflate_factory("inflate-amd64", replicas=0, memory="256M",
                              node_selector={**pool.template_labels, ARCH: "amd64"})

    with step("scale both to 2"):
        arm.scale(2)
        amd.scale(2)
        arm_nodes = expect.node_of_each_pod(expect.eventually_pods_running(arm, 2))
        amd_nodes = expect.node_of_each_pod(expect.eventually_pods_running(amd, 2))

    with step("expect each on nodes of its arch that Karpenter launched for the pool"):
        assert_all_labelled(arm_nodes, ARCH, "arm64", "arm64 pods' nodes")
        assert_all_labelled(amd_nodes, ARCH, "amd64", "amd64 pods' nodes")
        for nodes in (arm_nodes, amd_nodes):
            expect.eventually_nodes_launched_by_karpenter(pool, nodes)
            expect.expect_nodes_satisfy(pool, nodes)
    timings.notes["instance_types"] = ", ".join(labels_of(arm_nodes + amd_nodes, INSTANCE_TYPE))


@pytest.mark.scenario("zone-pinning")
@pytest.mark.covers("nodepool.requirements.In")
def test_pool_pinned_to_one_zone_launches_only_there(nodepool_factory, inflate_factory, expect,
                                                      cluster):
    """A pool requiring one zone: every node it launches is in that zone."""
    zone = cluster.info.zones[-1]
    with step(f"given the default pool, restricted to zone {zone}"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(ZONE, "In", zone))
        pool = nodepool_factory(spec)
        # One pod per node (hostname anti-affinity): four launches, each free to go wrong.
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels,
                                  extra_pod_spec={"affinity": ONE_PER_NODE})

    with step("scale inflate to 4"):
        inflate.scale(4)
        expect.eventually_pods_running(inflate, 4)

    with step(f"expect every node of the pool in {zone}"):
        nodes = expect.nodes(pool)
        assert len(nodes) == 4, f"{len(nodes)} nodes for 4 pods that each need their own"
        assert_all_labelled(nodes, ZONE, zone, f"NodePool {pool.name}")
        expect.expect_nodes_satisfy(pool, nodes)


@pytest.mark.scenario("zonal-spread")
@pytest.mark.covers("pod.topologySpread.maxSkew", "pod.topologySpread.topologyKey")
def test_zone_spread_pods_get_one_node_per_zone(nodepool_factory, inflate_factory, expect):
    """3 pods spread over zones (maxSkew 1, DoNotSchedule) in a pool allowing 4 zones:
    Karpenter launches 3 NodeClaims in 3 different zones, where it would otherwise pack all
    three one-CPU pods onto one node."""
    pool, pods = running_in_default_pool(nodepool_factory, inflate_factory, expect,
                                         "spread over zones", spread_over(ZONE), 3)

    with step("expect three NodeClaims of the pool, one per zone, one pod in each zone"):
        nodes = list(expect.pods_on(pods).values())
        claims = expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        all_claims = expect.nodeclaims(pool)
        assert len(all_claims) == 3, f"{len(all_claims)} NodeClaims for 3 zone-spread pods: " \
                                     f"{describe_claims(all_claims)}"
        zones = {n.metadata.name: n.metadata.labels.get(ZONE) for n in nodes}
        assert len(set(zones.values())) == 3 == len(claims), f"pods' nodes by zone: {zones}"
        expect.expect_nodes_satisfy(pool, nodes)


@pytest.mark.scenario("topology-min-domains")
@pytest.mark.covers("pod.topologySpread.minDomains")
@pytest.mark.own_karpenter(
    "Karpenter takes a zone spread's domains from every NodePool it knows, whatever the pod "
    "selects: beside other tests' pools in zones c and d there are 4 domains, and minDomains "
    "3 no longer decides what the scenario names")
def test_min_domains_above_the_zones_a_pool_has_caps_the_spread(nodepool_factory, inflate_factory,
                                                                 expect, timings):
    """3 pods, one per node, spread over zones with maxSkew 1 and minDomains 3, in a pool of
    two zones: fewer domains than minDomains count as a global minimum of 0, so each zone
    takes one pod. Karpenter launches two NodeClaims, one per zone, and none for the third
    pod, which it says violates the spread."""
    zones = ("us-west-2a", "us-west-2b")
    with step(f"given the default pool in zones {zones} and inflate spread with "
              f"minDomains 3"):
        # Limits raised: Karpenter counts an in-flight NodeClaim at its largest type against
        # them, and the workshop's 10 CPUs would refuse the third pod for that reason first.
        pool = nodepool_factory(narrow(nodepool_factory.spec("default"),
                                       require(ZONE, "In", *zones), replacing=(ZONE,)),
                                spec={"limits": {"cpu": ROOMY_CPU}})
        spread = spread_over(ZONE)
        spread["topologySpreadConstraints"][0]["minDomains"] = 3
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels,
                                  extra_pod_spec={**spread, "affinity": ONE_PER_NODE})

    with step("scale inflate to 3"):
        inflate.scale(3)

    with step("expect a NodeClaim in each zone, and none for the third pod"):
        running = expect.eventually_pods_running(inflate, 2, pending=1)
        nodes = list(expect.pods_on(running).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        assert sorted(labels_of(nodes, ZONE)) == list(zones), \
            f"the running pods' zones: {labels_of(nodes, ZONE)}"
        claims = {view.name(c) for c in expect.nodeclaims(pool)}
        assert len(claims) == 2, \
            f"NodeClaims for 3 pods capped at 2: {describe_claims(expect.nodeclaims(pool))}"
        waiting = [p.metadata.name for p in inflate.pods() if not p.spec.node_name]
        assert len(waiting) == 1, f"pods not bound: {waiting}"
        said = expect.eventually_karpenter_says(r"unsatisfiable topology constraint for "
                                                r"topology spread", namespace=inflate.namespace,
                                                about=waiting)
        # Long past a batch window and the kube-scheduler's retries: no third NodeClaim.
        expect.consistently_nodeclaims_untouched(pool, claims, 20)
    timings.notes["karpenter_said"] = said[:300]


UNTOLERATED = {"key": "karpenter-e2e/reserved", "value": "other-team", "effect": "NoSchedule"}


def given_spread_over_a_tainted_zone(nodepool_factory, inflate_factory, expect,
                                     zones: tuple[str, ...], tainted_zone: str) -> tuple:
    """spread-node-taints-policy's given: pool tainted alone in ``tainted_zone``, pools honor
    and ignore in ``zones``, each with a workload at 0 spread over zones (honor's with
    nodeTaintsPolicy Honor), one pod per node. Returns the pools and workloads by name."""
    pools, workloads = {}, {}
    with step(f"given pool tainted in {tainted_zone} ({UNTOLERATED['key']}:NoSchedule), "
              f"pools honor and ignore in {zones}, 3 pods on each spread over zones"):
        # The tainted pool first: Karpenter leaves a pool out of a round until it is Ready
        # and evaluated, and a round without it would have no zone c to count.
        pools["tainted"] = nodepool_factory(
            narrow(nodepool_factory.spec("default"), require(ZONE, "In", tainted_zone),
                   replacing=(ZONE,)),
            name="tainted", spec={"template": {"spec": {"taints": [UNTOLERATED]}}})
        for name, policy in (("honor", "Honor"), ("ignore", None)):
            # Limits raised: Karpenter counts an in-flight NodeClaim at its largest type
            # against them, and the workshop's 10 CPUs would refuse the third pod first.
            pools[name] = nodepool_factory(
                narrow(nodepool_factory.spec("default"), require(ZONE, "In", *zones),
                       replacing=(ZONE,)),
                name=name, spec={"limits": {"cpu": ROOMY_CPU}})
            spread = spread_over(ZONE, app=name)
            if policy:
                spread["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = policy
            workloads[name] = inflate_factory(name, replicas=0, node_selector=pools[name].own_nodes,
                                              extra_pod_spec={**spread,
                                                              "affinity": one_per_node(name)})
        expect.eventually_nodepools_ready(*pools.values())
    return pools, workloads


@pytest.mark.scenario("spread-node-taints-policy")
@pytest.mark.covers("pod.topologySpread.nodeTaintsPolicy")
@pytest.mark.karpenter_feature("spread-node-taints-policy")
@pytest.mark.own_karpenter(
    "Karpenter takes a zone spread's domains from every NodePool it knows: another test's "
    "untainted pool in zone c (or d) would make c a domain under Honor too, and the Honor "
    "pods would be held to two NodeClaims as the Ignore pods are")
def test_node_taints_policy_honor_leaves_out_a_tainted_pools_zone(nodepool_factory,
                                                                  inflate_factory, expect,
                                                                  timings):
    """Pools `honor` and `ignore` in zones a and b, and pool `tainted` in zone c alone, with a
    NoSchedule taint no pod tolerates. On each of the first two, 3 pods one per node, spread
    over zones (maxSkew 1, DoNotSchedule). Karpenter takes a spread's zones from every
    NodePool, whatever the pod selects. With nodeTaintsPolicy Honor it leaves out c, whose
    only pool's taint the pods do not tolerate: the domains are a and b, and the 3 pods get 3
    NodeClaims, in a and b. With the policy unset (Ignore) c is a domain no pod can reach, at
    0 pods, so a and b may hold one pod each: 2 NodeClaims, and the third pod refused as
    violating the spread (kube-scheduler, counting only the nodes the pod selects, would
    allow it a third node in a or b)."""
    zones, tainted_zone = ("us-west-2a", "us-west-2b"), "us-west-2c"
    pools, workloads = given_spread_over_a_tainted_zone(nodepool_factory, inflate_factory,
                                                        expect, zones, tainted_zone)

    with step("scale both to 3"):
        for w in workloads.values():
            w.scale(3)

    with step(f"expect Honor's plan: 3 NodeClaims, one pod each, in {zones} only"):
        honor, pool = workloads["honor"], pools["honor"]
        # Read once Karpenter is done: counting zone c too, it stops at 2 NodeClaims and
        # the third pod waits, which must fail here, on the plan.
        expect.eventually_settled(pool, honor)
        claims = expect.nodeclaims(pool)
        one_pod_per_claim(claims, 3, "pods spread with nodeTaintsPolicy Honor")
        planned = {view.name(c): claim_requirement(c, ZONE).get("values") or [] for c in claims}
        assert sorted({tuple(z) for z in planned.values()}) == [(z,) for z in zones], \
            f"Honor's NodeClaims by zone requirement: {planned}, expected each in one of " \
            f"{zones} and both used"
        nodes = list(expect.pods_on(expect.eventually_pods_running(honor, 3)).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)

    with step(f"expect Ignore's plan: one NodeClaim in each of {zones}, none for the "
              f"third pod"):
        ignore, pool = workloads["ignore"], pools["ignore"]
        running = expect.eventually_pods_running(ignore, 2, pending=1)
        nodes = list(expect.pods_on(running).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        assert labels_of(nodes, ZONE) == list(zones), \
            f"the running Ignore pods' zones: {labels_of(nodes, ZONE)}"
        claims = {view.name(c) for c in expect.nodeclaims(pool)}
        assert len(claims) == 2, \
            f"NodeClaims for 3 pods capped at 2: {describe_claims(expect.nodeclaims(pool))}"
        waiting = [p.metadata.name for p in ignore.pods() if not p.spec.node_name]
        assert len(waiting) == 1, f"Ignore pods not bound: {waiting}"
        # Zone c among the spread's counts, at 0: the domain that holds the third pod back.
        said = expect.eventually_karpenter_says(
            rf"unsatisfiable topology constraint for topology spread, key={ZONE} \(counts = "
            rf"[^)]*{tainted_zone}: 0", namespace=ignore.namespace, about=waiting)
        # Long past a batch window and the kube-scheduler's retries: no third NodeClaim.
        expect.consistently_nodeclaims_untouched(pool, claims, 20)

    with step("expect no NodeClaim of the tainted pool"):
        stray = expect.nodeclaims(pools["tainted"])
        assert not stray, f"NodeClaims of the tainted pool: {describe_claims(stray)}"
    timings.notes["karpenter_said"] = said[:300]


@pytest.mark.scenario("spread-node-affinity-policy")
@pytest.mark.covers("pod.topologySpread.nodeAffinityPolicy")
@pytest.mark.karpenter_feature("spread-node-affinity-policy")
@pytest.mark.own_karpenter(
    "with nodeAffinityPolicy Ignore kube-scheduler counts every node's zone, whatever the pod "
    "selects: another test's node in zone c (or d) is a domain at 0, so the second Ignore pod "
    "in b is a skew of 2 and stays Pending while Karpenter, whose domains are its pools', "
    "nominates it there (seen beside other tests in make e2e, 2026-12-07)")
def test_node_affinity_policy_decides_whether_pods_the_selector_excludes_count(
        nodepool_factory, inflate_factory, expect, timings):
    """Pool `other` in zone a runs 2 pods of `other`. Pools `honor` and `ignore` in zones a and
    b; on each, 2 pods one per node, pinned to a and b by node affinity and spread over zones
    (maxSkew 1) with a selector that matches `other`'s pods too. nodeAffinityPolicy Honor (the
    default) counts only pods on nodes the pod's node selector and affinity match: a and b
    both at 0, so one NodeClaim in each. Ignore counts `other`'s 2 pods in a: a is 2 ahead, so
    both NodeClaims go to b."""
    zones = ("us-west-2a", "us-west-2b")
    pools, workloads = {}, {}
    with step(f"given pool other in {zones[0]} running 2 pods of other"):
        pools["other"] = nodepool_factory(
            narrow(nodepool_factory.spec("default"), require(ZONE, "In", zones[0]),
                   replacing=(ZONE,)), name="other")
        workloads["other"] = inflate_factory("other", replicas=2,
                                             node_selector=pools["other"].own_nodes)
        expect.eventually_pods_running(workloads["other"], 2)

    with step(f"given pools honor and ignore in {zones}, 2 pods each to spread over "
              "zones, counting other's pods"):
        pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": list(zones)}]}]}}}
        for name, policy in (("honor", None), ("ignore", "Ignore")):
            pools[name] = nodepool_factory(
                narrow(nodepool_factory.spec("default"), require(ZONE, "In", *zones),
                       replacing=(ZONE,)), name=name, spec={"limits": {"cpu": ROOMY_CPU}})
            spread = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                      "labelSelector": {"matchExpressions": [
                          {"key": "app", "operator": "In", "values": ["other", name]}]}}
            if policy:
                spread["nodeAffinityPolicy"] = policy
            workloads[name] = inflate_factory(
                name, replicas=0, node_selector=pools[name].own_nodes,
                extra_pod_spec={"topologySpreadConstraints": [spread],
                                "affinity": {**one_per_node(name), **pinned}})
        expect.eventually_nodepools_ready(*pools.values())

    with step("scale honor and ignore to 2"):
        for name in ("honor", "ignore"):
            workloads[name].scale(2)

    planned = {}
    for name, want in (("honor", sorted(zones)), ("ignore", [zones[1], zones[1]])):
        with step(f"expect {name}'s plan: 2 NodeClaims, one pod each, in {want}"):
            expect.eventually_settled(pools[name], workloads[name])
            claims = expect.nodeclaims(pools[name])
            one_pod_per_claim(claims, 2, f"pods spread with nodeAffinityPolicy {name}")
            planned[name] = sorted(v for c in claims
                                   for v in claim_requirement(c, ZONE).get("values") or [])
            assert planned[name] == want, \
                f"{name}'s NodeClaims by zone requirement: {planned[name]}, expected {want} " \
                f"({describe_claims(claims)})"
            nodes = list(expect.pods_on(expect.eventually_pods_running(workloads[name], 2))
                         .values())
            expect.eventually_nodes_launched_by_karpenter(pools[name], nodes)
    timings.notes["zones"] = "; ".join(f"{k}: {v}" for k, v in planned.items())


RACK = "karpenter-e2e/rack"  # a topology key no pool defines and no node carries


@pytest.mark.scenario("spread-schedule-anyway")
@pytest.mark.covers("pod.topologySpread.whenUnsatisfiable")
def test_a_schedule_anyway_spread_is_relaxed_and_do_not_schedule_is_kept(
        nodepool_factory, inflate_factory, expect, timings):
    """Two pools alike, each with 2 pods spread over a key no node has: as DoNotSchedule the
    spread cannot be met, and Karpenter launches nothing and says so; as ScheduleAnyway it
    is a preference, which Karpenter relaxes away, launching for the pods."""
    pools, workloads = {}, {}
    with step(f"given two pools, 2 pods on each spread over {RACK}: DoNotSchedule, "
              f"ScheduleAnyway"):
        for name, when in (("strict", "DoNotSchedule"), ("anyway", "ScheduleAnyway")):
            pools[name] = nodepool_factory("default", name=name)
            spread = spread_over(RACK, app=name)
            spread["topologySpreadConstraints"][0]["whenUnsatisfiable"] = when
            workloads[name] = inflate_factory(name, replicas=0, extra_pod_spec=spread,
                                              node_selector=pools[name].own_nodes)

    with step("scale both to 2"):
        for w in workloads.values():
            w.scale(2)

    with step("expect the ScheduleAnyway pods running on the pool's nodes"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(workloads["anyway"], 2)).values())
        expect.eventually_nodes_launched_by_karpenter(pools["anyway"], nodes)

    with step("expect no NodeClaim for the DoNotSchedule pods, and Karpenter to say why"):
        strict = workloads["strict"]
        waiting = [p.metadata.name for p in strict.pods()]
        said = expect.eventually_karpenter_says(r"unsatisfiable topology constraint for "
                                                r"topology spread", namespace=strict.namespace,
                                                about=waiting)
        expect.consistently_nodeclaims_untouched(pools["strict"], set(), 15)
        expect.consistently_pods_pending(strict, 2, duration=1)
    timings.notes["karpenter_said"] = said[:300]


@pytest.mark.scenario("spread-match-label-keys")
@pytest.mark.covers("pod.topologySpread.matchLabelKeys")
@pytest.mark.karpenter_feature("spread-match-label-keys")
def test_match_label_keys_spread_each_workload_over_its_own_pods(nodepool_factory,
                                                                  inflate_factory, expect):
    """A pool in zones a, b and c; 2 pods of `old` running in zone a; 3 pods of `new` spread
    over zones (maxSkew 1) with a selector that matches both workloads' pods and
    matchLabelKeys [app]: each pod's own app value joins the selector, so only `new`'s pods
    count and Karpenter plans one NodeClaim in each zone, a included. Counting `old`'s two in
    a, it would plan none there. Each pod takes 1.5 CPUs: none fits beside another pod.
    From Kubernetes 1.34 the API server itself merges matchLabelKeys into the stored selector
    (seen on 1.35.4 with a dry-run create), so Karpenter's own merge shows only on 1.33 and
    older: its mutant runs there."""
    zones = ("us-west-2a", "us-west-2b", "us-west-2c")
    with step(f"given the default pool in zones {zones}, and 2 pods of old in {zones[0]}"):
        pool = nodepool_factory(narrow(nodepool_factory.spec("default"),
                                       require(ZONE, "In", *zones), replacing=(ZONE,)),
                                spec=ROOM_FOR_FOUR)
        old = inflate_factory("old", replicas=2, cpu="1500m",
                              node_selector={**pool.template_labels, ZONE: zones[0]})
        expect.eventually_pods_running(old, 2)
        before = {view.name(c) for c in expect.nodeclaims(pool)}
        both = {TEST_LABEL: inflate_factory.scope.labels[TEST_LABEL]}  # old's pods and new's
        spread = {"topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": both}, "matchLabelKeys": ["app"]}]}
        new = inflate_factory("new", replicas=0, cpu="1500m", node_selector=pool.template_labels,
                              extra_pod_spec=spread)

    with step("scale new to 3"):
        new.scale(3)
        pods = expect.eventually_pods_running(new, 3)

    with step("expect new's 3 NodeClaims one in each zone, a included"):
        expect.eventually_nodes_launched_by_karpenter(pool, list(expect.pods_on(pods).values()))
        claims = [c for c in expect.nodeclaims(pool) if view.name(c) not in before]
        planned = sorted(str(claim_requirement(c, ZONE).get("values")) for c in claims)
        assert planned == sorted(str([z]) for z in zones), \
            f"new's NodeClaims by zone requirement: {planned}, expected one in each of " \
            f"{zones} (old's pods in {zones[0]} must not count) ({describe_claims(claims)})"


@pytest.mark.scenario("instance-exclusion")
@pytest.mark.covers("nodepool.requirements.NotIn")
@pytest.mark.modes("local", "kind", reason="knowing Karpenter's cheapest pick needs the instance "
                   "catalogue it was given; EC2 prices are not known offline")
def test_excluded_types_are_never_launched(nodepool_factory, inflate_factory, expect, cluster,
                                           timings):
    """instance-type NotIn [...] keeps the cheapest fits out: none of them is ever launched."""
    with step("given the default pool, excluding the types it would pick first"):
        # What Karpenter picks for this pool without the exclusion (the provisioning scenario
        # sees it): the cheapest family that fits, per the offerings Karpenter was given.
        spec = nodepool_factory.spec("default")
        excluded = cluster.backend.cheapest_family(spec["spec"]["template"]["spec"]["requirements"])
        narrow(spec, require(INSTANCE_TYPE, "NotIn", *excluded))
        pool = nodepool_factory(spec)
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels)

    with step("scale inflate to 5"):
        inflate.scale(5)
        pods = expect.eventually_pods_running(inflate, 5)

    with step("expect none of the excluded types among the nodes"):
        nodes = list(expect.pods_on(pods).values())
        launched = labels_of(nodes, INSTANCE_TYPE)
        assert not set(launched) & set(excluded), f"launched excluded types: {launched}"
    timings.notes["excluded"] = ", ".join(excluded)
    timings.notes["instance_types"] = ", ".join(launched)


@pytest.mark.scenario("requirement-bounds")
@pytest.mark.covers("nodepool.requirements.Gt", "nodepool.requirements.Lt")
def test_gt_and_lt_bounds_are_exclusive(nodepool_factory, inflate_factory, expect, timings):
    """instance-generation Gt 6 and instance-cpu Lt 4: only 7th-generation types of at most 3
    vCPUs launch. Both bounds are exclusive (Karpenter turns Gt N into >= N+1): the 6th
    generation is cheaper and a 4-vCPU type would take three pods, so either bound taken
    inclusively changes what is launched."""
    with step("given the default pool narrowed to generation Gt 6 and cpu Lt 4"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(GENERATION, "Gt", "6"), require(CPUS, "Lt", "4"),
               replacing=(GENERATION,))
        pool = nodepool_factory(spec, spec={"limits": {"cpu": ROOMY_CPU}})
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels)

    with step("scale inflate to 4 (1 vCPU each)"):
        inflate.scale(4)
        pods = expect.eventually_pods_running(inflate, 4)

    with step("expect every node inside both bounds, one pod per 2-vCPU node"):
        nodes = list(expect.pods_on(pods).values())
        outside = {n.metadata.name: (n.metadata.labels.get(INSTANCE_TYPE),
                                     n.metadata.labels.get(GENERATION), n.metadata.labels.get(CPUS))
                   for n in nodes
                   if not int(n.metadata.labels.get(GENERATION, "0")) > 6
                   or not int(n.metadata.labels.get(CPUS, "99")) < 4}
        assert not outside, f"nodes outside generation Gt 6 / cpu Lt 4 (type, gen, cpu): {outside}"
        # At most 3 vCPUs and none below 2 in the 7th generation: 1.9 allocatable each, so
        # Karpenter must plan exactly one NodeClaim per pod, none for a larger type.
        claims = expect.nodeclaims(pool)
        assert len(claims) == 4, (f"expected 4 NodeClaims (one 1-vCPU pod per <4-vCPU node), "
                                  f"got {len(claims)}: {describe_claims(claims)}")
    timings.notes["instance_types"] = ", ".join(labels_of(nodes, INSTANCE_TYPE))


def open_to_gpu_types(nodepool_factory, name: str, gpu_label: dict) -> dict:
    """The default pool with its category requirement dropped (so GPU types are in reach),
    ``gpu_label`` added as a requirement and a template label naming the pool's kind."""
    spec = narrow(nodepool_factory.spec("default"), gpu_label, replacing=(CATEGORY,))
    view.labels(spec["spec"]["template"])["gpu-label"] = name
    return spec


@pytest.mark.scenario("requirement-existence")
@pytest.mark.covers("nodepool.requirements.Exists", "nodepool.requirements.DoesNotExist")
def test_exists_and_does_not_exist_follow_the_label(nodepool_factory, inflate_factory, expect,
                                                    timings):
    """Two pools open to every category: one requires the GPU-count label to exist, the other
    requires it not to. A 1-vCPU pod on the first gets a GPU type, though plain types cost a
    fifth as much; a GPU pod on the second gets no NodeClaim, and Karpenter says no instance
    type fits, where the first pool would have given it one."""
    with step(f"given a pool requiring {GPU_COUNT} Exists and one requiring it "
              f"DoesNotExist, a 1-vCPU workload on the first and a GPU one on the second"):
        exists = nodepool_factory(open_to_gpu_types(
            nodepool_factory, "exists", require(GPU_COUNT, "Exists")),
            name="exists", spec={"limits": {"cpu": ROOMY_CPU}})
        absent = nodepool_factory(open_to_gpu_types(
            nodepool_factory, "absent", require(GPU_COUNT, "DoesNotExist")),
            name="absent", spec={"limits": {"cpu": ROOMY_CPU}})
        plain = inflate_factory("plain", replicas=0, node_selector=exists.template_labels,
                                cpu="1")
        gpu = inflate_factory("gpu-app", replicas=0, node_selector=absent.template_labels,
                              cpu="1", gpus=1)

    with step("scale both to 1"):
        plain.scale(1)
        gpu.scale(1)

    with step("expect the 1-vCPU pod on a GPU type of the Exists pool"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(plain, 1)).values())
        expect.eventually_nodes_launched_by_karpenter(exists, nodes)
        without = {n.metadata.name: n.metadata.labels.get(INSTANCE_TYPE) for n in nodes
                   if GPU_COUNT not in n.metadata.labels}
        assert not without, f"nodes of the {GPU_COUNT} Exists pool without the label: {without}"
        claims = expect.nodeclaims(exists)
        planned = {view.name(c): claim_requirement(c, GPU_COUNT) for c in claims}
        assert all(r.get("operator") == "Exists" for r in planned.values()), \
            f"NodeClaims' {GPU_COUNT} requirement: {planned}"

    with step("expect no NodeClaim for the GPU pod, and Karpenter to say no type fits"):
        def no_claims() -> Observation:
            claims = expect.nodeclaims(absent)
            return Observation(not claims, f"NodeClaims of {absent.name}: {describe_claims(claims)}")

        waiting = [p.metadata.name for p in gpu.pods()]
        assert len(waiting) == 1, f"GPU workload's pods: {waiting}"
        with expect.throughout(no_claims, f"no NodeClaim of {absent.name}, whose types all lack "
                                          f"nvidia.com/gpu"):
            said = expect.eventually_karpenter_says(
                r"no instance type", namespace=gpu.namespace,
                about=waiting)
            expect.consistently_pods_pending(gpu, 1, duration=15)
    timings.notes["instance_types"] = ", ".join(labels_of(nodes, INSTANCE_TYPE))
    timings.notes["karpenter_said"] = said[:300]


@pytest.mark.scenario("requirement-gte-lte")
@pytest.mark.covers("nodepool.requirements.Gte", "nodepool.requirements.Lte")
@pytest.mark.karpenter_feature("requirement-gte-lte")
def test_gte_and_lte_bound_the_instance_size(nodepool_factory, inflate_factory, expect, timings):
    """The default pool with instance-cpu Gte 8 and Lte 16: a 1-vCPU pod, which a 2-vCPU type
    would fit at a quarter of the price, gets an 8-vCPU node (both bounds are inclusive), and
    its NodeClaim carries the two bounds as Karpenter planned them."""
    with step(f"given the default pool with {CPUS} Gte 8 and Lte 16, and inflate at 1"):
        spec = narrow(nodepool_factory.spec("default"), require(CPUS, "Gte", "8"),
                      require(CPUS, "Lte", "16"))
        pool = nodepool_factory(spec, name="bounded")
        inflate = inflate_factory(replicas=1, node_selector=pool.template_labels, cpu="1")

    with step("expect an 8-vCPU node, and a NodeClaim bounded at 8 and 16"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(inflate, 1)).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        cpus = {n.metadata.name: n.metadata.labels.get(CPUS) for n in nodes}
        # The cheapest type inside the bounds: a Gte read as Gt would make it 16.
        assert set(cpus.values()) == {"8"}, f"{CPUS} of the pool's nodes: {cpus}"
        (claim,) = expect.nodeclaims(pool)
        bounds = sorted((r["operator"], r.get("values")) for r in
                        claim["spec"]["requirements"] if r["key"] == CPUS)
        assert bounds == [("Gte", ["8"]), ("Lte", ["16"])], \
            f"NodeClaim {claim['metadata']['name']}'s {CPUS} requirements: {bounds}"
    timings.notes["instance_types"] = ", ".join(labels_of(nodes, INSTANCE_TYPE))


def zone_terms(*zones: str) -> list[dict]:
    return [{"matchExpressions": [require(ZONE, "In", z)]} for z in zones]


@pytest.mark.scenario("node-affinity-terms")
@pytest.mark.covers("pod.nodeAffinity.required", "pod.nodeAffinity.preferred")
def test_affinity_terms_are_tried_in_order_and_relaxed(nodepool_factory, inflate_factory, expect,
                                                       timings):
    """Two workloads whose first node-affinity choice is a zone no offering has (us-west-2e):
    Karpenter drops the first required term and plans the next (us-west-2d), and takes the
    heaviest preference as required, then relaxes it to the next heaviest (us-west-2c, not
    the lighter us-west-2b). The zone is Karpenter's plan: each NodeClaim's own requirement."""
    with step("given the default pool, one workload with two required terms "
              "[2e | 2d] and one with preferences 2e (100), 2c (60), 2b (20)"):
        pool = nodepool_factory("default")
        required = inflate_factory("required-terms", replicas=0, node_selector=pool.template_labels,
                                   extra_pod_spec={"affinity": {"nodeAffinity": {
                                       "requiredDuringSchedulingIgnoredDuringExecution": {
                                           "nodeSelectorTerms": zone_terms("us-west-2e",
                                                                           "us-west-2d")}}}})
        preferred = inflate_factory("preferred-terms", replicas=0,
                                    node_selector=pool.template_labels,
                                    extra_pod_spec={"affinity": {"nodeAffinity": {
                                        "preferredDuringSchedulingIgnoredDuringExecution": [
                                            {"weight": w, "preference": t} for w, t in zip(
                                                (20, 100, 60),
                                                zone_terms("us-west-2b", "us-west-2e",
                                                           "us-west-2c"), strict=True)]}}})

    with step("scale the preferring workload to 2, then the requiring one to 2"):
        # One after the other: a preference binds nobody, so preferring pods scaled beside
        # the others may be bound to the 2d node by the kube-scheduler. Alone, the only node
        # they can get is the one Karpenter planned for them.
        preferred.scale(2)
        pods = {"preferred-terms": (expect.eventually_pods_running(preferred, 2), "us-west-2c")}
        required.scale(2)
        pods["required-terms"] = (expect.eventually_pods_running(required, 2), "us-west-2d")

    with step("expect each workload's NodeClaims planned in, and its nodes in, its zone"):
        for workload, (running, zone) in pods.items():
            nodes = list(expect.pods_on(running).values())
            assert_all_labelled(nodes, ZONE, zone, workload)
            # Each node's NodeClaim by its nodeName, which Karpenter writes at registration,
            # possibly after the pods were bound: waited for, never read from a snapshot.
            planned = {n.metadata.name: claim_requirement(expect.eventually_nodeclaim_of(pool, n),
                                                          ZONE).get("values")
                       for n in nodes}
            assert all(v == [zone] for v in planned.values()), (
                f"{workload}: expected each NodeClaim to require {ZONE} In [{zone}], "
                f"Karpenter planned (node: zones) {planned}")
            timings.notes[workload] = ", ".join(labels_of(nodes, INSTANCE_TYPE))


@pytest.mark.scenario("prefer-no-schedule")
@pytest.mark.covers("pod.tolerations.PreferNoSchedule")
@pytest.mark.own_karpenter(
    "a NodePool with a PreferNoSchedule taint turns on Karpenter's PreferNoSchedule relaxation "
    "for every pod in the cluster, and a relaxed pod's topology spread loses the round's "
    "placements (a v1.15.0 finding, docs/troubleshooting.md): other tests' spreads would be "
    "planned against it")
def test_prefer_no_schedule_is_honoured_then_relaxed(nodepool_factory, inflate_factory, expect,
                                                     timings):
    """A weight-10 pool tainted dedicated=batch:PreferNoSchedule beside the default pool.
    Karpenter takes the taint as binding first: pods that do not tolerate it get the default
    pool although the tainted pool is tried first. Pods that only the tainted pool can take
    still get its nodes: Karpenter relaxes the preference by tolerating the taint."""
    with step("given a tainted weight-10 pool labelled dedicated=batch and the default pool"):
        tainted = nodepool_factory("default", name="a-prefer-not", spec={
            "weight": 10,
            "template": {"metadata": {"labels": {"dedicated": "batch"}},
                         "spec": {"taints": [{"key": "dedicated", "value": "batch",
                                              "effect": "PreferNoSchedule"}]}}})
        default = nodepool_factory("default")
        anywhere = inflate_factory("anywhere", replicas=0, node_selector={})
        batch_only = inflate_factory("batch-only", replicas=0, node_selector={"dedicated": "batch"})
        # Both pools able to launch before any pod is pending, or the first Ready one wins.
        expect.eventually_nodepools_ready(tainted, default)

    with step("scale the workload any pool fits to 3"):
        anywhere.scale(3)
        nodes = list(expect.pods_on(expect.eventually_pods_running(anywhere, 3)).values())

    with step("expect its nodes from the default pool, none from the tainted one"):
        assert_all_labelled(nodes, NODEPOOL, default.name, "the untolerating pods' nodes")
        claims = expect.nodeclaims(tainted)
        assert not claims, (f"NodeClaims of the PreferNoSchedule pool for pods another pool "
                            f"fits: {describe_claims(claims)}")

    with step("scale the workload only the tainted pool fits to 2"):
        batch_only.scale(2)
        batch_nodes = list(expect.pods_on(expect.eventually_pods_running(batch_only, 2)).values())

    with step("expect its nodes from the tainted pool, carrying the taint"):
        assert_all_labelled(batch_nodes, NODEPOOL, tainted.name, "the batch-only pods' nodes")
        untainted = [n.metadata.name for n in batch_nodes
                     if not any(t.key == "dedicated" and t.effect == "PreferNoSchedule"
                                for t in n.spec.taints or [])]
        assert not untainted, f"nodes of the tainted pool without its taint: {untainted}"
    timings.notes["instance_types"] = ", ".join(labels_of(nodes + batch_nodes, INSTANCE_TYPE))


@pytest.mark.scenario("taints-affinity")
@pytest.mark.covers("nodepool.template.taints",
                    "pod.tolerations.NoSchedule",
                    "nodepool.template.labels")
def test_team_pool_takes_only_tolerating_and_selecting_pods(nodepool_factory, inflate_factory,
                                                            expect):
    """A tainted, labelled team pool beside the default pool: only the team's pods go there."""
    with step("given the default pool and a team pool tainted team=ml:NoSchedule"):
        default = nodepool_factory("default")
        team = nodepool_factory("team")
        team_pods = inflate_factory("team-app", replicas=0, node_selector=team.template_labels,
                                    tolerations=[{"key": "team", "operator": "Equal",
                                                  "value": "ml", "effect": "NoSchedule"}])
        other_pods = inflate_factory("other-app", replicas=0, node_selector={})

    with step("scale both workloads to 3"):
        team_pods.scale(3)
        other_pods.scale(3)
        on_team = expect.node_of_each_pod(expect.eventually_pods_running(team_pods, 3))
        elsewhere = expect.node_of_each_pod(expect.eventually_pods_running(other_pods, 3))

    with step("expect Karpenter to launch the team's nodes from the team pool, tainted, "
              "and the others' from the default pool"):
        assert_all_labelled(on_team, NODEPOOL, team.name, "team-app pods' nodes")
        assert_all_labelled(elsewhere, NODEPOOL, default.name, "other-app pods' nodes")
        expect.expect_nodes_satisfy(team, on_team)
        expect.expect_nodes_satisfy(default, elsewhere)
        # Karpenter's own plan: it never nominated a pod that cannot tolerate the taint to a
        # team-pool NodeClaim ("Pod should schedule on: nodeclaim/<pool>-..."). (Not "no idle
        # team node": when the team's pods come in two batches Karpenter may launch a second
        # team node that kube-scheduler then leaves empty, seen once with -n 6.)
        expect.eventually_settled(team, team_pods)
        wrong = sorted(f"{e.involved_object.name}: {e.message}"
                       for e in expect.karpenter_events(other_pods.namespace)
                       if e.reason == "Nominated"
                       and e.involved_object.name.startswith(f"{other_pods.name}-")
                       and f"nodeclaim/{team.name}-" in (e.message or ""))
        assert not wrong, f"Karpenter planned other-app pods onto the tainted team pool: {wrong}"


def one_pod_per_claim(claims: list[dict], pods: int, what: str) -> None:
    """Karpenter planned ``pods`` NodeClaims, each sized for one pod: a NodeClaim's requests
    are what Karpenter scheduled onto it, and they hold exactly one pod. (Not asserted: that
    they came from one provisioning decision. Their creationTimestamps spread over 11-12 s on
    a loaded machine, past Karpenter's 10 s batch window, so no honest bound separates one
    decision from two.)"""
    assert len(claims) == pods, f"{len(claims)} NodeClaims for {pods} {what}: " \
                                f"{describe_claims(claims)}"
    packed = {view.name(c): c["spec"].get("resources", {}).get("requests", {}).get("pods")
              for c in claims}
    packed = {name: n for name, n in packed.items() if n != "1"}
    assert not packed, f"NodeClaims planned for other than one pod (requests.pods): {packed}"


@pytest.mark.scenario("hostname-spread")
@pytest.mark.covers("pod.topologySpread.maxSkew", "pod.topologySpread.topologyKey")
def test_hostname_spread_gets_one_node_per_pod(nodepool_factory, inflate_factory, expect):
    """4 one-CPU pods spread over hostnames (maxSkew 1, DoNotSchedule): Karpenter plans 4
    NodeClaims, each for one pod, where it would otherwise pack them."""
    pool, pods = running_in_default_pool(nodepool_factory, inflate_factory, expect,
                                         "spread over hostnames", spread_over(HOSTNAME), 4)

    with step("expect 4 NodeClaims, each sized for one pod"):
        nodes = list(expect.pods_on(pods).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        one_pod_per_claim(expect.nodeclaims(pool), 4, "hostname-spread pods")
        assert len(nodes) == 4, f"4 pods on {len(nodes)} nodes"
        expect.expect_nodes_satisfy(pool, nodes)


@pytest.mark.scenario("anti-affinity")
@pytest.mark.covers("pod.podAntiAffinity.required")
def test_anti_affine_pods_get_one_node_each(nodepool_factory, inflate_factory, expect):
    """4 pods with required anti-affinity to each other on hostname: Karpenter plans 4
    NodeClaims, one pod each."""
    pool, pods = running_in_default_pool(nodepool_factory, inflate_factory, expect,
                                         "anti-affine to itself per node", {"affinity": ONE_PER_NODE}, 4)

    with step("expect 4 NodeClaims, each sized for one pod"):
        nodes = list(expect.pods_on(pods).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        one_pod_per_claim(expect.nodeclaims(pool), 4, "anti-affine pods")
        expect.expect_nodes_satisfy(pool, nodes)


# The same anti-affinity as a preference (weight 100): kube-scheduler may ignore it, Karpenter
# plans for it as long as it can be met.
# Room for 4 new NodeClaims in one scheduling round: Karpenter counts each new NodeClaim
# against the pool's limits at the largest type it could become, so under the workshop's 10
# CPUs only 2 fit in a round; the other pods fail once, and a pod that failed has its
# preferences relaxed (seen on v1.13.0-v1.15.0: 2 NodeClaims, one of them for 3 pods).
ROOM_FOR_FOUR = {"limits": {"cpu": ROOMY_CPU}}
PREFERRED_ONE_PER_NODE = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
    "weight": 100, "podAffinityTerm": ONE_PER_NODE["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"][0]}]}}


@pytest.mark.scenario("preferred-anti-affinity")
@pytest.mark.covers("pod.podAntiAffinity.preferred")
def test_preferred_anti_affinity_is_planned_for_while_it_can_be_met(nodepool_factory,
                                                                     inflate_factory, expect):
    """4 pods with *preferred* anti-affinity to each other on hostname, a pool with room for
    4 nodes: under the default PREFERENCE_POLICY (Respect) Karpenter keeps a preference as a
    constraint until nothing fits, so it plans 4 NodeClaims, one pod each, where it would
    otherwise pack them."""
    pool, pods = running_in_default_pool(nodepool_factory, inflate_factory, expect,
                                         "preferring one pod per node",
                                         {"affinity": PREFERRED_ONE_PER_NODE}, 4, ROOM_FOR_FOUR)

    with step("expect 4 NodeClaims, each sized for one pod"):
        nodes = list(expect.pods_on(pods).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        one_pod_per_claim(expect.nodeclaims(pool), 4, "pods preferring anti-affinity")


@pytest.mark.scenario("preference-policy-ignore")
@pytest.mark.covers("options.PREFERENCE_POLICY")
@pytest.mark.karpenter_settings(PREFERENCE_POLICY="Ignore")
@pytest.mark.karpenter_feature("preference-policy")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's settings in local and kind mode")
def test_preference_policy_ignore_packs_pods_that_prefer_to_spread(nodepool_factory,
                                                                    inflate_factory, expect):
    """PREFERENCE_POLICY Ignore; the preferred-anti-affinity pods and pool: Karpenter drops
    the preference instead of trying it, and packs the 4 one-CPU pods onto fewer NodeClaims
    than pods, at least one planned for more than one pod."""
    pool, pods = running_in_default_pool(nodepool_factory, inflate_factory, expect,
                                         "preferring one pod per node",
                                         {"affinity": PREFERRED_ONE_PER_NODE}, 4, ROOM_FOR_FOUR)

    with step("expect fewer NodeClaims than pods, one planned for several"):
        expect.eventually_nodes_launched_by_karpenter(pool, list(expect.pods_on(pods).values()))
        claims = expect.nodeclaims(pool)
        planned = {view.name(c): int(c["spec"].get("resources", {}).get("requests", {})
                                     .get("pods", "0")) for c in claims}
        assert len(claims) < 4 and max(planned.values()) > 1, \
            f"Karpenter honoured the preference under Ignore: {len(claims)} NodeClaims for 4 " \
            f"pods, pods planned per NodeClaim {planned} ({describe_claims(claims)})"


# Karpenter's SCHEDULER_CONFIG: one default constraint, a zone spread, as a cluster whose
# kube-scheduler has it would give it (upstream forbids a labelSelector there: each pod's is
# deduced from the Services and the ReplicaSet that select it).
DEFAULT_ZONE_SPREAD = json.dumps({"podTopologySpread": {"defaultConstraints": [{
    "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}},
    separators=(",", ":"))


@pytest.mark.scenario("scheduler-config-default-spread")
@pytest.mark.covers("options.SCHEDULER_CONFIG")
@pytest.mark.karpenter_settings(SCHEDULER_CONFIG=DEFAULT_ZONE_SPREAD)
@pytest.mark.karpenter_feature("scheduler-config")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's settings in local and kind mode")
def test_scheduler_config_default_spread_is_given_to_pods_without_their_own(
        nodepool_factory, inflate_factory, expect, timings):
    """SCHEDULER_CONFIG with one default constraint, a zone spread (maxSkew 1, DoNotSchedule);
    two pools of every zone, 3 one-CPU pods on each. `plain` declares no spread: Karpenter
    gives its pods the default, the selector deduced from their ReplicaSet, and plans 3
    NodeClaims in 3 zones, where it would pack them. `own` declares its own spread (over
    hostnames, maxSkew 3), which replaces the default whole: one NodeClaim for its 3 pods.
    The harness's kube-scheduler has no default constraints: the plan is Karpenter's alone."""
    pools, workloads = {}, {}
    with step("given pools plain and own, 3 pods on each: plain without a spread, own "
              "spread over hostnames with maxSkew 3"):
        for name in ("plain", "own"):
            pools[name] = nodepool_factory("default", name=name, spec=ROOM_FOR_FOUR)
            spread = {}
            if name == "own":
                spread = spread_over(HOSTNAME, app=name)
                spread["topologySpreadConstraints"][0]["maxSkew"] = 3
            workloads[name] = inflate_factory(name, replicas=0, node_selector=pools[name].own_nodes,
                                              extra_pod_spec=spread)

    with step("scale both to 3"):
        for w in workloads.values():
            w.scale(3)

    with step("expect plain's plan: 3 NodeClaims, one pod each, in 3 zones"):
        # Read once Karpenter is done: without the default the three pods share one
        # NodeClaim, which must fail here, on the plan.
        expect.eventually_settled(pools["plain"], workloads["plain"])
        claims = expect.nodeclaims(pools["plain"])
        one_pod_per_claim(claims, 3, "pods given the default zone spread")
        zones = {view.name(c): claim_requirement(c, ZONE).get("values") or [] for c in claims}
        assert len({z[0] for z in zones.values() if len(z) == 1}) == 3, \
            f"plain's NodeClaims by zone requirement: {zones}, expected 3 zones, one each"

    with step("expect own's plan: its own spread, one NodeClaim for its 3 pods"):
        expect.eventually_settled(pools["own"], workloads["own"])
        claims = expect.nodeclaims(pools["own"])
        planned = {view.name(c): c["spec"].get("resources", {}).get("requests", {}).get("pods")
                   for c in claims}
        assert list(planned.values()) == ["3"], \
            f"own's NodeClaims (pods planned on each): {planned}, expected one for all 3: its " \
            f"own spread, not the default, decides"

    with step("expect every pod Running on the nodes Karpenter launched for its pool"):
        for name, w in workloads.items():
            nodes = list(expect.pods_on(expect.eventually_pods_running(w, 3)).values())
            expect.eventually_nodes_launched_by_karpenter(pools[name], nodes)
            timings.notes[name] = ", ".join(labels_of(nodes, INSTANCE_TYPE))


def followers_go_to_the_anchors_zone(nodepool_factory, inflate_factory, expect, cluster,
                                     term: str, pool_spec: dict | None = None) -> None:
    """A pod already running in the last zone; 3 one-CPU pods with zone affinity to it of
    the kind ``term`` (required, or preferred at weight 100): Karpenter plans their NodeClaims
    for that zone only (the claims' zone requirement), though the pool allows every zone."""
    zone = cluster.info.zones[-1]
    with step(f"given the default pool and an anchor pod running in {zone}"):
        pool = nodepool_factory("default", spec=pool_spec) if pool_spec else \
            nodepool_factory("default")
        anchor = inflate_factory("anchor", replicas=1,
                                 node_selector={**pool.template_labels, ZONE: zone})
        anchor_node = expect.node_of_each_pod(expect.eventually_pods_running(anchor, 1))[0]
        anchor_claims = {view.name(c) for c in expect.nodeclaims(pool)}
        to_anchor = {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "anchor"}}}
        affinity = {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [to_anchor]
            if term == "required" else [],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": to_anchor}] if term == "preferred" else []}}
        # Each follower needs its own CPU: none fits beside the anchor on its node.
        followers = inflate_factory("follower", replicas=0, node_selector=pool.template_labels,
                                    extra_pod_spec={"affinity": affinity})

    with step("scale the followers to 3"):
        followers.scale(3)
        pods = expect.eventually_pods_running(followers, 3)

    with step(f"expect Karpenter's new NodeClaims to be for {zone} only"):
        nodes = list(expect.pods_on(pods).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        new = [c for c in expect.nodeclaims(pool) if view.name(c) not in anchor_claims]
        assert new, f"no NodeClaim for the followers: all run beside the anchor on " \
                    f"{anchor_node.metadata.name}"
        zones = {view.name(c): claim_requirement(c, ZONE).get("values") for c in new}
        wrong = {name: values for name, values in zones.items() if values != [zone]}
        assert not wrong, f"follower NodeClaims not planned for {zone} only (zone " \
                          f"requirement): {wrong}"
        assert_all_labelled(nodes, ZONE, zone, "followers' nodes")


@pytest.mark.scenario("pod-affinity")
@pytest.mark.covers("pod.podAffinity.required")
def test_affine_pods_follow_an_existing_pod_to_its_zone(nodepool_factory, inflate_factory,
                                                        expect, cluster):
    """A pod already running in the last zone; 3 one-CPU pods with required zone affinity to
    it: Karpenter plans their NodeClaims for that zone only (the claims' zone requirement),
    though the pool allows every zone."""
    followers_go_to_the_anchors_zone(nodepool_factory, inflate_factory, expect, cluster,
                                     "required")


@pytest.mark.scenario("preferred-pod-affinity")
@pytest.mark.covers("pod.podAffinity.preferred")
def test_preferred_affinity_takes_pods_to_the_anchors_zone_while_it_can(
        nodepool_factory, inflate_factory, expect, cluster):
    """The same with *preferred* zone affinity (weight 100) and room for 4 nodes: under the
    default PREFERENCE_POLICY (Respect) Karpenter plans for the preference as long as it can
    be met, so the followers' NodeClaims are for the anchor's zone only."""
    followers_go_to_the_anchors_zone(nodepool_factory, inflate_factory, expect, cluster,
                                     "preferred", ROOM_FOR_FOUR)


HOST_PORT = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]


@pytest.mark.scenario("host-ports")
@pytest.mark.covers("pod.hostPorts")
def test_pods_asking_one_host_port_get_a_nodeclaim_each(nodepool_factory, inflate_factory, expect):
    """3 small pods (100m CPU) asking the same hostPort 8080: Karpenter plans 3 NodeClaims,
    one pod each, where it would otherwise pack all three onto one node."""
    with step("given the default pool and inflate (100m CPU) asking hostPort 8080"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels, cpu="100m",
                                  ports=HOST_PORT)

    with step("scale inflate to 3"):
        inflate.scale(3)

    with step("expect Karpenter's plan: 3 NodeClaims, each sized for one pod"):
        # Read once Karpenter is done, before the pods run: a plan that packed them leaves
        # two Pending (kube-scheduler keeps one per node), and that must fail here, on the
        # plan, not on a wait for pods.
        expect.eventually_settled(pool, inflate)
        one_pod_per_claim(expect.nodeclaims(pool), 3, "pods asking one hostPort")

    with step("expect the 3 pods Running on 3 nodes Karpenter launched for the pool"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(inflate, 3)).values())
        assert len(nodes) == 3, f"3 pods asking one hostPort on {len(nodes)} nodes"
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        expect.expect_nodes_satisfy(pool, nodes)


STARTUP_TAINT = {"key": "karpenter-e2e/agent", "value": "starting", "effect": "NoSchedule"}


REASON_S = 10  # registration to the Initialized reason naming the startup taint


@pytest.mark.scenario("startup-taints")
@pytest.mark.covers("nodepool.template.startupTaints")
def test_startup_taints_are_ignored_for_scheduling_and_hold_initialization(
        nodepool_factory, inflate_factory, expect, cluster, timings):
    """A pool whose template has a startup taint (an agent's "not ready yet") and a pod that
    does not tolerate it: Karpenter launches for the pod anyway, puts the taint on the node
    at registration, keeps the NodeClaim uninitialized (StartupTaintsExist) and launches no
    second one while the pod waits; once the agent takes the taint off, the NodeClaim is
    Initialized and the pod runs there."""
    with step(f"given the default pool with startup taint {STARTUP_TAINT['key']} and "
              f"inflate at 1 without a toleration"):
        pool = nodepool_factory("default", spec={"template": {"spec": {
            "startupTaints": [STARTUP_TAINT]}}})
        inflate = inflate_factory(replicas=1, node_selector=pool.template_labels)

    with step("expect a NodeClaim anyway, and its node registered with the taint"):
        claim = expect.eventually(lambda: one_registered(expect, pool),
                                  f"a NodeClaim of {pool.name} registered")
        name, node_name = view.name(claim), claim["status"]["nodeName"]
        (node,) = [n for n in expect.nodes(pool) if n.metadata.name == node_name]
        taints = [t.key for t in node.spec.taints or []]
        assert STARTUP_TAINT["key"] in taints, f"node {node_name}'s taints: {taints}"

    with step("expect it uninitialized, and no second NodeClaim, while the taint is on"):
        def held(reason: bool) -> Observation:
            return held_alone(expect, pool, name, reason)

        # Uninitialized and alone from registration on; the reason may first be the
        # unregistered taint the registration just removed (v1.0.x-v1.1.x judge initialization
        # on the node as read before their own patch), then the startup taint.
        with expect.throughout(lambda: held(reason=False), f"NodeClaim {name} uninitialized, "
                                                           "alone"):
            expect.eventually(lambda: held(reason=True), f"NodeClaim {name} uninitialized for "
                              "its startup taint (StartupTaintsExist)", timeout=REASON_S)
            # Longer than Karpenter's batch window and the kube-scheduler's retries: a pass
            # that took the taint as permanent would launch another node for the waiting pod.
            expect.consistently(lambda: held(reason=True),
                                f"NodeClaim {name} held uninitialized, alone", 20)

    with step("take the taint off, as the agent would"):
        # The removal is visible to Karpenter from some moment after the request is sent
        # (read, then patch: over 1.7 s under load), so that is the lower bound.
        removed = time.time()
        cluster.kube.remove_node_taint(node_name, STARTUP_TAINT["key"])

    with step("expect the NodeClaim Initialized and the pod running on its node"):
        init = expect.eventually(lambda: initialized(expect, pool, name),
                                 f"NodeClaim {name} to be Initialized", timeout=30)
        at = stamp(init["lastTransitionTime"], f"NodeClaim {name}'s Initialized")
        assert removed - 1 <= at, \
            f"NodeClaim {name} Initialized {removed - at:.0f}s before its startup taint was removed"
        nodes = list(expect.pods_on(expect.eventually_pods_running(inflate, 1)).values())
        assert [n.metadata.name for n in nodes] == [node_name], \
            f"the pod runs on {[n.metadata.name for n in nodes]}, not {node_name}"
        assert [view.name(c) for c in expect.nodeclaims(pool)] == [name]
    timings.record(removed_to_initialized_s=round(at - removed, 1))


def one_registered(expect, pool) -> Observation:
    """The pool's one NodeClaim registered (its node joined), as its value."""
    claims = expect.nodeclaims(pool)
    done = [c for c in claims if (view.condition(c, "Registered") or {}).get("status") == "True"]
    return Observation(len(done) == 1, f"NodeClaims {describe_claims(claims)}",
                       done[0] if done else None)


def held_alone(expect, pool, name: str, reason: bool) -> Observation:
    """NodeClaim ``name`` the pool's only one, not Initialized (``reason``: for its startup
    taint, StartupTaintsExist)."""
    claims = expect.nodeclaims(pool)
    init = view.condition(next((c for c in claims if view.name(c) == name), {}),
                          "Initialized") or {}
    ok = ({view.name(c) for c in claims} == {name} and init.get("status") != "True"
          and (not reason or init.get("reason") == "StartupTaintsExist"))
    return Observation(ok, f"Initialized {init.get('status')} ({init.get('reason')}: "
                           f"{init.get('message')}); NodeClaims {describe_claims(claims)}")


def initialized(expect, pool, name: str) -> Observation:
    """NodeClaim ``name`` Initialized; the condition as its value."""
    now: dict = next((c for c in expect.nodeclaims(pool) if view.name(c) == name), {})
    init = view.condition(now, "Initialized") or {}
    return Observation(init.get("status") == "True", f"Initialized: {init}", init)


NO_EXECUTE = {"key": "dedicated", "value": "batch", "effect": "NoExecute"}


@pytest.mark.scenario("no-execute-taint")
@pytest.mark.covers("pod.tolerations.NoExecute")
def test_a_no_execute_taint_needs_a_no_execute_toleration(nodepool_factory, inflate_factory,
                                                          expect, timings):
    """A pool tainted dedicated=batch:NoExecute: pods tolerating it get its nodes; pods
    without a toleration, or tolerating only NoSchedule, get no NodeClaim, no nomination to
    the pool's node, and Karpenter's "did not tolerate taint" for each."""
    with step("given a pool tainted dedicated=batch:NoExecute and three workloads on it: "
              "tolerating NoExecute, no toleration, tolerating NoSchedule"):
        pool = nodepool_factory("default", name="batch",
                                spec={"template": {"spec": {"taints": [NO_EXECUTE]}}})
        tolerating = inflate_factory("tolerating", replicas=0, node_selector=pool.own_nodes,
                                     tolerations=[{**NO_EXECUTE, "operator": "Equal"}])
        bare = inflate_factory("bare", replicas=0, node_selector=pool.own_nodes)
        wrong_effect = inflate_factory("wrong-effect", replicas=0, node_selector=pool.own_nodes,
                                       tolerations=[{**NO_EXECUTE, "operator": "Equal",
                                                     "effect": "NoSchedule"}])
        # The pool Ready before any pod is pending: each round until then Karpenter logs
        # "ignoring nodepool, not ready" at ERROR, four times on kind before its NodeClass was
        # Ready, which the log oracle counts as an error loop.
        expect.eventually_nodepools_ready(pool)

    with step("scale each to 1"):
        for w in (tolerating, bare, wrong_effect):
            w.scale(1)

    with step("expect the tolerating pod on a node of the pool, tainted NoExecute"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(tolerating, 1)).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        taints = [(t.key, t.effect) for n in nodes for t in n.spec.taints or []]
        assert (NO_EXECUTE["key"], "NoExecute") in taints, f"the pool's node's taints: {taints}"
        claims = {view.name(c) for c in expect.nodeclaims(pool)}

    with step("expect Karpenter to refuse the others the pool, and say why"):
        for w in (bare, wrong_effect):
            waiting = [p.metadata.name for p in w.pods()]
            expect.eventually_karpenter_says(untolerated("dedicated=batch:NoExecute"),
                                             namespace=w.namespace,
                                             about=waiting)
        expect.consistently_nodeclaims_untouched(pool, claims, 15)
        nominated = sorted(f"{e.involved_object.name}: {e.message}"
                           for e in expect.karpenter_events(bare.namespace)
                           if e.reason == "Nominated"
                           and not e.involved_object.name.startswith(f"{tolerating.name}-"))
        assert not nominated, f"Karpenter nominated untolerating pods: {nominated}"
    timings.notes["instance_types"] = ", ".join(labels_of(nodes, INSTANCE_TYPE))
