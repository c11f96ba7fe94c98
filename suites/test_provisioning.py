"""Provisioning (workshop 003): Karpenter launches nodes that fit the NodePool, within its limits."""

import allure
import pytest
from kubernetes.utils import parse_quantity

from fixtures import timings as measure
from fixtures.expect import INSTANCE_TYPE
from fixtures.waits import Observation

AWS = "karpenter.k8s.aws"


@pytest.mark.scenario("provisioning")
def test_scale_up_provisions_nodes_that_satisfy_the_nodepool(
        nodepool_factory, inflate_factory, expect, timings):
    """Workshop default NodePool; inflate 0 -> 5: all pods Running on Karpenter's nodes for it."""
    with allure.step("given the workshop default NodePool and inflate at 0 replicas"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels)

    with allure.step("scale inflate to 5"):
        inflate.scale(5)

    with allure.step("expect 5 Running pods, on nodes Karpenter launched for the pool"):
        pods = expect.eventually_pods_running(inflate, 5)
        nodes = list(expect.pods_on(pods).values())
        claims = expect.expect_nodes_launched_by_karpenter(pool, nodes)

    with allure.step("expect every node to satisfy every requirement of the pool"):
        expect.expect_nodes_satisfy(pool, nodes)

    timings.record(**measure.provisioning(pods, list(claims.values()), nodes),
                   nodes=len(nodes), pods=len(pods))
    timings.notes["instance_types"] = ", ".join(sorted(n.metadata.labels[INSTANCE_TYPE] for n in nodes))


def capacity_cpu(nodes) -> float:
    # What Karpenter counts against limits: the nodes' reported capacity. (Its KWOK provider
    # reports a NodeClaim's requests as capacity, so locally this is below the vCPU label.)
    return float(sum(parse_quantity(n.status.capacity["cpu"]) for n in nodes))


def instance_cpu(nodes) -> int:
    return sum(int(n.metadata.labels[f"{AWS}/instance-cpu"]) for n in nodes)


@pytest.mark.scenario("limits")
def test_nodepool_cpu_limit_is_never_exceeded(nodepool_factory, inflate_factory, expect, timings):
    """Workshop limits: cpu 10; 5 -> 12 replicas leaves pods Pending and the pool at <= 10 CPU."""
    with allure.step("given the workshop default NodePool (limits cpu 10) and inflate at 5"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=5, node_selector=pool.template_labels)
        expect.eventually_pods_running(inflate, 5)

    with allure.step("scale inflate to 12"):
        inflate.scale(12)

    with allure.step("expect Karpenter to say the pool's limits are exceeded"):
        said = expect.eventually_karpenter_says(r"exceed limits for nodepool",
                                                namespace=inflate.namespace)
        timings.notes["karpenter_said"] = said[:200]

    with allure.step("expect pods to stay Pending and the pool's CPU to stay <= 10, for 20s"):
        pending = expect.eventually_settled(pool, inflate)
        assert pending > 0, "all 12 pods run: the limit did not bind"

        def within_limit() -> Observation:
            cpu = capacity_cpu(expect.nodes(pool))
            return Observation(cpu <= 10, f"NodePool nodes have {cpu:g} CPU capacity", cpu)

        expect.consistently_pods_pending(inflate, pending, duration=20, also=within_limit)

    status_cpu = expect.nodepool(pool).get("status", {}).get("resources", {}).get("cpu")
    nodes = expect.nodes(pool)
    timings.record(pending_pods=pending, capacity_cpu=capacity_cpu(nodes),
                   instance_cpu=instance_cpu(nodes))
    timings.notes["nodepool_status_cpu"] = str(status_cpu)


@pytest.mark.scenario("rightsizing")
def test_instance_sizes_fit_the_requests(nodepool_factory, inflate_factory, expect, timings):
    """Workshop rightsizing: 8 pods x 1 CPU / 1Gi land on nodes no more than one size too big."""
    with allure.step("given the default NodePool (limit raised to 100 CPU) and inflate at 0"):
        pool = nodepool_factory("default", spec={"limits": {"cpu": "100"}})
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels, memory="1Gi")

    with allure.step("scale inflate to 8"):
        inflate.scale(8)
        pods = expect.eventually_pods_running(inflate, 8)

    with allure.step("expect every node used, and none a size larger than its pods need"):
        per_node: dict[str, int] = {}
        for p in pods:
            per_node[p.spec.node_name] = per_node.get(p.spec.node_name, 0) + 1
        nodes = expect.pods_on(pods)
        assert set(nodes) == set(per_node), "a node of the pool runs none of the pods"
        for name, node in nodes.items():
            cpu = int(node.metadata.labels[f"{AWS}/instance-cpu"])
            # Half this size has cpu/2 minus Karpenter's 100m kube-reserved: too small?
            assert cpu / 2 - 0.1 < per_node[name], \
                f"{name} ({node.metadata.labels[INSTANCE_TYPE]}, {cpu} CPU) runs only " \
                f"{per_node[name]} one-CPU pods: half its size would do"
    timings.record(nodes=len(nodes), instance_cpu=instance_cpu(nodes.values()))
    timings.notes["instance_types"] = ", ".join(sorted(
        n.metadata.labels[INSTANCE_TYPE] for n in nodes.values()))
