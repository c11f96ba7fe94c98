"""`karpenter-e2e snapshot --kubeconfig K [--context C] --out DIR`: what
Karpenter's next decisions read from a live cluster, written as YAML, read-only.

It takes, by `get` and `list` only (RBAC below): NodePools, NodeClasses, NodeClaims, Nodes,
the pods that are not finished, their owners (Deployments, ReplicaSets, StatefulSets, Jobs,
DaemonSets), PDBs, PriorityClasses, RuntimeClasses (a pod's overhead comes from its class),
StorageClasses, PVs and PVCs, and Karpenter's version and
settings where a Deployment of it is readable. Each object is cut down to the fields
Karpenter's scheduling and disruption read, by an allow-list (``keep``): no Secrets or
ConfigMaps are read, and no image, command, argument, environment value, volume source but a
PVC's name, address, or annotation outside Karpenter's and the scheduler's is written.

RBAC it needs (a ClusterRole): get, list on nodes, pods, persistentvolumes,
persistentvolumeclaims, namespaces (core); deployments, replicasets, statefulsets,
daemonsets (apps); jobs (batch); poddisruptionbudgets (policy); priorityclasses
(scheduling.k8s.io); runtimeclasses (node.k8s.io); storageclasses (storage.k8s.io);
nodepools, nodeclaims (karpenter.sh);
ec2nodeclasses (karpenter.k8s.aws) or kwoknodeclasses (karpenter.kwok.sh).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from karpenter_e2e.clusters.api.kube import NODECLAIM, NODEPOOL, Kind, Kube, if_found

FORMAT = 1
NODECLASSES = (Kind("karpenter.k8s.aws", "v1", "ec2nodeclasses"),
               Kind("karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses"))
# Annotations Karpenter or the scheduler act on; every other annotation is dropped.
ANNOTATION_PREFIXES = ("karpenter.sh/", "karpenter.k8s.aws/", "controller.kubernetes.io/pod-deletion-cost",
                       "cluster-autoscaler.kubernetes.io/safe-to-evict")
# Karpenter's settings (its environment) worth knowing; values of anything else are not read.
SETTINGS = ("BATCH_IDLE_DURATION", "BATCH_MAX_DURATION", "FEATURE_GATES", "MIN_VALUES_POLICY",
            "PREFERENCE_POLICY", "VM_MEMORY_OVERHEAD_PERCENT", "RESERVED_ENIS",
            "INTERRUPTION_QUEUE", "CLUSTER_NAME", "LOG_LEVEL")
FINISHED = ("Succeeded", "Failed")


# ---- the allow-list ----------------------------------------------------------------------------
def _pick(obj: dict, paths: tuple[str, ...]) -> dict:
    """Only ``paths`` ("spec.nodeName", "status.phase") of ``obj``, nested as they were."""
    out: dict = {}
    for path in paths:
        keys, src, dst = path.split("."), obj, out
        for k in keys[:-1]:
            nxt = src.get(k) if isinstance(src, dict) else None
            if nxt is None:
                break
            src, dst = nxt, dst.setdefault(k, {})
        else:
            if isinstance(src, dict) and keys[-1] in src and src[keys[-1]] not in (None, {}, []):
                dst[keys[-1]] = src[keys[-1]]
    return out


def _meta(obj: dict, labels: bool = True) -> dict:
    meta = obj.get("metadata") or {}
    out = {k: meta[k] for k in ("name", "namespace", "creationTimestamp", "deletionTimestamp",
                                "uid") if meta.get(k)}
    if labels and meta.get("labels"):
        out["labels"] = meta["labels"]
    notes = {k: v for k, v in (meta.get("annotations") or {}).items()
             if k.startswith(ANNOTATION_PREFIXES)}
    if notes:
        out["annotations"] = notes
    if meta.get("ownerReferences"):
        out["ownerReferences"] = [{k: r[k] for k in ("apiVersion", "kind", "name", "uid",
                                                       "controller") if k in r}
                                  for r in meta["ownerReferences"]]
    return out


def _container(c: dict) -> dict:
    out: dict[str, Any] = {"name": c.get("name", "")}
    if c.get("resources"):
        out["resources"] = {k: c["resources"][k] for k in ("requests", "limits")
                            if c["resources"].get(k)}
    ports = [{k: p[k] for k in ("containerPort", "hostPort", "protocol", "hostIP") if k in p}
             for p in c.get("ports") or [] if p.get("hostPort")]
    if ports:
        out["ports"] = ports
    if c.get("restartPolicy"):  # a sidecar (init container that keeps running)
        out["restartPolicy"] = c["restartPolicy"]
    return out


POD_SPEC = ("nodeName", "nodeSelector", "affinity", "tolerations", "topologySpreadConstraints",
            "priority", "priorityClassName", "preemptionPolicy", "schedulerName", "overhead",
            "runtimeClassName", "terminationGracePeriodSeconds", "resourceClaims")


def pod_spec(spec: dict) -> dict:
    out = _pick(spec, POD_SPEC)
    out["containers"] = [_container(c) for c in spec.get("containers") or []]
    if spec.get("initContainers"):
        out["initContainers"] = [_container(c) for c in spec["initContainers"]]
    claims = [{"name": v["name"], "persistentVolumeClaim": {
        "claimName": v["persistentVolumeClaim"]["claimName"]}}
        for v in spec.get("volumes") or [] if v.get("persistentVolumeClaim")]
    ephemeral = [{"name": v["name"], "ephemeral": v["ephemeral"]}
                 for v in spec.get("volumes") or [] if v.get("ephemeral")]
    if claims or ephemeral:
        out["volumes"] = claims + ephemeral
    return out


def _template(obj: dict) -> dict:
    tpl = (obj.get("spec") or {}).get("template") or {}
    return {"metadata": _meta(tpl), "spec": pod_spec(tpl.get("spec") or {})}


def _owner(obj: dict, fields: tuple[str, ...]) -> dict:
    spec = _pick(obj.get("spec") or {}, fields)
    if (obj.get("spec") or {}).get("template"):
        spec["template"] = _template(obj)
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": _meta(obj),
            "spec": spec, **({"status": _pick(obj.get("status") or {}, (
                "replicas", "readyReplicas", "active", "succeeded", "desiredNumberScheduled"))}
                if obj.get("status") else {})}


KEEP: dict[str, Callable[[dict], dict]] = {
    "NodePool": lambda o: {"apiVersion": o.get("apiVersion"), "kind": "NodePool",
                           "metadata": _meta(o), "spec": o.get("spec") or {},
                           "status": _pick(o.get("status") or {}, ("resources", "nodes"))},
    "NodeClass": lambda o: {"apiVersion": o.get("apiVersion"), "kind": o.get("kind"),
                            "metadata": _meta(o), "spec": {
                                k: v for k, v in (o.get("spec") or {}).items()
                                if k not in ("userData", "role", "instanceProfile")}},
    "NodeClaim": lambda o: {"apiVersion": o.get("apiVersion"), "kind": "NodeClaim",
                            "metadata": _meta(o), "spec": o.get("spec") or {},
                            "status": _pick(o.get("status") or {}, (
                                "nodeName", "providerID", "capacity", "allocatable",
                                "conditions", "lastPodEventTime"))},
    "Node": lambda o: {"apiVersion": "v1", "kind": "Node", "metadata": _meta(o),
                       "spec": _pick(o.get("spec") or {}, ("providerID", "taints", "unschedulable")),
                       "status": {**_pick(o.get("status") or {}, ("capacity", "allocatable")),
                                  "conditions": [{k: c[k] for k in ("type", "status",
                                                                     "lastTransitionTime") if k in c}
                                                 for c in (o.get("status") or {}).get("conditions")
                                                 or [] if c.get("type") == "Ready"]}},
    "Pod": lambda o: {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(o),
                      "spec": pod_spec(o.get("spec") or {}),
                      "status": _pick(o.get("status") or {}, ("phase", "conditions",
                                                              "nominatedNodeName"))},
    "Deployment": lambda o: _owner(o, ("replicas", "selector", "strategy")),
    "ReplicaSet": lambda o: _owner(o, ("replicas", "selector")),
    "StatefulSet": lambda o: _owner(o, ("replicas", "selector", "podManagementPolicy",
                                        "volumeClaimTemplates")),
    "Job": lambda o: _owner(o, ("parallelism", "completions", "selector", "backoffLimit")),
    "DaemonSet": lambda o: _owner(o, ("selector",)),
    "PodDisruptionBudget": lambda o: {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                      "metadata": _meta(o), "spec": o.get("spec") or {},
                                      "status": _pick(o.get("status") or {}, (
                                          "disruptionsAllowed", "currentHealthy",
                                          "desiredHealthy", "expectedPods"))},
    "PriorityClass": lambda o: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": _meta(o), **{k: o[k] for k in (
                                    "value", "globalDefault", "preemptionPolicy") if k in o}},
    "RuntimeClass": lambda o: {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                               "metadata": _meta(o), **{k: o[k] for k in (
                                   "handler", "overhead", "scheduling") if k in o}},
    "StorageClass": lambda o: {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                               "metadata": _meta(o), **{k: o[k] for k in (
                                   "provisioner", "volumeBindingMode", "allowedTopologies",
                                   "reclaimPolicy") if k in o}},
    "PersistentVolume": lambda o: {"apiVersion": "v1", "kind": "PersistentVolume",
                                   "metadata": _meta(o), "spec": _pick(o.get("spec") or {}, (
                                       "capacity", "accessModes", "nodeAffinity", "claimRef",
                                       "storageClassName", "volumeMode")),
                                   "status": _pick(o.get("status") or {}, ("phase",))},
    "PersistentVolumeClaim": lambda o: {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                        "metadata": _meta(o), "spec": _pick(o.get("spec") or {}, (
                                            "accessModes", "resources", "storageClassName",
                                            "volumeName", "volumeMode")),
                                        "status": _pick(o.get("status") or {}, ("phase",))},
}


def keep(kind: str, obj: dict) -> dict:
    """``obj`` cut down to what Karpenter's decisions read (the allow-list)."""
    if "claimRef" in (obj.get("spec") or {}) and kind == "PersistentVolume":
        obj = {**obj, "spec": {**obj["spec"], "claimRef": {k: obj["spec"]["claimRef"].get(k)
                                                           for k in ("namespace", "name")}}}
    return KEEP[kind](obj)


def karpenter(deployments: list[dict]) -> dict:
    """Karpenter's version (its image's tag) and its settings (SETTINGS only), from a
    Deployment named karpenter, or what could not be read."""
    for d in deployments:
        if (d.get("metadata") or {}).get("name") != "karpenter":
            continue
        for c in ((d.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []:
            if c.get("name") not in ("controller", "karpenter"):
                continue
            image = c.get("image", "")
            name = image.split("@")[0].rsplit("/", 1)[-1]  # digest and registry aside
            tag = name.split(":", 1)[1] if ":" in name else ""
            env = {e["name"]: e["value"] for e in c.get("env") or []
                   if e.get("name") in SETTINGS and "value" in e}
            return {"version": tag or "unknown", "settings": env,
                    "namespace": d["metadata"].get("namespace", "")}
    return {"version": "unknown", "settings": {},
            "note": "no Deployment named karpenter is readable (local mode runs it as a process)"}


# ---- taking it ---------------------------------------------------------------------------------
def _lists(kube: Kube) -> dict[str, Callable[[], list]]:
    """How each kind is listed (cluster-wide, read-only)."""
    from kubernetes import client
    t, core, apps = kube.timeout, kube.core, kube.apps
    return {
        "Node": lambda: core.list_node(_request_timeout=t).items,
        "Pod": lambda: core.list_pod_for_all_namespaces(_request_timeout=t).items,
        "Deployment": lambda: apps.list_deployment_for_all_namespaces(_request_timeout=t).items,
        "ReplicaSet": lambda: apps.list_replica_set_for_all_namespaces(_request_timeout=t).items,
        "StatefulSet": lambda: apps.list_stateful_set_for_all_namespaces(_request_timeout=t).items,
        "DaemonSet": lambda: apps.list_daemon_set_for_all_namespaces(_request_timeout=t).items,
        "Job": lambda: kube.batch.list_job_for_all_namespaces(_request_timeout=t).items,
        "PodDisruptionBudget": lambda: kube.policy.list_pod_disruption_budget_for_all_namespaces(
            _request_timeout=t).items,
        "PriorityClass": lambda: client.SchedulingV1Api(kube.api).list_priority_class(
            _request_timeout=t).items,
        "RuntimeClass": lambda: client.NodeV1Api(kube.api).list_runtime_class(
            _request_timeout=t).items,
        "StorageClass": lambda: kube.storage.list_storage_class(_request_timeout=t).items,
        "PersistentVolume": lambda: core.list_persistent_volume(_request_timeout=t).items,
        "PersistentVolumeClaim": lambda: core.list_persistent_volume_claim_for_all_namespaces(
            _request_timeout=t).items,
    }


def _node_classes(kube: Kube) -> list[dict]:
    out: list[dict] = []
    for kind in NODECLASSES:  # a cluster has one provider's: the other's CRD is absent (404)
        out += if_found(functools.partial(kube.list, kind), [])
    return out


def take(kube: Kube) -> dict[str, list[dict]]:
    """Every kind the snapshot holds, each object kept; read-only."""
    plain = kube.api.sanitize_for_serialization
    out: dict[str, list[dict]] = {
        "NodePool": [keep("NodePool", o) for o in kube.list(NODEPOOL)],
        "NodeClaim": [keep("NodeClaim", o) for o in kube.list(NODECLAIM)],
        "NodeClass": [keep("NodeClass", o) for o in _node_classes(kube)]}
    for kind, listed in _lists(kube).items():
        out[kind] = [keep(kind, {**plain(i), "kind": kind}) for i in listed()]
    out["Pod"] = [p for p in out["Pod"] if p["status"].get("phase") not in FINISHED]
    out["ReplicaSet"] = [r for r in out["ReplicaSet"] if (r["spec"].get("replicas") or 0) > 0]
    return out


def write(objects: dict[str, list[dict]], about: dict, out: Path) -> Path:
    """DIR/snapshot.yaml (about: Karpenter, the source; when, unless it says; the counts)
    and one YAML file per kind."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {k: len(v) for k, v in objects.items()}
    taken = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "snapshot.yaml").write_text(yaml.safe_dump({"format": FORMAT, "taken": taken, **about,
                                                        "counts": counts}, sort_keys=False))
    for kind, items in objects.items():
        (out / f"{kind}.yaml").write_text(yaml.safe_dump_all(items, sort_keys=False) if items else "")
    return out


def load(folder: Path) -> tuple[dict, dict[str, list[dict]]]:
    """A snapshot as written: (about, objects by kind)."""
    about = yaml.safe_load((folder / "snapshot.yaml").read_text())
    if not isinstance(about, dict) or about.get("format") != FORMAT:
        raise ValueError(f"{folder}: not a snapshot of format {FORMAT} (snapshot.yaml)")
    objects = {kind: [o for o in yaml.safe_load_all((folder / f"{kind}.yaml").read_text()) if o]
               for kind in about["counts"]}
    return about, objects


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e snapshot", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--context", default=None)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    try:
        kube = Kube(args.kubeconfig, args.context)
    except ValueError as exc:
        print(f"snapshot: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    objects = take(kube)
    about = {"took_s": round(time.time() - started, 2),
             "karpenter": karpenter(_deployments_raw(kube))}
    write(objects, about, args.out)
    print(json.dumps({"out": str(args.out), **{k: len(v) for k, v in objects.items()}}))
    return 0


def _deployments_raw(kube: Kube) -> list[dict]:
    """The Deployments as the API has them, only to find Karpenter's image and settings."""
    plain = kube.api.sanitize_for_serialization
    return [plain(d) for d in kube.apps.list_deployment_for_all_namespaces(
        _request_timeout=kube.timeout).items]
