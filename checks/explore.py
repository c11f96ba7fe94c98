"""Generated workloads for `make explore`: NodePools, Deployments, DaemonSets and PDBs drawn
from the input inventory (docs/coverage.md), written as `check` folders, and shrunk.

Why not Hypothesis: each example costs a cluster run (one to three minutes per release), and
Hypothesis's shrinker assumes cheap calls (it replays an example hundreds of times). Here a
case is drawn from ``random.Random(f"{seed}/{index}")`` (the seed reproduces the run), and a
failing case is shrunk by a bounded number of domain steps (drop a workload, a pool, a
constraint; halve replicas), each a cluster run, greedily, keeping a step while the failure
stays (docs/differential.md).

Everything here is pure: a ``Case`` is data; ``write`` renders it as a folder check reads.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.labels import CPUS, GENERATION, GPU_COUNT
from karpenter_e2e.clusters.api.objects import PAUSE_IMAGE
from karpenter_e2e.clusters.karpenter import features

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
    """A NodeOverlay over the case's pools: a price adjustment on a category's types, or an
    extended resource (DONGLE) on a family's."""

    category: str = "c"
    price_adjustment: str | None = None
    family: str | None = None  # capacity: DONGLE on this family's types


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
                          + _set(p, _POOL_EXTRAS) for p in self.pools)
        constraints += sum(bool(w.spread) + w.anti_affinity + w.do_not_disrupt + w.pdb
                           + (w.scale_in is not None) + (w.memory is not None)
                           + (w.pool is not None) + (w.prefer_zone is not None) + w.prefer_apart
                           + (w.volume_zones is not None) + _set(w, _WORKLOAD_EXTRAS)
                           for w in self.workloads)
        constraints += sum(_set(d, _DAEMON_EXTRAS) for d in self.daemons)
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
            + _said(p, _POOL_EXTRAS)) for p in self.pools]
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
                  + "".join(f", {x}" for x in _said(w, _WORKLOAD_EXTRAS))
                  for w in self.workloads]
        parts += [f"daemon {d.name}: {d.cpu}" + "".join(f", {x}" for x in _said(d, _DAEMON_EXTRAS))
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
_POOL_EXTRAS = {"extra_taint": "{}-tainted", "annotated": "annotated",
                "do_not_disrupt": "do-not-disrupt", "memory_limit": "limit {} memory",
                "node_limit": "limit {} nodes", "budget_window": "a scheduled budget",
                "grace": "grace {}", "replicas": "static, {} replicas"}
_WORKLOAD_EXTRAS = {"job": "a Job", "ephemeral": "{} ephemeral", "init_cpu": "init {}",
                    "sidecar_cpu": "sidecar {}", "overhead": "overhead",
                    "host_port": "hostPort {}", "zone_terms": "zone terms from {}",
                    "pod_affinity": "together ({})", "min_domains": "minDomains {}",
                    "affinity_policy": "nodeAffinityPolicy {}",
                    "taints_policy": "nodeTaintsPolicy {}", "match_label_keys": "per revision",
                    "tolerates_extra": "tolerates explore-extra",
                    "protected_for": "do-not-disrupt {}", "pdb_always_allow": "PDB AlwaysAllow",
                    "dongle": "a dongle", "missing_claim": "a claim that does not exist"}
_DAEMON_EXTRAS = {"tolerates_extra": "tolerates explore-extra",
                  "arch": "arch {}", "arch_terms": "capacity-type terms",
                  "prefers_zone": "prefers {}", "registered": "selects registered"}


def _empty(value):
    return False if isinstance(value, bool) else None


def _set(obj, extras: dict[str, str]) -> int:
    return sum(getattr(obj, a) not in (None, False) for a in extras)


def _said(obj, extras: dict[str, str]) -> list[str]:
    return [how.format(getattr(obj, a)) for a, how in extras.items()
            if getattr(obj, a) not in (None, False)]


# ---- generation --------------------------------------------------------------------------------
def _requirements(rng: random.Random) -> list[dict]:
    """Well-known keys with every operator kind the inventory lists (In, NotIn, Exists, Gt,
    Lt), each with a chance; arch and capacity type always, as the workshop's pools do."""
    reqs = [{"key": "kubernetes.io/arch", "operator": "In",
             "values": rng.choice([["amd64"], ["arm64"], ["amd64", "arm64"]])},
            {"key": "karpenter.sh/capacity-type", "operator": "In",
             "values": rng.choice([["on-demand"], ["spot"], ["spot", "on-demand"]])}]
    if rng.random() < 0.6:
        reqs.append({"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                     "values": sorted(rng.sample(["c", "m", "r"], rng.randint(1, 3)))})
    if rng.random() < 0.4:
        reqs.append({"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt",
                     "values": [str(rng.choice([2, 5]))]})
    if rng.random() < 0.3:
        reqs.append({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt",
                     "values": [str(rng.choice([9, 17, 33]))]})
    if rng.random() < 0.3:
        reqs.append({"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                     "values": [rng.choice(ZONES)]})
    if rng.random() < 0.2:
        reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "Exists"})
    return reqs


def generate(seed: str, index: int, releases: tuple[str, ...] = ()) -> Case:
    """Case ``index`` of the run ``seed``: the same pair always gives the same case. An input
    one of ``releases`` lacks (clusters/karpenter/features.py) is left out of it (none: every
    input may be drawn)."""
    rng = random.Random(f"{seed}/{index}")
    case = Case(f"{seed}/{index}")
    for i in range(rng.choice([1, 1, 2])):
        case.pools.append(Pool(
            f"p{i}", _requirements(rng), taint=rng.random() < 0.25,
            weight=rng.choice([None, None, 10, 50]),
            cpu_limit=rng.choice([None, None, 8, 16, 100]),
            policy=rng.choice(["WhenEmptyOrUnderutilized", "WhenEmptyOrUnderutilized", "WhenEmpty"]),
            consolidate_after=rng.choice(["0s", "0s", "30s"]),
            budgets=rng.choice([None, None, None, [{"nodes": "0"}], [{"nodes": "1"}],
                                [{"nodes": "50%", "reasons": ["Underutilized"]}]]),
            min_values=rng.choice([None, None, None, 2, 3])))
    tainted = {p.name for p in case.pools if p.taint}
    for i in range(rng.randint(1, 3)):
        pool = rng.choice([None] + [p.name for p in case.pools])
        replicas = rng.randint(1, 8)
        spread = rng.choice([None, None, "topology.kubernetes.io/zone", "kubernetes.io/hostname"])
        case.workloads.append(Workload(
            f"w{i}", pool, replicas, rng.choice(["250m", "500m", "1", "1", "2"]),
            memory=rng.choice([None, None, "512Mi", "2Gi"]),
            tolerates=bool(tainted) and (pool in tainted or rng.random() < 0.5),
            spread=spread, spread_anyway=bool(spread) and rng.random() < 0.3,
            anti_affinity=not spread and rng.random() < 0.2,
            do_not_disrupt=rng.random() < 0.15, pdb=rng.random() < 0.25,
            scale_in=rng.choice([None, 0, max(0, replicas // 2)]),
            prefer_zone=rng.choice([None, None, None, rng.choice(ZONES)]),
            prefer_apart=rng.random() < 0.15))
    if rng.random() < 0.3:
        case.daemons.append(Daemon("d0", rng.choice(["100m", "250m", "500m"]),
                                   tolerates=bool(tainted)))
    # Drawn from a stream of its own: seeds recorded before volumes were drawn give the same
    # pools and workloads as they did (only a volume may be added).
    vol = random.Random(f"{seed}/{index}/volumes")
    for w in case.workloads:
        if vol.random() < 0.2:
            w.volume_zones = tuple(sorted(vol.sample(ZONES, vol.choice([1, 2]))))
    # The rest of the inventory, from a third stream, the same way: added, never changing what
    # the first two drew.
    _inputs(case, random.Random(f"{seed}/{index}/inputs"))
    _supported(case, releases)
    return case


def _inputs(case: Case, rng: random.Random) -> None:
    """The inputs of the inventory (docs/coverage.md) the first streams never drew: more
    requirement operators, taint effects, pool annotations and limits, a scheduled budget, a
    static pool; pod resources, containers, affinities and spread fields; DaemonSet selection;
    a NodeOverlay, a CapacityBuffer, Karpenter's settings and feature gates. Each with a
    chance, so that most cases still run most pods."""
    for p in case.pools:
        if rng.random() < 0.3:
            p.more_requirements.append(rng.choice([
                {"key": GPU_COUNT, "operator": "DoesNotExist"},
                {"key": GENERATION, "operator": "Gte", "values": [str(rng.choice([5, 6]))]},
                {"key": CPUS, "operator": "Lte", "values": [str(rng.choice([8, 16, 32]))]}]))
        p.extra_taint = rng.choice([None, None, None, "PreferNoSchedule", "PreferNoSchedule",
                                    "NoExecute"])
        p.annotated = rng.random() < 0.2
        p.do_not_disrupt = rng.random() < 0.08
        p.memory_limit = rng.choice([None] * 6 + ["64Gi", "256Gi"])
        p.node_limit = rng.choice([None] * 6 + [3, 6])
        p.budget_window = rng.random() < 0.15
        p.grace = rng.choice([None] * 5 + ["30s", "10m"])
    if rng.random() < 0.12:  # a static pool: pinned to by no workload, as the first pools are
        replicas = rng.randint(1, 2)
        case.pools.append(Pool("s0", _requirements(rng), replicas=replicas,
                               node_limit=rng.choice([None, replicas])))
    if rng.random() < 0.12:  # a Balanced pool: a move only when its savings outweigh it
        case.pools.append(Pool("b0", _requirements(rng), policy="Balanced",
                               consolidate_after=rng.choice(["0s", "30s"])))
    extra = {p.name: p.extra_taint for p in case.pools if p.extra_taint}
    tainted = {p.name for p in case.pools if p.taint}
    if rng.random() < 0.15:  # a Job's pods, beside the Deployments
        case.workloads.append(Workload(
            "j0", None, rng.randint(1, 4), rng.choice(["250m", "500m", "1"]), job=True,
            tolerates=bool(tainted) and rng.random() < 0.5))
    for i, w in enumerate(case.workloads):
        w.ephemeral = rng.choice([None] * 5 + ["1Gi", "4Gi"])
        w.init_cpu = rng.choice([None] * 7 + ["2"])
        w.sidecar_cpu = rng.choice([None] * 7 + ["250m"])
        w.overhead = rng.random() < 0.12
        w.host_port = 8000 + i if rng.random() < 0.12 else None
        w.zone_terms = rng.choice([None] * 15 + list(ZONES))
        w.pod_affinity = rng.choice([None] * 7 + ["required", "preferred"])
        if w.spread:
            w.min_domains = rng.choice([None, None, 2, 3]) \
                if w.spread == ZONE_KEY and not w.spread_anyway else None
            w.affinity_policy = rng.choice([None, None, "Honor", "Ignore"])
            w.taints_policy = rng.choice([None, None, "Honor", "Ignore"])
            w.match_label_keys = rng.random() < 0.3
        # a pool tainted NoExecute takes only pods that tolerate it: those pinned to it do
        w.tolerates_extra = (w.pool is not None and extra.get(w.pool) == "NoExecute") or (
            bool(extra) and rng.random() < 0.4)
        w.protected_for = rng.choice([None] * 8 + ["90s"]) if not w.do_not_disrupt else None
        w.pdb_always_allow = w.pdb and rng.random() < 0.4
        w.missing_claim = not w.volume_zones and rng.random() < 0.05
    if not case.daemons and rng.random() < 0.25:
        case.daemons.append(Daemon("d1", rng.choice(["100m", "250m"]), tolerates=bool(tainted)))
    for d in case.daemons:
        d.tolerates_extra = bool(extra) and rng.random() < 0.5
        d.arch = rng.choice([None] * 4 + ["amd64", "arm64"])
        d.arch_terms = rng.random() < 0.15
        d.prefers_zone = rng.choice([None] * 5 + list(ZONES))
        d.registered = rng.random() < 0.15
    if rng.random() < 0.15:
        category = rng.choice(["c", "m", "r"])
        if rng.random() < 0.5:
            case.overlay = Overlay(category, price_adjustment=rng.choice(["-50%", "+20%"]))
        else:
            case.overlay = Overlay(category)
            rng.choice(case.workloads).dongle = True
    if rng.random() < 0.1:
        case.buffer = rng.randint(1, 3)
    for gate in OPTIONAL_GATES:
        if rng.random() < 0.1:
            case.settings[gate] = "true"
    if rng.random() < 0.2:
        case.settings["MIN_VALUES_POLICY"] = "BestEffort"
    if rng.random() < 0.12:
        case.settings["PREFERENCE_POLICY"] = "Ignore"
    if rng.random() < 0.12:
        case.settings.update(BATCH_IDLE_DURATION="3s", BATCH_MAX_DURATION="15s")
    if rng.random() < 0.08:
        case.settings["SCHEDULER_CONFIG"] = DEFAULT_ZONE_SPREAD


# The inputs of the inventory (clusters/karpenter/inputs.py) explore never draws, and why;
# every other input a folder can carry (checks/carried.py) some case draws
# (tests/test_explore.py holds the two to the inventory). Those no simulated node can show
# are the inventory's own (its ``kwok``), added below.
_CHANGES = ("a change to a pool after it launched, which no folder carries: a case is applied "
            "once and scaled in (a change is check's `steps:`); the drift scenarios cover it")
NOT_DRAWN: dict[str, str] = {
    "nodepool.template.drift": _CHANGES,
    "nodepool.requirements.drift": _CHANGES,
    "nodepool.outsideHash": _CHANGES,
    "nodepool.crdRules": "explore draws valid pools only: a case the API server refuses is a "
                         "generator defect (check exits 2, explore stops); the validation "
                         "scenario covers what the CRD refuses",
    "nodepool.template.startupTaints": "nothing in a case takes a startup taint off (an agent on "
                                       "the node does; the startup-taints scenario plays it), so "
                                       "its NodeClaims would never turn Initialized and the case "
                                       "never settle",
    "nodepool.template.expireAfter": "a case's pools expire Never: an expiry within a case's few "
                                     "minutes would replace nodes while it-settles watches for "
                                     "quiet (a healthy Karpenter's churn, judged as one), and a "
                                     "longer one decides nothing in the window; the expiration "
                                     "scenarios cover it",
    "nodeclaim.nodepoolHash": "an upgrade's: a case runs on one release at a time; the upgrade "
                              "gate covers it",
    "node.taints": "a taint an add-on puts on a launched node: nothing in a case touches a node "
                   "after launch; the chaos-runaway scenario plays one",
    "node.conditions": "a condition a health agent sets on a node: nothing in a case does; the "
                       "node-repair scenario sets KWOK's simulated fault",
    "provider.interruption": "an interruption message on the AWS provider's queue, sent from "
                             "outside the cluster; the interruption scenario (aws-sim, eks) "
                             "sends one",
}


def not_drawn() -> dict[str, str]:
    """NOT_DRAWN with the inputs no simulated node can show (the inventory's reasons)."""
    from karpenter_e2e.clusters.karpenter.inputs import INPUTS
    return {**{i.id: f"no simulated node can show it: {i.kwok}" for i in INPUTS if i.kwok},
            **NOT_DRAWN}


# The feature gates a case may turn on by chance; the others come with what needs them.
OPTIONAL_GATES = ("SpotToSpotConsolidation", "NodeRepair", "TerminateFirstDrift",
                  "TerminateFirstRepair", "PodDeletionCostManagement")
# SCHEDULER_CONFIG as a cluster whose kube-scheduler spreads by zone gives it.
DEFAULT_ZONE_SPREAD = json.dumps({"podTopologySpread": {"defaultConstraints": [{
    "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
    "whenUnsatisfiable": "DoNotSchedule"}]}}, separators=(",", ":"))


def _supported(case: Case, releases: tuple[str, ...]) -> None:
    """Leave out of ``case`` what one of ``releases`` lacks: its check would be refused (a
    setting it does not read, a field its CRDs reject) or would test something else."""
    def has(feature: str) -> bool:
        return all(features.has(v, feature) for v in releases)

    if not has("requirement-gte-lte"):
        for p in case.pools:
            p.more_requirements = [r for r in p.more_requirements
                                   if r["operator"] not in ("Gte", "Lte")]
    if not has("static-capacity"):
        case.pools = [p for p in case.pools if p.replicas is None]
    if not has("balanced-consolidation"):
        case.pools = [p for p in case.pools if p.policy != "Balanced"]
    for w in case.workloads:
        w.protected_for = w.protected_for if has("do-not-disrupt-duration") else None
        w.match_label_keys = w.match_label_keys and has("spread-match-label-keys")
        w.affinity_policy = w.affinity_policy if has("spread-node-affinity-policy") else None
        w.taints_policy = w.taints_policy if has("spread-node-taints-policy") else None
    if case.overlay is not None and not has("node-overlay"):
        case.overlay = None
        for w in case.workloads:
            w.dongle = False
    if case.buffer is not None and not has("capacity-buffer"):
        case.buffer = None
    for key, feature in (("MIN_VALUES_POLICY", "min-values-policy"),
                         ("PREFERENCE_POLICY", "preference-policy"),
                         ("SCHEDULER_CONFIG", "scheduler-config")):
        if key in case.settings and not has(feature):
            del case.settings[key]
    for gate in OPTIONAL_GATES:
        if gate in case.settings and not all(gate in features.gates_known(v) for v in releases):
            del case.settings[gate]


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


# ---- rendering ---------------------------------------------------------------------------------
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


# ---- shrinking ---------------------------------------------------------------------------------
def smaller(case: Case) -> Iterator[Case]:
    """One-step simplifications of ``case``, the largest cut first; each strictly smaller."""
    def variant(edit) -> Case:
        c = copy.deepcopy(case)
        edit(c)
        return c

    for i in range(len(case.workloads)):
        if len(case.workloads) > 1:
            yield variant(lambda c, i=i: c.workloads.pop(i))
    used = {w.pool for w in case.workloads}
    for i, p in enumerate(case.pools):
        if len(case.pools) > 1 and p.name not in used:
            yield variant(lambda c, i=i: c.pools.pop(i))
    for i in range(len(case.daemons)):
        yield variant(lambda c, i=i: c.daemons.pop(i))
    for i, p in enumerate(case.pools):
        for j in range(2, len(p.requirements)):  # arch and capacity type stay
            yield variant(lambda c, i=i, j=j: c.pools[i].requirements.pop(j))
        for j in range(len(p.more_requirements)):
            yield variant(lambda c, i=i, j=j: c.pools[i].more_requirements.pop(j))
        for attr, empty in (("taint", False), ("weight", None), ("cpu_limit", None),
                            ("budgets", None), ("min_values", None),
                            *((a, _empty(getattr(p, a))) for a in _POOL_EXTRAS)):
            if getattr(p, attr) != empty:
                yield variant(lambda c, i=i, attr=attr, empty=empty: setattr(c.pools[i], attr, empty))
    for i, w in enumerate(case.workloads):
        for attr, empty in (("spread", None), ("anti_affinity", False), ("do_not_disrupt", False),
                            ("pdb", False), ("scale_in", None), ("memory", None), ("pool", None),
                            ("prefer_zone", None), ("prefer_apart", False),
                            ("volume_zones", None),
                            *((a, _empty(getattr(w, a))) for a in _WORKLOAD_EXTRAS
                              if a not in ("job", "dongle"))):  # a Job goes whole; see overlay
            if getattr(w, attr) != empty:
                yield variant(lambda c, i=i, attr=attr, empty=empty: setattr(c.workloads[i], attr, empty))
        if w.replicas > 1:
            def halve(c, i=i):
                c.workloads[i].replicas = max(1, c.workloads[i].replicas // 2)
                if c.workloads[i].scale_in is not None:
                    c.workloads[i].scale_in = min(c.workloads[i].scale_in, c.workloads[i].replicas)
            yield variant(halve)
    for i, d in enumerate(case.daemons):
        for attr in _DAEMON_EXTRAS:
            if getattr(d, attr) not in (None, False):
                yield variant(lambda c, i=i, attr=attr: setattr(
                    c.daemons[i], attr, _empty(getattr(c.daemons[i], attr))))
    if case.overlay is not None:
        def no_overlay(c):
            c.overlay = None
            for w in c.workloads:  # nothing offers the dongle any more
                w.dongle = False
        yield variant(no_overlay)
    if case.buffer is not None:
        yield variant(lambda c: setattr(c, "buffer", None))
    for key in case.settings:
        yield variant(lambda c, key=key: c.settings.pop(key))

