"""What moto lacks or simplifies among the calls Karpenter's AWS provider makes, added
inside the harness's own process (never a fork of moto).

Each extension names the Karpenter call that needed it; the README lists them. They
patch moto's classes in this process only, so they need moto's server to run in the same
process (``ThreadedMotoServer``), which ``clusters.awssim.server`` does.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

SPOT_DISCOUNT = 0.35  # spot at 35 % of on-demand, as is typical for current generations
ZONE_SPREAD = 0.04  # +-4 % between zones, so zones are not all tied
_installed = threading.Lock()
_done: list[str] = []

PRICE_LINE = re.compile(r'"([a-z0-9-]+\.[a-z0-9-]+)":\s*([0-9.]+)')


def on_demand_prices(pricing_go: Path) -> dict[str, float]:
    """us-east-1 on-demand prices from the AWS provider's own static table
    (``pkg/providers/pricing/zz_generated.pricing_aws.go``): the prices Karpenter itself
    uses with ISOLATED_VPC=true, so the fake's spot prices are derived from the same."""
    text = pricing_go.read_text()
    start = text.index('"us-east-1": {')
    end = text.index("\n\t},", start)
    return {name: float(price) for name, price in PRICE_LINE.findall(text[start:end])}


class Prices:
    """On-demand prices, and spot prices derived from them per zone."""

    def __init__(self, on_demand: dict[str, float]):
        self.on_demand = on_demand

    def spot(self, instance_type: str, zone: str) -> float | None:
        od = self.on_demand.get(instance_type)
        if od is None:
            return None
        # A fixed pseudo-random spread per (type, zone): deterministic across runs.
        h = int(hashlib.sha256(f"{instance_type}/{zone}".encode()).hexdigest()[:8], 16)
        factor = 1 + ZONE_SPREAD * ((h % 2001) / 1000 - 1)
        return round(od * SPOT_DISCOUNT * factor, 6)

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float:
        p = self.spot(instance_type, zone) if capacity_type == "spot" else \
            self.on_demand.get(instance_type)
        return float("inf") if p is None else p


def install(prices: Prices, backend_for: Callable[[], object],
            response_cache: Path | None = None) -> None:
    """Patch moto once per process. ``backend_for()`` returns the seeded account's EC2
    backend (one account, one region); ``response_cache`` is a file that keeps the static
    answers' serialized form between runs."""
    with _installed:
        if _done:
            return
        _spot_price_history(prices)
        _fleet_cheapest_override(prices, backend_for)
        _fleet_security_groups(backend_for)
        _dry_run_instance_types()
        _instance_profiles_by_path()
        _static_responses(response_cache, prices)
        _done.append("installed")


def _dry_run_instance_types() -> None:
    """DescribeInstanceTypes with DryRun (Karpenter's EC2 connectivity check at start):
    EC2 answers DryRunOperation; moto ignored DryRun and serialized every type (6 s)."""
    from moto.ec2.responses.instances import InstanceResponse

    orig = InstanceResponse.describe_instance_types

    def describe_instance_types(self):
        self.error_on_dryrun()
        return orig(self)

    InstanceResponse.describe_instance_types = describe_instance_types


def _instance_profiles_by_path() -> None:
    """ListInstanceProfiles with PathPrefix (Karpenter's EC2NodeClass finalizer lists the
    profiles under /karpenter/<region>/<cluster>/<uid>/ and deletes each one listed): IAM
    answers only those under the prefix; moto ignored it and listed every profile in the
    account, so one NodeClass's deletion took every profile, foreign ones too."""
    from moto.core.responses import ActionResult
    from moto.iam.responses import IamResponse

    def list_instance_profiles(self):
        prefix = self._get_param("PathPrefix") or "/"
        return ActionResult({"InstanceProfiles": [
            p for p in self.backend.get_instance_profiles() if p.path.startswith(prefix)]})

    IamResponse.list_instance_profiles = list_instance_profiles


def _spot_price_history(prices: Prices) -> None:
    """DescribeSpotPriceHistory (Karpenter's pricing provider, every few minutes): moto
    answers a constant 0.00001 for every type, so every spot offering ties and Karpenter
    launches the largest type it lists. Answer prices derived from on-demand instead."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses.spot_instances import SpotInstances

    def describe_spot_price_history(self):
        instance_types = self._get_param("InstanceTypes", [])
        offered = self.ec2_backend.describe_spot_price_history(
            instance_types, self._filters_from_querystring())
        history = []
        for o in offered:
            price = prices.spot(o["InstanceType"], o["Location"])
            if price is None:
                continue  # no on-demand price known: no spot price either
            history.append({"InstanceType": o["InstanceType"],
                            "ProductDescription": "Linux/UNIX (Amazon VPC)",
                            "SpotPrice": f"{price:.6f}", "AvailabilityZone": o["Location"],
                            "Timestamp": "2026-01-01T00:00:00.000Z"})
        return ActionResult({"SpotPriceHistory": history})

    SpotInstances.describe_spot_price_history = describe_spot_price_history


def _fleet_cheapest_override(prices: Prices, backend_for: Callable[[], object]) -> None:
    """CreateFleet (every launch): moto fulfils an instant fleet from the first override
    (or by a SpotPrice Karpenter never sets). EC2 picks the cheapest override for the
    capacity type (lowest-price on-demand; price-capacity-optimized spot, approximated by
    price alone here)."""
    from moto.ec2.models.fleets import Fleet

    orig_spot, orig_od = Fleet.create_spot_requests, Fleet.create_on_demand_requests

    def create_spot_requests(self, weight):
        self._e2e_capacity_type = "spot"
        return orig_spot(self, weight)

    def create_on_demand_requests(self, weight):
        self._e2e_capacity_type = "on-demand"
        return orig_od(self, weight)

    def get_launch_spec_counts(self, weight_to_add):
        capacity_type = getattr(self, "_e2e_capacity_type", "on-demand")
        spec = cheapest_spec(self.launch_specs, capacity_type, prices,
                             lambda subnet: _zone_of(backend_for(), subnet))
        count = max(1, int(-(-weight_to_add // spec.weighted_capacity)))
        return {spec: count}, count * spec.weighted_capacity

    Fleet.create_spot_requests = create_spot_requests
    Fleet.create_on_demand_requests = create_on_demand_requests
    Fleet.get_launch_spec_counts = get_launch_spec_counts


def cheapest_spec(specs: list, capacity_type: str, prices: Prices, zone_of: Callable[[str], str]):
    """The launch spec (override) EC2 would fulfil: the cheapest for ``capacity_type``;
    ties keep the request's order, as the first override wins there too."""
    return min(specs, key=lambda s: prices.price(s.instance_type, zone_of(s.subnet_id),
                                                 capacity_type))


def _zone_of(backend, subnet_id: str | None) -> str:
    if not subnet_id:
        return ""
    try:
        return backend.get_subnet(subnet_id).availability_zone
    except Exception:  # noqa: BLE001 - an unknown subnet fails later, in moto's own check
        return ""


def _fleet_security_groups(backend_for: Callable[[], object]) -> None:
    """CreateFleet: Karpenter's launch templates put the security groups in
    ``NetworkInterfaces[0].Groups``; moto's fleet reads only ``GroupSet``, so instances got
    the VPC's default group and were at once Drifted (SecurityGroupDrift). Read them from
    the template's first network interface when the override and template name none."""
    from moto.ec2.models.spot_requests import SpotFleetLaunchSpec

    orig_init = SpotFleetLaunchSpec.__init__

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        if self.group_set or not self.launch_template_spec:
            return
        spec = self.launch_template_spec
        try:
            template = backend_for().get_launch_template(spec["LaunchTemplateId"])
            data = template.get_version(spec.get("Version") or
                                        template.default_version_number).data
        except Exception:  # noqa: BLE001 - no template: moto's own path decides
            return
        groups = network_interface_groups(data)
        if groups:
            self.group_set = groups

    SpotFleetLaunchSpec.__init__ = __init__


def network_interface_groups(template_data: dict) -> list[str]:
    """Security group ids of a launch template's first network interface (either shape
    moto may store: parsed ``Groups`` list or the query's ``SecurityGroupId`` entries)."""
    nics = template_data.get("NetworkInterfaces") or template_data.get("NetworkInterface") or []
    if isinstance(nics, dict):
        nics = [nics[k] for k in sorted(nics)]
    if not nics:
        return []
    first = nics[0]
    groups = first.get("Groups") or first.get("SecurityGroupId") or first.get("SecurityGroupIds") or []
    if isinstance(groups, dict):
        groups = [groups[k] for k in sorted(groups)]
    return [g if isinstance(g, str) else g.get("GroupId", "") for g in groups if g]


# Answers that never change while the fake runs; StartTime/EndTime vary per call only.
STATIC_ACTIONS = ("DescribeInstanceTypes", "DescribeInstanceTypeOfferings",
                  "DescribeSpotPriceHistory")
VOLATILE_PARAMS = ("StartTime", "EndTime")


def _static_responses(cache_file: Path | None, prices: Prices) -> None:
    """DescribeInstanceTypes and DescribeSpotPriceHistory (Karpenter's start-up and its
    periodic refreshes): moto serializes ~1400 types in 5-20 s on this machine, which
    made Karpenter's start-up that much slower than local mode's. Their answers are static
    here, so each distinct request is serialized once and then replayed; with
    ``cache_file``, also across runs (keyed by moto's version and the price table)."""
    import moto
    from moto.core.responses import BaseResponse

    orig = BaseResponse.serialized
    lock = threading.Lock()
    salt = hashlib.sha256(f"{moto.__version__}/{sorted(prices.on_demand.items())}/"
                          f"{SPOT_DISCOUNT}/{ZONE_SPREAD}".encode()).hexdigest()[:16]
    cache: dict[tuple, tuple] = _load(cache_file, salt)

    def serialized(self, action_result):
        action = self._get_action()
        if action not in STATIC_ACTIONS or isinstance(action_result.result, Exception):
            return orig(self, action_result)
        key = (action, self.region, tuple(sorted(
            (k, tuple(v)) for k, v in self.querystring.items() if k not in VOLATILE_PARAMS)))
        with lock:
            hit = cache.get(key)
        if hit is None:
            started = time.monotonic()
            hit = orig(self, action_result)
            with lock:
                cache[key] = hit
                _save(cache_file, salt, cache)
            log.warning("serialized %s in %.1fs (cached from now on): %s", action,
                        time.monotonic() - started, dict(key[2]))
        status, headers, body = hit
        return status, {**headers, **self.response_headers}, body

    BaseResponse.serialized = serialized


def _load(path: Path | None, salt: str) -> dict:
    try:
        with open(path, "rb") as fh:
            stored = pickle.load(fh)
        return stored["entries"] if stored.get("salt") == salt else {}
    except (OSError, TypeError, ValueError, KeyError, EOFError, pickle.UnpicklingError):
        return {}


def _save(path: Path | None, salt: str, cache: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with open(tmp, "wb") as fh:
        pickle.dump({"salt": salt, "entries": cache}, fh)
    os.replace(tmp, path)  # concurrent writers: last one wins, each file whole
