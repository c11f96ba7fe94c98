"""When Karpenter has settled: the one rule, for the suites' wait (fixtures.expect,
``Expect.eventually_settled``: one NodePool's NodeClaims, one workload's pods) and check's
(checks.settle, ``Settler.settled``: a bundle's namespaces, every NodeClaim). Each caller
gathers its scope's objects into a ``Look``; what counts as settled, the quiet and its clock
are here, so the two scopes cannot drift into two policies.

A look is settled when:

- no NodeClaim is launching (not Initialized) or deleting: Karpenter is acting on it, and a
  deleted node's pods come back Pending;
- no pod is Pending on a node (bound, not started yet): it has still to run, and a caller
  reads the pods next;
- every Pending pod on no node is one Karpenter decided on (its own FailedScheduling or
  Nominated event): a pod it has not looked at yet reads like one it refused;
- the caller has no other reason left (a workload short of its pods, a CapacityBuffer not
  yet decided);
- nothing of the above (NodeClaims and their stage, pods and their phase, node and decision,
  the caller's reasons) changed for SETTLE_QUIET_S. In disruption mode, besides, nothing
  changed for SETTLE_MARGIN_S counted from the later of the last change, POD_EVENT_DEDUPE_S
  after the start and each NodeClaim's earliest Consolidatable time; with no NodeClaim left
  there is nothing to disrupt and the first quiet is enough.

One clock, the wall clock: the disruption rule takes the later of the last change and
Karpenter's own timestamps (lastPodEventTime, creationTimestamp), which are wall-clock times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from karpenter_e2e.clusters.api import objects as view
from karpenter_e2e.clusters.api.kube import Kube
from karpenter_e2e.clusters.api.objects import Obj
from karpenter_e2e.clusters.karpenter.clock import (
    POD_EVENT_DEDUPE_S,
    SETTLE_MARGIN_S,
    SETTLE_QUIET_S,
)


@dataclass(frozen=True)
class Look:
    """One observation of a scope."""

    claims: Sequence[Obj]  # its NodeClaims, as the API returns them
    pods: Sequence[Any]  # its pods (kubernetes V1Pod); terminating ones are left out here
    decided: Collection[tuple[str, str]] = frozenset()  # (namespace, name): Karpenter's word
    missing: Sequence[str] = ()  # the caller's other reasons it is not settled, in words
    consolidatable: Sequence[float] = ()  # disruption mode: each claim's earliest Consolidatable


@dataclass(frozen=True)
class Verdict:
    ok: bool
    seen: str  # what it waits for, in words
    pending: int  # pods left Pending (on no node, or on one and not started)


def live(pods: Sequence[Any]) -> list[Any]:
    return [p for p in pods if not p.metadata.deletion_timestamp]


def waiting(pods: Sequence[Any]) -> list[Any]:
    """Pods Pending on no node: the ones Karpenter decides on."""
    return [p for p in live(pods) if p.status.phase == "Pending" and not p.spec.node_name]


def karpenter_decided(kube: Kube, pods: Sequence[Any]) -> set[tuple[str, str]]:
    """(namespace, name) of the pods Karpenter emitted FailedScheduling or Nominated about:
    one list of its events per namespace where a pod waits, none when no pod waits."""
    return {(ns, name) for ns in sorted({_key(p)[0] for p in waiting(pods)})
            for name in kube.pods_karpenter_decided(ns)}


def _key(pod: Any) -> tuple[str, str]:
    return str(pod.metadata.namespace), str(pod.metadata.name)


def _stage(claim: Obj) -> str:
    if view.deleting(claim):
        return "deleting"
    return "initialized" if view.is_true(claim, "Initialized") else "launching"


def _names(pods: Sequence[Any]) -> str:
    names = [str(p.metadata.name) for p in pods]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


class Settling:
    """The rule over a run of looks: ``look`` says whether this one is settled, counting the
    quiet from the last change of what it reads."""

    def __init__(self, disruption: bool = False, quiet: float = SETTLE_QUIET_S,
                 clock: Callable[[], float] = time.time):
        self.disruption, self.quiet, self.clock = disruption, quiet, clock
        self.started = clock()
        self._signature: tuple[Any, ...] | None = None
        self._changed = self.started

    def elapsed(self) -> float:
        return self.clock() - self.started

    def look(self, look: Look) -> Verdict:
        now = self.clock()
        pods = live(look.pods)
        unbound = waiting(pods)
        binding = [p for p in pods if p.status.phase == "Pending" and p.spec.node_name]
        undecided = [p for p in unbound if _key(p) not in look.decided]
        unheard = {_key(p) for p in undecided}
        stages = {view.name(c): _stage(c) for c in look.claims}
        signature = (tuple(sorted(stages.items())),
                     tuple(sorted((*_key(p), str(p.status.phase), bool(p.spec.node_name),
                                   _key(p) in unheard) for p in pods)),
                     tuple(look.missing))
        if signature != self._signature:
            self._signature, self._changed = signature, now
        quiet_for = now - self._changed
        calm = quiet_for >= self.quiet
        quiet_text = f"unchanged for {quiet_for:.0f}s of {self.quiet:.0f}s"
        if self.disruption and look.claims:
            # Karpenter records a pod event at most every POD_EVENT_DEDUPE_S: a NodeClaim's
            # emptying may count from up to that long after the start.
            since = max([self._changed, self.started + POD_EVENT_DEDUPE_S, *look.consolidatable])
            calm = calm and now - since >= SETTLE_MARGIN_S
            quiet_text = (f"{len(look.claims)} NodeClaims, {max(0.0, now - since):.0f}s of "
                          f"{SETTLE_MARGIN_S}s quiet since the last change or consolidateAfter")
        busy = [f"{stage}: {', '.join(sorted(n for n, s in stages.items() if s == stage))}"
                for stage in ("launching", "deleting") if stage in stages.values()]
        blocking = [*look.missing, *busy,
                    f"{len(binding)} pods on a node, not started ({_names(binding)})"
                    if binding else "",
                    f"no word from Karpenter on {len(undecided)} Pending pods "
                    f"({_names(undecided)})" if undecided else ""]
        ok = calm and not any(blocking)
        return Verdict(ok, "; ".join(filter(None, [*blocking, quiet_text])),
                       len(unbound) + len(binding))
