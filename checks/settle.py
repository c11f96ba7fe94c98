"""When has Karpenter finished with the manifests? Both waits read Karpenter's own decision
points and are bounded by the harness's Timeouts.

- After scale-out: every workload has its pods; no NodeClaim is launching or deleting; every
  Pending pod carries Karpenter's FailedScheduling event (Karpenter looked at it and could
  not place it); and nothing changed for ``QUIET_S``.
- After scale-in: no NodeClaim launching or deleting, and nothing changed for
  ``DISRUPTION_QUIET_S`` counted from the later of the last change and the moment the last
  NodeClaim could turn Consolidatable (its ``lastPodEventTime`` + its pool's consolidateAfter);
  or no NodeClaim left at all.
"""

from __future__ import annotations

import re
import time

from karpenter_e2e.checks.manifests import Bundle, Manifest, desired_pods
from karpenter_e2e.checks.observe import not_created, pod_workload
from karpenter_e2e.clusters import objects as view
from karpenter_e2e.clusters.karpenter_clock import POD_EVENT_DEDUPE_S
from karpenter_e2e.clusters.kube import CAPACITY_BUFFER, NODECLAIM, NODEPOOL, Kube
from karpenter_e2e.clusters.labels import NODEPOOL as NODEPOOL_LABEL
from karpenter_e2e.clusters.waits import DEFAULTS, Observation, eventually
from karpenter_e2e.fixtures.timings import timestamp

QUIET_S = 5  # Karpenter batches pending pods for 1-10 s; 5 s with nothing launching is settled
# Karpenter's disruption poll (10 s) + its command validation (15 s) + 5 s.
DISRUPTION_QUIET_S = 30


def _duration_s(text: str) -> float | None:
    """'30s', '1m', '1h30m', 'Never' -> seconds (None for Never)."""
    if text in (None, "", "Never"):
        return None
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ms|h|m|s)", text))


class Settler:
    def __init__(self, kube: Kube, bundle: Bundle):
        self.kube, self.bundle = kube, bundle
        self._signature, self._changed = None, time.time()

    def _pods_by_workload(self) -> tuple[dict[str, int], list]:
        counts, pods = {}, []
        for ns in sorted(self.bundle.namespaces):
            for pod in self.kube.pods(ns):
                if pod.metadata.deletion_timestamp:
                    continue
                pods.append(pod)
                w = pod_workload(pod)
                counts[w] = counts.get(w, 0) + 1
        return counts, pods

    def _missing(self, manifests: list[Manifest], counts: dict[str, int]) -> list[str]:
        """Workloads still short of pods; one whose controller was refused the rest (a
        ResourceQuota, say) is decided and not waited for."""
        refused = not_created(self.kube, manifests, counts)
        out = []
        for m in manifests:
            want, have = desired_pods(m), counts.get(m.ref, 0)
            if want is not None and have != want and m.ref not in refused:
                out.append(f"{m.kind} {m.name} has {have}/{want} pods")
        return out

    def _buffers_undecided(self) -> list[str]:
        """CapacityBuffers Karpenter's provisioner has not decided on yet: it writes each one's
        Provisioning condition after every scheduling round that saw its chunks."""
        wanted = self.bundle.of_kind("CapacityBuffer")
        provisioned = set()
        for namespace in {m.namespace or "default" for m in wanted}:  # one list, as for claims
            for body in self.kube.list(CAPACITY_BUFFER, namespace=namespace):
                if view.condition(body, "Provisioning") is not None:
                    provisioned.add((namespace, body["metadata"]["name"]))
        return [f"CapacityBuffer {m.name} not yet provisioned for" for m in wanted
                if (m.namespace or "default", m.name) not in provisioned]

    def _claims(self) -> list[dict]:
        return self.kube.list(NODECLAIM)

    def _note(self, signature) -> float:
        """Seconds since the signature last changed."""
        if signature != self._signature:
            self._signature, self._changed = signature, time.time()
        return time.time() - self._changed

    def scaled_out(self, manifests: list[Manifest]) -> float:
        """Wait until settled after scale-out; returns the seconds it took."""
        started = time.time()

        def check() -> Observation:
            counts, pods = self._pods_by_workload()
            claims = self._claims()
            busy = _busy(claims)
            pending = [p for p in pods if p.status.phase == "Pending"]
            decided = self._karpenter_decided({p.metadata.namespace for p in pending})
            undecided = [p.metadata.name for p in pending
                         if (p.metadata.namespace, p.metadata.name) not in decided]
            quiet = self._note((tuple(sorted(counts.items())),
                                tuple(sorted((p.metadata.name, p.status.phase) for p in pods)),
                                tuple(sorted(c["metadata"]["name"] for c in claims))))
            missing = self._missing(manifests, counts) + self._buffers_undecided()
            ok = not missing and not busy and not undecided and quiet >= QUIET_S
            return Observation(ok, "; ".join(filter(None, [
                ", ".join(missing), busy, f"{len(undecided)} Pending pods Karpenter has not "
                f"decided on yet ({', '.join(undecided[:3])})" if undecided else "",
                f"quiet for {quiet:.0f}s"])))

        eventually(check, what="Karpenter to settle after scale-out (every pod Running, or "
                               "Pending with Karpenter's FailedScheduling event; nothing "
                               "launching)", timeout=DEFAULTS.provision)
        return time.time() - started

    def scaled_in(self, manifests: list[Manifest]) -> float:
        started = time.time()
        after = {p["metadata"]["name"]: _duration_s(
            ((p.get("spec") or {}).get("disruption") or {}).get("consolidateAfter", "0s"))
            for p in self.kube.list(NODEPOOL)}

        def check() -> Observation:
            counts, _ = self._pods_by_workload()
            claims = self._claims()
            busy = _busy(claims)
            quiet_since = time.time() - self._note(
                tuple(sorted(c["metadata"]["name"] for c in claims)))
            decidable = [timestamp(view.status(c).get("lastPodEventTime")
                                   or c["metadata"]["creationTimestamp"])
                         + after[c["metadata"]["labels"].get(NODEPOOL_LABEL)]
                         for c in claims
                         if after.get(c["metadata"]["labels"].get("karpenter.sh/nodepool"))
                         is not None]
            # Karpenter records a pod event at most once per 10 s: the emptying may count
            # from up to 10 s after the scale-in.
            since = max([quiet_since, started + POD_EVENT_DEDUPE_S, *decidable])
            quiet = time.time() - since
            missing = self._missing(manifests, counts)
            # With no NodeClaim left there is nothing more to disrupt.
            ok = not missing and not busy and (quiet >= DISRUPTION_QUIET_S or not claims)
            return Observation(ok, "; ".join(filter(None, [
                ", ".join(missing), busy, f"{len(claims)} NodeClaims, "
                f"{quiet:.0f}s of {DISRUPTION_QUIET_S}s quiet since the last change or "
                "consolidateAfter"])))

        eventually(check, what="consolidation to settle after scale-in (no NodeClaim launching "
                               f"or deleting, {DISRUPTION_QUIET_S}s quiet after each pool's "
                               "consolidateAfter)", timeout=DEFAULTS.disruption)
        return time.time() - started

    def _karpenter_decided(self, namespaces: set[str]) -> set[tuple[str, str]]:
        """The pods Karpenter could not place (FailedScheduling), or placed on a NodeClaim
        (Nominated) while they wait on something else, e.g. a volume nothing provisions (no
        NodeClaim launching is the other half, checked beside this). One list of Karpenter's
        events per namespace, not one per pod."""
        return {(ns, e.involved_object.name or "") for ns in sorted(namespaces)
                for e in self.kube.karpenter_events(ns)
                if e.involved_object.kind == "Pod" and e.reason in ("FailedScheduling", "Nominated")}


def _busy(claims: list[dict]) -> str:
    launching, deleting = [], []
    for c in claims:
        if view.deleting(c):
            deleting.append(c["metadata"]["name"])
        elif not view.is_true(c, "Initialized"):
            launching.append(c["metadata"]["name"])
    return ", ".join(filter(None, [f"launching: {', '.join(launching)}" if launching else "",
                                   f"deleting: {', '.join(deleting)}" if deleting else ""]))
