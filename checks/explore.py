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
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.objects import PAUSE_IMAGE

NAMESPACE = "explore"
CASE_LABEL = "explore.karpenter-e2e/case"
POOL_LABEL = "explore.karpenter-e2e/pool"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")
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


@dataclass
class Daemon:
    name: str
    cpu: str
    tolerates: bool = False


@dataclass
class Case:
    seed: str
    pools: list[Pool] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def size(self) -> int:
        """What shrinking decreases: objects, then constraints, then replicas."""
        constraints = sum(len(p.requirements) + p.taint + (p.weight is not None)
                          + (p.cpu_limit is not None) + (p.budgets is not None)
                          + (p.min_values is not None) for p in self.pools)
        constraints += sum(bool(w.spread) + w.anti_affinity + w.do_not_disrupt + w.pdb
                           + (w.scale_in is not None) + (w.memory is not None)
                           + (w.pool is not None) + (w.prefer_zone is not None) + w.prefer_apart
                           + (w.volume_zones is not None)
                           for w in self.workloads)
        return (100 * (len(self.pools) + len(self.workloads) + len(self.daemons))
                + 10 * constraints + sum(w.replicas for w in self.workloads))

    def describe(self) -> str:
        parts = [f"pool {p.name}: " + ", ".join(
            [f"{r['key'].split('/')[-1]} {r['operator']} {','.join(r.get('values', []))}".strip()
             for r in p.requirements]
            + (["tainted"] if p.taint else []) + ([f"weight {p.weight}"] if p.weight else [])
            + ([f"limit {p.cpu_limit} CPU"] if p.cpu_limit else [])
            + ([f"budgets {p.budgets}"] if p.budgets is not None else [])
            + ([f"family minValues {p.min_values}"] if p.min_values else [])
            + [f"{p.policy} after {p.consolidate_after}"]) for p in self.pools]
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
                  for w in self.workloads]
        parts += [f"daemon {d.name}: {d.cpu}" for d in self.daemons]
        return "; ".join(parts)


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


def generate(seed: str, index: int) -> Case:
    """Case ``index`` of the run ``seed``: the same pair always gives the same case."""
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
    return case


# ---- rendering ---------------------------------------------------------------------------------
def manifests(case: Case) -> list[dict]:
    out: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                       copy.deepcopy(NODECLASS)]
    for p in case.pools:
        spec: dict = {
            "template": {"metadata": {"labels": {CASE_LABEL: "on", POOL_LABEL: p.name}},
                         "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws",
                                                   "kind": "EC2NodeClass", "name": "default"},
                                  "expireAfter": "Never",
                                  "requirements": copy.deepcopy(p.requirements)}},
            "disruption": {"consolidationPolicy": p.policy,
                           "consolidateAfter": p.consolidate_after}}
        if p.taint:
            spec["template"]["spec"]["taints"] = [{"key": "team", "value": "explore",
                                                   "effect": "NoSchedule"}]
        if p.weight is not None:
            spec["weight"] = p.weight
        if p.cpu_limit is not None:
            spec["limits"] = {"cpu": str(p.cpu_limit)}
        if p.budgets is not None:
            spec["disruption"]["budgets"] = copy.deepcopy(p.budgets)
        if p.min_values is not None:
            spec["template"]["spec"]["requirements"].append(
                {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists",
                 "minValues": p.min_values})
        out.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": p.name}, "spec": spec})
    toleration = [{"key": "team", "operator": "Equal", "value": "explore", "effect": "NoSchedule"}]
    for w in case.workloads:
        labels = {"app": w.name}
        requests = {"cpu": w.cpu, **({"memory": w.memory} if w.memory else {})}
        pod: dict = {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "pause", "image": PAUSE_IMAGE,
                                     "resources": {"requests": requests}}],
                     "nodeSelector": {CASE_LABEL: "on", **({POOL_LABEL: w.pool} if w.pool else {})}}
        if w.tolerates:
            pod["tolerations"] = toleration
        if w.spread:
            pod["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": w.spread, "labelSelector": {"matchLabels": labels},
                "whenUnsatisfiable": "ScheduleAnyway" if w.spread_anyway else "DoNotSchedule"}]
        if w.anti_affinity:
            pod["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}]}}
        if w.prefer_zone:
            pod.setdefault("affinity", {})["nodeAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "preference": {
                    "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                          "values": [w.prefer_zone]}]}}]}
        if w.prefer_apart:
            pod.setdefault("affinity", {}).setdefault("podAntiAffinity", {})[
                "preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 50, "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}}]
        if w.volume_zones:
            out += _volume(w.name, w.volume_zones)
            pod["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": w.name}}]
            pod["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        meta: dict = {"labels": labels}
        if w.do_not_disrupt:
            meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": w.name, "namespace": NAMESPACE},
                    "spec": {"replicas": w.replicas, "selector": {"matchLabels": labels},
                             "template": {"metadata": meta, "spec": pod}}})
        if w.pdb:
            out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": w.name, "namespace": NAMESPACE},
                        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}}})
    for d in case.daemons:
        labels = {"app": d.name}
        out.append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": d.name, "namespace": NAMESPACE},
                    "spec": {"selector": {"matchLabels": labels}, "template": {
                        "metadata": {"labels": labels},
                        "spec": {"terminationGracePeriodSeconds": 0,
                                 "nodeSelector": {CASE_LABEL: "on"},
                                 **({"tolerations": toleration} if d.tolerates else {}),
                                 "containers": [{"name": "pause", "image": PAUSE_IMAGE, "resources": {
                                     "requests": {"cpu": d.cpu}}}]}}}})
    return out


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
        for attr, empty in (("taint", False), ("weight", None), ("cpu_limit", None),
                            ("budgets", None), ("min_values", None)):
            if getattr(p, attr) != empty:
                yield variant(lambda c, i=i, attr=attr, empty=empty: setattr(c.pools[i], attr, empty))
    for i, w in enumerate(case.workloads):
        for attr, empty in (("spread", None), ("anti_affinity", False), ("do_not_disrupt", False),
                            ("pdb", False), ("scale_in", None), ("memory", None), ("pool", None),
                            ("prefer_zone", None), ("prefer_apart", False),
                            ("volume_zones", None)):
            if getattr(w, attr) != empty:
                yield variant(lambda c, i=i, attr=attr, empty=empty: setattr(c.workloads[i], attr, empty))
        if w.replicas > 1:
            def halve(c, i=i):
                c.workloads[i].replicas = max(1, c.workloads[i].replicas // 2)
                if c.workloads[i].scale_in is not None:
                    c.workloads[i].scale_in = min(c.workloads[i].scale_in, c.workloads[i].replicas)
            yield variant(halve)
