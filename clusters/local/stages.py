"""The kwok stages local mode runs its simulated nodes and pods with: the ones kwokctl's
binary runtime picks by default (the kwok module's stage files, pkg/kwokctl/runtime/cluster.go
getDefaultNodeStages, getDefaultPodStages), with a launch latency a node can ask for.

A node whose annotation LAUNCH_LATENCY (seconds; the NodePool's template annotations reach
the node through its NodeClaim: Karpenter's KWOK provider copies them, kwok/cloudprovider
toNode) boots as an EC2 instance does: at once it reports Ready=False, reason KubeletNotReady,
so kube-controller-manager taints it node.kubernetes.io/not-ready and no pod lands on it; it
turns Ready LAUNCH_LATENCY seconds after its creation. Karpenter counts it Initialized only
then (lifecycle/initialization.go: Ready, and the not-ready taints gone). A node without the
annotation turns Ready at once, as kwokctl's own stages make it.

A pod asked to terminate goes POD_STOP_MS later, as kwok's own general profile has it
(kustomize/stage/pod/general/pod-delete.yaml) and as a kubelet takes to stop its containers and
report; the fast profile removes it the moment its deletionTimestamp is set. That moment is too
soon for Karpenter: its podevents controller records a node's last pod event when a pod goes
terminating (nodeclaim/podevents/controller.go), reading the pod from its cache when it
reconciles; a pod already gone by then is no event, so the node's emptying went unrecorded and
consolidateAfter ran from the pods' binding instead (seen on kind beside `make test`: the
NodeClaim Consolidatable and deleted with lastPodEventTime still the binding's).

The delay is kwok's own (Stage spec.delay), taken from the node's creationTimestamp plus the
annotation: kwok computes a stage's delay anew each time the node changes (stage_controller.go
preprocess), and a node changes many times while it launches (registration, labels, taints),
so a relative delay would restart with every change; an absolute time does not ("a string
in RFC 3339 is that time minus now", lifecycle/value_duration_from.go).
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.labels import LAUNCH_LATENCY
from karpenter_e2e.clusters.errors import ClusterError

# What kwokctl's binary runtime gives kwok when its configuration names no stage: node/fast,
# heartbeat-with-lease (node leases are on: nodeLeaseDurationSeconds 40; the default 10 s
# status frequency is under the stage's own 600 s, so kwokctl leaves its delay as it is) and
# pod/fast.
MODULE_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
                 "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                 "kustomize/stage/pod/fast/pod-ready.yaml",
                 "kustomize/stage/pod/fast/pod-complete.yaml",
                 "kustomize/stage/pod/fast/pod-delete.yaml")
NODE_INITIALIZE = "node-initialize"
NODE_BOOT = "node-boot"
POD_DELETE = "pod-delete"
POD_STOP_MS = 1000  # kwok's general profile's pod-delete delay (module docstring)

_READY = '.status.conditions.[] | select( .type == "Ready" ) | .status'
_ANNOTATION = f'.metadata.annotations["{LAUNCH_LATENCY}"]'
# The moment the node turns Ready: its creation plus the latency it asks for; no output (no
# annotation) leaves kwok's default, no delay.
READY_AT = (f'({_ANNOTATION} // empty | tonumber) as $latency '
            '| .metadata.creationTimestamp | fromdate + $latency | todate')
# node-initialize stamps every condition's lastTransitionTime with the node's creation (it is
# instant there); a node that launched for a while turned Ready when the stage ran.
_TRANSITION_FROM = "{{ $lastTransitionTime := or .metadata.creationTimestamp $now }}"
_TRANSITION_TO = "{{ $lastTransitionTime := $now }}"

# Ready=False while the instance boots: what a kubelet reports before its runtime and network
# are up. Weight 1 over node-initialize's 0: kwok picks among the stages a node matches by
# weight (lifecycle.go Match), and a booting node matches both.
BOOT = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": NODE_BOOT},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Node"},
        "selector": {"matchExpressions": [
            {"key": _ANNOTATION, "operator": "Exists"},
            {"key": _READY, "operator": "DoesNotExist"}]},
        "weight": 1,
        "next": {"statusTemplate": (
            "{{ $now := Now }}\n"
            "conditions:\n"
            "- type: Ready\n"
            "  status: \"False\"\n"
            "  reason: KubeletNotReady\n"
            "  message: \"the simulated instance is still booting (karpenter-e2e launch "
            "latency)\"\n"
            "  lastHeartbeatTime: {{ $now | Quote }}\n"
            "  lastTransitionTime: {{ $now | Quote }}\n")},
    },
}


def _stage(docs: list[dict], name: str) -> dict | None:
    return next((d for d in docs if d["metadata"]["name"] == name), None)


def render(module_dir: Path) -> list[dict]:
    """The Stage documents for kwok, from the kwok module at ``module_dir``."""
    docs = [yaml.safe_load((module_dir / rel).read_text()) for rel in MODULE_STAGES]
    init = _stage(docs, NODE_INITIALIZE)
    template = ((init or {}).get("spec", {}).get("next") or {}).get("statusTemplate", "")
    if init is None or _TRANSITION_FROM not in template or "delay" in init["spec"]:
        raise ClusterError(f"kwok's {NODE_INITIALIZE} stage in {module_dir} is not the one the "
                           "launch latency was written for (clusters/local/stages.py)")
    init["spec"]["delay"] = {"durationFrom": {"jq": {"expression": READY_AT}}}
    init["spec"]["next"]["statusTemplate"] = template.replace(_TRANSITION_FROM, _TRANSITION_TO)
    delete = _stage(docs, POD_DELETE)
    if delete is None or "delay" in delete["spec"] or not delete["spec"]["next"].get("delete"):
        raise ClusterError(f"kwok's {POD_DELETE} stage in {module_dir} is not the one the "
                           "pod stop delay was written for (clusters/local/stages.py)")
    delete["spec"]["delay"] = {"durationMilliseconds": POD_STOP_MS}
    return [copy.deepcopy(BOOT), *docs]


def digest(stages: list[dict]) -> str:
    """What a running cluster's stages are, to tell a reused cluster started with others."""
    return hashlib.sha256(json.dumps(stages, sort_keys=True).encode()).hexdigest()[:16]
