"""What Karpenter did with the manifests, read from the cluster's own state: every pod and its
node, every node Karpenter launched (pool, type, capacity type, zone, price, allocatable, the
NodeClaim that names it), every NodePool's limits and what it counts against them, and for
Pending pods the diagnosis in the troubleshooting checklist's words.

The snapshot is plain data (``to_dict``/``from_dict``), so expectations and reports are pure
functions of it and are unit-tested from recorded snapshots.
"""

from __future__ import annotations

import functools
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from kubernetes import client

from karpenter_e2e.checks.manifests import Bundle, Manifest, desired_pods
from karpenter_e2e.clusters.api import objects as view
from karpenter_e2e.clusters.api.kube import NODECLAIM, NODEPOOL, Kind, Kube, if_found
from karpenter_e2e.clusters.api.labels import (
    CAPACITY_TYPE,
    CATEGORY,
    FAMILY,
    INSTANCE_TYPE,
    NODEPOOL as NODEPOOL_LABEL,
    PRICE,
    ZONE,
)
from karpenter_e2e.clusters.karpenter import resources
from karpenter_e2e.fixtures import diagnosis


@dataclass
class PodView:
    namespace: str
    name: str
    workload: str  # 'Kind/namespace/name' of the manifest it comes from
    phase: str  # Pending, Running, Succeeded, Failed; 'Terminating' once deleting
    node: str = ""
    requests: dict[str, str] = field(default_factory=dict)  # summed over containers
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class NodeView:
    name: str
    nodepool: str
    instance_type: str
    capacity_type: str
    zone: str
    price: float | None  # USD/hour, from the provider's price label
    labels: dict[str, str] = field(default_factory=dict)
    created: float | None = None
    allocatable: dict[str, str] = field(default_factory=dict)  # the node's status.allocatable
    claim: str = ""  # the NodeClaim whose status names this node ('' when none does)

    @property
    def category(self) -> str:
        return self.labels.get(CATEGORY) or _category(self.instance_type)

    @property
    def family(self) -> str:
        return self.labels.get(FAMILY) or self.instance_type.split(".")[0]


@dataclass
class PoolView:
    name: str
    limits: dict[str, str] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)  # what Karpenter counts (status)
    consolidation: str = ""  # policy and consolidateAfter, e.g. 'WhenEmpty after 30s'


@dataclass
class NotCreated:
    missing: int
    wanted: int
    refused: str  # the controller's latest FailedCreate: '<Kind> <name>: <message>'

    def text(self) -> str:
        return f"{self.missing} of {self.wanted} pods not created: {self.refused}"


@dataclass
class Snapshot:
    at: float
    pods: list[PodView] = field(default_factory=list)
    nodes: list[NodeView] = field(default_factory=list)
    pools: list[PoolView] = field(default_factory=list)
    claims_launching: int = 0  # NodeClaims not yet Initialized
    claims_deleting: int = 0
    diagnoses: dict[str, str] = field(default_factory=dict)  # workload -> verdict
    # workload -> why its controller made fewer pods than asked (no pod, so no Karpenter input)
    not_created: dict[str, NotCreated] = field(default_factory=dict)
    # what happened in the phase that led here, from the timeline recording: the NodeClaims
    # Karpenter deleted ({claim, nodepool, instance_type}) and Karpenter's events
    # ({reason, kind, name, message})
    removed: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)

    def node(self, name: str) -> NodeView | None:
        return next((n for n in self.nodes if n.name == name), None)

    def workloads(self) -> list[str]:
        return sorted({p.workload for p in self.pods} | set(self.not_created))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Snapshot:
        return cls(d["at"], [PodView(**p) for p in d["pods"]],
                   [NodeView(**n) for n in d["nodes"]], [PoolView(**p) for p in d["pools"]],
                   d.get("claims_launching", 0), d.get("claims_deleting", 0),
                   d.get("diagnoses") or {},
                   {w: NotCreated(**n) for w, n in (d.get("not_created") or {}).items()},
                   d.get("removed") or [], d.get("events") or [])


def _category(instance_type: str) -> str:
    """'c6i.large' -> 'c' (what the AWS provider's instance-category label says)."""
    m = re.match(r"[a-z]+", instance_type)
    return m[0] if m else ""


def pod_workload(pod) -> str:
    """'Kind/namespace/name' of what made the pod: a Deployment through its ReplicaSet (whose
    name is the Deployment's plus the pod-template-hash), else the direct owner, else itself."""
    ns, owners = pod.metadata.namespace, pod.metadata.owner_references or []
    owner = next((o for o in owners if o.controller), owners[0] if owners else None)
    if owner is None:
        return f"Pod/{ns}/{pod.metadata.name}"
    if owner.kind == "ReplicaSet":
        h = (pod.metadata.labels or {}).get("pod-template-hash", "")
        if h and owner.name.endswith(f"-{h}"):
            return f"Deployment/{ns}/{owner.name.removesuffix(f'-{h}')}"
    return f"{owner.kind}/{ns}/{owner.name}"


# one client for turning the official client's objects into the API's dicts (it holds a pool)
_serializer = functools.cache(client.ApiClient)


def _requests(pod) -> dict[str, str]:
    """What the pod asks of a node as Karpenter and the scheduler count it
    (resources.pod_requests: containers, sidecars, init containers, pod-level requests,
    overhead). A LimitRange's defaults are in the spec already (admission wrote them)."""
    asked = resources.pod_requests(_serializer().sanitize_for_serialization(pod))
    return {k: _amount(float(v)) for k, v in sorted(asked.items())}


def _amount(v: float) -> str:
    """1610612736 -> '1.5Gi', 0.5 -> '0.5': bytes in the largest binary unit that keeps at
    most three decimals, other amounts as they are."""
    for unit, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
        if v >= size and (v / size * 1000).is_integer():
            return f"{v / size:g}{unit}"
    return f"{v:g}"


def _quantity(q: str) -> float:
    from kubernetes.utils import parse_quantity
    return float(parse_quantity(q))


def _phase(pod) -> str:
    return "Terminating" if pod.metadata.deletion_timestamp else (pod.status.phase or "Unknown")


def _consolidation(pool: dict) -> str:
    d = (pool.get("spec") or {}).get("disruption") or {}
    policy = d.get("consolidationPolicy", "WhenEmptyOrUnderutilized")
    return f"{policy} after {d.get('consolidateAfter', '0s')}"


def not_created(kube: Kube, workloads: list[Manifest],
                counts: dict[str, int]) -> dict[str, NotCreated]:
    """Workloads with fewer pods than they ask for whose controller was refused the rest (a
    ResourceQuota, a LimitRange's bounds, a missing ServiceAccount), by 'Kind/namespace/name'.
    Karpenter never sees pods that do not exist, so that shortfall is decided; it is
    reported, not waited for."""
    short = {}
    for m in workloads:
        want = desired_pods(m)
        if want is not None and counts.get(m.ref, 0) < want:
            short[m.ref] = (m, want - counts.get(m.ref, 0))
    out = {}
    for ns in sorted({m.namespace or "default" for m, _ in short.values()}):
        refusals = sorted(kube.events_in(ns, "reason=FailedCreate"), key=diagnosis.event_time)
        for key, (m, missing) in short.items():
            if (m.namespace or "default") != ns:
                continue
            mine = [e for e in refusals if _made_by(e.involved_object, m)]
            if mine:
                last = mine[-1]
                message = (last.message or "").removeprefix("(combined from similar events): ")
                out[key] = NotCreated(missing, missing + counts.get(key, 0),
                                      f"{last.involved_object.kind} "
                                      f"{last.involved_object.name}: {message}")
    return out


def _made_by(obj, m: Manifest) -> bool:
    """Is the event's object the workload's pod maker: its own controller (Job, StatefulSet),
    or for a Deployment one of its ReplicaSets ('<name>-<pod-template-hash>')?"""
    if m.kind == "Deployment":
        return obj.kind == "ReplicaSet" and obj.name.startswith(f"{m.name}-") and \
            "-" not in obj.name.removeprefix(f"{m.name}-")
    return obj.kind == m.kind and obj.name == m.name


def take(kube: Kube, bundle: Bundle, nodeclass: Kind | None = None,
         karpenter_running: Callable[[], bool] = lambda: True,
         karpenter_log: Callable[[], str] = lambda: "",
         catalogue: set[str] | None = None, workloads: list[Manifest] | None = None) -> Snapshot:
    """The cluster as it is now, limited to the folder's namespaces and Karpenter's nodes.
    ``catalogue``: the instance types the cluster's cloud offers, when it is a fake one;
    ``workloads``: the workloads as applied (scaled), else as the folder has them."""
    snap = state(kube, bundle.namespaces)
    snap.diagnoses = diagnose_pending(kube, snap, nodeclass, karpenter_running, karpenter_log,
                                      bundle, catalogue)
    counts = Counter(p.workload for p in snap.pods if p.phase != "Terminating")
    snap.not_created = not_created(kube, bundle.workloads if workloads is None else workloads,
                                   counts)
    return snap


def state(kube: Kube, namespaces) -> Snapshot:
    """The pods of ``namespaces``, Karpenter's nodes, NodePools and NodeClaims, as they are
    now (what the packing picture draws; a replay's before and after)."""
    snap = Snapshot(time.time())
    for ns in sorted(namespaces):
        for pod in kube.pods(ns):
            snap.pods.append(PodView(ns, pod.metadata.name, pod_workload(pod), _phase(pod),
                                     pod.spec.node_name or "", _requests(pod),
                                     dict(pod.metadata.labels or {})))
    for node in kube.nodes(NODEPOOL_LABEL):
        labels = dict(node.metadata.labels or {})
        price = labels.get(PRICE)
        snap.nodes.append(NodeView(node.metadata.name, labels.get(NODEPOOL_LABEL, ""),
                                   labels.get(INSTANCE_TYPE, "?"), labels.get(CAPACITY_TYPE, "?"),
                                   labels.get(ZONE, "?"), float(price) if price else None,
                                   labels, node.metadata.creation_timestamp.timestamp(),
                                   dict((node.status and node.status.allocatable) or {})))
    for pool in kube.list(NODEPOOL):
        snap.pools.append(PoolView(pool["metadata"]["name"],
                                   dict((pool.get("spec") or {}).get("limits") or {}),
                                   dict(view.status(pool).get("resources") or {}),
                                   _consolidation(pool)))
    claims = kube.list(NODECLAIM)
    named = {view.status(c).get("nodeName"): view.name(c) for c in claims}
    for n in snap.nodes:
        n.claim = named.get(n.name, "")
    for claim in claims:
        if view.deleting(claim):
            snap.claims_deleting += 1
        elif not view.is_true(claim, "Initialized"):
            snap.claims_launching += 1
    return snap


def diagnose_pending(kube: Kube, snap: Snapshot, nodeclass: Kind | None,
                     karpenter_running: Callable[[], bool],
                     karpenter_log: Callable[[], str], bundle: Bundle | None = None,
                     catalogue: set[str] | None = None) -> dict[str, str]:
    """Per workload with Pending pods, the verdict of fixtures.diagnosis from Karpenter's
    events on those pods, the NodeClasses that are not ready, and the lines of Karpenter's
    log that name those pods; when no instance type fits and the cloud is the fake
    catalogue, each family or type the pod or a NodePool asks for that it lacks."""
    pending: dict[str, list[PodView]] = {}
    for p in snap.pods:
        if p.phase == "Pending":
            pending.setdefault(p.workload, []).append(p)
    if not pending:
        return {}
    from karpenter_e2e.checks.apply import APPLIED_LABEL
    running, log_text = karpenter_running(), karpenter_log()
    classes = diagnosis.nodeclass_messages(kube, nodeclass, "", selector=APPLIED_LABEL) \
        if nodeclass is not None else []
    out = {}
    for workload, pods in pending.items():
        messages = []
        for p in pods[:5]:  # the same verdict for every replica: a few pods are enough
            messages += diagnosis.pod_event_messages(kube, p.namespace, p.name)
        names = {p.name for p in pods}
        lines = "\n".join(line for line in log_text.splitlines()
                          if any(f'"{n}"' in line for n in names))
        pod = kube.core.read_namespaced_pod(pods[0].name, pods[0].namespace,
                                            _request_timeout=kube.timeout)
        if waiting := volume_wait(kube, pod, messages):
            out[workload] = waiting
            continue
        found = diagnosis.verdict(diagnosis.Evidence(
            running, "", [_closest_clause(m, _asks(pod)) for m in messages] + classes, lines))
        if catalogue is not None and found.startswith("no instance type fits"):
            gaps = catalogue_gaps(pod_requirements(pod), bundle, catalogue)
            found = f"{'; '.join(gaps)} [{found}]" if gaps else found
        out[workload] = found
    return out


NOMINATED_CLAIM = re.compile(r"nodeclaim/([a-z0-9.-]+)")


def volume_wait(kube: Kube, pod, messages: list[str]) -> str:
    """A pod Karpenter placed (Nominated) that waits on a claim nothing binds: which claim,
    its class and provisioner, and where Karpenter put the pod (its NodeClaim's zone), so an
    unbound volume does not hide Karpenter's decision. '' when that is not the case."""
    claims = [v.persistent_volume_claim.claim_name for v in pod.spec.volumes or []
              if v.persistent_volume_claim]
    unbound = []
    for name in claims:
        pvc = if_found(functools.partial(kube.core.read_namespaced_persistent_volume_claim,
                                         name, pod.metadata.namespace,
                                         _request_timeout=kube.timeout))
        if pvc is not None and pvc.status.phase != "Bound":
            sc = pvc.spec.storage_class_name
            cls = if_found(functools.partial(client.StorageV1Api(kube.api).read_storage_class,
                                             sc, _request_timeout=kube.timeout)) if sc else None
            unbound.append(f"PersistentVolumeClaim {name} is {pvc.status.phase} (StorageClass "
                           f"{sc or 'none'}, provisioner {cls.provisioner if cls else '?'})")
    nominated = [m for m in messages if "Nominated (karpenter)" in m]
    if not unbound or not nominated:
        return ""
    where = ""
    if m := NOMINATED_CLAIM.search(nominated[-1]):
        claim = kube.get(NODECLAIM, m[1]) or {}
        zone = (claim.get("metadata", {}).get("labels") or {}).get(ZONE, "?")
        where = f"nodeclaim/{m[1]} in {zone}"
    return (f"waits for its volume, not for Karpenter: {'; '.join(unbound)}; nothing here "
            f"binds it. Karpenter placed the pod on {where or nominated[-1]}")


def pod_requirements(pod) -> list[dict]:
    """A pod's node requirements: its nodeSelector (as In) and required node affinity."""
    reqs = [{"key": k, "operator": "In", "values": [v]}
            for k, v in (pod.spec.node_selector or {}).items()]
    affinity = pod.spec.affinity and pod.spec.affinity.node_affinity
    required = affinity and affinity.required_during_scheduling_ignored_during_execution
    for term in (required and required.node_selector_terms) or []:
        reqs += [{"key": e.key, "operator": e.operator, "values": list(e.values or [])}
                 for e in term.match_expressions or []]
    return reqs


def catalogue_gaps(pod_reqs: list[dict], bundle: Bundle | None, catalogue: set[str]) -> list[str]:
    """What the pod and the folder's NodePools pin to that the fake catalogue lacks."""
    from karpenter_e2e.clusters.infra.catalogue import missing
    gaps = missing(pod_reqs, catalogue)
    for pool in bundle.nodepools if bundle else []:
        spec = ((pool.body.get("spec") or {}).get("template") or {}).get("spec") or {}
        gaps += [f"NodePool {pool.name}: {g}"
                 for g in missing(spec.get("requirements") or [], catalogue)]
    return gaps


# How close a pool came to taking the pod, by what Karpenter said about it. A limit ranks
# below "no instance type": Karpenter also says "all available instance types exceed limits"
# for a pool whose types the pod's requirements filtered out entirely (seen: the api pool for
# the A10G pods of examples/ml-platform with g5 excluded from the GPU pool).
DEPTH = {"no instance type fits": 3, "NodePool limit reached": 2,
         "no NodePool matches the pod": 1, "untolerated taint": 0}


def _asks(pod) -> set[str]:
    """What a pod asks of a node by name: its nodeSelector keys and requested resources."""
    keys = set((pod.spec.node_selector or {}).keys())
    for c in pod.spec.containers or []:
        keys |= set(((c.resources and c.resources.requests) or {}).keys())
    return keys


def _closest_clause(message: str, asks: set[str]) -> str:
    """Karpenter joins one clause per NodePool with '; '. With several pools the clause that
    explains the pod is the one about the pool it was meant for: a taint whose key the pod
    asks for (a GPU taint on a pod requesting nvidia.com/gpu, a `workload` taint on a pod
    selecting `workload`), else the pool it got furthest with. Other clauses are dropped."""
    head, sep, rest = message.partition("Failed to schedule pod, ")
    if not sep or "; " not in rest:
        return message
    ranked = []
    for clause in rest.split("; "):
        name = next((n for n, pattern in diagnosis.RULES if pattern.search(clause)), None)
        if name is None:
            continue
        taint = re.search(r"taint=([^=:)\s]+)", clause)
        depth = 4 if name == "untolerated taint" and taint and taint[1] in asks \
            else DEPTH.get(name, -1)
        ranked.append((depth, clause))
    if not ranked:
        return message
    return head + sep + max(ranked, key=lambda r: r[0])[1]


# ---- reductions the report and the expectations share ---------------------------------------
def pool_summary(snap: Snapshot, pool: str) -> dict:
    nodes = [n for n in snap.nodes if n.nodepool == pool]
    prices = [n.price for n in nodes]
    return {
        "nodes": len(nodes),
        "instance_types": dict(Counter(n.instance_type for n in nodes).most_common()),
        "capacity_types": dict(Counter(n.capacity_type for n in nodes).most_common()),
        "zones": dict(sorted(Counter(n.zone for n in nodes).items())),
        "cost_per_hour": round(sum(prices), 4) if None not in prices else None,
        "spot_share": round(sum(n.capacity_type == "spot" for n in nodes) / len(nodes), 3)
        if nodes else None,
    }


def workload_summary(snap: Snapshot, workload: str) -> dict:
    pods = [p for p in snap.pods if p.workload == workload]
    phases = Counter(p.phase for p in pods)
    nodes = [snap.node(p.node) for p in pods if p.node]
    return {
        "pods": len(pods), **{k.lower(): v for k, v in sorted(phases.items())},
        "nodepools": sorted({n.nodepool for n in nodes if n}),
        "capacity_types": dict(Counter(n.capacity_type for n in nodes if n).most_common()),
        "instance_types": dict(Counter(n.instance_type for n in nodes if n).most_common()),
        "requests": sorted({", ".join(f"{k} {v}" for k, v in p.requests.items()) for p in pods}),
        "diagnosis": snap.diagnoses.get(workload, ""),
        "not_created": n.text() if (n := snap.not_created.get(workload)) else "",
    }


def cost_per_hour(snap: Snapshot) -> float | None:
    prices = [n.price for n in snap.nodes]
    return None if None in prices else round(sum(prices), 4)
