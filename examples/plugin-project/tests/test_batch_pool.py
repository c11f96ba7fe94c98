"""A platform team's own scenario, written against the karpenter-e2e pytest plugin: no
conftest, the fixtures come from the installed package (`pip install karpenter-e2e`)."""

from pathlib import Path

import pytest

from karpenter_e2e.clusters.api.labels import CAPACITY_TYPE, INSTANCE_TYPE

POOLS = Path(__file__).parent.parent / "pools"


@pytest.mark.scenario("batch-pool")
def test_batch_jobs_run_on_spot_c_and_m_nodes(nodepool_factory, inflate_factory, expect):
    """Given our batch pool and 4 tolerating pods: Karpenter launches spot c/m nodes for them,
    each satisfying every requirement of the pool and carrying its taint."""
    pool = nodepool_factory(POOLS / "batch.yaml")
    batch = inflate_factory("batch", replicas=4, cpu="1", node_selector=pool.template_labels,
                            tolerations=[{"key": "team", "value": "batch",
                                          "effect": "NoSchedule"}])

    pods = expect.eventually_pods_running(batch, 4)
    nodes = list(expect.pods_on(pods).values())
    expect.eventually_nodes_launched_by_karpenter(pool, nodes)
    expect.expect_nodes_satisfy(pool, nodes)

    for node in nodes:
        labels = node.metadata.labels
        assert labels[CAPACITY_TYPE] == "spot", f"{node.metadata.name} is {labels[CAPACITY_TYPE]}"
        assert labels[INSTANCE_TYPE].split(".")[0][0] in "cm", \
            f"{node.metadata.name} is a {labels[INSTANCE_TYPE]}, outside the c/m families"
        taints = {(t.key, t.value, t.effect) for t in node.spec.taints or []}
        assert ("team", "batch", "NoSchedule") in taints, f"{node.metadata.name} taints: {taints}"
