"""`check --snapshot DIR`: a snapshot (checks/snapshot.py) rebuilt on a fresh local cluster,
verified object by object, then left to Karpenter for a window (docs/replay.md).

1. NodeClasses and NodePools as the snapshot has them, each pool's disruption budgets held
   at 0 nodes while the state is rebuilt (Karpenter must not act on a half-built cluster).
2. Each of the snapshot's NodeClaims as a NodeClaim of its pool pinned to its node's
   instance type, zone and capacity type (the KWOK provider launches exactly that), carrying
   the pool's hash as Karpenter's own launches do; nodes no NodeClaim owns as plain KWOK
   nodes with their labels, taints and allocatable.
3. The pods where they ran: bound by nodeName to the node rebuilt for theirs (pause images);
   then their ReplicaSets, StatefulSets (updateStrategy OnDelete) and DaemonSets, which adopt
   them or make their own; PDBs and PriorityClasses as they were. Pods of a node not rebuilt
   stay unbound. What is not rebuilt: Deployments (their ReplicaSets own the pods and
   Karpenter reads no Deployment), Jobs (their pods stay unowned), PVs and PVCs (volumes are
   dropped from the pods). Every difference is listed in the report.
4. The rebuild is verified: the same nodes (pool, instance type, zone, capacity type), each
   pod on the node rebuilt for its own; a replay that does not match says where and stops.
5. The budgets are restored and Karpenter acts for ``window`` seconds, watched by the timeline.

Long because a replay is one sequence over one Replayer (rebuild, verify, change, window,
from scratch) and its report; the seam for a split is the report and comparisons
(replay_once's second half): the window's section is rendering/replay_window.py.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError

from karpenter_e2e.checks import change, snapshot
from karpenter_e2e.checks.report import write_comparison
from karpenter_e2e.clusters.api import objects as view
from karpenter_e2e.clusters.api.kube import NODECLAIM, NODEPOOL, Kube
from karpenter_e2e.clusters.api.labels import (
    CAPACITY_TYPE,
    INSTANCE_TYPE,
    NODEPOOL as POOL,
    PRICE,
    ZONE,
)
from karpenter_e2e.clusters.api.objects import PAUSE_IMAGE
from karpenter_e2e.clusters.api.waits import Observation, WaitTimeout, eventually, pause
from karpenter_e2e.clusters.karpenter.clock import BATCH_MAX_S
from karpenter_e2e.fixtures import decisions, oracles
from karpenter_e2e.fixtures.isolation import new_run_id
from karpenter_e2e.fixtures.timeline import ALL_NAMESPACES, Timeline
from karpenter_e2e.rendering import replay_window

log = logging.getLogger("karpenter_e2e.replay")

ORIGIN = "replay.karpenter-e2e/node"  # on a rebuilt NodeClaim: the snapshot node it stands for
HASH = "karpenter.sh/nodepool-hash"
HASH_VERSION = "karpenter.sh/nodepool-hash-version"
HELD = [{"nodes": "0"}]  # the budgets while the state is rebuilt
# Beside a snapshot: what Karpenter decided on the original cluster over the window after it
# was taken (check --snapshot-out --snapshot-window), to compare a replay with
ORIGINAL = "original.json"
# A snapshot's objects as snapshot.keep writes them may lack apiVersion: the kinds a change edits
_API_VERSIONS = {"NodePool": "karpenter.sh/v1", "PodDisruptionBudget": "policy/v1",
                 "PriorityClass": "scheduling.k8s.io/v1", "ReplicaSet": "apps/v1",
                 "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Pod": "v1"}
LAUNCH_S = 120  # every NodeClaim launched and initialized: KWOK nodes join in seconds
# From scratch: Karpenter batches the pending pods (at most BATCH_MAX_S a round), launches and
# initializes their NodeClaims (LAUNCH_S); a few rounds for what the first could not place
SCRATCH_S = 3 * (BATCH_MAX_S + LAUNCH_S)


@dataclass
class Rebuilt:
    nodes: dict[str, str] = field(default_factory=dict)  # snapshot node -> replay node
    rows: list[dict] = field(default_factory=list)  # the verification table, one per node
    pods_placed: int = 0
    pods_total: int = 0
    left_out: list[str] = field(default_factory=list)  # what the replay does not rebuild

    @property
    def exact(self) -> bool:
        return all(r["match"] for r in self.rows) and self.pods_placed == self.pods_total


def _pool_body(pool: dict, nodeclass: tuple[str, str, str]) -> dict:
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": pool["metadata"]["name"],
                         "labels": pool["metadata"].get("labels") or {}},
            "spec": copy.deepcopy(pool["spec"])}
    group, _, kind = nodeclass
    body["spec"]["template"]["spec"]["nodeClassRef"].update(group=group, kind=kind)
    body["spec"].setdefault("disruption", {})["budgets"] = HELD
    return body


def _claim_body(claim: dict, node: dict, pool_hash: dict, nodeclass: tuple[str, str, str]) -> dict:
    """A NodeClaim of the snapshot's, pinned to where its node ran."""
    labels = node["metadata"].get("labels") or {}
    spec = copy.deepcopy(claim["spec"])
    group, _, kind = nodeclass
    spec["nodeClassRef"] = {**spec.get("nodeClassRef", {}), "group": group, "kind": kind}
    pinned = {INSTANCE_TYPE: labels.get(INSTANCE_TYPE), ZONE: labels.get(ZONE),
              CAPACITY_TYPE: labels.get(CAPACITY_TYPE)}
    spec["requirements"] = [r for r in spec.get("requirements") or [] if r["key"] not in pinned] + [
        {"key": k, "operator": "In", "values": [v]} for k, v in pinned.items() if v]
    spec.pop("startupTaints", None)  # nothing here would remove them
    notes = {k: v for k, v in (claim["metadata"].get("annotations") or {}).items()
             if k not in (HASH, HASH_VERSION)}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": f"{labels.get(POOL, 'replay')}-r-{claim['metadata']['name'][-5:]}",
                         "labels": {**(claim["metadata"].get("labels") or {}),
                                    ORIGIN: node["metadata"]["name"]},
                         "annotations": {**notes, **pool_hash}},
            "spec": spec}


def _pod_body(pod: dict, node: str | None, runtime_classes: set[str] | None = None) -> dict:
    """The pod to create: bound by nodeName to ``node``; its overhead left to admission, which
    sets it from its RuntimeClass (one of ``runtime_classes``; a class the snapshot lacks is
    dropped with the overhead, which admission refuses without it)."""
    body = copy.deepcopy(pod)
    body.pop("status", None)
    meta = body["metadata"]
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "ownerReferences"):
        meta.pop(k, None)
    spec = body["spec"]
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        c["image"] = PAUSE_IMAGE
    spec.pop("volumes", None)
    spec.pop("nodeName", None)
    spec.pop("overhead", None)
    if spec.get("runtimeClassName") and spec["runtimeClassName"] not in (runtime_classes or set()):
        spec.pop("runtimeClassName")
    if node:
        spec["nodeName"] = node
    return body


def _owner_body(owner: dict) -> dict:
    body = copy.deepcopy(owner)
    body.pop("status", None)
    for k in ("uid", "creationTimestamp", "ownerReferences"):
        body["metadata"].pop(k, None)
    tpl = body["spec"].get("template") or {}
    for c in (tpl.get("spec") or {}).get("containers", []) + (tpl.get("spec") or {}).get(
            "initContainers", []):
        c["image"] = PAUSE_IMAGE
    (tpl.get("spec") or {}).pop("volumes", None)
    if body["kind"] == "StatefulSet":
        body["spec"]["updateStrategy"] = {"type": "OnDelete"}  # never roll the adopted pods
        body["spec"].pop("volumeClaimTemplates", None)
        body["spec"].setdefault("serviceName", body["metadata"]["name"])
    return body


def _made_by_the_cluster(pod: dict) -> bool:
    """A DaemonSet's pod (its DaemonSet makes it on the rebuilt nodes) or a static pod (its
    node's): not replayed as a pod of its own."""
    return any(o["kind"] in ("DaemonSet", "Node") for o in pod["metadata"].get("ownerReferences") or [])


class Replayer:
    """Rebuilds ``objects`` (a loaded snapshot) on the cluster ``kube`` reaches."""

    def __init__(self, kube: Kube, objects: dict[str, list[dict]], nodeclass: tuple[str, str, str]):
        self.kube, self.objects, self.nodeclass = kube, objects, nodeclass
        self.dyn = DynamicClient(kube.api)  # dicts in and out, as the snapshot has them

    # ---- 1-2: pools and nodes ------------------------------------------------------------
    def pools_and_nodes(self) -> Rebuilt:
        out = Rebuilt()
        hashes = self._pools()
        nodes = {n["metadata"]["name"]: n for n in self.objects.get("Node", [])}
        owned = set()
        for claim in self.objects.get("NodeClaim", []):
            name = (claim.get("status") or {}).get("nodeName")
            pool = (claim["metadata"].get("labels") or {}).get(POOL, "")
            if not name or name not in nodes or pool not in hashes or claim["metadata"].get(
                    "deletionTimestamp"):
                out.left_out.append(f"NodeClaim {claim['metadata']['name']}: no node, no pool or "
                                    "deleting in the snapshot")
                continue
            owned.add(name)
            self.make(_claim_body(claim, nodes[name], hashes[pool], self.nodeclass))
        for name, node in nodes.items():
            if name not in owned:
                self._plain_node(node)
        out.nodes = eventually(lambda: self._launched(set(nodes)), timeout=LAUNCH_S,
                               what=f"{len(nodes)} nodes rebuilt and initialized")
        return out

    def _pools(self) -> dict[str, dict]:
        """NodeClasses and NodePools (held); each pool's hash as Karpenter computed it."""
        group, version, kind = self.nodeclass
        for nc in self.objects.get("NodeClass", []):  # local mode brings up a "default" one
            self.make({"apiVersion": f"{group}/{version}", "kind": kind,
                       "metadata": {"name": nc["metadata"]["name"]}}, exists_ok=True)
        for pool in self.objects.get("NodePool", []):
            self.make(_pool_body(pool, self.nodeclass))
        return eventually(self._pool_hashes, what="every NodePool to carry Karpenter's hash",
                          timeout=30)

    def from_scratch(self) -> dict:
        """The same pods on a cluster with none of Karpenter's nodes: the pools (held, so that
        nothing is consolidated meanwhile), the nodes no NodeClaim owns (they are there
        whatever Karpenter does), the pods unbound with their owners; what Karpenter launches
        for them by the time every pod is placed (or SCRATCH_S has passed)."""
        self._pools()
        claimed = {(c.get("status") or {}).get("nodeName") for c in self.objects.get("NodeClaim", [])}
        plain = [n for n in self.objects.get("Node", []) if n["metadata"]["name"] not in claimed]
        for node in plain:
            self._plain_node(node)
        names = {n["metadata"]["name"] for n in plain}
        out = Rebuilt(nodes=eventually(lambda: self._launched(names), timeout=LAUNCH_S,
                                       what=f"{len(names)} nodes no NodeClaim owns") if names else {})
        started = time.monotonic()
        self.workloads(out)
        # the pods that ran in the snapshot (one that was pending there may stay so)
        ran = sum(1 for p in self.objects.get("Pod", []) if p["spec"].get("nodeName")
                  and not _made_by_the_cluster(p))
        try:
            eventually(lambda: self._all_bound(ran), timeout=SCRATCH_S,
                       what=f"the {ran} pods that ran placed from scratch")
        except WaitTimeout as exc:  # a result, not an error: the report says how many
            log.info("from scratch: %s", exc)
        claims = self.kube.list(NODECLAIM)
        return {"seconds": round(time.monotonic() - started, 1), "nodeclaims": len(claims),
                "instance_types": dict(Counter(view.labels(c).get(INSTANCE_TYPE, "")
                                               for c in claims)),
                "placed": self._all_bound(ran).value, "ran": ran, "cost": cost_now(self.kube)}

    def _all_bound(self, total: int) -> Observation:
        placed = sum(1 for p in self.listed("v1", "Pod") if p["spec"].get("nodeName")
                     and not _made_by_the_cluster(p))
        return Observation(placed >= total, f"{placed} of {total} pods placed", placed)

    def _pool_hashes(self) -> Observation:
        got = {p["metadata"]["name"]: {k: v for k, v in (p["metadata"].get("annotations") or {})
                                       .items() if k in (HASH, HASH_VERSION)}
               for p in self.kube.list(NODEPOOL)}
        ok = len(got) == len(self.objects.get("NodePool", [])) and all(HASH in v for v in got.values())
        return Observation(ok, f"hashes {got}", got)

    def _plain_node(self, node: dict) -> None:
        """A node no NodeClaim owns (a managed node group's): KWOK runs it as it is."""
        body: dict = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node["metadata"]["name"],
                             "labels": node["metadata"].get("labels") or {},
                             "annotations": {"kwok.x-k8s.io/node": "fake"}},
                "spec": {k: v for k, v in (node.get("spec") or {}).items() if k != "providerID"},
                "status": {k: node["status"][k] for k in ("capacity", "allocatable")
                           if k in (node.get("status") or {})}}
        self.make(body)
        # a node's capacity is its status: set apart from the object
        self.dyn.resources.get(api_version="v1", kind="Node").status.patch(
            body={"metadata": {"name": body["metadata"]["name"]}, "status": body["status"]},
            content_type="application/merge-patch+json")

    def _launched(self, wanted: set[str]) -> Observation:
        mapping: dict[str, str] = {}
        waiting = []
        for c in self.kube.list(NODECLAIM):
            origin = (c["metadata"].get("labels") or {}).get(ORIGIN)
            init = any(x.get("type") == "Initialized" and x.get("status") == "True"
                       for x in (c.get("status") or {}).get("conditions") or [])
            if origin and init and (c.get("status") or {}).get("nodeName"):
                mapping[origin] = c["status"]["nodeName"]
            elif origin:
                waiting.append(origin)
        present = {n["metadata"]["name"] for n in self.listed("v1", "Node")}
        mapping.update({n: n for n in wanted - set(mapping) if n in present})
        return Observation(set(mapping) >= wanted, f"{len(mapping)} of {len(wanted)} nodes rebuilt; "
                           f"launching: {sorted(waiting)[:5]}", mapping)

    # ---- 3: what runs on them ------------------------------------------------------------
    def workloads(self, out: Rebuilt) -> None:
        namespaces = sorted({p["metadata"].get("namespace", "default")
                             for kind in ("Pod", "ReplicaSet", "StatefulSet", "DaemonSet",
                                          "PodDisruptionBudget") for p in self.objects.get(kind, [])})
        for ns in namespaces:
            self.make({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                      exists_ok=True)
        for pc in self.objects.get("PriorityClass", []):
            if not pc["metadata"]["name"].startswith("system-"):
                body = {k: v for k, v in pc.items() if k != "metadata"}
                self.make({**body, "metadata": {"name": pc["metadata"]["name"]}}, exists_ok=True)
        classes = set()
        for rc in self.objects.get("RuntimeClass", []):
            self.make({**{k: v for k, v in rc.items() if k != "metadata"},
                       "metadata": {"name": rc["metadata"]["name"]}}, exists_ok=True)
            classes.add(rc["metadata"]["name"])
        for pdb in self.objects.get("PodDisruptionBudget", []):
            self.make({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                       "metadata": {k: pdb["metadata"][k] for k in ("name", "namespace")},
                       "spec": pdb["spec"]})
        for pod in self.objects.get("Pod", []):
            if _made_by_the_cluster(pod):
                continue
            owners = pod["metadata"].get("ownerReferences") or []
            out.pods_total += 1
            was = pod["spec"].get("nodeName")
            self.make(_pod_body(pod, out.nodes.get(was) if was else None, classes))
            if (pod["spec"].get("runtimeClassName") or "") not in classes | {""}:
                out.left_out.append(f"pod {pod['metadata']['name']}: its RuntimeClass "
                                    f"{pod['spec']['runtimeClassName']} is not in the snapshot "
                                    "(the pod runs without it and its overhead)")
            if any(o["kind"] == "Job" for o in owners):
                out.left_out.append(f"pod {pod['metadata']['name']}: its Job is not rebuilt "
                                    "(the pod runs unowned)")
            if pod["spec"].get("volumes"):
                out.left_out.append(f"pod {pod['metadata']['name']}: its volumes are dropped")
        for kind in ("ReplicaSet", "StatefulSet", "DaemonSet"):
            for owner in self.objects.get(kind, []):
                self.make(_owner_body(owner))
        out.left_out += [f"{k} {o['metadata']['name']}: not rebuilt" for k in ("Deployment", "Job")
                         for o in self.objects.get(k, [])]
        out.left_out += [f"{k}: {len(self.objects.get(k, []))} not rebuilt"
                         for k in ("PersistentVolume", "PersistentVolumeClaim", "StorageClass")
                         if self.objects.get(k)]

    # ---- 4: verified ---------------------------------------------------------------------
    def verify(self, out: Rebuilt) -> Rebuilt:
        now = {n["metadata"]["name"]: n for n in self.listed("v1", "Node")}
        keys = (POOL, INSTANCE_TYPE, ZONE, CAPACITY_TYPE)
        pods_now = {(p["metadata"]["namespace"], p["metadata"]["name"]): p["spec"].get("nodeName") or ""
                    for p in self.listed("v1", "Pod")}
        for node in self.objects.get("Node", []):
            name = node["metadata"]["name"]
            was = {k: (node["metadata"].get("labels") or {}).get(k, "") for k in keys}
            new = now.get(out.nodes.get(name, ""))
            got = {k: (new["metadata"].get("labels") or {}).get(k, "") for k in keys} if new else {}
            pods = [p for p in self.objects.get("Pod", []) if p["spec"].get("nodeName") == name
                    and not _made_by_the_cluster(p)]
            placed = sum(1 for p in pods if pods_now.get((p["metadata"].get("namespace", "default"),
                                                          p["metadata"]["name"])) == out.nodes.get(name))
            out.pods_placed += placed
            out.rows.append({"node": name, "as": out.nodes.get(name, "–"), **{
                k.split("/")[-1]: was[k] for k in keys}, "pods": len(pods), "placed": placed,
                "match": got == was and placed == len(pods)})
        pending = [p for p in self.objects.get("Pod", []) if not p["spec"].get("nodeName")]
        out.pods_placed += sum(1 for p in pending if pods_now.get(
            (p["metadata"].get("namespace", "default"), p["metadata"]["name"])) == "")
        return out

    # ---- 5: a change, then Karpenter acts -------------------------------------------------
    def apply(self, edits: list[change.Edit]) -> None:
        """The change (--patch) on the live objects, budgets aside (release() sets them)."""
        for e in edits:
            api = next(o.get("apiVersion") for o in self.objects[e.kind]
                       if o["metadata"]["name"] == e.name) or _API_VERSIONS[e.kind]
            res = self.dyn.resources.get(api_version=api, kind=e.kind)
            res.patch(body=change.without_budgets(e), name=e.name, namespace=e.namespace,
                      content_type="application/merge-patch+json",
                      _request_timeout=self.kube.timeout)

    def release(self, edits: list[change.Edit] | None = None) -> None:
        """The snapshot's own budgets back (Karpenter's default, 10%, where it had none), or
        the ones the change gives a pool."""
        for pool in self.objects.get("NodePool", []):
            changed = change.budgets(edits or [], pool)
            budgets = changed if changed is not None else (
                (pool["spec"].get("disruption") or {}).get("budgets") or [{"nodes": "10%"}])
            self.kube.custom.patch_cluster_custom_object(
                "karpenter.sh", "v1", "nodepools", pool["metadata"]["name"],
                {"spec": {"disruption": {"budgets": budgets}}}, _request_timeout=self.kube.timeout)

    # ---- helpers ---------------------------------------------------------------------------
    def make(self, body: dict, exists_ok: bool = False) -> None:
        """Create ``body`` as it is (``exists_ok``: a namespace or PriorityClass may be there)."""
        res = self.dyn.resources.get(api_version=body["apiVersion"], kind=body["kind"])
        try:
            res.create(body=body, namespace=body["metadata"].get("namespace") if res.namespaced
                       else None, _request_timeout=self.kube.timeout)
        except ConflictError:
            if not exists_ok:
                raise

    def listed(self, api_version: str, kind: str) -> list[dict]:
        res = self.dyn.resources.get(api_version=api_version, kind=kind)
        return list(res.get(_request_timeout=self.kube.timeout).to_dict()["items"])


def table(rebuilt: Rebuilt) -> str:
    lines = [f"Replayed {len(rebuilt.rows)} node(s) and {rebuilt.pods_total} pod(s): "
             + ("**reproduced exactly**" if rebuilt.exact else "**not reproduced**")
             + f" ({rebuilt.pods_placed} of {rebuilt.pods_total} pods where they were).", "",
             "| snapshot node | replayed as | nodepool | instance type | zone | capacity type | "
             "pods | placed | match |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['node']} | {r['as']} | {r['nodepool']} | {r['instance-type']} | {r['zone']} | "
              f"{r['capacity-type']} | {r['pods']} | {r['placed']} | {'yes' if r['match'] else 'NO'} |"
              for r in rebuilt.rows]
    if rebuilt.left_out:
        lines += ["", "Not rebuilt (differences from the snapshot):", ""]
        lines += [f"- {x}" for x in rebuilt.left_out]
    return "\n".join(lines) + "\n"


def watch(seconds: float, what: str) -> None:
    """Karpenter's window: a span of fixed length the timeline records (an observation, not
    a wait for a condition), saying how much is left every 30 s."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        log.info("%s: %.0fs of %.0fs left", what, left, seconds)
        pause(min(30.0, left))  # a stopped check (waits.stop_when) stops here too


# ---- the whole replay, as check --snapshot runs it ---------------------------------------------
def run(folder: Path, backend, reports_dir: Path, window_s: float, keep_cluster: bool = False,
        edits: list[change.Edit] | None = None, other=None, scratch: bool = False) -> int:
    """Rebuild, verify, apply the change (``edits``), let Karpenter act for the window,
    report (replay.md, replay.json); with ``other`` (a second release's backend) the same
    again on it, and the two releases' decisions diffed (compare.md). Exit 0 when every
    replay reproduced the state, the oracles found nothing and no difference is suspect.
    ``scratch``: each release first provisions the same pods on a cluster of its own with
    none of Karpenter's nodes (what they would cost from scratch)."""
    about, objects = snapshot.load(folder)
    results = []
    for side in (backend, other) if other is not None else (backend,):
        fresh = scratch_cost(objects, side) if scratch else None
        result = replay_once(folder, about, objects, side, reports_dir, window_s, keep_cluster,
                             edits or [], fresh)
        print(result["report"])
        print(f"files: {result['files']['markdown']}, {result['files']['json']}")
        results.append(result)
    failed = any(not r["exact"] or (r.get("oracles") or {}).get("findings") for r in results)
    if other is not None:
        text, suspect = compare(results[0], results[1])
        print(text)
        failed = failed or suspect > 0
    return 1 if failed else 0


def scratch_cost(objects: dict[str, list[dict]], backend) -> dict:
    """The snapshot's pods provisioned from scratch on ``backend``'s cluster, taken down after."""
    info = backend.up()
    try:
        kube = Kube(info.kubeconfig)
        nodeclass = (info.nodeclass_group, info.nodeclass_version, info.nodeclass_kind)
        log.info("from scratch on Karpenter %s: the snapshot's pods, none of its NodeClaims",
                 info.versions.get("karpenter"))
        return Replayer(kube, objects, nodeclass).from_scratch()
    finally:
        backend.down()


def replay_once(folder: Path, about: dict, objects: dict[str, list[dict]], backend,
                reports_dir: Path, window_s: float, keep_cluster: bool,
                edits: list[change.Edit], scratch: dict | None = None) -> dict:
    """One replay on ``backend``'s cluster, which goes down (or is kept) whatever happens."""
    out_dir = reports_dir / "runs" / f"replay-{new_run_id()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    info = backend.up()
    try:
        kube = Kube(info.kubeconfig)
        if kube.list(NODEPOOL):
            raise RuntimeError(f"cluster {info.name!r} already has NodePools: a replay needs a "
                               "cluster of its own")
        nodeclass = (info.nodeclass_group, info.nodeclass_version, info.nodeclass_kind)
        r = Replayer(kube, objects, nodeclass)
        log.info("replay %s on Karpenter %s: %s", folder, info.versions.get("karpenter"),
                 about.get("counts"))
        rebuilt = r.pools_and_nodes()
        r.workloads(rebuilt)
        eventually(lambda: _placed(r, rebuilt), what="the replayed pods bound where they ran",
                   timeout=60)
        rebuilt = r.verify(Rebuilt(rebuilt.nodes, [], 0, rebuilt.pods_total, rebuilt.left_out))
        report = [f"# Replay of `{folder}` (taken {about.get('taken')}, Karpenter "
                  f"{(about.get('karpenter') or {}).get('version')}) on Karpenter "
                  f"{info.versions.get('karpenter')}", "", table(rebuilt)]
        result: dict = {"snapshot": str(folder), "about": about, "exact": rebuilt.exact,
                        "rows": rebuilt.rows, "left_out": rebuilt.left_out,
                        "karpenter": info.versions.get("karpenter"),
                        "change": [{"ref": e.ref, "patch": e.patch} for e in edits]}
        if rebuilt.exact:
            timeline = Timeline(f"replay {folder.name}", str(folder), "")
            timeline.record(kube, "", namespace=lambda: ALL_NAMESPACES)
            offset = info.karpenter_log.stat().st_size if info.karpenter_log and \
                info.karpenter_log.exists() else 0
            before, released = cost_now(kube), time.time()
            namespaces = {p["metadata"].get("namespace", "default") for p in objects.get("Pod", [])}
            pictures = {"before": _packing(kube, namespaces, out_dir / "packing-before.png",
                                           f"before the window · {folder.name}")}
            if edits:
                r.apply(edits)
                report.append(change.describe(edits))
            r.release(edits)
            watch(window_s, f"Karpenter acting on the replayed state ({window_s:.0f}s window)")
            timeline.stop()
            timeline.raise_error()  # a recording the oracles cannot trust is no verdict
            assert timeline.recording is not None  # record() made it
            pictures["after"] = _packing(kube, namespaces, out_dir / "packing-after.png",
                                         f"after {window_s:.0f}s · {folder.name}")
            pictures["timeline"] = _timeline(timeline, out_dir)
            text = info.karpenter_log.read_text(errors="replace")[offset:] if info.karpenter_log \
                else ""
            rec = oracles.gather(kube, timeline.recording, "", text,
                                 info.versions.get("karpenter", ""), [ALL_NAMESPACES],
                                 pools_selector="")
            rec.start = released  # the window: what the rebuild itself made is not Karpenter's
            verdict = oracles.judge(rec)
            d = decisions.record(rec, verdict)
            result.update(decisions=d.to_dict(), oracles=verdict.to_dict(),
                          cost_before=before, cost_after=cost_now(kube),
                          blocked=_blocked(rec))
            report += [replay_window.acted(result, window_s), _pictures(pictures),
                       "## Oracles", "", "```", verdict.summary(), "```"]
            report.append(against_original(folder, window_s, d, result))
        if scratch is not None:
            result["from_scratch"] = scratch
            report.append(_scratch(scratch, result))
        result["report"] = "\n".join(report) + "\n"
        result["files"] = {"markdown": str(out_dir / "replay.md"),
                           "json": str(out_dir / "replay.json")}
        (out_dir / "replay.md").write_text(result["report"])
        (out_dir / "replay.json").write_text(json.dumps(result, indent=1, default=str))
        return result
    finally:
        if not keep_cluster:
            backend.down()


def compare(a: dict, b: dict) -> tuple[str, int]:
    """What the two releases decided on the same replayed state, and the diff (compare.md
    and compare.json beside the second replay's report); the number of suspect differences.
    A side that did not reproduce the snapshot has no decisions: nothing is compared."""
    if "decisions" not in a or "decisions" not in b:
        text = "# Not compared: a replay did not reproduce the snapshot\n"
        (Path(b["files"]["json"]).parent / "compare.md").write_text(text)
        return text, 0
    text = write_comparison(a, b, f"On this cluster: Karpenter {a['karpenter']} and "
                                  f"{b['karpenter']}, the same replayed state and window")
    return (text + f"\nfiles: {b['files']['compare_markdown']}, {b['files']['compare_json']}\n",
            b["compare"]["suspect"])


def against_original(folder: Path, window_s: float, replayed: decisions.Decisions,
                     result: dict) -> str:
    """The replay's decisions beside the original cluster's over the same window after the
    snapshot (original.json, when the snapshot has one): a replay that reproduces the state
    should decide as the original did. Karpenter's own clocks restart with the rebuild (a
    node's consolidateAfter counts from when the replay made it), so what is compared is what
    had happened by the end of the window. Reported, not judged: the same release decides
    differently between two runs too (docs/differential.md, the noise floor)."""
    path = folder / ORIGINAL
    if not path.is_file():
        return ""
    original = json.loads(path.read_text())
    if abs(float(original["window_s"]) - window_s) > 1:
        return (f"\n## The original cluster\n\nNot compared: the original was watched "
                f"{original['window_s']:.0f}s after the snapshot, this replay {window_s:.0f}s.\n")
    was = decisions.Decisions.from_dict(original["decisions"])
    found = decisions.diff(was, replayed)
    result["original"] = {**original, "differences": [x.to_dict() for x in found]}
    cost = (f"Cost per hour over the window: the original ${original['cost_before']:.4f} -> "
            f"${original['cost_after']:.4f}; the replay ${result['cost_before']:.4f} -> "
            f"${result['cost_after']:.4f}.")
    return "\n" + decisions.markdown(
        was, replayed, found, f"The original cluster ({original.get('karpenter')}) and the "
        f"replay over the same {window_s:.0f}s after the snapshot",
        names=("original", "replay")) + "\n" + cost + "\n"


def _packing(kube: Kube, namespaces: set[str], path: Path, when: str) -> Path | None:
    """Which pods sit on which node (the check's packing picture), now."""
    from karpenter_e2e.checks import observe
    from karpenter_e2e.rendering import packing_chart
    try:
        packing = packing_chart.prepare(observe.state(kube, namespaces).to_dict())
        nodes = sum(g.nodes for g in packing.groups)
        return packing_chart.render(packing, path, "Node packing: replay", f"{nodes} nodes · {when}")
    except Exception as exc:  # noqa: BLE001 - a picture must never hide the verdict
        log.warning("node packing not drawn: %s: %s", type(exc).__name__, exc)
        return None


def _timeline(timeline: Timeline, out_dir: Path) -> Path | None:
    """The window's timeline (timeline.json, and its picture)."""
    from karpenter_e2e.fixtures.timeline import write_snapshot
    from karpenter_e2e.rendering import timeline_chart
    try:
        snap = timeline.snapshot("replayed")
        write_snapshot(snap, out_dir / "timeline.json")
        return timeline_chart.render(snap, out_dir / "timeline.png")
    except Exception as exc:  # noqa: BLE001 - as above
        log.warning("timeline not drawn: %s: %s", type(exc).__name__, exc)
        return None


def _pictures(pictures: dict[str, Path | None]) -> str:
    drawn = [(what, p) for what, p in pictures.items() if p is not None]
    if not drawn:
        return ""
    return "\n".join(["## Pictures", ""] + [f"![{what}]({p.name})" for what, p in drawn]) + "\n"


def _scratch(s: dict, result: dict) -> str:
    types = ", ".join(f"{n} {t}" for t, n in sorted(s["instance_types"].items()))
    was = (f" (the replay: ${result['cost_before']:.4f} before the window, "
           f"${result['cost_after']:.4f} after)" if "cost_before" in result else "")
    return (f"\n## From scratch\n\nThe same pods on a cluster with none of Karpenter's "
            f"nodes: {s['nodeclaims']} NodeClaim(s) ({types or 'none'}), {s['placed']} of the "
            f"{s['ran']} pods that ran placed in {s['seconds']:.0f}s, **${s['cost']:.4f} per "
            f"hour**{was}. Nodes no NodeClaim owns count in both.\n")


def _placed(r: Replayer, rebuilt: Rebuilt) -> Observation:
    got = r.verify(Rebuilt(rebuilt.nodes, [], 0, 0, []))
    total = sum(row["pods"] for row in got.rows)
    placed = sum(row["placed"] for row in got.rows)
    return Observation(placed == total, f"{placed} of {total} pods bound where they ran")


def cost_now(kube: Kube) -> float:
    """The cluster's cost per hour: its nodes' catalogue prices (their price labels)."""
    nodes = kube.core.list_node(_request_timeout=kube.timeout).items
    prices = [float(((n.metadata and n.metadata.labels) or {}).get(PRICE) or 0.0) for n in nodes]
    return round(sum(prices), 4)


def _blocked(rec) -> dict[str, list[str]]:
    """Every reason Karpenter gave for leaving a node alone (DisruptionBlocked), per node:
    Karpenter publishes each on the Node and on its NodeClaim; the Node's name is kept."""
    node_of = {m.claim: m.node for m in rec.machines if m.claim and m.node}
    out: dict[str, list[str]] = {}
    for (kind, name), evs in sorted(rec.events.items()):
        node = node_of.get(name, name) if kind == "NodeClaim" else name
        for ev in evs:
            if ev["reason"] == "DisruptionBlocked" and ev["message"] not in out.get(node, []):
                out.setdefault(node, []).append(ev["message"])
    return out
