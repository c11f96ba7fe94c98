"""Which inputs of the inventory (clusters/karpenter/inputs.py, docs/coverage.md) a check
folder carries, read from its manifests and its Karpenter settings (expect.yaml's
``karpenter:``) as Karpenter would meet them: a pool tainted PreferNoSchedule carries
``pod.tolerations.PreferNoSchedule``, a DaemonSet selecting ``karpenter.sh/registered``
carries ``daemonset.karpenterLabels``.

One reader per input a NodePool, a workload or a setting can carry. What no folder carries (a
change after launch, an upgrade, an actor touching a node) has none: explore says why it does
not draw those (checks/explore.NOT_DRAWN), and tests/test_explore.py holds the generator to the
inventory with this table, so a new input cannot go undrawn unsaid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from karpenter_e2e.clusters.api.labels import ARCH, REGISTERED

_WORKLOADS = ("Deployment", "StatefulSet", "Job", "ReplicaSet")
_BASIC = {"cpu", "memory", "ephemeral-storage", "pods"}
_INITIALIZED = "karpenter.sh/initialized"
_DND = "karpenter.sh/do-not-disrupt"


@dataclass
class Folder:
    """A folder's documents by kind, and its Karpenter settings."""

    docs: list[dict]
    settings: dict[str, str] = field(default_factory=dict)

    def of(self, *kinds: str) -> list[dict]:
        return [d for d in self.docs if d.get("kind") in kinds]

    def pods(self) -> list[dict]:
        """The pod specs the workloads make (not DaemonSets')."""
        out = [((d.get("spec") or {}).get("template") or {}).get("spec") or {}
               for d in self.of(*_WORKLOADS)]
        return out + [d.get("spec") or {} for d in self.of("Pod")]

    def pod_meta(self) -> list[dict]:
        return [((d.get("spec") or {}).get("template") or {}).get("metadata") or {}
                for d in self.of(*_WORKLOADS)] + [d.get("metadata") or {} for d in self.of("Pod")]

    def daemons(self) -> list[dict]:
        return [((d.get("spec") or {}).get("template") or {}).get("spec") or {}
                for d in self.of("DaemonSet")]

    def pools(self, static: bool | None = None) -> list[dict]:
        """NodePool specs (``static``: only static pools, or only dynamic ones)."""
        specs = [d.get("spec") or {} for d in self.of("NodePool")]
        return [s for s in specs if static is None or ("replicas" in s) == static]

    def templates(self) -> list[dict]:
        return [s.get("template") or {} for s in self.pools()]

    def requirements(self) -> list[dict]:
        return [r for t in self.templates() for r in (t.get("spec") or {}).get("requirements") or []]

    def taints(self) -> list[dict]:
        return [x for t in self.templates() for x in (t.get("spec") or {}).get("taints") or []]

    def budgets(self) -> list[dict]:
        return [b for s in self.pools() for b in (s.get("disruption") or {}).get("budgets") or []]

    def gate(self, name: str) -> bool:
        return str(self.settings.get(name, "")).lower() == "true"


def _containers(spec: dict) -> Iterator[dict]:
    yield from spec.get("containers") or []
    yield from spec.get("initContainers") or []


def _requests(f: Folder) -> set[str]:
    return {k for spec in f.pods() for c in _containers(spec)
            for k in ((c.get("resources") or {}).get("requests") or {})}


def _inits(f: Folder, sidecar: bool) -> bool:
    return any((c.get("restartPolicy") == "Always") == sidecar
               for spec in f.pods() for c in spec.get("initContainers") or [])


def _affinity(specs: list[dict], kind: str, which: str) -> list:
    key = f"{which}DuringSchedulingIgnoredDuringExecution"
    return [a for spec in specs
            if (a := (((spec.get("affinity") or {}).get(kind) or {}).get(key)))]


def _terms(specs: list[dict]) -> list[list[dict]]:
    """Each spec's required node affinity terms."""
    return [t.get("nodeSelectorTerms") or [] for t in _affinity(specs, "nodeAffinity", "required")]


def _spreads(f: Folder) -> list[dict]:
    return [c for spec in f.pods() for c in spec.get("topologySpreadConstraints") or []]


def _selects(spec: dict, keys: set[str]) -> bool:
    """A DaemonSet's pod selecting any of ``keys`` (nodeSelector or a required term)."""
    if keys & set(spec.get("nodeSelector") or {}):
        return True
    return any(e.get("key") in keys for terms in _terms([spec]) for t in terms
               for e in t.get("matchExpressions") or [])


def _overhead(f: Folder) -> bool:
    classes = {(d.get("metadata") or {}).get("name") for d in f.of("RuntimeClass")
               if d.get("overhead")}
    return any(spec.get("runtimeClassName") in classes for spec in f.pods())


def _owners(f: Folder) -> bool:
    """Pods of more than one kind of owner: Karpenter provisions for some, not for others."""
    return len({d["kind"] for d in f.of(*_WORKLOADS, "Pod", "DaemonSet")}) > 1


def _unbound_claims(f: Folder) -> bool:
    claims = {(d.get("metadata") or {}).get("name") for d in f.of("PersistentVolumeClaim")}
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") not in claims
               for spec in f.pods() for v in spec.get("volumes") or []
               if v.get("persistentVolumeClaim"))


def _limit(f: Folder, resource: str, static: bool) -> bool:
    return any(resource in (s.get("limits") or {}) for s in f.pools(static))


def _policy(f: Folder, policy: str) -> bool:
    return any(((s.get("disruption") or {}).get("consolidationPolicy")
                or "WhenEmptyOrUnderutilized") == policy for s in f.pools(static=False))


def _operator(op: str) -> Callable[[Folder], bool]:
    return lambda f: any(r.get("operator") == op for r in f.requirements())


def _gate(name: str) -> Callable[[Folder], bool]:
    return lambda f: f.gate(name)


CARRIES: dict[str, Callable[[Folder], bool]] = {
    # the pod spec
    "pod.requests": lambda f: bool(_requests(f) & {"cpu", "memory"}),
    "pod.requests.ephemeral-storage": lambda f: "ephemeral-storage" in _requests(f),
    "pod.requests.extended": lambda f: bool(_requests(f) - _BASIC),
    "pod.initContainers": lambda f: _inits(f, sidecar=False),
    "pod.sidecarContainers": lambda f: _inits(f, sidecar=True),
    "pod.overhead": _overhead,
    "pod.hostPorts": lambda f: any(p.get("hostPort") for spec in f.pods()
                                   for c in _containers(spec) for p in c.get("ports") or []),
    "pod.nodeSelector": lambda f: any(spec.get("nodeSelector") for spec in f.pods()),
    "pod.nodeAffinity.required": lambda f: any(_terms(f.pods())),
    "pod.nodeAffinity.preferred": lambda f: bool(_affinity(f.pods(), "nodeAffinity", "preferred")),
    "pod.podAffinity.required": lambda f: bool(_affinity(f.pods(), "podAffinity", "required")),
    "pod.podAffinity.preferred": lambda f: bool(_affinity(f.pods(), "podAffinity", "preferred")),
    "pod.podAntiAffinity.required":
        lambda f: bool(_affinity(f.pods(), "podAntiAffinity", "required")),
    "pod.podAntiAffinity.preferred":
        lambda f: bool(_affinity(f.pods(), "podAntiAffinity", "preferred")),
    "pod.topologySpread.maxSkew": lambda f: any("maxSkew" in c for c in _spreads(f)),
    "pod.topologySpread.topologyKey": lambda f: any("topologyKey" in c for c in _spreads(f)),
    "pod.topologySpread.minDomains": lambda f: any("minDomains" in c for c in _spreads(f)),
    "pod.topologySpread.whenUnsatisfiable":
        lambda f: {c.get("whenUnsatisfiable") for c in _spreads(f)} >= {"ScheduleAnyway"},
    "pod.topologySpread.nodeAffinityPolicy":
        lambda f: any("nodeAffinityPolicy" in c for c in _spreads(f)),
    "pod.topologySpread.nodeTaintsPolicy":
        lambda f: any("nodeTaintsPolicy" in c for c in _spreads(f)),
    "pod.topologySpread.matchLabelKeys": lambda f: any(c.get("matchLabelKeys") for c in _spreads(f)),
    "pod.tolerations.NoSchedule": lambda f: any(t.get("effect") == "NoSchedule" for t in f.taints()),
    "pod.tolerations.NoExecute": lambda f: any(t.get("effect") == "NoExecute" for t in f.taints()),
    "pod.tolerations.PreferNoSchedule":
        lambda f: any(t.get("effect") == "PreferNoSchedule" for t in f.taints()),
    "pod.priority": lambda f: any(spec.get("priorityClassName") or spec.get("priority") is not None
                                  for spec in f.pods()),
    "pod.owner": _owners,
    "pod.doNotDisrupt": lambda f: any((m.get("annotations") or {}).get(_DND) == "true"
                                      for m in f.pod_meta()),
    "pod.doNotDisrupt.duration": lambda f: any((m.get("annotations") or {}).get(_DND, "true")
                                               != "true" for m in f.pod_meta()),
    # PodDisruptionBudgets
    "pdb.budget": lambda f: bool(f.of("PodDisruptionBudget")),
    "pdb.unhealthyPodEvictionPolicy": lambda f: any(
        "unhealthyPodEvictionPolicy" in (d.get("spec") or {}) for d in f.of("PodDisruptionBudget")),
    # DaemonSets
    "daemonset.overhead": lambda f: any((c.get("resources") or {}).get("requests")
                                        for spec in f.daemons() for c in _containers(spec)),
    "daemonset.nodeSelector": lambda f: any(spec.get("nodeSelector") for spec in f.daemons()),
    "daemonset.requiredTerms": lambda f: any(len(t) > 1 for t in _terms(f.daemons())),
    "daemonset.preferredTerms":
        lambda f: bool(_affinity(f.daemons(), "nodeAffinity", "preferred")),
    "daemonset.karpenterLabels":
        lambda f: any(_selects(spec, {REGISTERED, _INITIALIZED}) for spec in f.daemons()),
    "daemonset.arch": lambda f: any(_selects(spec, {ARCH}) for spec in f.daemons()),
    "daemonset.tolerations": lambda f: any(spec.get("tolerations") for spec in f.daemons()),
    # NodePool fields
    "nodepool.template.labels": lambda f: any((t.get("metadata") or {}).get("labels")
                                              for t in f.templates()),
    "nodepool.template.annotations": lambda f: any((t.get("metadata") or {}).get("annotations")
                                                   for t in f.templates()),
    "nodepool.template.taints": lambda f: bool(f.taints()),
    "nodepool.template.startupTaints": lambda f: any((t.get("spec") or {}).get("startupTaints")
                                                     for t in f.templates()),
    "nodepool.template.nodeClassRef": lambda f: any((t.get("spec") or {}).get("nodeClassRef")
                                                    for t in f.templates()),
    **{f"nodepool.requirements.{op}": _operator(op)
       for op in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")},
    "nodepool.requirements.minValues": lambda f: any("minValues" in r for r in f.requirements()),
    "nodepool.limits.cpu": lambda f: _limit(f, "cpu", static=False),
    "nodepool.limits.memory": lambda f: _limit(f, "memory", static=False),
    "nodepool.limits.nodes": lambda f: _limit(f, "nodes", static=False),
    "nodepool.limits.nodes.static": lambda f: _limit(f, "nodes", static=True),
    "nodepool.replicas": lambda f: bool(f.pools(static=True)),
    "nodepool.weight": lambda f: any("weight" in s for s in f.pools()),
    "nodepool.consolidationPolicy.WhenEmpty": lambda f: _policy(f, "WhenEmpty"),
    "nodepool.consolidationPolicy.WhenEmptyOrUnderutilized":
        lambda f: _policy(f, "WhenEmptyOrUnderutilized"),
    "nodepool.consolidationPolicy.Balanced": lambda f: _policy(f, "Balanced"),
    "nodepool.consolidateAfter": lambda f: any("consolidateAfter" in (s.get("disruption") or {})
                                               for s in f.pools()),
    "nodepool.budgets.nodes": lambda f: bool(f.budgets()),
    "nodepool.budgets.reasons": lambda f: any(b.get("reasons") for b in f.budgets()),
    "nodepool.budgets.schedule": lambda f: any(b.get("schedule") for b in f.budgets()),
    # a duration: Never expires nothing
    "nodepool.template.expireAfter": lambda f: any(
        (t.get("spec") or {}).get("expireAfter") not in (None, "Never") for t in f.templates()),
    "nodepool.template.terminationGracePeriod":
        lambda f: any((t.get("spec") or {}).get("terminationGracePeriod") for t in f.templates()),
    # the Node and NodeClaim: the template's annotation is on every NodeClaim of the pool
    "node.doNotDisrupt": lambda f: any((t.get("metadata") or {}).get("annotations", {}).get(_DND)
                                       == "true" for t in f.templates()),
    # volumes
    "volume.storageClass.topology": lambda f: any(
        d.get("allowedTopologies") and d.get("volumeBindingMode") == "WaitForFirstConsumer"
        for d in f.of("StorageClass")),
    "volume.pv.nodeAffinity": lambda f: any((d.get("spec") or {}).get("nodeAffinity")
                                            for d in f.of("PersistentVolume")),
    "volume.pvc.unbound": _unbound_claims,
    # NodeOverlays
    "overlay.capacity": lambda f: any((d.get("spec") or {}).get("capacity")
                                      for d in f.of("NodeOverlay")),
    "overlay.price": lambda f: any({"price", "priceAdjustment"} & set(d.get("spec") or {})
                                   for d in f.of("NodeOverlay")),
    # Karpenter's options and feature gates
    "options.MIN_VALUES_POLICY.Strict": lambda f: any("minValues" in r for r in f.requirements())
    and f.settings.get("MIN_VALUES_POLICY", "Strict") == "Strict",
    "options.MIN_VALUES_POLICY.BestEffort":
        lambda f: f.settings.get("MIN_VALUES_POLICY") == "BestEffort",
    "options.BATCH_DURATIONS": lambda f: bool({"BATCH_IDLE_DURATION", "BATCH_MAX_DURATION"}
                                              & set(f.settings)),
    "options.PREFERENCE_POLICY": lambda f: "PREFERENCE_POLICY" in f.settings,
    "options.SCHEDULER_CONFIG": lambda f: "SCHEDULER_CONFIG" in f.settings,
    **{f"gates.{g}": _gate(g) for g in ("SpotToSpotConsolidation", "NodeRepair",
                                        "TerminateFirstDrift", "TerminateFirstRepair",
                                        "PodDeletionCostManagement")},
    "gates.CapacityBuffer": lambda f: f.gate("CapacityBuffer") and bool(f.of("CapacityBuffer")),
    "gates.NodeOverlay": lambda f: f.gate("NodeOverlay") and bool(f.of("NodeOverlay")),
    "gates.StaticCapacity": lambda f: f.gate("StaticCapacity") and bool(f.pools(static=True)),
    # the AWS provider: every EC2NodeClass names its AMIs (read in aws-sim and eks modes)
    "provider.ec2nodeclass.amiSelectorTerms": lambda f: any(
        (d.get("spec") or {}).get("amiSelectorTerms") for d in f.of("EC2NodeClass")),
}


def carried(docs: list[dict], settings: dict[str, str] | None = None) -> set[str]:
    """The inventory's inputs ``docs`` (and Karpenter's ``settings``) carry."""
    f = Folder(docs, dict(settings or {}))
    return {name for name, reads in CARRIES.items() if reads(f)}
