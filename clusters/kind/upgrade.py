"""What a Karpenter upgrade on a kind cluster must leave: the gate and `upgrade_karpenter`
judge the upgrade itself (the new image on every replica, the new CRDs, no stale webhook)."""

from __future__ import annotations

import yaml

from karpenter_e2e.clusters.api.kube import Kube
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.karpenter import incluster
from karpenter_e2e.clusters.kind import chart
from karpenter_e2e.clusters.local.cluster import LocalCluster


def check(kube: Kube, local: LocalCluster, karpenter: incluster.InCluster,
          version: str) -> list[str]:
    """What an upgrade to ``version`` must leave, each said; a ClusterError names what
    it did not."""
    image = local._state().get("karpenter_image", "")
    d = karpenter.deployment()
    pods = [p for p in kube.pods(chart.NAMESPACE, incluster.SELECTOR)
            if p.metadata and not p.metadata.deletion_timestamp]
    images_run = sorted({c.image or "" for p in pods
                         for c in (p.spec.containers if p.spec else [])
                         if c.name == "controller"})
    if d.image != image or images_run != [image]:
        raise ClusterError(f"after the upgrade to {version} Karpenter's Deployment runs "
                           f"{d.image} and its pods {images_run}, not {image}")
    said = [f"{d.ready_replicas}/{d.replicas} replica(s) ready on {image}"]
    stale = []
    for crd_dir in local.crd_dirs(version):
        for path in sorted(crd_dir.glob("*.yaml")):
            want = yaml.safe_load(path.read_text())
            live = kube.api.sanitize_for_serialization(
                kube.apiext.read_custom_resource_definition(
                    want["metadata"]["name"], _request_timeout=kube.timeout))
            if _schemas(want) != _schemas(live):
                stale.append(want["metadata"]["name"])
    if stale:
        raise ClusterError(f"after the upgrade to {version} these CRDs are not "
                           f"{version}'s: {', '.join(stale)}")
    said.append(f"CRDs are {version}'s")
    broken = incluster.stale_webhooks(kube, chart.NAMESPACE)
    if broken:
        raise ClusterError(f"after the upgrade to {version} Karpenter's webhooks call "
                           f"Services that do not answer: {'; '.join(broken)}")
    said.append("no Karpenter webhook calls a Service that does not answer")
    return said


def _schemas(crd: dict) -> dict:
    """A CRD's versions and their schemas, as the API server serves them."""
    return {v["name"]: (v.get("served"), v.get("storage"), v.get("schema"))
            for v in crd["spec"]["versions"]}
