"""Expiration pacing per mode: expireAfter must outlast a node's launch, or on EKS nodes
expire about as fast as they join and the scenario measures nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_e2e.clusters.base import ClusterInfo
from karpenter_e2e.clusters.eks.cluster import NODE_LAUNCH_S
from karpenter_e2e.fixtures.pacing import ExpirationPacing


def info(mode: str, **kwargs) -> ClusterInfo:
    return ClusterInfo(mode=mode, name="x", kubeconfig=Path("/dev/null"), **kwargs)


def test_local_and_kind_keep_the_measured_60s():
    # The README's expiration figures (65.1 s created -> deleted) are for these values.
    assert ExpirationPacing.for_cluster(info("local")) == ExpirationPacing(60, 10, 30)


def test_eks_expires_after_upstreams_3_minutes_and_waits_for_real_terminations():
    pace = ExpirationPacing.for_cluster(info("eks", node_launch_s=NODE_LAUNCH_S))
    assert pace.expire_after == 180  # as upstream's expiration e2e on real clouds
    assert pace.termination >= NODE_LAUNCH_S


@pytest.mark.parametrize("launch", [1, 15, 60, NODE_LAUNCH_S, 300])
def test_nodes_always_run_their_pods_before_they_expire(launch):
    pace = ExpirationPacing.for_cluster(info("any", node_launch_s=launch))
    assert pace.expire_after >= 1.5 * launch and pace.expire_after >= 60
    assert pace.expire_after % 30 == 0

