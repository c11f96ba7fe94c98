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
from datetime import UTC, datetime
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
        return metrics(self.kube, self.deployment())


def metrics(kube: Kube, d: Deployment) -> str | None:
    """/metrics through the API server's proxy to the chart's Service, or None. Both charts
    (the KWOK provider's, the AWS provider's charts/karpenter/templates/service.yaml) name
    the Service as the Deployment (karpenter.fullname) and its port http-metrics."""
    # The generated method, not ApiClient.call_api: that one's signature changed with the
    # client's generator (v35+ takes method, url, ...; earlier, path and method keywords).
    try:
        page = kube.core.connect_get_namespaced_service_proxy_with_path(
            f"{d.name}:{METRICS_PORT_NAME}", d.namespace, "metrics", _request_timeout=10)
    except (ApiException, OSError):
        return None
    return page if isinstance(page, str) else None


# Where the chart puts Karpenter (kube-system in the getting-started guide, karpenter in
# upstream's e2e and the chart's own docs).
NAMESPACES = ("kube-system", "karpenter")


def absence(kube: Kube) -> str | None:
    """Why a Karpenter installed in the cluster is not running, in words: its Deployment's
    ready replicas, each of its pods (deleted, not ready, restarting and why) and the
    namespace's recent events about them; None where no Karpenter Deployment is found (it
    runs as a process: local and aws-sim)."""
    for namespace in NAMESPACES:
        found = deployments(kube, namespace)
        if not found:
            continue
        d = found[0]
        parts = [f"its Deployment {d.namespace}/{d.name} has {d.ready_replicas}/{d.replicas} "
                 f"replica(s) ready"]
        for pod in kube.pods(namespace, SELECTOR):
            meta, status = pod.metadata, pod.status
            if meta is None:
                continue
            said = [f"created {_hms(meta.creation_timestamp)}"]
            if meta.deletion_timestamp:
                said.append(f"being deleted since {_hms(meta.deletion_timestamp)}")
            for c in (status.container_statuses or []) if status else []:
                said.append("ready" if c.ready else "not ready")
                last = c.last_state.terminated if c.last_state else None
                if c.restart_count:
                    said.append(f"{c.restart_count} restart(s)"
                                + (f", last exit {last.reason} ({last.exit_code})" if last else ""))
                waiting = c.state.waiting if c.state else None
                if waiting:
                    said.append(f"waiting: {waiting.reason}")
            parts.append(f"pod {meta.name}: {', '.join(said)}")
        events = kube.events_in(namespace, "involvedObject.kind=Pod")
        recent = sorted((e for e in events if e.involved_object.name
                         and e.involved_object.name.startswith(d.name + "-")),
                        key=lambda e: e.last_timestamp or e.event_time or e.first_timestamp
                        or _EPOCH)[-4:]
        parts += [f"{_hms(e.last_timestamp or e.event_time or e.first_timestamp)} "
                  f"{e.involved_object.name} {e.reason}: {e.message}" for e in recent]
        return "; ".join(parts)
    return None


_EPOCH = datetime.fromtimestamp(0, UTC)


def _hms(when) -> str:
    return when.strftime("%H:%M:%S") if when else "?"


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
    """The pod-log follower (podlogs) appending Karpenter's log to ``out``: the one running,
    else one started; its pid. One only: a second would append every line again (it streams
    each container from its first line). ``out`` is in its command line: that is how it is
    found."""
    running = _followers(out)
    if running:
        return running[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "karpenter_e2e.clusters.karpenter.podlogs",
           "--kubeconfig", str(kubeconfig), "--namespace", namespace, "--selector", SELECTOR,
           "--out", str(out), *(["--context", context] if context else [])]
    return process.spawn(cmd, log_path or out.with_name("podlogs.log"), out.parent).pid


def _followers(out: Path) -> list[int]:
    return [pid for pid in process.pids_using(str(out)) if "podlogs" in process.cmdline(pid)]


def stop_following(out: Path) -> None:
    for pid in _followers(out):
        process.terminate(pid)
