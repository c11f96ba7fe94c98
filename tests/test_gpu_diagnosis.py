"""The GPU scenario's fail-fast: a Ready GPU node that never advertises nvidia.com/gpu (no
NVIDIA device plugin on EKS) fails the wait at once with that reason."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from karpenter_e2e.fixtures.expect import GPU_ADVERTISE_S, gpu_resource_missing

NOW = datetime(2026, 11, 30, 3, 40, tzinfo=UTC).timestamp()


def node(name="ip-10-0-1-7", gpus="1", allocatable_gpus=None, ready_for=300.0, ready=True,
         instance_type="g5.xlarge") -> client.V1Node:
    labels = {"node.kubernetes.io/instance-type": instance_type}
    if gpus is not None:
        labels["karpenter.k8s.aws/instance-gpu-count"] = gpus
    allocatable = {"cpu": "3920m", "memory": "15147100Ki"}
    if allocatable_gpus is not None:
        allocatable["nvidia.com/gpu"] = allocatable_gpus
    since = datetime.fromtimestamp(NOW - ready_for, tz=UTC)
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        status=client.V1NodeStatus(allocatable=allocatable, conditions=[client.V1NodeCondition(
            type="Ready", status="True" if ready else "False", last_transition_time=since)]))


def test_a_gpu_node_ready_past_the_grace_without_the_resource_is_the_verdict():
    verdict = gpu_resource_missing([node()], NOW)
    assert verdict.startswith("GPU nodes advertise no nvidia.com/gpu: ip-10-0-1-7 (g5.xlarge, "
                              "1 GPU, Ready 300s)")
    assert "NVIDIA device plugin is not running" in verdict


def test_no_verdict_while_the_plugin_may_still_be_starting_or_when_it_runs():
    assert gpu_resource_missing([node(ready_for=GPU_ADVERTISE_S - 5)], NOW) is None
    assert gpu_resource_missing([node(allocatable_gpus="1")], NOW) is None
    assert gpu_resource_missing([node(ready=False, ready_for=900)], NOW) is None


def test_cpu_nodes_are_never_suspects():
    assert gpu_resource_missing([node(gpus=None, instance_type="c6a.large"),
                                 node(gpus="0", instance_type="m5.large")], NOW) is None


def test_only_the_stuck_nodes_are_named():
    verdict = gpu_resource_missing([node("ip-a", allocatable_gpus="4", gpus="4"),
                                    node("ip-b", instance_type="g4dn.xlarge")], NOW)
    assert "ip-b (g4dn.xlarge" in verdict and "ip-a" not in verdict
