"""Spot interruption (seed 004): Karpenter cordons, drains and replaces an interrupted node.

EKS and aws-sim: the interruption warning goes to Karpenter's SQS queue, and EC2 is asked what
ran. Never run against AWS yet (see README); in local and kind mode it is skipped with the reason.
"""

import pytest

from karpenter_e2e.fixtures.scenario import CAPACITY_TYPE, Observation, settings, step


@pytest.mark.scenario("interruption")
@pytest.mark.covers("provider.interruption")
@pytest.mark.modes("eks", "aws-sim", reason="needs Karpenter's SQS interruption queue and EC2 spot")
def test_spot_interruption_cordons_drains_and_replaces(nodepool_factory, inflate_factory, expect,
                                                       aws_checks, request, timings):
    """A spot node gets an interruption warning: cordoned, drained, replaced; pods keep running."""
    with step("given a spot-only pool and 2 running pods"):
        pool = nodepool_factory("spot-training")
        inflate = inflate_factory(replicas=2, node_selector=pool.template_labels)
        pods = expect.eventually_pods_running(inflate, 2)
        node = expect.node_of_each_pod(pods)[0]
        instance = aws_checks.instance_for_node(node.spec.provider_id)
        label = node.metadata.labels.get(CAPACITY_TYPE)
        assert instance.capacity_type == "spot" == label, \
            f"node {node.metadata.name}: EC2 lifecycle {instance.capacity_type}, label {label}"

    with step(f"send a spot interruption warning for {instance.instance_id}"):
        queue = aws_checks.queue_url(settings(request.config).interruption_queue
                                     or aws_checks.cluster_name)
        aws_checks.send_spot_interruption(queue, instance.instance_id)

    with step("expect the node cordoned, then gone, with the pods Running elsewhere"):
        def cordoned() -> Observation:
            now = {n.metadata.name: n for n in expect.kube.nodes()}.get(node.metadata.name)
            gone_or_cordoned = now is None or bool(now.spec.unschedulable) or any(
                t.key == "karpenter.sh/disrupted" for t in now.spec.taints or [])
            return Observation(gone_or_cordoned, "still schedulable" if now else "gone")

        expect.eventually(cordoned, f"node {node.metadata.name} to be cordoned")
        expect.watch_nodes_gone({node.metadata.name})
        after = expect.eventually_pods_running(inflate, 2)
        assert node.metadata.name not in {p.spec.node_name for p in after}, \
            f"pods still on interrupted node {node.metadata.name}"
