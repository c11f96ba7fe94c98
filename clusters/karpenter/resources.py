"""A pod's effective requests: what a node must hold for it, as Kubernetes counts them.

Karpenter sizes a NodeClaim with resources.Ceiling (pkg/utils/resources/resources.go), which
from v1.13 on is the kube-scheduler's own helper, k8s.io/component-helpers resource.PodRequests
(v0.35.0; v1.14 and v1.15 pass UseStatusResources, which changes nothing for a pod that never
ran; v1.5.5 has its own copy of the same rule, without pod-level resources). This is that
helper, on the pod as the API serialises it (camelCase), so the oracles can check the sum
Karpenter wrote on a NodeClaim against the pods it planned there (fixtures/oracles/plans.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from kubernetes.utils.quantity import parse_quantity

# component-helpers IsSupportedPodLevelResource: cpu, memory and hugepages-*
_POD_LEVEL = ("cpu", "memory")


def _list(values: dict | None) -> dict[str, Decimal]:
    return {k: Decimal(parse_quantity(str(v))) for k, v in (values or {}).items()}


def _add(into: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, Decimal(0)) + v


def _max(into: dict[str, Decimal], other: dict[str, Decimal]) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def _requests(container: dict) -> dict[str, Decimal]:
    return _list((container.get("resources") or {}).get("requests"))


def pod_requests(pod: dict) -> dict[str, Decimal]:
    """PodRequests: the containers' sum plus the sidecars (init containers with restartPolicy
    Always, which run beside them), or, if larger, each plain init container with the sidecars
    started before it (KEP-753, AggregateContainerRequests); pod-level requests of cpu, memory
    and hugepages replace the containers' sum; the RuntimeClass's overhead (spec.overhead, set
    at admission) on top. ``pod`` is a Pod or a pod template ({"spec": ...})."""
    spec = pod.get("spec") or {}
    reqs: dict[str, Decimal] = {}
    for c in spec.get("containers") or []:
        _add(reqs, _requests(c))
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in spec.get("initContainers") or []:
        own = _requests(c)
        if c.get("restartPolicy") == "Always":
            _add(reqs, own)
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
            _max(init_peak, running)
    _max(reqs, init_peak)
    for k, v in _list((spec.get("resources") or {}).get("requests")).items():
        if k in _POD_LEVEL or k.startswith("hugepages-"):
            reqs[k] = v
    _add(reqs, _list(spec.get("overhead")))
    return reqs


def summed(lists: Iterable[dict[str, Decimal]]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for one in lists:
        _add(out, one)
    return out


def quantity(v: Decimal) -> str:
    """A quantity written back exactly (no exponent: parse_quantity reads it again)."""
    return format(v.normalize(), "f")


def shown(values: dict[str, Decimal]) -> str:
    """'cpu 1.75, memory 4Gi, pods 1': bytes in the largest binary unit that divides them."""
    def one(k: str, v: Decimal) -> str:
        if k in ("memory", "ephemeral-storage") or k.startswith("hugepages-"):
            for unit, size in (("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10)):
                if v >= size and v % size == 0:
                    return f"{quantity(v / size)}{unit}"
        return quantity(v)
    return ", ".join(f"{k} {one(k, v)}" for k, v in sorted(values.items()))
