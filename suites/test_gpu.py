"""GPU placement (seed 000 §1 and summary 3): GPU pods on GPU nodes only, and why they wait."""

import pytest

from karpenter_e2e.fixtures.scenario import (
    DISRUPTION_TOLERANCE_S as TOLERANCE,
    GPU_COUNT,
    GPU_RESOURCE,
    INSTANCE_TYPE,
    Observation,
    describe_claims,
    step,
    untolerated,
    view,
)

GPU_CONSOLIDATE_AFTER = 30  # the GPU pool's (defaults/nodepool-gpu.yaml)
GPU_TOLERATION = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def is_gpu_node(node) -> bool:
    return int(node.status.allocatable.get(GPU_RESOURCE, "0")) > 0


@pytest.mark.scenario("gpu-placement")
@pytest.mark.disruption_loop  # an idle GPU node must be taken back by WhenEmpty in time
@pytest.mark.covers("pod.requests.extended",
                    "nodepool.template.taints",
                    "pod.tolerations.NoSchedule")
def test_gpu_pods_only_on_gpu_nodes_and_cpu_pods_never(nodepool_factory, inflate_factory, expect,
                                                       timings):
    """A tainted GPU pool beside a CPU pool: GPU pods on GPU nodes, CPU pods on CPU nodes."""
    with step("given a GPU pool (g4dn/g5, tainted nvidia.com/gpu) and the default pool"):
        gpu_pool = nodepool_factory("gpu")
        cpu_pool = nodepool_factory("default")
        gpu = inflate_factory("gpu-app", replicas=0, node_selector={}, gpus=1,
                              tolerations=GPU_TOLERATION)
        cpu = inflate_factory("cpu-app", replicas=0, node_selector={})

    with step("scale both workloads to 2"):
        gpu.scale(2)
        cpu.scale(2)
        # Fails at once, with the reason, if a Ready GPU node never advertises its GPUs.
        with expect.throughout(expect.gpus_advertised(gpu_pool), "GPU nodes to advertise "
                                                                 "nvidia.com/gpu"):
            gpu_nodes = expect.node_of_each_pod(expect.eventually_pods_running(gpu, 2))
        cpu_nodes = expect.node_of_each_pod(expect.eventually_pods_running(cpu, 2))

    with step("expect GPU pods on GPU nodes of the GPU pool only"):
        assert all(is_gpu_node(n) and n.metadata.labels.get(GPU_COUNT) for n in gpu_nodes), \
            [n.metadata.labels[INSTANCE_TYPE] for n in gpu_nodes]
        expect.expect_nodes_satisfy(gpu_pool, gpu_nodes)

    with step("expect CPU pods never on a GPU node, and no GPU node standing idle"):
        assert not any(is_gpu_node(n) for n in cpu_nodes), \
            [n.metadata.labels[INSTANCE_TYPE] for n in cpu_nodes]
        expect.expect_nodes_satisfy(cpu_pool, cpu_nodes)
        expect.eventually_settled(gpu_pool, gpu)
        # Karpenter's plan, not kube-scheduler's packing: a NodeClaim's requests are the pods
        # Karpenter scheduled onto it, so every GPU NodeClaim was planned for GPU pods, and no
        # CPU pod was ever nominated to one.
        claims = expect.nodeclaims(gpu_pool)
        unplanned = [view.name(c) for c in claims
                     if int(c["spec"].get("resources", {}).get("requests", {})
                            .get(GPU_RESOURCE, "0")) < 1]
        assert not unplanned, f"GPU NodeClaims planned for no GPU pod: {unplanned} " \
                              f"({describe_claims(claims)})"
        wrong = sorted(f"{e.involved_object.name}: {e.message}"
                       for e in expect.karpenter_events(cpu.namespace)
                       if e.reason == "Nominated" and e.involved_object.name.startswith(
                           f"{cpu.name}-") and f"nodeclaim/{gpu_pool.name}-" in (e.message or ""))
        assert not wrong, f"Karpenter planned CPU pods onto the GPU pool: {wrong}"
        # A GPU node that kube-scheduler left without a GPU pod (Karpenter launched a node per
        # batch of GPU pods, and the scheduler packed them onto one) is empty: the pool's
        # WhenEmpty policy must take it back within consolidateAfter and Karpenter's loop.
        idle = sorted({n.metadata.name for n in expect.nodes(gpu_pool)}
                      - {n.metadata.name for n in gpu_nodes})
        if idle:
            expect.watch_nodes_gone(set(idle), GPU_CONSOLIDATE_AFTER + TOLERANCE,
                                    f"GPU nodes running no GPU pod {idle} to be consolidated "
                                    f"(WhenEmpty, consolidateAfter {GPU_CONSOLIDATE_AFTER}s)")
        timings.record(idle_gpu_nodes=len(idle))
    timings.notes["gpu_types"] = ", ".join(sorted(n.metadata.labels[INSTANCE_TYPE] for n in gpu_nodes))


@pytest.mark.scenario("gpu-no-toleration")
@pytest.mark.covers("nodepool.template.taints", "pod.tolerations.NoSchedule")
def test_gpu_pod_without_toleration_stays_pending_and_says_why(nodepool_factory, inflate_factory,
                                                               expect, diagnose, timings):
    """A GPU pod without the nvidia.com/gpu toleration stays Pending; the verdict names the taint."""
    with step("given only the tainted GPU pool"):
        pool = nodepool_factory("gpu")
        gpu = inflate_factory("gpu-app", replicas=0, node_selector={}, gpus=1)

    with step("scale the GPU workload to 1"):
        gpu.scale(1)

    with step("expect it Pending for 20s, no NodeClaim launched, and the taint named"):
        def no_claims() -> Observation:
            claims = expect.nodeclaims(pool)
            return Observation(not claims, f"NodeClaims of the GPU pool: {describe_claims(claims)}")

        with expect.throughout(no_claims, f"no NodeClaim of {pool.name} for a pod that does "
                                          f"not tolerate its taint"):
            expect.eventually_karpenter_says(untolerated("nvidia.com/gpu="),
                                             namespace=gpu.namespace)
            expect.consistently_pods_pending(gpu, 1, duration=20)
        verdict = diagnose()
        assert verdict.startswith("untolerated taint") and "nvidia.com/gpu" in verdict, verdict
    timings.notes["verdict"] = verdict[:200]
