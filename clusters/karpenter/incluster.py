"""Karpenter running as its chart installs it: a Deployment in the cluster (kind, eks).

Stopping it scales the Deployment to 0 and remembers the replica count on the Deployment
itself, so a later process (another xdist worker, the next run after a crash) restores it;
its log is followed into a file (podlogs) so the oracles read it as in local mode; its
/metrics page is read through the API server's service proxy.
"""

from __future__ import annotations

import functools
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api.kube import Kube, if_found
from karpenter_e2e.clusters.api.waits import DEFAULTS, Observation, eventually
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process

log = logging.getLogger(__name__)

SELECTOR = "app.kubernetes.io/name=karpenter"
REPLICAS_BEFORE_STOP = "karpenter-e2e/replicas-before-stop"
METRICS_PORT_NAME = "http-metrics"  # the chart's Service port


@dataclass(frozen=True)
class Deployment:
    namespace: str
    name: str
    image: str
    replicas: int
    ready_replicas: int
    annotations: dict[str, str] = field(default_factory=dict)
    updated_replicas: int = 0
    generation_observed: bool = True

    @property
    def version(self) -> str:
        """'public.ecr.aws/karpenter/controller:1.15.2@sha256:…' -> 'v1.15.2'."""
        ref = self.image.split("@", 1)[0]
        tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "unknown"
        return f"v{tag}" if tag[:1].isdigit() else tag

    @property
    def rolled_out(self) -> bool:
        """Every replica runs the current template and is ready (`kubectl rollout status`)."""
        return (self.generation_observed and self.updated_replicas == self.replicas
                and self.ready_replicas == self.replicas)


def deployments(kube: Kube, namespace: str, selector: str = SELECTOR) -> list[Deployment]:
    items = kube.apps.list_namespaced_deployment(
        namespace, label_selector=selector, _request_timeout=kube.timeout).items
    out = []
    for d in items:
        meta, spec, status = d.metadata, d.spec, d.status
        pod = spec.template.spec if spec and spec.template else None
        if meta is None or spec is None or pod is None:
            continue  # never so from an API server; the client's models allow it
        out.append(Deployment(
            meta.namespace or namespace, meta.name or "", pod.containers[0].image or "",
            spec.replicas or 0, (status.ready_replicas or 0) if status else 0,
            dict(meta.annotations or {}), (status.updated_replicas or 0) if status else 0,
            bool(status and (status.observed_generation or 0) >= (meta.generation or 0))))
    return out


class InCluster:
    """One Karpenter Deployment, found by the chart's label in ``namespace``."""

    def __init__(self, kube: Kube, namespace: str, what: str):
        self.kube, self.namespace, self.what = kube, namespace, what

    def deployment(self) -> Deployment:
        found = deployments(self.kube, self.namespace)
        if not found:
            raise ClusterError(f"Karpenter is not installed in {self.what}: no Deployment "
                               f"labelled {SELECTOR} in namespace {self.namespace}")
        return found[0]

    def running(self) -> bool:
        try:
            return self.deployment().ready_replicas > 0
        except ClusterError:
            return False

    def stop(self) -> None:
        d = self.deployment()
        if d.replicas:
            self._patch({"metadata": {"annotations": {REPLICAS_BEFORE_STOP: str(d.replicas)}},
                         "spec": {"replicas": 0}})
        self.wait(False)

    def start(self) -> None:
        d = self.deployment()
        replicas = int(d.annotations.get(REPLICAS_BEFORE_STOP) or 0) or d.replicas or 1
        self._patch({"metadata": {"annotations": {REPLICAS_BEFORE_STOP: None}},
                     "spec": {"replicas": replicas}})
        self.wait(True)

    def _patch(self, body: dict) -> None:
        d = self.deployment()
        self.kube.apps.patch_namespaced_deployment(d.name, d.namespace, body,
                                                   _request_timeout=self.kube.timeout)

    def wait(self, ready: bool, timeout: float | None = None) -> Deployment:
        """Until every replica of the current template is ready (``ready``), or none runs."""
        def check() -> Observation:
            d = self.deployment()
            seen = (f"{d.ready_replicas}/{d.replicas} replicas ready, {d.updated_replicas} "
                    f"updated ({d.image})")
            ok = d.rolled_out and d.ready_replicas > 0 if ready else d.ready_replicas == 0
            return Observation(ok, seen, d)

        return eventually(check, what=f"Karpenter in {self.what} to be "
                          f"{'rolled out and ready' if ready else 'stopped'}",
                          timeout=(timeout or DEFAULTS.provision) if ready else DEFAULTS.api,
                          poll=1)

    def metrics(self) -> str | None:
        """/metrics through the API server's proxy to the chart's Service, or None."""
        d = self.deployment()
        path = (f"/api/v1/namespaces/{d.namespace}/services/{d.name}:{METRICS_PORT_NAME}"
                f"/proxy/metrics")
        try:
            resp = self.kube.api.call_api(path, "GET", _preload_content=False,
                                          _request_timeout=10, auth_settings=["BearerToken"])
            return resp[0].data.decode()
        except (ApiException, OSError):
            return None


def stale_webhooks(kube: Kube, namespace: str) -> list[str]:
    """Webhook configurations that call a Karpenter Service in ``namespace`` with no ready
    endpoint: left by an earlier release (the v1.0 chart had webhooks), every API write they
    cover fails."""
    found = []
    admission = client.AdmissionregistrationV1Api(kube.api)
    hooks: list[tuple[str, Any]] = []
    for listed in (admission.list_validating_webhook_configuration(_request_timeout=kube.timeout),
                   admission.list_mutating_webhook_configuration(_request_timeout=kube.timeout)):
        for config in listed.items:
            name = (config.metadata.name if config.metadata else None) or "?"
            hooks += [(name, hook) for hook in config.webhooks or []]
    for name, hook in hooks:
        svc = hook.client_config.service if hook.client_config else None
        if svc is None or svc.namespace != namespace or "karpenter" not in (svc.name or ""):
            continue
        endpoints = if_found(functools.partial(kube.core.read_namespaced_endpoints, svc.name,
                                               svc.namespace, _request_timeout=kube.timeout))
        if endpoints is None or not any(subset.addresses for subset in endpoints.subsets or []):
            found.append(f"{name} -> {svc.namespace}/{svc.name} (no ready endpoint)")
    return found


def follow_logs(kubeconfig: Path, namespace: str, out: Path, context: str | None = None,
                log_path: Path | None = None) -> int:
    """Start the pod-log follower (podlogs) appending Karpenter's log to ``out``; its pid.
    ``out`` is in its command line: stop_following finds it by that."""
    stop_following(out)
    cmd = [sys.executable, "-m", "karpenter_e2e.clusters.karpenter.podlogs",
           "--kubeconfig", str(kubeconfig), "--namespace", namespace, "--selector", SELECTOR,
           "--out", str(out), *(["--context", context] if context else [])]
    return process.spawn(cmd, log_path or out.with_name("podlogs.log"), out.parent).pid


def stop_following(out: Path) -> None:
    for pid in process.pids_using(str(out)):
        if "podlogs" in process.cmdline(pid):
            process.terminate(pid)
