"""`karpenter-e2e synthetic --nodes 300 --pods 3000 [--seed S] --out DIR`: a
large snapshot made up (docs/replay.md), in the format checks/snapshot.py writes, for
replays at scale: two NodePools (on-demand c/m/r, spot), nodes of mixed families, sizes,
zones and capacity types, each with its NodeClaim; Deployments' ReplicaSets whose pods fill
the nodes to 40-90 % of their CPU, some under PDBs (a quarter of those maxUnavailable 0),
some do-not-disrupt; a DaemonSet on every node. Instance types come from the curated
catalogue (clusters/infra/catalogue.py), so a replay on the full catalogue finds each of them.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from karpenter_e2e.checks import snapshot
from karpenter_e2e.clusters.infra.catalogue import TYPES, ZONES

POOLS = {"general": ("on-demand", ("c", "m", "r")), "spot": ("spot", ("c", "m"))}


def _pool(name: str, capacity: str, categories: tuple[str, ...]) -> dict:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "Never",
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                    {"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                     "values": list(categories)},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}},
                "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                               "consolidateAfter": "1m"},
                "limits": {"cpu": "100000"}}}


def make(nodes: int, pods: int, seed: str = "synthetic") -> tuple[dict, dict[str, list[dict]]]:
    rng = random.Random(seed)
    types = [t for t in TYPES if t.arch == "amd64" and not t.gpus and 2 <= t.vcpu <= 16
             and t.name.split(".")[0][0] in "cmr"]
    objects: dict[str, list[dict]] = {k: [] for k in (
        "NodePool", "NodeClass", "NodeClaim", "Node", "Pod", "ReplicaSet", "DaemonSet",
        "PodDisruptionBudget")}
    objects["NodePool"] = [_pool(n, c, cats) for n, (c, cats) in POOLS.items()]
    objects["NodeClass"] = [{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                             "metadata": {"name": "default"},
                             "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}]}}]
    room: list[tuple[str, float]] = []  # node, CPU left for pods
    for i in range(nodes):
        pool = "spot" if rng.random() < 0.3 else "general"
        capacity, cats = POOLS[pool]
        t = rng.choice([x for x in types if x.name.split(".")[0][0] in cats])
        zone = rng.choice(ZONES)
        node, claim = f"ip-10-{i // 250}-{i % 250}-1.synthetic", f"{pool}-{i:05d}"
        labels = {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": t.name,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": capacity,
                  "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": node,
                  "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true"}
        alloc = {"cpu": f"{t.vcpu * 1000 - 100}m", "memory": f"{int(t.memory_gib * 0.9 * 1024)}Mi",
                 "pods": "58"}
        objects["Node"].append({"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": node, "labels": labels},
                                "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
                                "status": {"capacity": alloc, "allocatable": alloc}})
        objects["NodeClaim"].append({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": claim, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                      "name": "default"},
                     "requirements": objects["NodePool"][list(POOLS).index(pool)]["spec"]["template"][
                         "spec"]["requirements"]},
            "status": {"nodeName": node, "capacity": alloc, "allocatable": alloc}})
        room.append((node, (t.vcpu * 1000 - 100) * rng.uniform(0.4, 0.9) - 100))  # the daemon
    objects["DaemonSet"].append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                                 "metadata": {"name": "node-agent", "namespace": "kube-system"},
                                 "spec": {"selector": {"matchLabels": {"app": "node-agent"}},
                                          "template": {"metadata": {"labels": {"app": "node-agent"}},
                                                       "spec": {"containers": [{"name": "agent",
                                                                "resources": {"requests": {"cpu": "100m"}}}],
                                                                "tolerations": [{"operator": "Exists"}]}}}})
    apps = max(3, pods // 10)  # a workload per ten pods
    placed = 0
    for a in range(apps):
        name, ns = f"app-{a:03d}", f"team-{a % 12:02d}"
        cpu = rng.choice([100, 250, 500, 1000])
        rs = f"{name}-5f7d{a:04d}"
        labels = {"app": name, "pod-template-hash": f"5f7d{a:04d}"}
        dnd = rng.random() < 0.05
        want = pods // apps + (1 if a < pods % apps else 0)
        mine = 0
        for _ in range(want):
            fits = [k for k, (_, left) in enumerate(room) if left >= cpu]
            if not fits:
                break
            k = rng.choice(fits)
            node, left = room[k]
            room[k] = (node, left - cpu)
            meta: dict = {"name": f"{rs}-{mine:04d}", "namespace": ns, "labels": labels,
                          "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                               "name": rs, "uid": f"u-{rs}", "controller": True}]}
            if dnd:
                meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
            objects["Pod"].append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                                   "spec": {"nodeName": node, "containers": [{
                                       "name": "app", "resources": {"requests": {"cpu": f"{cpu}m"}}}]},
                                   "status": {"phase": "Running"}})
            mine += 1
        placed += mine
        objects["ReplicaSet"].append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                      "metadata": {"name": rs, "namespace": ns, "labels": labels},
                                      "spec": {"replicas": mine, "selector": {"matchLabels": labels},
                                               "template": {"metadata": {"labels": labels}, "spec": {
                                                   "containers": [{"name": "app", "resources": {
                                                       "requests": {"cpu": f"{cpu}m"}}}]}}}})
        if rng.random() < 0.3:  # a PDB; one in four of them allows no eviction at all
            objects["PodDisruptionBudget"].append({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"maxUnavailable": 0 if rng.random() < 0.25 else 1,
                         "selector": {"matchLabels": {"app": name}}}})
    about = {"taken": "synthetic", "seed": seed, "karpenter": {"version": "unknown", "settings": {}},
             "source": f"checks/synthetic.py: {nodes} nodes, {placed} of {pods} pods placed"}
    return about, objects


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e synthetic", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=300)
    p.add_argument("--pods", type=int, default=3000)
    p.add_argument("--seed", default="synthetic")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.nodes < 1 or args.pods < 0:
        print("synthetic: --nodes 1 or more, --pods 0 or more", file=sys.stderr)
        return 2
    about, objects = make(args.nodes, args.pods, args.seed)
    snapshot.write(objects, about, args.out)
    print(about["source"])
    return 0
