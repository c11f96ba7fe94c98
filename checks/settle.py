"""When has Karpenter finished with the manifests? Both waits read Karpenter's own decision
points and are bounded by the harness's Timeouts.

- After scale-out: every workload has its pods; no NodeClaim is launching or deleting; every
  Pending pod carries Karpenter's FailedScheduling event (Karpenter looked at it and could
  not place it); and nothing changed for ``QUIET_S``.
- After scale-in, or a step that may make Karpenter disrupt (a patch that drifts nodes):
  the same, but nothing changed for ``SETTLE_MARGIN_S`` (clusters.karpenter.clock: a
  disruption round and a scheduling round, as the it-settles oracle allows) counted from the
  later of the last change and the moment the last NodeClaim could turn Consolidatable (its
  ``lastPodEventTime`` + its pool's consolidateAfter); or no NodeClaim left at all.

One wait (``Settler.settled``) for both.
"""

from __future__ import annotations

import time

from karpenter_e2e.checks.manifests import Bundle, Manifest, desired_pods
from karpenter_e2e.checks.observe import not_created, pod_workload
from karpenter_e2e.clusters.api import objects as view
from karpenter_e2e.clusters.api.kube import CAPACITY_BUFFER, NODECLAIM, NODEPOOL, Kube
from karpenter_e2e.clusters.api.labels import NODEPOOL as NODEPOOL_LABEL
from karpenter_e2e.clusters.api.waits import DEFAULTS, Observation, StopWaiting, eventually
from karpenter_e2e.clusters.karpenter.clock import POD_EVENT_DEDUPE_S, SETTLE_MARGIN_S, go_duration
from karpenter_e2e.fixtures.timings import timestamp

QUIET_S = 5  # Karpenter batches pending pods for 1-10 s; 5 s with nothing launching is settled


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
        return self.settled(manifests)

    def scaled_in(self, manifests: list[Manifest]) -> float:
        """Wait until consolidation settled after a scale-in; returns the seconds it took."""
        return self.settled(manifests, disruption=True)

    def settled(self, manifests: list[Manifest], disruption: bool = False,
                timeout: float | None = None) -> float:
        """The one settle wait: every workload has its pods (or its controller was refused
        them), every CapacityBuffer decided, no NodeClaim launching or deleting, every Pending
        pod decided by Karpenter, and nothing changed for ``QUIET_S``. With ``disruption``,
        the quiet is Karpenter's disruption quiet instead: ``SETTLE_MARGIN_S`` counted from
        the later of the last change, ``POD_EVENT_DEDUPE_S`` after the start and the moment
        the last NodeClaim could turn Consolidatable (or no NodeClaim left). Bounded by the
        provision timeout (``disruption``: the disruption timeout) unless ``timeout`` is
        given; returns the seconds it took."""
        started = time.time()
        after = {p["metadata"]["name"]: go_duration(
            ((p.get("spec") or {}).get("disruption") or {}).get("consolidateAfter") or "0s")
            for p in self.kube.list(NODEPOOL)} if disruption else {}

        def check() -> Observation:
            counts, pods = self._pods_by_workload()
            claims = self._claims()
            busy = _busy(claims)
            pending = [p for p in pods if p.status.phase == "Pending"]
            decided = self._karpenter_decided({p.metadata.namespace for p in pending})
            undecided = [p.metadata.name for p in pending
                         if (p.metadata.namespace, p.metadata.name) not in decided]
            unchanged = self._note((tuple(sorted(counts.items())),
                                    tuple(sorted((p.metadata.name, p.status.phase) for p in pods)),
                                    tuple(sorted(c["metadata"]["name"] for c in claims))))
            missing = self._missing(manifests, counts) + self._buffers_undecided()
            if disruption:
                decidable = [timestamp(view.status(c).get("lastPodEventTime")
                                       or c["metadata"]["creationTimestamp"])
                             + after[c["metadata"]["labels"].get(NODEPOOL_LABEL)]
                             for c in claims
                             if after.get(c["metadata"]["labels"].get(NODEPOOL_LABEL))
                             is not None]
                # Karpenter records a pod event at most once per 10 s: the emptying may
                # count from up to 10 s after the start.
                since = max([time.time() - unchanged, started + POD_EVENT_DEDUPE_S, *decidable])
                quiet = time.time() - since
                # With no NodeClaim left there is nothing more to disrupt.
                calm = quiet >= SETTLE_MARGIN_S or not claims
                quiet_text = (f"{len(claims)} NodeClaims, {quiet:.0f}s of {SETTLE_MARGIN_S}s "
                              "quiet since the last change or consolidateAfter")
            else:
                calm, quiet_text = unchanged >= QUIET_S, f"quiet for {unchanged:.0f}s"
            ok = not missing and not busy and not undecided and calm
            return Observation(ok, "; ".join(filter(None, [
                ", ".join(missing), busy, f"{len(undecided)} Pending pods Karpenter has not "
                f"decided on yet ({', '.join(undecided[:3])})" if undecided else "",
                quiet_text])))

        if disruption:
            what = ("Karpenter to settle, disruption included (no NodeClaim launching or "
                    f"deleting, {SETTLE_MARGIN_S}s quiet after each pool's consolidateAfter)")
        else:
            what = ("Karpenter to settle after scale-out (every pod Running, or Pending with "
                    "Karpenter's FailedScheduling event; nothing launching)")
        eventually(check, what=what, timeout=timeout if timeout is not None
                   else DEFAULTS.disruption if disruption else DEFAULTS.provision)
        return time.time() - started

    def _karpenter_decided(self, namespaces: set[str]) -> set[tuple[str, str]]:
        """The pods Karpenter could not place (FailedScheduling), or placed on a NodeClaim
        (Nominated) while they wait on something else, e.g. a volume nothing provisions (no
        NodeClaim launching is the other half, checked beside this). One list of Karpenter's
        events per namespace, not one per pod."""
        return {(ns, name) for ns in sorted(namespaces)
                for name in self.kube.pods_karpenter_decided(ns)}


def job_finished(kube: Kube, namespace: str, name: str, outcome: str = "complete",
                 timeout: float | None = None) -> str:
    """Wait until the Job's ``Complete`` condition is True (``outcome`` 'failed': its
    ``Failed``); the other ending stops the wait at once (WaitAborted, with the Job's own
    reason and message). Returns what was seen; bounded by the disruption timeout."""
    wanted, other = ("Complete", "Failed") if outcome == "complete" else ("Failed", "Complete")

    def check() -> Observation:
        job = kube.api.sanitize_for_serialization(kube.batch.read_namespaced_job_status(
            name, namespace, _request_timeout=kube.timeout))
        st = view.status(job)
        seen = (f"succeeded {st.get('succeeded', 0)}, failed {st.get('failed', 0)}, "
                f"active {st.get('active', 0)}")
        if view.is_true(job, other):
            end = view.condition(job, other) or {}
            raise StopWaiting(f"the Job ended {other} ({end.get('reason', '')}: "
                              f"{end.get('message', '')}); {seen}")
        return Observation(view.is_true(job, wanted), seen, seen)

    return str(eventually(check, what=f"Job {namespace}/{name} to "
                                      f"{'complete' if outcome == 'complete' else 'fail'}",
                          timeout=DEFAULTS.disruption if timeout is None else timeout))


def _busy(claims: list[dict]) -> str:
    launching, deleting = [], []
    for c in claims:
        if view.deleting(c):
            deleting.append(c["metadata"]["name"])
        elif not view.is_true(c, "Initialized"):
            launching.append(c["metadata"]["name"])
    return ", ".join(filter(None, [f"launching: {', '.join(launching)}" if launching else "",
                                   f"deleting: {', '.join(deleting)}" if deleting else ""]))
