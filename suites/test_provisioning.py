"""Provisioning (workshop 003, "basic scale-up"): Karpenter launches nodes that fit the NodePool."""

import allure
import pytest

from fixtures import timings as measure


@allure.feature("provisioning")
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
    timings.notes["instance_types"] = ", ".join(
        sorted(n.metadata.labels["node.kubernetes.io/instance-type"] for n in nodes))
