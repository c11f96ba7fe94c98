"""Local mode's catalogue selection: the curated table (default), or a full catalogue of every
EC2 type built at run time from two pinned sources, nothing fetched from AWS:

- moto's EC2 instance-type data (vCPU, memory, architecture, GPUs, CPU manufacturer,
  hypervisor), ``moto/ec2/resources/instance_types.json.gz`` of the installed moto;
- on-demand prices from the pinned AWS provider's generated price table,
  ``pkg/providers/pricing/zz_generated.pricing_aws.go`` (``InitialOnDemandPricesAWS``:
  region -> type -> USD/hour), read from the Go module cache (downloaded there, not built,
  when absent). That file holds one region, us-east-1: the provider asks the pricing API for
  the others at run time.

A type moto knows but the price table lacks for the region is left out (counted in the
selection's description), and so is one whose name or architecture the AWS provider's labels
cannot describe (mac*, u-*tb1). Spot prices stay modelled (``catalogue.spot_price``).

Selections (``--catalogue`` / ``--karpenter-catalogue`` / expect.yaml ``catalogue:``):
``curated`` (the table in catalogue_table.py, ~84 types; the default), ``full`` (every priced
type), ``families=c6g,m5d`` (the full catalogue's types of those families); any of them may
end in ``:max-vcpu=N`` (only sizes of at most N vCPU), e.g. ``full:max-vcpu=16``.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions
from karpenter_e2e.clusters.infra.catalogue_table import TYPES, EC2Type
from karpenter_e2e.clusters.infra.filelock import write_whole

CURATED, FULL = "curated", "full"
DEFAULT = CURATED
REGION = "us-east-1"  # the only region of the provider's generated table (v1.14, v1.15)
PROVIDER_MODULE = "github.com/aws/karpenter-provider-aws"
PRICING_FILE = "pkg/providers/pricing/zz_generated.pricing_aws.go"
SYNTAX = "curated, full or families=F1,F2,... (optionally :max-vcpu=N)"

_REGION_RE = re.compile(r'^\s*"([a-z]{2}(?:-[a-z]+)+-\d+)":\s*\{', re.M)
_PRICE_RE = re.compile(r'"([a-z0-9-]+\.[a-z0-9-]+)":\s*([0-9.]+)')
_FAMILY_RE = re.compile(r"[a-z]+?\d+")  # what catalogue.aws_labels splits (c6gd; not u-6tb1)
_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
CACHE_FORMAT = 1


@dataclass(frozen=True)
class Selection:
    base: str  # curated | full | families
    families: tuple[str, ...] = ()
    max_vcpu: int | None = None

    def __str__(self) -> str:
        text = (f"families={','.join(self.families)}" if self.base == "families" else self.base)
        return text + (f":max-vcpu={self.max_vcpu}" if self.max_vcpu else "")

    @property
    def needs_full(self) -> bool:
        return self.base != CURATED


def parse_selection(spec: str | None) -> Selection:
    """``curated``, ``full`` or ``families=F,...``, optionally ``:max-vcpu=N``; ValueError
    naming the syntax otherwise."""
    text = (spec or DEFAULT).strip()
    head, _, cap = text.partition(":")
    max_vcpu = None
    if cap:
        key, _, value = cap.partition("=")
        if key != "max-vcpu" or not value.isdigit() or int(value) < 1:
            raise ValueError(f"catalogue {spec!r}: after ':' expected max-vcpu=N ({SYNTAX})")
        max_vcpu = int(value)
    if head in (CURATED, FULL):
        return Selection(head, (), max_vcpu)
    key, _, value = head.partition("=")
    families = tuple(f.strip() for f in value.split(",") if f.strip())
    if key == "families" and families:
        return Selection("families", families, max_vcpu)
    raise ValueError(f"catalogue {spec!r}: expected {SYNTAX}")


# ---- the two sources --------------------------------------------------------------------

def parse_pricing(text: str) -> dict[str, dict[str, float]]:
    """The generated Go map literal ``region: {"type": price, ...}`` as a dict."""
    out: dict[str, dict[str, float]] = {}
    starts = list(_REGION_RE.finditer(text))
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        out[m[1]] = {name: float(price) for name, price in _PRICE_RE.findall(text, m.end(), end)}
    return out


def moto_instance_types_file() -> Path:
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterError("the full catalogue reads moto's EC2 instance types: moto is not "
                           "installed (pip install moto)")
    return Path(list(spec.submodule_search_locations)[0]) / "ec2/resources/instance_types.json.gz"


def from_moto(info: dict, od: float) -> EC2Type | None:
    """One moto ``DescribeInstanceTypes`` entry as an EC2Type, or None where the AWS labels
    cannot describe it (a mac or a u-*tb1 type)."""
    name = info["InstanceType"]
    family = name.split(".", 1)[0]
    archs = [_ARCH[a] for a in info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
             if a in _ARCH]
    if not archs or not _FAMILY_RE.match(family):
        return None
    gpus = info.get("GpuInfo", {}).get("Gpus") or []
    gpu = gpus[0] if gpus else {}
    return EC2Type(
        name=name, vcpu=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_gib=info["MemoryInfo"]["SizeInMiB"] / 1024, arch=archs[0], od=od,
        gpus=sum(int(g.get("Count", 0)) for g in gpus),
        gpu_name=str(gpu.get("Name", "")).lower().replace(" ", "-"),
        cpu_manufacturer=str(info.get("ProcessorInfo", {}).get("Manufacturer", "")).lower(),
        hypervisor=str(info.get("Hypervisor", "")),
        gpu_manufacturer=str(gpu.get("Manufacturer", "")).lower() if gpus else "")


@dataclass(frozen=True)
class Full:
    types: list[EC2Type]
    unpriced: int  # moto's types the price table lacks for the region
    unlabelled: int  # moto's types the AWS labels cannot describe (mac*, u-*)
    region: str
    provider: str

    def source(self) -> str:
        return (f"moto's EC2 types priced from AWS provider {self.provider}'s {self.region} "
                f"table; {self.unpriced} unpriced and {self.unlabelled} unlabelled types "
                "left out")


def build_full(moto_types: dict[str, dict], prices: dict[str, float], region: str,
               provider: str) -> Full:
    types: list[EC2Type] = []
    unpriced = unlabelled = 0
    for name in sorted(moto_types):
        if name not in prices:
            unpriced += 1
            continue
        t = from_moto(moto_types[name], prices[name])
        if t is None:
            unlabelled += 1
        else:
            types.append(t)
    return Full(types, unpriced, unlabelled, region, provider)


def _cache_path(provider: str, region: str, moto_file: Path) -> Path:
    from karpenter_e2e.clusters.infra import build
    try:
        moto = importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:
        moto = f"{moto_file.stat().st_size}"
    return build.cache_dir() / "catalogue" / f"full-{provider}-{region}-moto{moto}.json"


def pricing_text(provider: str) -> str:
    from karpenter_e2e.clusters.infra import build
    module = build.download_module(PROVIDER_MODULE, provider, versions.GO_TOOLCHAIN)
    return (module / PRICING_FILE).read_text()


def load_full(region: str = REGION, provider: str = versions.AWS_PROVIDER) -> Full:
    """The full catalogue, parsed once per (provider, region, moto) into the cache."""
    moto_file = moto_instance_types_file()
    cache = _cache_path(provider, region, moto_file)
    try:
        data = json.loads(cache.read_text())
        if data.get("format") == CACHE_FORMAT:
            return Full([EC2Type(*t) for t in data["types"]], data["unpriced"],
                        data["unlabelled"], region, provider)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    table = parse_pricing(pricing_text(provider))
    if region not in table:
        raise ClusterError(f"the AWS provider {provider}'s generated price table has no "
                           f"{region} (it has {', '.join(sorted(table)) or 'none'})")
    full = build_full(json.loads(gzip.decompress(moto_file.read_bytes())), table[region],
                      region, provider)
    # Two clusters may prepare it at once (processes, or check --compare-version's two sides).
    write_whole(cache, json.dumps({"format": CACHE_FORMAT, "types": [list(t) for t in full.types],
                                   "unpriced": full.unpriced, "unlabelled": full.unlabelled}))
    return full


def resolve(selection: Selection, full: Full | None = None) -> tuple[list[EC2Type], str]:
    """The selection's types and a sentence on where they come from."""
    if selection.needs_full:
        full = full or load_full()
        types, source = full.types, full.source()
        if selection.base == "families":
            have = {t.name.split(".", 1)[0] for t in types}
            unknown = [f for f in selection.families if f not in have]
            if unknown:
                raise ClusterError(f"catalogue {selection}: the full catalogue has no family "
                                   f"{', '.join(unknown)}")
            types = [t for t in types if t.name.split(".", 1)[0] in selection.families]
    else:
        types, source = list(TYPES), "the curated table (catalogue_table.py)"
    if selection.max_vcpu:
        types = [t for t in types if t.vcpu <= selection.max_vcpu]
    return types, source


def on_demand_source(selection: str | None) -> str:
    """Where the selection's on-demand prices come from, for the report."""
    if not selection or not parse_selection(selection).needs_full:
        return "the local catalogue's us-west-2 list prices"
    return (f"the AWS provider {versions.AWS_PROVIDER}'s generated {REGION} on-demand price "
            "table")
