"""Generated workloads for `make explore`: NodePools, Deployments, DaemonSets and PDBs drawn
from the input inventory (docs/coverage.md), written as `check` folders, and shrunk.

Why not Hypothesis: each example costs a cluster run (one to three minutes per release), and
Hypothesis's shrinker assumes cheap calls (it replays an example hundreds of times). Here a
case is drawn from ``random.Random(f"{seed}/{index}")`` (the seed reproduces the run), and a
failing case is shrunk by a bounded number of domain steps (drop a workload, a pool, a
constraint; halve replicas), each a cluster run, greedily, keeping a step while the failure
stays (docs/differential.md).

Everything here is pure: a ``Case`` is data (checks/explore_case.py); ``write``
(checks/explore_manifests.py) renders it as a folder check reads.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator

from karpenter_e2e.checks.explore_case import (  # noqa: F401 - the case's names, explore's too
    CASE_LABEL,
    DAEMON_EXTRAS,
    DONGLE,
    NAMESPACE,
    POOL_EXTRAS,
    POOL_LABEL,
    WORKLOAD_EXTRAS,
    ZONE_KEY,
    ZONES,
    Case,
    Daemon,
    Overlay,
    Pool,
    Workload,
    empty_value,
)
from karpenter_e2e.checks.explore_manifests import gates, manifests, write  # noqa: F401
from karpenter_e2e.clusters.api.labels import CPUS, GENERATION, GPU_COUNT
from karpenter_e2e.clusters.karpenter import features


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
                            *((a, empty_value(getattr(p, a))) for a in POOL_EXTRAS)):
            if getattr(p, attr) != empty:
                yield variant(lambda c, i=i, attr=attr, empty=empty: setattr(c.pools[i], attr, empty))
    for i, w in enumerate(case.workloads):
        for attr, empty in (("spread", None), ("anti_affinity", False), ("do_not_disrupt", False),
                            ("pdb", False), ("scale_in", None), ("memory", None), ("pool", None),
                            ("prefer_zone", None), ("prefer_apart", False),
                            ("volume_zones", None),
                            *((a, empty_value(getattr(w, a))) for a in WORKLOAD_EXTRAS
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
        for attr in DAEMON_EXTRAS:
            if getattr(d, attr) not in (None, False):
                yield variant(lambda c, i=i, attr=attr: setattr(
                    c.daemons[i], attr, empty_value(getattr(c.daemons[i], attr))))
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
