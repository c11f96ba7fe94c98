"""Put the manifests into the cluster: a server-side dry-run of every document first (the API
server's own schema, defaults and CEL rules, with its message), then the real apply; and
delete them again when a kept cluster is reused.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

from karpenter_e2e.checks.manifests import NODECLASSES, WORKLOADS, Manifest, ManifestError
from karpenter_e2e.clusters.api.kube import NODECLAIM, Kube, api_message, if_found
from karpenter_e2e.clusters.api.labels import NODEPOOL as NODEPOOL_LABEL
from karpenter_e2e.clusters.api.waits import (
    DEFAULTS,
    Observation,
    WaitTimeout,
    eventually,
    transient,
)
from karpenter_e2e.clusters.errors import ClusterError

log = logging.getLogger("karpenter_e2e.check")

FIELD_MANAGER = "karpenter-e2e-check"
# Unknown fields are errors, every one named: without it the API server drops them silently
# (a create) or names only the first (an apply), and a misspelt blockDeviceMappings passed.
STRICT, IGNORE = "Strict", "Ignore"
# The label check puts on what it applies, so a kept cluster can be emptied by it.
APPLIED_LABEL = "karpenter-e2e/check"


class Applier:
    def __init__(self, kube: Kube, run_id: str):
        self.kube, self.run_id = kube, run_id
        self.dyn = DynamicClient(kube.api)
        self._pending_rules: list[Manifest] = []  # applied, not yet known to be in force

    def _resource(self, m: Manifest):
        try:
            return self.dyn.resources.get(api_version=m.body["apiVersion"], kind=m.kind)
        except ResourceNotFoundError:
            raise ManifestError(f"{m.where}: the API server serves no {m.kind} in "
                                f"{m.body['apiVersion']}") from None

    def _apply(self, m: Manifest, dry_run: bool) -> None:
        resource = self._resource(m)
        sent(f"{m.kind} {m.name}", lambda: self.dyn.server_side_apply(
            resource, body=self._labelled(m), namespace=m.namespace,
            field_manager=FIELD_MANAGER, force_conflicts=True,
            dry_run="All" if dry_run else None, _request_timeout=30,
            query_params=[("fieldValidation", STRICT)]))

    def _labelled(self, m: Manifest) -> dict:
        body = dict(m.body)
        meta = body["metadata"] = dict(body.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), APPLIED_LABEL: self.run_id}
        return body

    def _create_dry_run(self, m: Manifest, validation: str) -> None:
        resource = self._resource(m)
        sent(f"{m.kind} {m.name}", lambda: self.dyn.create(
            resource, body=self._labelled(m), namespace=m.namespace, dry_run="All",
            _request_timeout=30, query_params=[("fieldValidation", validation)]))

    def dry_run(self, manifests: list[Manifest]) -> None:
        """Every document through the API server without persisting it (namespaces are
        created for real first: the others cannot be dry-run into namespaces that do not
        exist). Raises ManifestError with the API's message for each rejected document."""
        errors = []
        namespaces = [m for m in manifests if m.kind == "Namespace"]
        for m in namespaces + [m for m in manifests if m.kind != "Namespace"]:
            try:
                self._apply(m, dry_run=m.kind != "Namespace")
            except ManifestError as exc:
                errors.append(str(exc))
            except DynamicApiError as exc:
                errors.append(self._every_unknown_field(m, exc))
        if errors:
            raise ManifestError("\n".join(errors))

    def _every_unknown_field(self, m: Manifest, exc) -> str:
        """An apply names one unknown field at a time; a strict create (dry-run) names them
        all, and one that ignores them names the document's other errors (a required field
        missing, a CEL rule) at once too."""
        if not _unknown_fields(exc) or m.kind == "Namespace":
            return _rejected(m, exc)
        try:
            self._create_dry_run(m, STRICT)
        except DynamicApiError as strict:
            if _unknown_fields(strict):
                exc = strict
        return _rejected(m, exc, self._beyond_unknown_fields(
            exc, lambda: self._create_dry_run(m, IGNORE)))

    @staticmethod
    def _beyond_unknown_fields(exc, again) -> str:
        """A document refused for unknown fields is dry-run once more with them ignored, so
        that its other errors are named at once too."""
        if not _unknown_fields(exc):
            return ""
        try:
            again()
        except (DynamicApiError, ApiException) as other:
            return "" if _unknown_fields(other) else api_message(other)
        return ""

    def apply(self, manifests: list[Manifest]) -> None:
        """Apply in the given order; a namespace's admission rules are waited for until they
        are in force, before what they judge is applied."""
        for m in manifests:
            if m.kind in WORKLOADS or m.kind == "PersistentVolumeClaim":
                self._rules_in_force(m.namespace or "default")
            try:
                self._apply(m, dry_run=False)
            except DynamicApiError as exc:
                raise ManifestError(_rejected(m, exc)) from None
            if m.kind in ("ResourceQuota", "LimitRange"):
                self._pending_rules.append(m)

    def _rules_in_force(self, namespace: str) -> None:
        """The API server admits pods against a ResourceQuota only once the quota controller
        has written its status (before that, the quota is skipped: pods created at once with
        it all ran), and sets a LimitRange's defaults only once its admission cache has it.
        Both are waited for: a check judges the namespace as it is in force."""
        for m in [r for r in self._pending_rules if r.namespace == namespace]:
            if m.kind == "ResourceQuota":
                check, what = self._quota_synced, "to have its status (the quota controller's usage)"
            else:
                check, what = self._defaults_set, "'s container defaults to be set on a dry-run pod"
            eventually(functools.partial(check, m), what=f"{m.ref}{what}", timeout=DEFAULTS.api,
                       poll=0.2)
            self._pending_rules.remove(m)

    def _quota_synced(self, m: Manifest) -> Observation:
        quota = self.kube.core.read_namespaced_resource_quota(
            m.name, m.namespace or "default", _request_timeout=self.kube.timeout)
        hard = (quota.status and quota.status.hard) or {}
        missing = sorted(set((m.body.get("spec") or {}).get("hard") or {}) - set(hard))
        return Observation(not missing, f"status.hard lacks {', '.join(missing)}"
                           if missing else "in force")

    def _defaults_set(self, m: Manifest) -> Observation:
        limits = (m.body.get("spec") or {}).get("limits") or []
        if not any(lim.get("type") == "Container" and (lim.get("default")
                                                        or lim.get("defaultRequest"))
                   for lim in limits):
            return Observation(True, "no container defaults to wait for")
        probe = client.V1Pod(metadata=client.V1ObjectMeta(generate_name="limitrange-probe-"),
                             spec=client.V1PodSpec(containers=[client.V1Container(
                                 name="probe", image="probe")]))
        try:
            pod = self.kube.core.create_namespaced_pod(m.namespace or "default", probe,
                                                       dry_run="All",
                                                       _request_timeout=self.kube.timeout)
        except ApiException as exc:
            if exc.status == 403:  # a quota that admits no pod refuses the probe too
                return Observation(True, f"a dry-run pod is refused: {api_message(exc)}")
            raise
        set_by = (pod.metadata.annotations or {}).get("kubernetes.io/limit-ranger", "")
        return Observation(bool(set_by), set_by or "a dry-run pod got no defaults yet")

    def validate_as_written(self, manifests: list[Manifest], crd: Path) -> None:
        """Dry-run documents of a kind this mode does not run (EC2NodeClass in local mode)
        against that kind's real CRD, installed for the purpose: its schema and CEL rules
        judge them before they are mapped. Raises ManifestError with the API's message."""
        body = yaml.safe_load(crd.read_text())
        name, names = body["metadata"]["name"], body["spec"]["names"]
        group = body["spec"]["group"]
        if not self.kube.crd_established(name):
            try:
                sent(f"CRD {name}", lambda: self.kube.apiext.create_custom_resource_definition(
                    body, _request_timeout=30))
            except ApiException as exc:
                if exc.status != 409:  # another check on this cluster installed it just now
                    raise
            eventually(lambda: Observation(self.kube.crd_established(name), "not established"),
                       what=f"CRD {name} to be established", timeout=DEFAULTS.api, poll=0.2)
        errors = []
        for m in manifests:
            version = m.body["apiVersion"].rpartition("/")[2]
            def create(m=m, version=version, validation=STRICT):
                sent(f"{m.kind} {m.name}", lambda: self.kube.custom.create_cluster_custom_object(
                    group, version, names["plural"], m.body, dry_run="All",
                    field_validation=validation, _request_timeout=30))
            try:
                create()
            except ApiException as exc:
                errors.append(_rejected(m, exc, self._beyond_unknown_fields(
                    exc, lambda create=create: create(validation=IGNORE))))
        if errors:
            raise ManifestError("\n".join(errors))

    def delete_all(self, manifests: list[Manifest]) -> None:
        """Delete what was applied (workloads first, NodePools and NodeClasses last) and wait
        until Karpenter has removed every NodeClaim and node, and the namespaces, NodePools
        and NodeClasses are gone: a kept cluster is clean again."""
        for m in reversed(manifests):
            if_found(functools.partial(self.dyn.delete, self._resource(m), name=m.name,
                                       namespace=m.namespace, _request_timeout=30,
                                       body={"propagationPolicy": "Background"}))

        # The NodePools' NodeClaims too, at once: left to the garbage collector (their owner
        # references), their deletion began 15-17 s after their NodePool's, as measured.
        pools = {m.name for m in manifests if m.kind == "NodePool"}
        for claim in self.kube.list(NODECLAIM):
            if (claim["metadata"].get("labels") or {}).get(NODEPOOL_LABEL) in pools:
                self.kube.delete(NODECLAIM, claim["metadata"]["name"])  # 404: gone already

        namespaces = {m.name for m in manifests if m.kind == "Namespace"}
        # A NodePool or NodeClass still finalizing when the next check applies one of the same
        # name would take the new one with it (check --base applies the head's right after).
        pools_and_classes = [m for m in manifests
                             if m.kind == "NodePool" or (m.group, m.kind) in NODECLASSES]

        def gone() -> Observation:
            # A namespace still terminating would refuse the next check's objects.
            left = [f"NodeClaim/{c['metadata']['name']}" for c in self.kube.list(NODECLAIM)]
            left += [f"Node/{n.metadata.name}" for n in self.kube.nodes(NODEPOOL_LABEL)]
            left += [m.ref for m in pools_and_classes if if_found(functools.partial(
                self.dyn.get, self._resource(m), name=m.name, _request_timeout=30))]
            left += [f"Namespace/{n.metadata.name}" for n in
                     self.kube.core.list_namespace(_request_timeout=self.kube.timeout).items
                     if n.metadata.name in namespaces]
            return Observation(not left, f"still there: {', '.join(left)}")

        eventually(gone, what="every NodeClaim and the check's namespaces to be gone after "
                              "its objects were deleted", timeout=DEFAULTS.cleanup)


def sent(what: str, write) -> None:
    """One write to the API server. Its refusal of the document (4xx) is raised at once: the
    answer about the manifest. A 429, a 5xx or a dropped connection is the API server's load,
    not the manifest's fault: retried as any wait's "not yet" (the one rule,
    clusters.api.waits), and if it lasts the API deadline, a ClusterError (no verdict), never
    bad input."""
    answer: list[BaseException] = []

    def attempt() -> Observation:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - sorted just below
            if transient(exc, writing=True) and not _about_the_document(exc):
                raise
            answer.append(exc)
        return Observation(True, "answered")

    try:
        eventually(attempt, what=f"the API server to take {what}", timeout=DEFAULTS.api,
                   poll=0.5)
    except WaitTimeout as exc:
        raise ClusterError(f"the API server did not take {what} for {DEFAULTS.api:.0f}s, "
                           f"refusing it as overloaded or failing: {exc}") from None
    if answer:
        raise answer[0]


def _about_the_document(exc) -> bool:
    """A 500 that is the API server's answer about the document: a server-side apply it
    cannot type against the schema (an unknown field, a list where a map is due) comes back
    as an internal error, "failed to create typed patch object ..."
    (k8s.io/apimachinery pkg/util/managedfields/internal/structuredmerge.go); make test's
    unknown-fields check met it when such 500s were retried as load."""
    return "failed to create typed patch object" in api_message(exc) or _unknown_fields(exc)


def _unknown_fields(exc) -> bool:
    """The API server's refusal for unknown fields: a create's strict decoding error, an
    apply's typed patch that names fields 'not declared in schema'."""
    text = api_message(exc)
    return "strict decoding error" in text or "field not declared in schema" in text


def _rejected(m: Manifest, exc, also: str = "") -> str:
    return (f"{m.where}: the API server rejected {m.kind} {m.name}: {api_message(exc)}"
            + (f"\n  and with the unknown fields left out: {also}" if also else ""))
