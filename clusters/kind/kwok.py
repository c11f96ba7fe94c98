"""kwok in a kind cluster, installed from kwok's own manifests (as Karpenter's
hack/install-kwok.sh patches them) with the stages local mode gives kwok (launch latency
included) as Stage objects: it makes Karpenter's nodes Ready and runs the pods bound to them."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from karpenter_e2e.clusters.infra import build, versions
from karpenter_e2e.clusters.kind import images
from karpenter_e2e.clusters.local import stages
from karpenter_e2e.clusters.local.cluster import LocalCluster

IMAGE = f"registry.k8s.io/kwok/kwok:{versions.KWOK}"


def kwok_kustomization(kustomize_dir: str) -> dict:
    """kwok's own manifests (``kustomize_dir``/kwok: a copy of the module's kustomize/, which
    kustomize only reads below the kustomization), as Karpenter's hack/install-kwok.sh
    patches them: the control plane's taint tolerated, never on kwok's own nodes."""
    deployment_patch = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kwok-controller"},
        "spec": {"template": {"spec": {
            # install-kwok.sh tolerates CriticalAddonsOnly with Equal and no value; this
            # control plane's taint has the value "true" (CRITICAL_ADDONS_ONLY)
            "tolerations": [{"operator": "Exists", "key": "CriticalAddonsOnly",
                             "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kwok.x-k8s.io/node", "operator": "DoesNotExist"}]}]}}}}}}}
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [f"{kustomize_dir}/kwok"],
            "images": [{"name": "registry.k8s.io/kwok/kwok", "newTag": versions.KWOK}],
            "patches": [{"patch": yaml.safe_dump(deployment_patch)}]}


def install(local: LocalCluster, load_image: Callable[[str], None]) -> None:
    """kwok in the cluster from kwok's own manifests and stages: it makes Karpenter's
    nodes Ready and runs the pods bound to them."""
    module = build.download_module("sigs.k8s.io/kwok", versions.KWOK)
    if not images.exists(IMAGE):
        images.from_files(IMAGE, {"usr/local/bin/kwok": build.build(build.find("kwok"))},
                          ["/usr/local/bin/kwok"])
    load_image(IMAGE)
    with tempfile.TemporaryDirectory(dir=local.run_dir) as tmp:
        shutil.copytree(module / "kustomize", Path(tmp) / "kwok-kustomize")
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(
            kwok_kustomization("kwok-kustomize")))
        manifests = local.kubectl("kustomize", tmp)
        rendered = Path(tmp) / "kwok.yaml"
        rendered.write_text(manifests)
        local.kubectl("apply", "--server-side", "-f", str(rendered))
    local.kubectl("-n", "kube-system", "wait", "--for=condition=Established",
                  "--timeout=60s", "crd/stages.kwok.x-k8s.io", timeout=90)
    # The stages local mode gives kwok (launch latency included), as Stage objects.
    staged = local.run_dir / "kwok-stages.yaml"
    staged.write_text(yaml.safe_dump_all(stages.render(module), sort_keys=False))
    local.kubectl("apply", "--server-side", "-f", str(staged))
    local.kubectl("-n", "kube-system", "rollout", "status",
                  "deployment/kwok-controller", "--timeout=180s", timeout=200)
