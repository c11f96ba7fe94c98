"""Render the curated EC2 table into the KWOK provider's instance-types JSON.

The KWOK provider turns every single-valued ``In`` requirement of an offering into a
node label and a well-known key. Putting the AWS provider's ``karpenter.k8s.aws/*``
labels on each offering is what lets the workshop NodePools (category In [c,m,r],
generation Gt 2, ...) apply unchanged in local mode. Releases before v1.5.5 take only the
zone and capacity type from an offering (features "kwok-offering-labels"); the harness builds
them with that part of v1.5.5's KWOK provider backported (clusters/infra/build.py), so every
release reads the same catalogue.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from karpenter_e2e.clusters.api.labels import (
    ARCH,
    AWS,
    CAPACITY_TYPE,
    GPU_COUNT,
    GPU_MANUFACTURER,
    GPU_NAME,
    INSTANCE_TYPE,
    ZONE,
)
from karpenter_e2e.clusters.infra import catalogue_full
from karpenter_e2e.clusters.infra.catalogue_table import TYPES, ZONES, EC2Type

SPOT_DISCOUNT = (0.30, 0.45)  # spot/on-demand ratio range, as commonly seen on EC2


def spot_price(t: EC2Type, zone: str) -> float:
    # Deterministic per (type, zone): reruns see the same prices, zones differ as on EC2.
    h = int(hashlib.sha256(f"{t.name}/{zone}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    lo, hi = SPOT_DISCOUNT
    return round(t.od * (lo + (hi - lo) * h), 5)


def aws_labels(t: EC2Type) -> dict[str, str]:
    """The labels the AWS provider puts on a node of this type."""
    family, size = t.name.split(".", 1)
    m = re.match(r"([a-z]+?)(\d+)", family)
    labels = {
        f"{AWS}/instance-category": m[1],
        f"{AWS}/instance-generation": m[2],
        f"{AWS}/instance-family": family,
        f"{AWS}/instance-size": size,
        f"{AWS}/instance-cpu": str(t.vcpu),
        f"{AWS}/instance-cpu-manufacturer": t.cpu_manufacturer,
        f"{AWS}/instance-memory": str(int(t.memory_gib * 1024)),
        f"{AWS}/instance-hypervisor": t.hypervisor,
    }
    if not t.hypervisor:  # bare metal in the full catalogue: the provider's label is empty
        del labels[f"{AWS}/instance-hypervisor"]
    if t.gpus:
        labels |= {GPU_COUNT: str(t.gpus), GPU_NAME: t.gpu_name,
                   GPU_MANUFACTURER: t.gpu_manufacturer}
    return labels


# The extended resource the AWS provider gives a GPU type, by GPU manufacturer.
GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu", "habana": "habana.ai/gaudi"}


# The AWS provider gives a type without GPUs a DoesNotExist requirement on each GPU key
# (instancetype computeRequirements). Without it the type leaves the key undefined, which
# Karpenter's Intersects allows against anything: a pool requiring `instance-gpu-count
# Exists` would then launch plain types.
GPU_KEYS = (GPU_COUNT, GPU_NAME, GPU_MANUFACTURER)


def offering_requirements(t: EC2Type, zone: str, capacity_type: str) -> list[dict]:
    """An offering's requirements: one single-valued In per label (the KWOK provider makes
    each a node label), and DoesNotExist for the GPU keys on a type without GPUs."""
    labels = {CAPACITY_TYPE: capacity_type, ZONE: zone} | aws_labels(t)
    absent = [] if t.gpus else [{"key": k, "operator": "DoesNotExist"} for k in GPU_KEYS]
    return [{"key": k, "operator": "In", "values": [v]} for k, v in labels.items()] + absent


def offering_labels(offering: dict) -> dict[str, str]:
    """The labels a node launched from ``offering`` gets from it (its single-valued Ins)."""
    return {r["key"]: r["values"][0] for r in offering["Requirements"] if r["operator"] == "In"}


def _offering(t: EC2Type, zone: str, capacity_type: str) -> dict:
    price = t.od if capacity_type == "on-demand" else spot_price(t, zone)
    return {"Price": price, "Available": True,
            "Requirements": offering_requirements(t, zone, capacity_type)}


def instance_type(t: EC2Type) -> dict:
    resources = {"cpu": str(t.vcpu), "memory": f"{int(t.memory_gib * 1024)}Mi",
                 "ephemeral-storage": "20Gi", "pods": "110"}
    if t.gpus and t.gpu_manufacturer in GPU_RESOURCES:
        resources[GPU_RESOURCES[t.gpu_manufacturer]] = str(t.gpus)
    return {
        "name": t.name,
        "offerings": [_offering(t, z, ct)
                      for z in ZONES for ct in ("on-demand", "spot")],
        "architecture": t.arch,
        "operatingSystems": ["linux"],
        "resources": resources,
    }


@functools.lru_cache(maxsize=4)
def _read_resources(path: Path, stamp: float) -> dict[str, dict[str, str]]:
    return {t["name"]: {k: str(v) for k, v in (t.get("resources") or {}).items()}
            for t in json.loads(path.read_text())}


def resources_by_type(path: Path) -> dict[str, dict[str, str]]:
    """Each instance type's resources as a catalogue file holds them (what the KWOK
    provider launches: a NodeClaim's allocatable there also lists any resource it was
    planned for that its type lacks, kwok/cloudprovider Create)."""
    return _read_resources(path, path.stat().st_mtime)


def render(types: Iterable[EC2Type] = TYPES) -> list[dict]:
    return [instance_type(t) for t in types]


def select(exclude: Callable[[EC2Type], bool] | None = None,
           selection: str | None = None) -> list[EC2Type]:
    """The ``selection``'s types (catalogue_full: curated, the default, or full or
    families=...), less the types a negative check wants missing (e.g. every arm64 type)."""
    types = TYPES
    if selection and selection != catalogue_full.DEFAULT:
        types, _ = catalogue_full.resolve(catalogue_full.parse_selection(selection))
    return [t for t in types if not (exclude and exclude(t))]


def render_text(types: Iterable[EC2Type] = TYPES) -> str:
    """The catalogue file's text (also what is built into releases without a catalogue flag).
    A catalogue larger than the curated table (the full one: 18 MB indented) is compact."""
    rendered = render(types)
    return json.dumps(rendered, indent=1 if len(rendered) <= len(TYPES) else None)


def write(path: Path, types: Iterable[EC2Type] = TYPES) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_text(types))
    return path


def without(spec: str) -> Callable[[EC2Type], bool]:
    """Parse a catalogue filter like ``arch=arm64`` or ``family=g5`` into a predicate."""
    key, _, value = spec.partition("=")
    fields = {"arch": lambda t: t.arch, "family": lambda t: t.name.split(".")[0],
              "type": lambda t: t.name}
    if key not in fields or not value:
        raise ValueError(f"catalogue filter {spec!r}: expected one of "
                         f"{', '.join(k + '=VALUE' for k in fields)}")
    values = set(value.split(","))
    return lambda t: fields[key](t) in values


EC2_TYPES_FILE = Path(__file__).parent / "assets" / "ec2-instance-types.txt"
FAMILY_KEY, TYPE_KEYS = f"{AWS}/instance-family", (INSTANCE_TYPE,
                                                   "beta.kubernetes.io/instance-type")


def ec2_types() -> set[str]:
    """Every instance type EC2 has, as the AWS provider lists them."""
    return {line.strip() for line in EC2_TYPES_FILE.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def missing(requirements: Iterable[dict], catalogue: set[str],
            ec2: set[str] | None = None) -> list[str]:
    """For requirements that name an instance family or type (operator In), each value the
    ``catalogue`` (instance type names) lacks, with whether EC2 has it: in local mode a
    NodePool pinned to a family the fake catalogue lacks launches nothing, where EKS would.
    'instance-family c6gd: the local catalogue has no such family; EKS would offer it'."""
    ec2 = ec2_types() if ec2 is None else ec2
    families = {t.split(".", 1)[0] for t in catalogue}
    ec2_families = {t.split(".", 1)[0] for t in ec2}
    out: list[str] = []
    for r in requirements:
        if r.get("operator") != "In":
            continue
        key = r.get("key")
        kind, have, real = (("family", families, ec2_families) if key == FAMILY_KEY else
                            ("type", catalogue, ec2) if key in TYPE_KEYS else (None, set(), set()))
        if kind is None:
            continue
        for value in r.get("values") or []:
            if value in have:
                continue
            line = (f"instance-{kind} {value}: the local catalogue has no such {kind}; "
                    + ("EKS would offer it" if value in real else
                       f"EC2 has no such {kind} either"))
            if line not in out:
                out.append(line)
    return out


def cheapest_family(types: Iterable[EC2Type], requirements: list[dict], min_vcpu: int = 2) -> list[str]:
    """Every type of the family with the cheapest offering that satisfies ``requirements``
    (sizes of at least ``min_vcpu``): what Karpenter would launch first for that pool."""
    from karpenter_e2e.clusters.karpenter.requirements import (
        satisfies,  # shared node-selector semantics
    )

    best: tuple[float, str] | None = None
    for t in types:
        if t.vcpu < min_vcpu:
            continue
        for off in instance_type(t)["offerings"]:
            labels = offering_labels(off) | {ARCH: t.arch, "kubernetes.io/os": "linux", INSTANCE_TYPE: t.name}
            if all(satisfies(labels, r) for r in requirements):
                family = t.name.split(".")[0]
                if best is None or off["Price"] / t.vcpu < best[0]:
                    best = (off["Price"] / t.vcpu, family)
    if best is None:
        return []
    return [t.name for t in types if t.name.split(".")[0] == best[1]]
