"""Capacity (workshop 003, seeds 000/004; Karpenter's regression suite): on-demand:spot split,
spot-only batch jobs, static NodePools (replicas) and NodeOverlays."""

import time
from collections import Counter

import pytest

from karpenter_e2e.fixtures.scenario import (
    CAPACITY_TYPE,
    DISRUPTION_ROUND_S,
    INSTANCE_TYPE,
    NEXT_BATCH_S,
    NODEPOOL,
    ROOMY_CPU,
    Observation,
    claim_requirement,
    describe_claims,
    narrow,
    require,
    static,
    step,
    view,
)

SPREAD = [{"maxSkew": 1, "topologyKey": "capacity-spread", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "inflate"}}}]


def split(expect, pods) -> Counter:
    """How many pods run on on-demand and on spot nodes, read from the nodes' labels."""
    return Counter(n.metadata.labels[CAPACITY_TYPE] for n in expect.node_of_each_pod(pods))


@pytest.mark.scenario("capacity-split")
@pytest.mark.covers("pod.topologySpread.maxSkew",
                    "pod.topologySpread.topologyKey",
                    "nodepool.requirements.In")
def test_on_demand_to_spot_split_is_one_to_four(nodepool_factory, inflate_factory, expect,
                                                timings):
    """Pools on-demand (capacity-spread 1) and spot (2-5), spread maxSkew 1: 1:4, then 2:8."""
    with step("given the workshop on-demand and spot pools sharing one NodeClass"):
        nodeclass = nodepool_factory.nodeclass("default")
        on_demand = nodepool_factory("on-demand", nodeclass=nodeclass)
        nodepool_factory("spot", nodeclass=nodeclass)
        inflate = inflate_factory(replicas=0, node_selector=on_demand.template_labels,
                                  extra_pod_spec={"topologySpreadConstraints": SPREAD})

    with step("scale inflate to 5: expect 1 pod on on-demand, 4 on spot"):
        inflate.scale(5)
        five = split(expect, expect.eventually_pods_running(inflate, 5))
        assert five == Counter({"on-demand": 1, "spot": 4}), f"5 replicas split {dict(five)}"

    with step("scale inflate to 10: expect 2 on on-demand, 8 on spot"):
        inflate.scale(10)
        ten = split(expect, expect.eventually_pods_running(inflate, 10))
        assert ten == Counter({"on-demand": 2, "spot": 8}), f"10 replicas split {dict(ten)}"
    timings.notes["split"] = f"5 -> {dict(five)}; 10 -> {dict(ten)}"


@pytest.mark.scenario("spot-training")
@pytest.mark.covers("pod.owner", "nodepool.requirements.In")
def test_spot_only_training_job_completes_on_spot(nodepool_factory, inflate_factory, expect,
                                                  timings):
    """A spot-only pool and a 4-pod batch Job: every node is spot and the Job completes."""
    with step("given a spot-only pool with broad instance choice"):
        pool = nodepool_factory("spot-training")

    with step("run a training Job of 4 parallel pods"):
        job = inflate_factory.job("training", 4, node_selector=pool.template_labels, cpu="2",
                                  memory="4Gi")

    with step("expect the Job to complete, with every pod on a spot node"):
        nodes = list(expect.watch_job_placement(job, 4).values())
        expect.eventually_job_complete(job, 4)
        capacity = Counter(n.metadata.labels[CAPACITY_TYPE] for n in nodes)
        assert capacity == Counter({"spot": 4}), f"Job pods ran on {dict(capacity)}"
        expect.expect_nodes_satisfy(pool, list({n.metadata.name: n for n in nodes}.values()))
    timings.notes["instance_types"] = ", ".join(sorted(n.metadata.labels[INSTANCE_TYPE]
                                                       for n in nodes))


LIMIT_HOLD_S = 20  # how long a static pool is watched at its node limit


@pytest.mark.scenario("static-capacity")
@pytest.mark.covers("nodepool.replicas", "nodepool.limits.nodes.static", "gates.StaticCapacity")
@pytest.mark.karpenter_feature("static-capacity")
@pytest.mark.karpenter_feature("node-limits")
@pytest.mark.feature_gate("StaticCapacity")
def test_static_pool_node_count_follows_replicas_within_limit(nodepool_factory, expect,
                                                              timeline):
    """A static pool (spec.replicas) with limits.nodes 3 and no pods: 2 replicas give 2
    launched NodeClaims with nodes; 5 give 3, never a 4th; 1 gives 1."""
    with step("given a static pool: replicas 2, limits nodes 3, no workload"):
        pool = nodepool_factory(static(nodepool_factory.spec("default"), replicas=2,
                                       node_limit=3))

    def launched(n: int):
        """Exactly ``n`` NodeClaims, none deleting, each Launched with its node."""
        return lambda claims: len(claims) == n and all(
            not view.deleting(c) and view.status(c).get("nodeName")
            and (view.condition(c, "Launched") or {}).get("status") == "True" for c in claims)

    with step("expect 2 NodeClaims launched, with no pod asking for them"):
        expect.eventually_nodeclaims(pool, launched(2), "2 launched NodeClaims for replicas 2")
        nodes = expect.nodes(pool)
        assert len(nodes) == 2, f"{len(nodes)} nodes for 2 launched NodeClaims"
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)

    with expect.throughout(expect.nodeclaims_at_most(pool, 3),
                           f"NodePool {pool.name} to hold at most 3 NodeClaims (limits.nodes) "
                           "from replicas 5 on"):
        with step("raise replicas to 5: expect 3 launched NodeClaims (the limit), held"):
            nodepool_factory.patch(pool, {"spec": {"replicas": 5}})
            timeline.mark(time.time(), "replicas 5")
            expect.eventually_nodeclaims(pool, launched(3), "3 launched NodeClaims: replicas 5 "
                                                            "cut to limits.nodes 3")
            held = time.time()
            timeline.band(held, held + LIMIT_HOLD_S, f"limits.nodes 3: no 4th NodeClaim for "
                                                     f"{LIMIT_HOLD_S}s")
            expect.consistently(expect.nodeclaims_at_most(pool, 3),
                                "the pool to stay at 3 NodeClaims", LIMIT_HOLD_S)

    with step("lower replicas to 1: expect 1 NodeClaim left"):
        nodepool_factory.patch(pool, {"spec": {"replicas": 1}})
        timeline.mark(time.time(), "replicas 1")
        expect.eventually_nodeclaims(pool, launched(1), "1 launched NodeClaim for replicas 1")


OVERLAY_RESOURCE = "example.com/dongle"
OVERLAY_TYPE = "r5.xlarge"  # neither the cheapest fit nor otherwise special in the pool


@pytest.mark.scenario("node-overlay-capacity")
@pytest.mark.covers("overlay.capacity", "pod.requests.extended", "gates.NodeOverlay")
@pytest.mark.karpenter_feature("node-overlay")
@pytest.mark.feature_gate("NodeOverlay")
def test_capacity_overlay_decides_the_instance_type(nodepool_factory, inflate_factory, expect):
    """A NodeOverlay gives one type of the pool an extended resource; a pod asking for it gets
    a NodeClaim of that type alone (Karpenter's pick, in the NodeClaim's requirements)."""
    with step(f"given the default pool and an overlay adding {OVERLAY_RESOURCE} to "
              f"{OVERLAY_TYPE} in it"):
        pool = nodepool_factory("default")
        nodepool_factory.overlay("dongle", {
            "requirements": [require(NODEPOOL, "In", pool.name),
                             require(INSTANCE_TYPE, "In", OVERLAY_TYPE)],
            "capacity": {OVERLAY_RESOURCE: "1"}})
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels,
                                  extended={OVERLAY_RESOURCE: "1"})

    with step("scale inflate to 1"):
        inflate.scale(1)
        pods = expect.eventually_pods_running(inflate, 1)

    with step(f"expect Karpenter to have picked {OVERLAY_TYPE} alone"):
        nodes = expect.node_of_each_pod(pods)
        claims = expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        picked = {name: claim_requirement(c, INSTANCE_TYPE).get("values")
                  for name, c in claims.items()}
        assert all(v == [OVERLAY_TYPE] for v in picked.values()), \
            f"NodeClaims' instance types, expected only {OVERLAY_TYPE}: {picked}"
        assert nodes[0].metadata.labels.get(INSTANCE_TYPE) == OVERLAY_TYPE


PRICE_TYPES = ["c5.large", "m5.large"]  # c5.large is the cheaper of the two by the catalogue
CHEAPENED = "m5.large"
# consolidateAfter 0s, a disruption round and a launch (20 s), twice
OVERLAY_PRICE_BOUND_S = 2 * (DISRUPTION_ROUND_S + 20)


@pytest.mark.scenario("node-overlay-price")
@pytest.mark.covers("overlay.price", "gates.NodeOverlay")
@pytest.mark.karpenter_feature("node-overlay")
@pytest.mark.feature_gate("NodeOverlay")
@pytest.mark.own_karpenter(
    "its node is a consolidation candidate only once its nomination expires (20 s after "
    "launch), which changes no cluster state; a consolidation pass over other tests' nodes in "
    "that window marks the cluster consolidated, and Karpenter then re-checks only after 5 min")
@pytest.mark.modes("local", "kind", reason="the launch picks by the fake catalogue's prices")
def test_price_overlay_changes_karpenters_pick(nodepool_factory, inflate_factory, expect,
                                              timeline):
    """A pool of c5.large and m5.large, with an overlay pricing m5.large at $0.001: Karpenter
    replaces the c5.large its provider launched (the cheaper by the catalogue) with an
    m5.large, a NodeClaim of that type alone, because the overlay made it the cheaper one."""
    with step(f"given a pool of {PRICE_TYPES} (consolidateAfter 0s) and an overlay "
              f"pricing {CHEAPENED} at 0.001"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(INSTANCE_TYPE, "In", *PRICE_TYPES))
        spec["spec"]["disruption"]["consolidateAfter"] = "0s"
        pool = nodepool_factory(spec)
        nodepool_factory.overlay("cheaper", {
            "requirements": [require(NODEPOOL, "In", pool.name),
                             require(INSTANCE_TYPE, "In", CHEAPENED)],
            "price": "0.001"})
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels)

    with step("scale inflate to 1"):
        inflate.scale(1)
        first = expect.node_of_each_pod(expect.eventually_pods_running(inflate, 1))[0]
        scaled = time.time()

    with step(f"expect the pod to end on a {CHEAPENED} Karpenter picked alone"):
        timeline.band(scaled, scaled + OVERLAY_PRICE_BOUND_S,
                      f"replaced by {CHEAPENED} within {OVERLAY_PRICE_BOUND_S}s")

        def on_cheapened(claims: list[dict]) -> bool:
            return any(claim_requirement(c, INSTANCE_TYPE).get("values") == [CHEAPENED]
                       and view.status(c).get("nodeName") for c in claims)

        expect.eventually_nodeclaims(pool, on_cheapened, f"a NodeClaim of {CHEAPENED} alone",
                                     OVERLAY_PRICE_BOUND_S)
        expect.watch_nodes_gone({first.metadata.name},
                                max(1.0, scaled + OVERLAY_PRICE_BOUND_S - time.time()),
                                f"the first node {first.metadata.name} to be replaced")
        pods = expect.eventually_pods_running(inflate, 1)
        node = expect.node_of_each_pod(pods)[0]
        assert node.metadata.labels.get(INSTANCE_TYPE) == CHEAPENED, \
            f"the pod runs on {node.metadata.labels.get(INSTANCE_TYPE)}, first on " \
            f"{first.metadata.labels.get(INSTANCE_TYPE)}"


BUFFER_CHUNKS = 3
BUFFER_HOLD_S = NEXT_BATCH_S  # past two of Karpenter's batches: time for a runaway to show


@pytest.mark.scenario("capacity-buffer")
@pytest.mark.covers("gates.CapacityBuffer")
@pytest.mark.karpenter_settings(CapacityBuffer="true")
@pytest.mark.karpenter_feature("capacity-buffer")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's feature gates in local and kind mode")
def test_capacity_buffer_gets_a_nodeclaim_per_chunk(nodepool_factory, inflate_factory, expect,
                                                    timings):
    """A CapacityBuffer of 3 chunks whose PodTemplate asks 1 CPU with hostname anti-affinity
    to its own chunks (the CapacityBuffer gate on): Karpenter provisions as if 3 such pods
    were pending, one NodeClaim per chunk, each requesting one chunk's CPU, and no more for
    20 s; the buffer says it is ready for provisioning. No pod exists."""
    with step(f"given the default pool (limits cpu 100) and a CapacityBuffer of "
              f"{BUFFER_CHUNKS} 1-CPU chunks, one per node"):
        # The workshop pool's 10 CPU would bind: Karpenter counts each planned NodeClaim at
        # its largest instance-type option (up to 8 vCPU) against the limit.
        pool = nodepool_factory("default", spec={"limits": {"cpu": ROOMY_CPU}})
        apart = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "spare"}},
             "topologyKey": "kubernetes.io/hostname"}]}}}
        buffer = inflate_factory.capacity_buffer("spare", BUFFER_CHUNKS, cpu="1",
                                                 node_selector=pool.template_labels,
                                                 extra_pod_spec=apart)

    with step(f"expect {BUFFER_CHUNKS} NodeClaims, one chunk each"):
        claims = expect.eventually_nodeclaims(pool, lambda cs: len(cs) >= BUFFER_CHUNKS,
                                              f"{BUFFER_CHUNKS} NodeClaims for the buffer's chunks")
        cpu = {view.name(c): c["spec"]["resources"]["requests"].get("cpu") for c in claims}
        assert len(claims) == BUFFER_CHUNKS and set(cpu.values()) == {"1"}, \
            f"NodeClaims' CPU requests {cpu}: expected {BUFFER_CHUNKS} of one chunk (1) each"

    with step(f"expect no further NodeClaim for {BUFFER_HOLD_S}s, and the buffer ready"):
        def still_three() -> Observation:
            now = expect.nodeclaims(pool)
            return Observation(len(now) == BUFFER_CHUNKS, describe_claims(now))

        expect.consistently(still_three, f"{BUFFER_CHUNKS} NodeClaims for the buffer",
                            BUFFER_HOLD_S)
        status = inflate_factory.capacity_buffer_status(buffer)
        ready = view.condition({"status": status}, "ReadyForProvisioning") or {}
        assert ready.get("status") == "True" and status.get("replicas") == BUFFER_CHUNKS, \
            f"CapacityBuffer {buffer} status: {status}"
    timings.notes["instance_types"] = ", ".join(sorted(
        view.labels(c).get(INSTANCE_TYPE, "?") for c in expect.nodeclaims(pool)))
