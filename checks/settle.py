"""When has Karpenter finished with the manifests? The one settle rule
(clusters/karpenter/settled.py, shared with the suites' Expect.eventually_settled) over
check's scope: the bundle's namespaces and every NodeClaim, plus what only a bundle has (its
workloads' desired pods, its CapacityBuffers). Bounded by the harness's Timeouts.

- After scale-out: nothing launching or deleting, every pod Running or decided by Karpenter,
  every workload with its pods, and nothing changed for SETTLE_QUIET_S.
- After scale-in, or a step that may make Karpenter disrupt (a patch that drifts nodes):
  the same, and Karpenter's disruption quiet (SETTLE_MARGIN_S after each NodeClaim could
  turn Consolidatable: its ``lastPodEventTime`` + its pool's consolidateAfter); or no
  NodeClaim left at all.

One wait (``Settler.settled``) for both.
"""

from __future__ import annotations

from karpenter_e2e.checks.manifests import Bundle, Manifest, desired_pods
from karpenter_e2e.checks.observe import not_created, pod_workload
from karpenter_e2e.clusters.api import objects as view
from karpenter_e2e.clusters.api.kube import CAPACITY_BUFFER, NODECLAIM, NODEPOOL, Kube
from karpenter_e2e.clusters.api.labels import NODEPOOL as NODEPOOL_LABEL
from karpenter_e2e.clusters.api.waits import DEFAULTS, Observation, StopWaiting, eventually
from karpenter_e2e.clusters.karpenter import settled
from karpenter_e2e.clusters.karpenter.clock import SETTLE_MARGIN_S, SETTLE_QUIET_S, go_duration
from karpenter_e2e.fixtures.timings import timestamp


class Settler:
    def __init__(self, kube: Kube, bundle: Bundle):
        self.kube, self.bundle = kube, bundle

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

    def _consolidatable(self, claims: list[dict], after: dict[str, float | None]) -> list[float]:
        """When each NodeClaim could turn Consolidatable at the earliest: its last pod event
        (else its creation) + its pool's consolidateAfter; none for a pool that never does."""
        out = []
        for c in claims:
            wait = after.get(view.labels(c).get(NODEPOOL_LABEL, ""))
            if wait is not None:
                out.append(timestamp(view.status(c).get("lastPodEventTime")
                                     or c["metadata"]["creationTimestamp"]) + wait)
        return out

    def scaled_out(self, manifests: list[Manifest]) -> float:
        """Wait until settled after scale-out; returns the seconds it took."""
        return self.settled(manifests)

    def scaled_in(self, manifests: list[Manifest]) -> float:
        """Wait until consolidation settled after a scale-in; returns the seconds it took."""
        return self.settled(manifests, disruption=True)

    def settled(self, manifests: list[Manifest], disruption: bool = False,
                timeout: float | None = None) -> float:
        """The one settle wait (clusters/karpenter/settled.py) over the bundle, with its
        workloads' missing pods (unless their controller was refused them) and undecided
        CapacityBuffers as reasons of its own; ``disruption``: Karpenter's disruption quiet
        too. Bounded by the provision timeout (``disruption``: the disruption timeout) unless
        ``timeout`` is given; returns the seconds it took."""
        rule = settled.Settling(disruption=disruption)
        after = {view.name(p): go_duration(
            ((p.get("spec") or {}).get("disruption") or {}).get("consolidateAfter") or "0s")
            for p in self.kube.list(NODEPOOL)} if disruption else {}

        def check() -> Observation:
            counts, pods = self._pods_by_workload()
            claims = self.kube.list(NODECLAIM)
            verdict = rule.look(settled.Look(
                claims, pods, settled.karpenter_decided(self.kube, pods),
                self._missing(manifests, counts) + self._buffers_undecided(),
                self._consolidatable(claims, after)))
            return Observation(verdict.ok, verdict.seen)

        if disruption:
            what = ("Karpenter to settle, disruption included (no NodeClaim launching or "
                    f"deleting, {SETTLE_MARGIN_S}s quiet after each pool's consolidateAfter)")
        else:
            what = ("Karpenter to settle after scale-out (every pod Running, or Pending with "
                    f"Karpenter's word on it; nothing launching; unchanged for {SETTLE_QUIET_S}s)")
        eventually(check, what=what, timeout=timeout if timeout is not None
                   else DEFAULTS.disruption if disruption else DEFAULTS.provision)
        return rule.elapsed()


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
