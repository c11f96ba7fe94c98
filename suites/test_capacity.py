"""Capacity types (workshop 003, seeds 000/004): on-demand:spot split and spot-only batch jobs."""

from collections import Counter

import allure
import pytest

from fixtures.expect import CAPACITY_TYPE, INSTANCE_TYPE

SPREAD = [{"maxSkew": 1, "topologyKey": "capacity-spread", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "inflate"}}}]


def split(expect, pods) -> Counter:
    """How many pods run on on-demand and on spot nodes, read from the nodes' labels."""
    return Counter(n.metadata.labels[CAPACITY_TYPE] for n in expect.node_of_each_pod(pods))


@pytest.mark.scenario("capacity-split")
def test_on_demand_to_spot_split_is_one_to_four(nodepool_factory, inflate_factory, expect,
                                                timings):
    """Pools on-demand (capacity-spread 1) and spot (2-5), spread maxSkew 1: 1:4, then 2:8."""
    with allure.step("given the workshop on-demand and spot pools sharing one NodeClass"):
        nodeclass = nodepool_factory.nodeclass("default")
        on_demand = nodepool_factory("on-demand", nodeclass=nodeclass)
        nodepool_factory("spot", nodeclass=nodeclass)
        inflate = inflate_factory(replicas=0, node_selector=on_demand.template_labels,
                                  extra_pod_spec={"topologySpreadConstraints": SPREAD})

    with allure.step("scale inflate to 5: expect 1 pod on on-demand, 4 on spot"):
        inflate.scale(5)
        five = split(expect, expect.eventually_pods_running(inflate, 5))
        assert five == Counter({"on-demand": 1, "spot": 4}), f"5 replicas split {dict(five)}"

    with allure.step("scale inflate to 10: expect 2 on on-demand, 8 on spot"):
        inflate.scale(10)
        ten = split(expect, expect.eventually_pods_running(inflate, 10))
        assert ten == Counter({"on-demand": 2, "spot": 8}), f"10 replicas split {dict(ten)}"
    timings.notes["split"] = f"5 -> {dict(five)}; 10 -> {dict(ten)}"


@pytest.mark.scenario("spot-training")
def test_spot_only_training_job_completes_on_spot(nodepool_factory, inflate_factory, expect,
                                                  timings):
    """A spot-only pool and a 4-pod batch Job: every node is spot and the Job completes."""
    with allure.step("given a spot-only pool with broad instance choice"):
        pool = nodepool_factory("spot-training")

    with allure.step("run a training Job of 4 parallel pods"):
        job = inflate_factory.job("training", 4, node_selector=pool.template_labels, cpu="2",
                                  memory="4Gi")

    with allure.step("expect the Job to complete, with every pod on a spot node"):
        expect.eventually_job_complete(job, 4)
        nodes = expect.node_of_each_pod(job.pods())
        capacity = Counter(n.metadata.labels[CAPACITY_TYPE] for n in nodes)
        assert capacity == Counter({"spot": 4}), f"Job pods ran on {dict(capacity)}"
        expect.expect_nodes_satisfy(pool, list({n.metadata.name: n for n in nodes}.values()))
    timings.notes["instance_types"] = ", ".join(sorted(n.metadata.labels[INSTANCE_TYPE]
                                                       for n in nodes))
