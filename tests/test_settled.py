"""The one settle rule (clusters/karpenter/settled.py) on fabricated looks, and its two
adapters (the suites' Expect.eventually_settled, check's Settler.settled) on faked clusters:
both must go through it, so a second policy cannot grow back. No cluster."""

from __future__ import annotations

import datetime as dt
import inspect
from types import SimpleNamespace

import pytest
from kubernetes import client

from karpenter_e2e.checks.settle import Settler
from karpenter_e2e.clusters.api.kube import NODECLAIM, NODEPOOL
from karpenter_e2e.clusters.api.waits import Timeouts
from karpenter_e2e.clusters.karpenter import settled
from karpenter_e2e.clusters.karpenter.clock import (
    POD_EVENT_DEDUPE_S,
    SETTLE_MARGIN_S,
    SETTLE_QUIET_S,
)
from karpenter_e2e.fixtures.expect import Expect

NS = "shop"


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def pod(name: str, phase: str = "Running", node: str | None = "node-a", deleting: bool = False,
        ns: str = NS) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace=ns,
                                     deletion_timestamp=dt.datetime.now() if deleting else None),
        spec=client.V1PodSpec(containers=[], node_name=node),
        status=client.V1PodStatus(phase=phase))


def claim(name: str, initialized: bool = True, deleting: bool = False,
          pool: str = "default") -> dict:
    meta = {"name": name, "labels": {"karpenter.sh/nodepool": pool},
            "creationTimestamp": "2026-12-06T10:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T10:05:00Z"
    conds = [{"type": "Initialized", "status": "True" if initialized else "Unknown"}]
    return {"metadata": meta, "status": {"conditions": conds}}


def rule(disruption: bool = False) -> tuple[settled.Settling, Clock]:
    clock = Clock()
    return settled.Settling(disruption=disruption, clock=clock), clock


def at(clock: Clock, rule: settled.Settling, seconds: float, look: settled.Look) -> settled.Verdict:
    clock.t = rule.started + seconds
    return rule.look(look)


SETTLED = settled.Look([claim("a")], [pod("p1")])


# ---- each condition that must block settling blocks it, however long it lasts --------------
@pytest.mark.parametrize("look, said", [
    (settled.Look([claim("a", initialized=False)], [pod("p1")]), "launching: a"),
    (settled.Look([claim("a", deleting=True)], [pod("p1")]), "deleting: a"),
    (settled.Look([claim("a")], [pod("p1", "Pending", node="node-a")]),
     "1 pods on a node, not started (p1)"),
    (settled.Look([claim("a")], [pod("p1", "Pending", node=None)]),
     "no word from Karpenter on 1 Pending pods (p1)"),
    (settled.Look([claim("a")], [pod("p1")], missing=["Deployment inflate has 1/3 pods"]),
     "Deployment inflate has 1/3 pods"),
], ids=["launching", "deleting", "bound-not-started", "undecided", "callers-reason"])
@pytest.mark.parametrize("disruption", [False, True], ids=["scale-out", "disruption"])
def test_each_blocking_condition_blocks_settling(look, said, disruption):
    r, clock = rule(disruption)
    for t in (0, SETTLE_QUIET_S, 10 * SETTLE_MARGIN_S):
        verdict = at(clock, r, t, look)
        assert not verdict.ok and said in verdict.seen, (t, verdict)


def test_what_does_not_block_settles_after_the_quiet():
    """A Pending pod Karpenter decided on, a terminating pod Karpenter never sees, and an
    Initialized NodeClaim; the pods left Pending are counted."""
    look = settled.Look([claim("a")], [pod("p1"), pod("p2", "Pending", node=None),
                                       pod("p3", "Pending", node=None, deleting=True)],
                        decided={(NS, "p2")})
    r, clock = rule()
    assert not at(clock, r, 0, look).ok
    assert not at(clock, r, SETTLE_QUIET_S - 0.1, look).ok
    verdict = at(clock, r, SETTLE_QUIET_S, look)
    assert verdict.ok and verdict.pending == 1, verdict


# ---- the quiet counts from the last change of anything the rule reads -----------------------
@pytest.mark.parametrize("before", [
    settled.Look([], [pod("p1")]),  # the NodeClaim appeared
    settled.Look([claim("a", initialized=False)], [pod("p1")]),  # it was Initialized
    settled.Look([claim("a")], [pod("p1", "Pending", node="node-a")]),  # the pod started
    settled.Look([claim("a")], [pod("p0")]),  # a pod was replaced
    settled.Look([claim("a")], [pod("p1")], missing=["Deployment inflate has 0/1 pods"]),
], ids=["claim-created", "claim-initialized", "pod-started", "pod-replaced", "reason-cleared"])
def test_the_quiet_counts_from_the_last_change(before):
    r, clock = rule()
    at(clock, r, 0, before)
    at(clock, r, 5, before)
    assert not at(clock, r, 7, SETTLED).ok  # changed at 7
    assert not at(clock, r, 7 + SETTLE_QUIET_S - 1, SETTLED).ok
    assert at(clock, r, 7 + SETTLE_QUIET_S, SETTLED).ok


def test_karpenters_word_on_a_pod_is_a_change():
    waiting = [claim("a")], [pod("p1", "Pending", node=None)]
    r, clock = rule()
    at(clock, r, 0, settled.Look(*waiting))
    at(clock, r, 20, settled.Look(*waiting, decided={(NS, "p1")}))
    assert not at(clock, r, 20 + SETTLE_QUIET_S - 1, settled.Look(*waiting, decided={(NS, "p1")})).ok
    assert at(clock, r, 20 + SETTLE_QUIET_S, settled.Look(*waiting, decided={(NS, "p1")})).ok


# ---- disruption mode: SETTLE_MARGIN_S from the later of its three moments --------------------
def test_disruption_waits_the_margin_after_the_pod_event_dedupe():
    r, clock = rule(disruption=True)
    end = POD_EVENT_DEDUPE_S + SETTLE_MARGIN_S
    at(clock, r, 0, SETTLED)
    assert not at(clock, r, end - 1, SETTLED).ok
    verdict = at(clock, r, end, SETTLED)
    assert verdict.ok, verdict


def test_disruption_waits_the_margin_after_the_last_change():
    r, clock = rule(disruption=True)
    at(clock, r, 0, settled.Look([claim("a"), claim("b")], [pod("p1")]))
    at(clock, r, 50, SETTLED)  # b gone
    assert not at(clock, r, 50 + SETTLE_MARGIN_S - 1, SETTLED).ok
    assert at(clock, r, 50 + SETTLE_MARGIN_S, SETTLED).ok


def test_disruption_waits_the_margin_after_a_claim_could_turn_consolidatable():
    r, clock = rule(disruption=True)
    look = settled.Look([claim("a"), claim("b")], [pod("p1")],
                        consolidatable=[r.started + 5, r.started + 60])
    at(clock, r, 0, look)
    assert not at(clock, r, 60 + SETTLE_MARGIN_S - 1, look).ok
    verdict = at(clock, r, 60 + SETTLE_MARGIN_S, look)
    assert verdict.ok and "2 NodeClaims" in verdict.seen, verdict


def test_disruption_with_no_nodeclaim_left_is_settled_after_the_first_quiet():
    """Nothing left to disrupt: no margin, no consolidateAfter, but still the quiet every
    settle needs (the provisioner may yet act on a pod it refused)."""
    r, clock = rule(disruption=True)
    empty = settled.Look([], [])
    at(clock, r, 0, empty)
    assert not at(clock, r, SETTLE_QUIET_S - 1, empty).ok
    assert at(clock, r, SETTLE_QUIET_S, empty).ok


def test_karpenters_word_is_read_once_per_namespace_where_a_pod_waits():
    asked = []

    def decided(ns):
        asked.append(ns)
        return {"p2"}

    kube = SimpleNamespace(pods_karpenter_decided=decided)
    assert settled.karpenter_decided(kube, [pod("p1")]) == set() and asked == []
    pods = [pod("p1", "Pending", node=None), pod("p2", "Pending", node=None),
            pod("p3", "Pending", node=None, ns="other"), pod("p4", "Pending", node="n")]
    assert settled.karpenter_decided(kube, pods) == {(NS, "p2"), ("other", "p2")}
    assert sorted(asked) == ["other", NS]


# ---- both adapters go through the one rule ---------------------------------------------------
class Spy(settled.Settling):
    """The rule as it is, with no quiet (the adapters are tested, not the wait), recording
    every look."""

    made: list[Spy] = []

    def __init__(self, disruption: bool = False, quiet: float = SETTLE_QUIET_S, **kw):
        super().__init__(disruption, 0, **kw)
        self.asked_quiet, self.looks = quiet, []
        Spy.made.append(self)

    def look(self, look):
        self.looks.append(look)
        return super().look(look)


@pytest.fixture
def spy(monkeypatch):
    Spy.made = []
    monkeypatch.setattr(settled, "Settling", Spy)
    return Spy.made


class FakeKube:
    def __init__(self, claims, pods, decided=()):
        self.claims, self.pod_list, self.decided = claims, pods, set(decided)

    def list(self, kind, selector=None, namespace=None):
        return {NODECLAIM: self.claims, NODEPOOL: []}.get(kind, [])

    def pods(self, namespace, selector=None):
        return [p for p in self.pod_list if p.metadata.namespace == namespace]

    def pods_karpenter_decided(self, namespace, reasons=None):
        return self.decided


def test_expect_eventually_settled_goes_through_the_one_rule(spy):
    kube = FakeKube([claim("a")], [pod("p1"), pod("p2", "Pending", node=None)], {"p2"})
    replicas = iter([3, 2])  # the Deployment's replicas: short of a pod at the first look
    inflate = SimpleNamespace(name="inflate", namespace=NS, pods=lambda: kube.pods(NS),
                              replicas=lambda: next(replicas, 2))
    expect = Expect(kube, diagnose=lambda: "", timeouts=Timeouts(poll=0.01))
    assert expect.eventually_settled(SimpleNamespace(name="default"), inflate) == 1
    [made] = spy
    assert not made.disruption and made.asked_quiet == SETTLE_QUIET_S
    first, last = made.looks[0], made.looks[-1]
    assert first.missing == ["Deployment inflate has 2/3 pods"] and not last.missing
    assert last.decided == {(NS, "p2")} and [view["metadata"]["name"] for view in last.claims] == ["a"]


@pytest.mark.parametrize("disruption", [False, True])
def test_check_settler_goes_through_the_one_rule(spy, disruption):
    kube = FakeKube([] if disruption else [claim("a")], [pod("p1", ns=NS)])
    bundle = SimpleNamespace(namespaces={NS}, of_kind=lambda kind: [])
    assert Settler(kube, bundle).settled([], disruption=disruption, timeout=5) >= 0
    [made] = spy
    assert made.disruption == disruption and made.asked_quiet == SETTLE_QUIET_S
    assert [p.metadata.name for p in made.looks[-1].pods] == ["p1"]


def test_neither_adapter_keeps_a_clock_or_a_quiet_of_its_own():
    """The quiet, its clock and the disruption since-rule live in the one rule; an adapter
    that reads a clock is growing a second policy."""
    for adapter in (Expect.eventually_settled, Settler.settled):
        source = inspect.getsource(adapter)
        assert "time." not in source and "POD_EVENT_DEDUPE_S" not in source, adapter
        assert "settled.Settling(" in source, adapter
