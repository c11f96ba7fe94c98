"""Volumes: the zones a pod's volumes allow decide where Karpenter launches its node, and a pod
whose claim cannot be bound gets none.

Karpenter reads a pod's PersistentVolumeClaims before it plans (scheduling/volumetopology.go):
a bound claim's PersistentVolume node affinity, or an unbound claim's StorageClass
allowedTopologies (each term one alternative), become requirements of the NodeClaim alone;
a claim that does not exist, or an unbound one of an Immediate class, makes it ignore the
pod. Nothing provisions volumes here (no CSI driver): the PV is a static hostPath one, and the
classes name a provisioner no controller serves, so what is asserted is Karpenter's plan.
"""

import time

import pytest

from karpenter_e2e.fixtures.scenario import (
    NEXT_BATCH_S,
    ZONE,
    Observation,
    claim_requirement,
    describe_claims,
    require,
    step,
    view,
)

NOBODY = "karpenter-e2e.test/nobody"  # a provisioner no controller serves
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # Karpenter reads a claim as bound by it
# How long pods Karpenter must ignore are watched after its NodeClaim for a pod scaled with
# them: a claim for them would come in the same batch or the next.
IGNORED_HOLD_S = NEXT_BATCH_S


def four_zones(cluster) -> tuple[str, str, str, str]:
    """Zones a, b, c and d: the first four Karpenter can launch into (local: us-west-2a-d)."""
    zones = tuple(sorted(cluster.info.zones))
    if len(zones) < 4:
        pytest.skip(f"needs 4 zones, the cluster has {list(zones)}")
    return zones[0], zones[1], zones[2], zones[3]


def zone_in(*zones: str) -> dict:
    return require(ZONE, "In", *zones)


def requiring_zones(*zones: str) -> dict:
    """A pod spec fragment: required node affinity to ``zones``."""
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [zone_in(*zones)]}]}}}}


def topology_term(*zones: str) -> dict:
    return {"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}


def planned_zones(claim) -> list[str] | None:
    return claim_requirement(claim, ZONE).get("values")


@pytest.mark.scenario("volume-topology")
@pytest.mark.covers("volume.pv.nodeAffinity", "volume.storageClass.topology")
def test_volume_zones_constrain_the_nodeclaim(nodepool_factory, inflate_factory, expect,
                                              timings, cluster):
    """A pod requiring zones b or c whose claim is bound to a PV allowing zones a or b: its
    NodeClaim requires zone b alone and the pod runs there. A pod requiring b or d whose
    claim's WaitForFirstConsumer StorageClass allows [a] or [c, d]: Karpenter skips the first
    term, takes the second, and plans its NodeClaim for zone d alone (no provisioner binds
    that claim, so the pod is not expected to run; the node is, in d)."""
    a, b, c, d = four_zones(cluster)
    with step("given pools pv and sc; a static PV (zones a, b) bound to claim "
              "static-data; a WaitForFirstConsumer class (terms [a] | [c, d]) and its "
              "claim wffc-data"):
        pv_pool = nodepool_factory("default", name="pv")
        sc_pool = nodepool_factory("default", name="sc")
        volume = inflate_factory.persistent_volume(
            "static", "static-data", [{"matchExpressions": [zone_in(a, b)]}])
        inflate_factory.claim("static-data", volume=volume)
        wffc = inflate_factory.storage_class("wffc", NOBODY, "WaitForFirstConsumer",
                                             [topology_term(a), topology_term(c, d)])
        inflate_factory.claim("wffc-data", storage_class=wffc)
        on_pv = inflate_factory("on-pv", replicas=0, node_selector=pv_pool.own_nodes,
                                claim="static-data", extra_pod_spec=requiring_zones(b, c))
        on_sc = inflate_factory("on-sc", replicas=0, node_selector=sc_pool.own_nodes,
                                claim="wffc-data", extra_pod_spec=requiring_zones(b, d))

    with step("given kube-controller-manager has bound static-data to the PV"):
        # Karpenter ignores a claim with a volumeName until the PV controller marks the
        # binding complete (ValidatePersistentVolumeClaims), as kube-scheduler does.
        expect.eventually(lambda: bind_completed(inflate_factory, "static-data"),
                          f"claim static-data to be bound to PV {volume}", expect.timeouts.api)

    with step("scale on-pv and on-sc to 1"):
        on_pv.scale(1)
        on_sc.scale(1)

    with step("expect Karpenter's plan: one NodeClaim per pool, pv's for zone b alone, "
              "sc's for zone d alone"):
        claims = expect.eventually(lambda: launched_in(expect, pv_pool, sc_pool),
                                   "a Launched NodeClaim in each of pools pv and sc")
        planned = {pool: [planned_zones(c) for c in cs] for pool, cs in claims.items()}
        assert planned == {pv_pool.name: [[b]], sc_pool.name: [[d]]}, (
            f"expected one NodeClaim requiring {ZONE} In [{b}] (PV {a}|{b} x pod {b}|{c}) and "
            f"one In [{d}] (class [{a}] | [{c}, {d}] x pod {b}|{d}); Karpenter planned (pool: "
            f"zones per NodeClaim) {planned}")

    with step("expect on-pv's pod Running on the pv pool's node, in zone b"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(on_pv, 1)).values())
        expect.eventually_nodes_launched_by_karpenter(pv_pool, nodes)
        expect.expect_nodes_satisfy(pv_pool, nodes)
        zones = {n.metadata.name: n.metadata.labels.get(ZONE) for n in nodes}
        assert list(zones.values()) == [b], f"on-pv's node by zone: {zones} (expected {b})"

    with step("expect the sc pool's NodeClaim to register a node in zone d"):
        names = expect.eventually(lambda: one_registered_node(expect, sc_pool),
                                  f"the NodeClaim of {sc_pool.name} to register its node",
                                  expect.timeouts.provision)
        zones = {n.metadata.name: n.metadata.labels.get(ZONE) for n in expect.nodes(sc_pool)
                 if n.metadata.name in names}
        assert list(zones.values()) == [d], f"sc pool's node by zone: {zones} (expected {d})"
    timings.notes["zones"] = f"pv: {b}, sc: {d}"


def bind_completed(inflate_factory, claim: str) -> Observation:
    """The claim Bound, and the PV controller's bind-completed annotation on it."""
    pvc = inflate_factory.read_claim(claim)
    done = pvc.status.phase == "Bound" and BIND_COMPLETED in (pvc.metadata.annotations or {})
    return Observation(done, f"phase {pvc.status.phase}, annotations "
                             f"{sorted(pvc.metadata.annotations or {})}")


def launched_in(expect, *pools) -> Observation:
    """Every pool has NodeClaims, all Launched; the NodeClaims by pool as its value."""
    claims = {p.name: expect.nodeclaims(p) for p in pools}
    ok = all(claims.values()) and all((view.condition(c, "Launched") or {}).get("status") == "True"
                                      for cs in claims.values() for c in cs)
    return Observation(ok, "; ".join(f"{p}: {describe_claims(cs)}" for p, cs in claims.items()),
                       claims)


def one_registered_node(expect, pool) -> Observation:
    """The pool's one NodeClaim registered; its node's name (in a list) as the value."""
    cs = expect.nodeclaims(pool)
    names = [view.status(c).get("nodeName") for c in cs
             if (view.condition(c, "Registered") or {}).get("status") == "True"]
    return Observation(len(names) == len(cs) == 1, describe_claims(cs), names)


@pytest.mark.scenario("volume-pvc-unbound")
@pytest.mark.covers("volume.pvc.unbound")
def test_pods_whose_claims_cannot_bind_get_no_nodeclaim(nodepool_factory, inflate_factory,
                                                        expect, timings, cluster):
    """Beside a plain pod requiring zone a (the control), a pod mounting a claim that does not
    exist and one mounting an unbound claim of an Immediate class (no provisioner), both
    requiring zone d: Karpenter launches for the control only, nothing more in the 20 s after
    that NodeClaim, and says why it ignores each of the two."""
    a, _, _, d = four_zones(cluster)
    with step("given the default pool, an Immediate class and its unbound claim, and "
              "workloads control (zone a), missing-claim and immediate-claim (zone d)"):
        pool = nodepool_factory("default")
        immediate_class = inflate_factory.storage_class("immediate", NOBODY, "Immediate")
        inflate_factory.claim("immediate-data", storage_class=immediate_class)
        control = inflate_factory("control", replicas=0, node_selector=pool.template_labels,
                                  extra_pod_spec=requiring_zones(a))
        ignored = {
            "missing-claim": (inflate_factory("missing-claim", replicas=0,
                                              node_selector=pool.template_labels, claim="absent",
                                              extra_pod_spec=requiring_zones(d)),
                              r"Failed to schedule pod, .*persistent ?volume ?claim.*not found"),
            "immediate-claim": (inflate_factory("immediate-claim", replicas=0,
                                                node_selector=pool.template_labels,
                                                claim="immediate-data",
                                                extra_pod_spec=requiring_zones(d)),
                                r"Failed to schedule pod, .*immediate volume binding mode must "
                                r"be bound"),
        }

    with step("scale all three to 1"):
        for workload, _ in ignored.values():
            workload.scale(1)
        control.scale(1)
        scaled = time.time()

    with step("expect the control's pod Running on a node Karpenter launched for it"):
        nodes = list(expect.pods_on(expect.eventually_pods_running(control, 1)).values())
        claims = expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        assert [planned_zones(c) for c in claims.values()] == [[a]], \
            f"the control's NodeClaim: {describe_claims(claims.values())}"
        control_claim = view.name(next(iter(claims.values())))

    with step(f"expect no other NodeClaim of the pool for {IGNORED_HOLD_S}s"):
        def only_control() -> Observation:
            cs = expect.nodeclaims(pool)
            others = [c for c in cs if view.name(c) != control_claim]
            return Observation(not others, f"NodeClaims {describe_claims(cs)}, zones "
                                           f"{[planned_zones(c) for c in others]}")

        expect.consistently(only_control, f"no NodeClaim of {pool.name} but {control_claim}",
                            IGNORED_HOLD_S)

    with step("expect Karpenter to say why it ignores each of the two pods"):
        for name, (workload, pattern) in ignored.items():
            pods = [p.metadata.name for p in expect.live_pods(workload)]
            message = expect.eventually_karpenter_says(pattern, workload.namespace, about=pods,
                                                       timeout=expect.timeouts.api)
            timings.notes[name] = message[:160]
    timings.notes["hold_after_scale_s"] = f"{time.time() - scaled:.0f}"
