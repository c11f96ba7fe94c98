"""A component that exits during bring-up fails the bring-up, naming it and its log: seen on a
loaded machine, where kube-controller-manager gave up at start while the API answered."""

import pytest

from karpenter_e2e.clusters.base import Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.local.cluster import LocalCluster


def test_a_component_dead_after_bring_up_is_an_error_naming_it(monkeypatch):
    cluster = LocalCluster("bringup-check-test")
    monkeypatch.setattr(cluster, "status", lambda: Status(
        False, "", {"kube-apiserver": True, "kube-controller-manager": False, "karpenter": True}))
    monkeypatch.setattr(cluster, "_log_tails", lambda names: f"--- {names[0]} ---\nE1130 "
                        "Error building controller context")
    with pytest.raises(ClusterError, match=r"kube-controller-manager exited during bring-up:\n"
                                           r"--- kube-controller-manager ---"):
        cluster._check_components()
    monkeypatch.setattr(cluster, "status", lambda: Status(True, "", {"kube-apiserver": True}))
    cluster._check_components()
