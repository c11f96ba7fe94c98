"""The kind config a cluster is created with."""

from __future__ import annotations

from pathlib import Path

import yaml

# Keeps the suites' pods off the kind node, so they stay pending until Karpenter's kwok
# nodes exist; CoreDNS, kube-proxy, the CNI, kwok and Karpenter's chart tolerate it.
CRITICAL_ADDONS_ONLY = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}
# kubeadm's own control-plane taint: naming taints replaces kubeadm's defaults, and kind
# removes this one from a single-node cluster with `kubectl taint ... control-plane-`, which
# fails if it is absent (sigs.k8s.io/kind pkg/cluster/internal/create/actions/kubeadminit).
KUBEADM_CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def cgroup_v1() -> bool:
    return not Path("/sys/fs/cgroup/cgroup.controllers").exists()


def kind_config(kubernetes: str) -> str:
    """The cluster's kind config: the control plane registers already tainted, so no pod can
    land on it in a window between creation and a later taint; on a cgroup v1 host, kubelet
    is told to run anyway (Kubernetes 1.35+ refuses v1 unless failCgroupV1 is false)."""
    init = {"kind": "InitConfiguration",
            "nodeRegistration": {"taints": [CRITICAL_ADDONS_ONLY, KUBEADM_CONTROL_PLANE]}}
    patches = [yaml.safe_dump(init)]
    minor = tuple(int(x) for x in kubernetes.lstrip("v").split(".")[:2])
    if cgroup_v1() and minor >= (1, 31):  # the field exists from 1.31 on
        patches.append(yaml.safe_dump({"kind": "KubeletConfiguration", "failCgroupV1": False}))
    return yaml.safe_dump({"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                           "nodes": [{"role": "control-plane",
                                      "kubeadmConfigPatches": patches}]},
                          sort_keys=False)
