"""An explore case (checks/explore_case.py) as a folder `check` takes: the manifests of its
pools, workloads, daemons, volumes, NodeOverlay and CapacityBuffer, and its expect.yaml (the
scale-in, Karpenter's settings and the feature gates its objects need).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from karpenter_e2e.checks.explore_case import (
    CASE_LABEL,
    DONGLE,
    EXTRA_TAINT,
    HOSTNAME_KEY,
    NAMESPACE,
    NODECLASS,
    OVERHEAD_CLASS,
    POOL_LABEL,
    ZONE_KEY,
    ZONES,
    Case,
    Daemon,
    Overlay,
    Pool,
    Workload,
)
from karpenter_e2e.clusters.api.objects import PAUSE_IMAGE


def gates(case: Case) -> dict[str, str]:
    """The case's settings with the gates its objects need: a static pool's StaticCapacity,
    the NodeOverlay's and the CapacityBuffer's own."""
    out = dict(case.settings)
    if any(p.replicas is not None for p in case.pools):
        out["StaticCapacity"] = "true"
    if case.overlay is not None:
        out["NodeOverlay"] = "true"
    if case.buffer is not None:
        out["CapacityBuffer"] = "true"
    return out


def manifests(case: Case) -> list[dict]:
    out: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                       copy.deepcopy(NODECLASS)]
    out += [_pool(p) for p in case.pools]
    if any(w.overhead for w in case.workloads):
        out.append({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                    "metadata": {"name": OVERHEAD_CLASS}, "handler": "runc",
                    "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}}})
    for w in case.workloads:
        out += _workload(w)
    out += [_daemon(d) for d in case.daemons]
    if case.overlay is not None:
        out.append(_overlay(case.overlay, [p.name for p in case.pools if p.replicas is None]))
    if case.buffer is not None:
        out += _buffer(case.buffer)
    return out


TOLERATION = {"key": "team", "operator": "Equal", "value": "explore", "effect": "NoSchedule"}
TOLERATES_EXTRA = {"key": EXTRA_TAINT, "operator": "Exists"}


def _pool(p: Pool) -> dict:
    template: dict = {"metadata": {"labels": {CASE_LABEL: "on", POOL_LABEL: p.name}},
                      "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
                                                "kind": "EC2NodeClass", "name": "default"},
                               "expireAfter": "Never",
                               "requirements": copy.deepcopy(p.requirements + p.more_requirements)}}
    spec: dict = {"template": template,
                  "disruption": {"consolidationPolicy": p.policy,
                                 "consolidateAfter": p.consolidate_after}}
    taints = [{"key": "team", "value": "explore", "effect": "NoSchedule"}] if p.taint else []
    taints += [{"key": EXTRA_TAINT, "value": "on", "effect": p.extra_taint}] if p.extra_taint else []
    if taints:
        template["spec"]["taints"] = taints
    annotations = {"explore.karpenter-e2e/drawn": "yes"} if p.annotated else {}
    annotations |= {"karpenter.sh/do-not-disrupt": "true"} if p.do_not_disrupt else {}
    if annotations:
        template["metadata"]["annotations"] = annotations
    if p.grace:
        template["spec"]["terminationGracePeriod"] = p.grace
    if p.weight is not None and p.replicas is None:  # a static pool takes no weight
        spec["weight"] = p.weight
    limits = {"cpu": str(p.cpu_limit)} if p.cpu_limit is not None else {}
    limits |= {"memory": p.memory_limit} if p.memory_limit else {}
    if p.replicas is not None:  # only limits.nodes on a static pool
        spec["replicas"], limits = p.replicas, {}
    limits |= {"nodes": str(p.node_limit)} if p.node_limit is not None else {}
    if limits:
        spec["limits"] = limits
    budgets = copy.deepcopy(p.budgets)
    if p.budget_window:  # inactive but for one minute a year: the window decides
        budgets = (budgets or [{"nodes": "10%"}]) + [
            {"nodes": "0", "schedule": "0 0 1 1 *", "duration": "1m"}]
    if budgets is not None:
        spec["disruption"]["budgets"] = budgets
    if p.min_values is not None:
        template["spec"]["requirements"].append(
            {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists",
             "minValues": p.min_values})
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": p.name},
            "spec": spec}


def _workload(w: Workload) -> list[dict]:
    out: list[dict] = []
    labels = {"app": w.name}
    requests = {"cpu": w.cpu, **({"memory": w.memory} if w.memory else {}),
                **({"ephemeral-storage": w.ephemeral} if w.ephemeral else {}),
                **({DONGLE: "1"} if w.dongle else {})}
    container: dict = {"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": requests}}
    if w.dongle:  # an extended resource is not overcommitted: its limit is its request
        container["resources"]["limits"] = {DONGLE: "1"}
    if w.host_port:
        container["ports"] = [{"containerPort": w.host_port, "hostPort": w.host_port}]
    pod: dict = {"terminationGracePeriodSeconds": 0, "containers": [container],
                 "nodeSelector": {CASE_LABEL: "on", **({POOL_LABEL: w.pool} if w.pool else {})}}
    inits = [{"name": "init", "image": PAUSE_IMAGE,
              "resources": {"requests": {"cpu": w.init_cpu}}}] if w.init_cpu else []
    inits += [{"name": "sidecar", "image": PAUSE_IMAGE, "restartPolicy": "Always",
               "resources": {"requests": {"cpu": w.sidecar_cpu}}}] if w.sidecar_cpu else []
    if inits:
        pod["initContainers"] = inits
    if w.overhead:
        pod["runtimeClassName"] = OVERHEAD_CLASS
    tolerations = ([TOLERATION] if w.tolerates else []) + ([TOLERATES_EXTRA] if w.tolerates_extra
                                                           else [])
    if tolerations:
        pod["tolerations"] = copy.deepcopy(tolerations)
    if w.spread:
        spread: dict = {"maxSkew": 1, "topologyKey": w.spread,
                        "labelSelector": {"matchLabels": labels},
                        "whenUnsatisfiable": "ScheduleAnyway" if w.spread_anyway else "DoNotSchedule"}
        for key, value in (("minDomains", w.min_domains), ("nodeAffinityPolicy", w.affinity_policy),
                           ("nodeTaintsPolicy", w.taints_policy),
                           ("matchLabelKeys", ["pod-template-hash"] if w.match_label_keys else None)):
            if value:
                spread[key] = value
        pod["topologySpreadConstraints"] = [spread]
    affinity = _affinity(w, labels)
    if affinity:
        pod["affinity"] = affinity
    if w.volume_zones or w.missing_claim:
        out += _volume(w.name, w.volume_zones) if w.volume_zones else []
        claim = w.name if w.volume_zones else f"{w.name}-missing"  # no such claim: never bound
        pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        container["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    meta: dict = {"labels": labels}
    protected = "true" if w.do_not_disrupt else w.protected_for
    if protected:
        meta["annotations"] = {"karpenter.sh/do-not-disrupt": protected}
    template = {"metadata": meta, "spec": pod}
    if w.job:  # pause never exits: the Job's pods run until the case ends
        pod["restartPolicy"] = "Never"
        out.append({"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": w.name, "namespace": NAMESPACE},
                    "spec": {"parallelism": w.replicas, "completions": w.replicas,
                             "backoffLimit": 0, "template": template}})
    else:
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": w.name, "namespace": NAMESPACE},
                    "spec": {"replicas": w.replicas, "selector": {"matchLabels": labels},
                             "template": template}})
    if w.pdb:
        pdb: dict = {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
        if w.pdb_always_allow:
            pdb["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
        out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": w.name, "namespace": NAMESPACE}, "spec": pdb})
    return out


def _affinity(w: Workload, labels: dict) -> dict:
    def term(key: str, values: list[str]) -> dict:
        return {"matchExpressions": [{"key": key, "operator": "In", "values": values}]}

    def pod_term(key: str) -> dict:
        return {"topologyKey": key, "labelSelector": {"matchLabels": labels}}

    node: dict = {}
    if w.zone_terms:  # terms are ORed: the first is tried, then the next
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            term(ZONE_KEY, [w.zone_terms]), term(ZONE_KEY, [z for z in ZONES if z != w.zone_terms])]}
    if w.prefer_zone:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 50, "preference": term(ZONE_KEY, [w.prefer_zone])}]
    together: dict = {}
    if w.pod_affinity == "required":
        together["requiredDuringSchedulingIgnoredDuringExecution"] = [pod_term(ZONE_KEY)]
    elif w.pod_affinity == "preferred":
        together["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 50, "podAffinityTerm": pod_term(ZONE_KEY)}]
    apart: dict = {}
    if w.anti_affinity:
        apart["requiredDuringSchedulingIgnoredDuringExecution"] = [pod_term(HOSTNAME_KEY)]
    if w.prefer_apart:
        apart["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 50, "podAffinityTerm": pod_term(HOSTNAME_KEY)}]
    return {k: v for k, v in (("nodeAffinity", node), ("podAffinity", together),
                              ("podAntiAffinity", apart)) if v}


def _daemon(d: Daemon) -> dict:
    labels = {"app": d.name}
    selector = {CASE_LABEL: "on", **({"kubernetes.io/arch": d.arch} if d.arch else {}),
                **({"karpenter.sh/registered": "true"} if d.registered else {})}
    pod: dict = {"terminationGracePeriodSeconds": 0, "nodeSelector": selector,
                 "containers": [{"name": "pause", "image": PAUSE_IMAGE,
                                 "resources": {"requests": {"cpu": d.cpu}}}]}
    tolerations = ([TOLERATION] if d.tolerates else []) + ([TOLERATES_EXTRA] if d.tolerates_extra
                                                           else [])
    if tolerations:
        pod["tolerations"] = copy.deepcopy(tolerations)
    node: dict = {}
    if d.arch_terms:  # ORed: compatible with a pool if any term is
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                   "values": [ct]}]} for ct in ("spot", "on-demand")]}
    if d.prefers_zone:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 10, "preference": {
            "matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [d.prefers_zone]}]}}]
    if node:
        pod["affinity"] = {"nodeAffinity": node}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": d.name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def _overlay(o: Overlay, pools: list[str]) -> dict:
    spec: dict = {"requirements": [
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": pools},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": [o.category]}]}
    if o.price_adjustment:
        spec["priceAdjustment"] = o.price_adjustment
    else:
        spec["capacity"] = {DONGLE: "1"}
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "explore"}, "spec": spec}


def _buffer(chunks: int) -> list[dict]:
    """Spare capacity of ``chunks`` 500m chunks on the case's pools, through a PodTemplate."""
    pod = {"nodeSelector": {CASE_LABEL: "on"}, "containers": [
        {"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": "500m"}}}]}
    return [{"apiVersion": "v1", "kind": "PodTemplate",
             "metadata": {"name": "spare", "namespace": NAMESPACE},
             "template": {"metadata": {"labels": {"app": "spare"}}, "spec": pod}},
            {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
             "metadata": {"name": "spare", "namespace": NAMESPACE},
             "spec": {"podTemplateRef": {"name": "spare"}, "replicas": chunks}}]


def _volume(name: str, zones: tuple[str, ...]) -> list[dict]:
    """A class allowing ``zones`` (no provisioner: the PV is made here, bound where the first
    pod lands), a PV that exists only there, and the workload's claim on it (its pods share it)."""
    in_zones = {"key": "topology.kubernetes.io/zone", "values": list(zones)}
    cls = f"explore-{name}"
    return [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": cls},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [in_zones]}]},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": cls},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "storageClassName": cls, "hostPath": {"path": f"/tmp/{cls}"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {**in_zones, "operator": "In"}]}]}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": name, "namespace": NAMESPACE},
         "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                  "resources": {"requests": {"storage": "1Gi"}}}}]


def write(case: Case, folder: Path) -> Path:
    """The case as a folder `check` takes: manifests.yaml and expect.yaml (the scale-in, if
    any; no expectations of its own: explore's verdict is the oracles' and the diff's)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifests.yaml").write_text(
        f"# explore case {case.seed}: {case.describe()}\n"
        + yaml.safe_dump_all(manifests(case), sort_keys=False))
    scale_in = {w.name: w.scale_in for w in case.workloads if w.scale_in is not None}
    expect: dict = {"scale_in": scale_in} if scale_in else {}
    if settings := gates(case):
        expect["karpenter"] = settings
    # Every workload's pods run when they can: a case is drawn so that most can, and the
    # default expectation says which did not (the verdict is the oracles' and the diff's).
    (folder / "expect.yaml").write_text(
        f"# explore case {case.seed}\n" + (yaml.safe_dump(expect, sort_keys=False) if expect
                                           else "{}\n"))
    return folder
