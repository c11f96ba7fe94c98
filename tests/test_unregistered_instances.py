"""The KWOK provider's Delete removes a NodeClaim, not the node it created, so a NodeClaim
deleted between launch and registration leaves its node: local mode ends such nodes as a
cloud would end the instance, and only those (a registered node left behind is a leak the
teardown check reports)."""

from karpenter_e2e.clusters.awssim.cluster import AwsSimCluster
from karpenter_e2e.clusters.local.cluster import LocalCluster


def stubbed(cluster, listing: str) -> list[tuple]:
    ran: list[tuple] = []

    def kubectl(*args, **kwargs):
        ran.append(args)
        return listing if args[0] == "get" else ""
    cluster.kubectl = kubectl
    return ran


def test_only_unowned_unregistered_nodes_are_ended():
    cluster = LocalCluster("unregistered-test")
    ran = stubbed(cluster, "NodeClaim default-x-a kwok-a\nNode kwok-a\nNode kwok-b\n")
    assert cluster.end_unregistered_instances("karpenter-e2e/test=t1") == ["kwok-b"]
    assert ran[0][:4] == ("get", "nodes,nodeclaims", "-l",
                          "karpenter-e2e/test=t1,!karpenter.sh/registered")
    assert ran[1:] == [("delete", "node", "kwok-b", "--ignore-not-found", "--wait=false")]


def test_aws_sim_leaves_it_to_the_provider():
    cluster = AwsSimCluster("unregistered-test-aws")
    ran = stubbed(cluster, "Node kwok-b\n")
    assert cluster.end_unregistered_instances("karpenter-e2e/test=t1") == []
    assert ran == []
