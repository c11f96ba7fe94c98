"""The instance -> Node registrar: what kubelet's bootstrap and the AWS cloud controller
manager do on a real EC2 instance, for the fake's instances.

No kubelet runs, so something must register a Node for each instance Karpenter launches.
The registrar reads what a real node reads: the instance's user data (the NodeConfig
Karpenter wrote: ``--node-labels``, ``registerWithTaints``, ``maxPods``, reservations)
and the instance type's hardware (DescribeInstanceTypes), and registers the Node under
the instance's private DNS name with providerID ``aws:///<zone>/<instance-id>``. kwok,
which manages every node of the cluster, then makes it Ready and runs its pods. When an
instance is terminated, its Node is deleted, as the cloud controller manager does.
"""

from __future__ import annotations

import base64
import binascii
import email
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from karpenter_e2e.clusters.api.kube import if_found
from karpenter_e2e.clusters.api.labels import (
    ARCH as ARCH_LABEL,
    HOSTNAME,
    INSTANCE_TYPE,
    PRICE as PRICE_LABEL,
    ZONE,
)

log = logging.getLogger(__name__)

# On every instance Karpenter launches (karpenter.sh/nodeclaim is added later, by CreateTags).
NODEPOOL_TAG = "karpenter.sh/nodepool"
ARCH = {"x86_64": "amd64", "arm64": "arm64"}
NODE_CONFIG_TYPE = "application/node.eks.aws"
GONE_STATES = ("shutting-down", "terminated")
EPHEMERAL_STORAGE = "20Gi"  # the AL2023 root volume Karpenter's default block device maps
QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti)?$")
UNITS = {None: 1, "m": 1e-3, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4}


@dataclass
class Bootstrap:
    """What kubelet takes from Karpenter's user data."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict] = field(default_factory=list)
    max_pods: int | None = None
    reserved: dict[str, float] = field(default_factory=dict)  # resource -> amount, summed


def decode_user_data(raw: str) -> str:
    """User data as EC2 returns it (base64), decoded; tolerant of a second encoding layer."""
    text = raw or ""
    for _ in range(2):
        if "Content-Type" in text or "NodeConfig" in text:
            return text
        try:
            text = base64.b64decode(text, validate=False).decode()
        except (binascii.Error, UnicodeDecodeError):
            return text
    return text


def parse_bootstrap(user_data: str) -> Bootstrap:
    """The NodeConfig parts of an AL2023 (nodeadm) MIME user data, merged in order."""
    out = Bootstrap()
    msg = email.message_from_string(decode_user_data(user_data))
    parts = msg.walk() if msg.is_multipart() else [msg]
    for part in parts:
        if part.is_multipart() or part.get_content_type() != NODE_CONFIG_TYPE:
            continue
        for doc in yaml.safe_load_all(part.get_payload(decode=True) or b""):
            if not isinstance(doc, dict) or doc.get("kind") != "NodeConfig":
                continue
            kubelet = (doc.get("spec") or {}).get("kubelet") or {}
            config = kubelet.get("config") or {}
            for flag in kubelet.get("flags") or []:
                if flag.startswith("--node-labels="):
                    pairs = flag.split("=", 1)[1].strip('"')
                    out.labels.update(p.split("=", 1) for p in pairs.split(",") if "=" in p)
            if "registerWithTaints" in config:
                out.taints = list(config["registerWithTaints"] or [])
            if config.get("maxPods"):
                out.max_pods = int(config["maxPods"])
            for key in ("kubeReserved", "systemReserved"):
                for res, qty in (config.get(key) or {}).items():
                    out.reserved[res] = out.reserved.get(res, 0) + quantity(qty)
            evict = (config.get("evictionHard") or {}).get("memory.available")
            if evict and not str(evict).endswith("%"):
                out.reserved["memory"] = out.reserved.get("memory", 0) + quantity(evict)
    return out


def quantity(q) -> float:
    m = QUANTITY.match(str(q).strip())
    if not m:
        raise ValueError(f"not a quantity: {q!r}")
    return float(m[1]) * UNITS[m[2]]


def nodeadm_reserved(vcpus: int, max_pods: int) -> dict[str, float]:
    """What the AL2023 AMI's nodeadm reserves when the NodeConfig names no reservation
    (the EKS formulas Karpenter also assumes): CPU 6 % of the first core, 1 % of the
    second, 0.5 % of the next two, 0.25 % of the rest; memory 11 MiB per pod + 255 MiB,
    plus the 100 MiB memory.available eviction threshold; 1 GiB of ephemeral storage."""
    cores = [(1, 0.06), (1, 0.01), (2, 0.005), (max(0, vcpus - 4), 0.0025)]
    cpu, left = 0.0, vcpus
    for n, share in cores:
        take = min(n, left)
        cpu, left = cpu + take * share, left - take
    return {"cpu": cpu, "memory": (11 * max_pods + 255 + 100) * 1024 ** 2,
            "ephemeral-storage": 1024 ** 3}


def node_for(instance: dict, itype: dict, boot: Bootstrap, region: str,
             price: float | None = None, annotations: dict[str, str] | None = None) -> dict:
    """The Node kubelet (and the cloud controller manager) would register for ``instance``;
    ``price`` (what the fake charges per hour) becomes the label Karpenter's KWOK provider
    sets in local mode, so the suites' cost checks read the same label in both modes."""
    zone = instance["Placement"]["AvailabilityZone"]
    name = instance.get("PrivateDnsName") or instance["InstanceId"]
    arch = ARCH.get((itype.get("ProcessorInfo", {}).get("SupportedArchitectures") or ["x86_64"])[0],
                    "amd64")
    gpus = sum(g.get("Count", 0) for g in itype.get("GpuInfo", {}).get("Gpus", [])
               if g.get("Manufacturer", "").upper() == "NVIDIA")
    mem = int(itype["MemoryInfo"]["SizeInMiB"]) * 1024 ** 2
    cpu = int(itype["VCpuInfo"]["DefaultVCpus"])
    pods = boot.max_pods or 110
    reserved = {**nodeadm_reserved(cpu, pods), **boot.reserved}
    capacity = {"cpu": str(cpu), "memory": f"{mem // 1024}Ki", "pods": str(pods),
                "ephemeral-storage": EPHEMERAL_STORAGE}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)  # what NVIDIA's device plugin advertises
    allocatable = dict(capacity)
    if reserved.get("cpu"):
        allocatable["cpu"] = f"{max(0, round(cpu * 1000 - reserved['cpu'] * 1000))}m"
    if reserved.get("memory"):
        allocatable["memory"] = f"{max(0, int((mem - reserved['memory']) // 1024))}Ki"
    if reserved.get("ephemeral-storage"):
        total = quantity(EPHEMERAL_STORAGE) - reserved["ephemeral-storage"]
        allocatable["ephemeral-storage"] = f"{max(0, int(total // 1024))}Ki"
    labels = {**boot.labels,
              ARCH_LABEL: arch, "kubernetes.io/os": "linux", HOSTNAME: name,
              # set by the AWS cloud controller manager on a real cluster
              INSTANCE_TYPE: instance["InstanceType"],
              ZONE: zone, "topology.kubernetes.io/region": region}
    if price is not None:
        labels[PRICE_LABEL] = f"{price:g}"
    addresses = [{"type": "InternalIP", "address": instance.get("PrivateIpAddress", "")},
                 {"type": "Hostname", "address": name},
                 {"type": "InternalDNS", "address": name}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"alpha.kubernetes.io/provided-node-ip":
                                     instance.get("PrivateIpAddress", ""),
                                     **(annotations or {})}},
        "spec": {"providerID": f"aws:///{zone}/{instance['InstanceId']}",
                 "taints": [{k: v for k, v in t.items() if k in ("key", "value", "effect")}
                            for t in boot.taints]},
        "status": {"capacity": capacity, "allocatable": allocatable,
                   "addresses": [a for a in addresses if a["address"]],
                   "nodeInfo": {"architecture": arch, "operatingSystem": "linux",
                                "osImage": "Amazon Linux 2023 (simulated)",
                                "kernelVersion": "", "kubeletVersion": "", "kubeProxyVersion": "",
                                "containerRuntimeVersion": "", "machineID": instance["InstanceId"],
                                "systemUUID": instance["InstanceId"], "bootID": ""}},
    }


class Registrar:
    """Polls the fake's instances and keeps one Node per live Karpenter instance."""

    def __init__(self, ec2, core_api, region: str, kubelet_version: str,
                 price: Callable[[str, str, str], float] | None = None,
                 annotations: dict[str, str] | None = None):
        self.ec2, self.core, self.region = ec2, core_api, region
        self.price = price  # (instance type, zone, capacity type) -> $/h
        # On each Node: what the kwok that simulates the cluster's nodes selects its nodes by
        # (a kind cluster's kwok manages only nodes annotated kwok.x-k8s.io/node=fake; local
        # mode's kwokctl manages every node and needs none).
        self.annotations = dict(annotations or {})
        self.kubelet_version = kubelet_version
        self._types: dict[str, dict] = {}
        self._registered: set[str] = set()  # instance ids

    def _itype(self, name: str) -> dict:
        if name not in self._types:
            found = self.ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
            self._types[name] = found[0]
        return self._types[name]

    def _instances(self) -> list[dict]:
        out, kwargs = [], {"Filters": [{"Name": "tag-key", "Values": [NODEPOOL_TAG]}]}
        while True:
            page = self.ec2.describe_instances(**kwargs)
            out += [i for r in page["Reservations"] for i in r["Instances"]]
            if not page.get("NextToken"):
                return out
            kwargs["NextToken"] = page["NextToken"]

    def sync(self) -> None:
        from kubernetes.client.rest import ApiException

        instances = {i["InstanceId"]: i for i in self._instances()}
        listed = self.core.list_node(_request_timeout=10).items
        nodes = {n.spec.provider_id.rsplit("/", 1)[-1]: n.metadata.name for n in listed
                 if n.spec.provider_id and n.spec.provider_id.startswith("aws:///")}
        deleting = {n.metadata.name for n in listed if n.metadata.deletion_timestamp}
        for iid, inst in instances.items():
            state = inst["State"]["Name"]
            if state in GONE_STATES:
                if iid in nodes and nodes[iid] not in deleting:
                    # the cloud controller manager deletes nodes whose instance is gone
                    self._delete(nodes[iid], f"instance {iid} is {state}")
                continue
            if iid in nodes or iid in self._registered:
                continue
            attr = self.ec2.describe_instance_attribute(InstanceId=iid, Attribute="userData")
            boot = parse_bootstrap((attr.get("UserData") or {}).get("Value", ""))
            capacity_type = "spot" if inst.get("InstanceLifecycle") == "spot" else "on-demand"
            price = self.price(inst["InstanceType"], inst["Placement"]["AvailabilityZone"],
                               capacity_type) if self.price else None
            body = node_for(inst, self._itype(inst["InstanceType"]), boot, self.region,
                            price if price != float("inf") else None, self.annotations)
            body["status"]["nodeInfo"]["kubeletVersion"] = self.kubelet_version
            try:
                self.core.create_node(body, _request_timeout=10)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            self._registered.add(iid)
            log.warning("registered node %s for %s (%s, %s)", body["metadata"]["name"], iid,
                        inst["InstanceType"], inst["Placement"]["AvailabilityZone"])
        for iid, name in nodes.items():
            if iid not in instances and name not in deleting:
                self._delete(name, f"instance {iid} does not exist")

    def _delete(self, name: str, why: str) -> None:
        if if_found(lambda: self.core.delete_node(name, _request_timeout=10)) is not None:
            log.warning("deleted node %s: %s", name, why)

    def run(self, stop, interval: float = 0.3) -> None:
        """Sync until ``stop`` (a threading.Event) is set; errors are logged, not fatal. Not
        the harness's watch but a part of the cluster it simulates (the cloud controller
        manager): like any controller it tries again next sync, and it has no test to raise
        to (it runs in the fake AWS's process; a test sees its failure as nodes that never
        register, and the log says why)."""
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.sync()
            except Exception as exc:  # noqa: BLE001 - a controller's loop: see above
                log.warning("registrar: %s: %s", type(exc).__name__, exc)
            stop.wait(max(0.05, interval - (time.monotonic() - started)))
