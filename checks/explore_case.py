"""An explore case as data (checks/explore.py draws it, checks/explore_manifests.py writes it
as a check folder): its pools, workloads, daemons, the NodeOverlay, the CapacityBuffer and
Karpenter's settings, how big it is (what shrinking decreases) and how it reads in a sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NAMESPACE = "explore"
CASE_LABEL = "explore.karpenter-e2e/case"
POOL_LABEL = "explore.karpenter-e2e/pool"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"
EXTRA_TAINT = "explore-extra"  # a pool's second taint, of the effect its inputs drew
DONGLE = "explore.karpenter-e2e/dongle"  # the extended resource a capacity NodeOverlay adds
OVERHEAD_CLASS = "explore-overhead"  # a RuntimeClass with a pod overhead
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}],
             "role": "KarpenterNodeRole-${CLUSTER_NAME}",
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "${CLUSTER_NAME}"}}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "${CLUSTER_NAME}"}}]}}


@dataclass
class Pool:
    name: str
    requirements: list[dict] = field(default_factory=list)
    taint: bool = False  # team=explore:NoSchedule
    weight: int | None = None
    cpu_limit: int | None = None
    policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "0s"
    budgets: list[dict] | None = None  # disruption budgets; None: Karpenter's default (10%)
    min_values: int | None = None  # minValues on the instance-family key (Exists)
    # Drawn from the case's inputs stream (``_inputs``): added to what the seed drew before.
    more_requirements: list[dict] = field(default_factory=list)  # DoesNotExist, Gte, Lte
    extra_taint: str | None = None  # explore-extra=on with this effect: PreferNoSchedule, NoExecute
    annotated: bool = False  # a template annotation (hashed: a change would drift)
    do_not_disrupt: bool = False  # karpenter.sh/do-not-disrupt on the template: its NodeClaims'
    memory_limit: str | None = None
    node_limit: int | None = None  # limits.nodes (a static pool: its replicas' cap)
    budget_window: bool = False  # a scheduled budget of 0 nodes, inactive but for 1 min a year
    grace: str | None = None  # template terminationGracePeriod
    replicas: int | None = None  # a static pool (spec.replicas; the StaticCapacity gate)


@dataclass
class Workload:
    name: str
    pool: str | None  # pinned to a pool by its label, or None: any pool of the case
    replicas: int
    cpu: str
    memory: str | None = None
    tolerates: bool = False
    spread: str | None = None  # a topology key, DoNotSchedule
    spread_anyway: bool = False  # ScheduleAnyway instead
    anti_affinity: bool = False  # one per node (required, hostname)
    do_not_disrupt: bool = False
    pdb: bool = False  # maxUnavailable 1
    scale_in: int | None = None  # replicas after the scale-out settled
    prefer_zone: str | None = None  # a preferred node affinity for this zone (weight 50)
    prefer_apart: bool = False  # a preferred pod anti-affinity on hostname (weight 50)
    # a claim on a volume that exists only in these zones (a static PV and its class, both
    # naming them; WaitForFirstConsumer), so the volume decides where Karpenter may launch
    volume_zones: tuple[str, ...] | None = None
    # Drawn from the case's inputs stream (``_inputs``): added to what the seed drew before.
    job: bool = False  # a Job's pods (parallelism = replicas), not a Deployment's
    ephemeral: str | None = None  # an ephemeral-storage request
    init_cpu: str | None = None  # an init container's cpu request (the pod needs the larger)
    sidecar_cpu: str | None = None  # a sidecar's (restartPolicy Always): added for its life
    overhead: bool = False  # a RuntimeClass with a pod overhead
    host_port: int | None = None
    zone_terms: str | None = None  # a required node affinity: this zone, or (ORed) the others
    pod_affinity: str | None = None  # to its own pods, by zone: required or preferred
    min_domains: int | None = None  # on a DoNotSchedule zone spread
    affinity_policy: str | None = None  # the spread's nodeAffinityPolicy: Honor or Ignore
    taints_policy: str | None = None  # the spread's nodeTaintsPolicy
    match_label_keys: bool = False  # the spread per ReplicaSet revision (pod-template-hash)
    tolerates_extra: bool = False  # tolerates the pools' explore-extra taint (any effect)
    protected_for: str | None = None  # karpenter.sh/do-not-disrupt with a duration
    pdb_always_allow: bool = False  # the PDB's unhealthyPodEvictionPolicy AlwaysAllow
    dongle: bool = False  # asks for the extended resource the case's NodeOverlay adds
    missing_claim: bool = False  # mounts a claim that does not exist: Karpenter leaves it out


@dataclass
class Daemon:
    name: str
    cpu: str
    tolerates: bool = False
    tolerates_extra: bool = False  # the pools' explore-extra taint
    arch: str | None = None  # a nodeSelector on kubernetes.io/arch
    arch_terms: bool = False  # a required node affinity of two terms (ORed)
    prefers_zone: str | None = None  # a preferred node affinity (ignored for its overhead)
    registered: bool = False  # selects karpenter.sh/registered, set only at registration


@dataclass
class Overlay:
    """A NodeOverlay over the case's pools, on one instance category's types: a price
    adjustment, or (none) an extended resource, DONGLE, that some of the case's pods ask for."""

    category: str = "c"
    price_adjustment: str | None = None


@dataclass
class Case:
    seed: str
    pools: list[Pool] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # expect.yaml's karpenter: block
    overlay: Overlay | None = None
    buffer: int | None = None  # a CapacityBuffer of this many 500m chunks

    @property
    def size(self) -> int:
        """What shrinking decreases: objects, then constraints, then replicas."""
        constraints = sum(len(p.requirements) + len(p.more_requirements) + p.taint
                          + (p.weight is not None) + (p.cpu_limit is not None)
                          + (p.budgets is not None) + (p.min_values is not None)
                          + _set(p, POOL_EXTRAS) for p in self.pools)
        constraints += sum(bool(w.spread) + w.anti_affinity + w.do_not_disrupt + w.pdb
                           + (w.scale_in is not None) + (w.memory is not None)
                           + (w.pool is not None) + (w.prefer_zone is not None) + w.prefer_apart
                           + (w.volume_zones is not None) + _set(w, WORKLOAD_EXTRAS)
                           for w in self.workloads)
        constraints += sum(_set(d, DAEMON_EXTRAS) for d in self.daemons)
        constraints += len(self.settings) + (self.overlay is not None) + (self.buffer is not None)
        return (100 * (len(self.pools) + len(self.workloads) + len(self.daemons))
                + 10 * constraints + sum(w.replicas for w in self.workloads))

    def describe(self) -> str:
        parts = [f"pool {p.name}: " + ", ".join(
            [_requirement(r) for r in p.requirements]
            + (["tainted"] if p.taint else []) + ([f"weight {p.weight}"] if p.weight else [])
            + ([f"limit {p.cpu_limit} CPU"] if p.cpu_limit else [])
            + ([f"budgets {p.budgets}"] if p.budgets is not None else [])
            + ([f"family minValues {p.min_values}"] if p.min_values else [])
            + [f"{p.policy} after {p.consolidate_after}"]
            + [_requirement(r) for r in p.more_requirements]
            + _said(p, POOL_EXTRAS)) for p in self.pools]
        parts += [f"{w.name}: {w.replicas}x {w.cpu}" + (f"/{w.memory}" if w.memory else "")
                  + (f" on {w.pool}" if w.pool else "")
                  + (f", spread {w.spread.split('/')[-1]}" + (" anyway" if w.spread_anyway else "")
                     if w.spread else "")
                  + (", one per node" if w.anti_affinity else "")
                  + (", do-not-disrupt" if w.do_not_disrupt else "") + (", PDB" if w.pdb else "")
                  + (f", scaled to {w.scale_in}" if w.scale_in is not None else "")
                  + (f", prefers {w.prefer_zone}" if w.prefer_zone else "")
                  + (", prefers apart" if w.prefer_apart else "")
                  + (f", volume in {','.join(z[-1] for z in w.volume_zones)}"
                     if w.volume_zones else "")
                  + "".join(f", {x}" for x in _said(w, WORKLOAD_EXTRAS))
                  for w in self.workloads]
        parts += [f"daemon {d.name}: {d.cpu}" + "".join(f", {x}" for x in _said(d, DAEMON_EXTRAS))
                  for d in self.daemons]
        if self.overlay:
            o = self.overlay
            parts.append(f"overlay on category {o.category}: " + (
                f"price {o.price_adjustment}" if o.price_adjustment else f"capacity {DONGLE}"))
        if self.buffer:
            parts.append(f"buffer of {self.buffer} chunk(s)")
        if self.settings:
            parts.append("settings " + ", ".join(
                f"{k}={v if len(v) < 20 else v[:17] + '...'}" for k, v in self.settings.items()))
        return "; ".join(parts)


def _requirement(r: dict) -> str:
    return f"{r['key'].split('/')[-1]} {r['operator']} {','.join(r.get('values', []))}".strip()


# The inputs drawn from a case's inputs stream, per object: attribute -> how describe() says it
# ({} is the attribute's value). Shrinking sets each back to its empty value, one at a time.
POOL_EXTRAS = {"extra_taint": "{}-tainted", "annotated": "annotated",
                "do_not_disrupt": "do-not-disrupt", "memory_limit": "limit {} memory",
                "node_limit": "limit {} nodes", "budget_window": "a scheduled budget",
                "grace": "grace {}", "replicas": "static, {} replicas"}
WORKLOAD_EXTRAS = {"job": "a Job", "ephemeral": "{} ephemeral", "init_cpu": "init {}",
                    "sidecar_cpu": "sidecar {}", "overhead": "overhead",
                    "host_port": "hostPort {}", "zone_terms": "zone terms from {}",
                    "pod_affinity": "together ({})", "min_domains": "minDomains {}",
                    "affinity_policy": "nodeAffinityPolicy {}",
                    "taints_policy": "nodeTaintsPolicy {}", "match_label_keys": "per revision",
                    "tolerates_extra": "tolerates explore-extra",
                    "protected_for": "do-not-disrupt {}", "pdb_always_allow": "PDB AlwaysAllow",
                    "dongle": "a dongle", "missing_claim": "a claim that does not exist"}
DAEMON_EXTRAS = {"tolerates_extra": "tolerates explore-extra",
                  "arch": "arch {}", "arch_terms": "capacity-type terms",
                  "prefers_zone": "prefers {}", "registered": "selects registered"}


def empty_value(value):
    return False if isinstance(value, bool) else None


def _set(obj, extras: dict[str, str]) -> int:
    return sum(getattr(obj, a) not in (None, False) for a in extras)


def _said(obj, extras: dict[str, str]) -> list[str]:
    return [how.format(getattr(obj, a)) for a, how in extras.items()
            if getattr(obj, a) not in (None, False)]
