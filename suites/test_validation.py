"""Validation (Karpenter's regression suite): NodePools the API must reject, and minValues.

The rules are the NodePool CRD's own (OpenAPI schema and CEL), enforced by the API server:
each defective pool is submitted as a dry run and must come back 422 with the CRD's message.
The same pool without the defect is accepted first, so the rejection is the defect's alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.fixtures.scenario import (
    FAMILY,
    HOSTNAME,
    INSTANCE_TYPE,
    MIN_VALUES_RELAXED,
    NEXT_BATCH_S,
    NODEPOOL as NODEPOOL_LABEL,
    Observation,
    claim_requirement,
    describe_claims,
    narrow,
    require,
    requirements,
    step,
    view,
)


def add_requirement(req: dict) -> Callable[[dict], None]:
    return lambda spec: requirements(spec).append(req)


def set_disruption(key: str, value: str) -> Callable[[dict], None]:
    return lambda spec: spec["spec"]["disruption"].update({key: value})


def add_template_label(key: str, value: str) -> Callable[[dict], None]:
    return lambda spec: view.labels(spec["spec"]["template"]).update({key: value})


@dataclass(frozen=True)
class Defect:
    id: str
    what: str
    apply: Callable[[dict], None]
    message: str  # the CRD's words, as the API server returns them


DEFECTS = [
    Defect("hostname-requirement", "a requirement on kubernetes.io/hostname",
           add_requirement(require(HOSTNAME, "In", "a-node")),
           'label "kubernetes.io/hostname" is restricted'),
    Defect("nodepool-requirement", "a requirement on karpenter.sh/nodepool",
           add_requirement(require(NODEPOOL_LABEL, "In", "other")),
           'label "karpenter.sh/nodepool" is restricted'),
    Defect("nodepool-label", "a template label karpenter.sh/nodepool",
           add_template_label(NODEPOOL_LABEL, "other"),
           'label "karpenter.sh/nodepool" is restricted'),
    Defect("in-without-values", "an In requirement with no values",
           add_requirement(require(FAMILY, "In")),
           "requirements with operator 'In' must have a value defined"),
    Defect("negative-consolidate-after", "consolidateAfter -30s",
           set_disruption("consolidateAfter", "-30s"),
           "spec.disruption.consolidateAfter in body should match"),
    Defect("min-values-above-values", "minValues 3 over 2 values",
           add_requirement(require(FAMILY, "In", "c5", "m5", min_values=3)),
           "requirements with 'minValues' must have at least that many values specified in "
           "the 'values' field"),
    Defect("min-values-zero", "minValues 0",
           add_requirement(require(FAMILY, "In", "c5", "m5", min_values=0)),
           "minValues in body should be greater than or equal to 1"),
]


def rejection(submit: Callable[[], object]) -> ApiException | None:
    try:
        submit()
    except ApiException as exc:
        return exc
    return None


def api_message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body or "").get("message", exc.body)
    except (TypeError, ValueError):
        return str(exc.body)


@pytest.mark.scenario("validation")
@pytest.mark.covers("nodepool.crdRules")
def test_api_rejects_invalid_nodepools(nodepool_factory):
    """The default pool is accepted; with any one of the defects it is rejected (422) with the
    CRD's message. One test, one step per defect: each submission takes milliseconds, a test
    of its own seconds of set-up and teardown."""
    with step("given the default pool, accepted as it is (dry run)"):
        refused = rejection(partial(nodepool_factory.dry_run, "default"))
        assert refused is None, f"the valid default pool was rejected: {api_message(refused)}"

    wrong = []
    for defect in DEFECTS:
        with step(f"submit it with {defect.what}: expect a 422 saying: {defect.message}"):
            spec = nodepool_factory.spec("default")
            defect.apply(spec)
            refused = rejection(partial(nodepool_factory.dry_run, spec))
            if refused is None:
                wrong.append(f"{defect.id}: accepted")
            elif refused.status != 422 or defect.message not in api_message(refused):
                wrong.append(f"{defect.id}: rejected ({refused.status}) for another reason: "
                             f"{api_message(refused)!r}")
    assert not wrong, f"{len(wrong)} of {len(DEFECTS)} defective NodePools not rejected with " \
                      "the CRD's message: " + "; ".join(wrong)


MIN_TYPES = 3
# Two 1-CPU pods fit together only on an xlarge (a large keeps 1.9 CPU after KWOK's 100m
# kube-reserved), and the pool allows just two xlarges: packing both pods onto one NodeClaim
# would leave it 2 instance types, fewer than minValues.
MIN_VALUES_TYPES = ["c5.large", "m5.large", "r5.large", "c5.xlarge", "m5.xlarge"]
# The priciest of MIN_VALUES_TYPES: the open pod's node (the cheapest type) is never one.
NARROWED = "m5.xlarge"


@pytest.mark.scenario("min-values")
@pytest.mark.covers("nodepool.requirements.minValues", "options.MIN_VALUES_POLICY.Strict")
@pytest.mark.karpenter_settings(MIN_VALUES_POLICY="Strict")
@pytest.mark.modes("local", "kind", reason="the packing argument needs the fake catalogue's "
                   "sizes and KWOK's 100m kube-reserved")
def test_min_values_keeps_each_nodeclaim_flexible(nodepool_factory, inflate_factory, expect):
    """A pool allowing 5 types with minValues 3 on the instance type; 2 one-CPU pods: Karpenter
    gives each pod its own NodeClaim with at least 3 types rather than one NodeClaim whose
    only fits are the 2 xlarges. Then a pod selecting one of the types: Strict never relaxes
    minValues, so it gets no NodeClaim and stays Pending."""
    with step(f"given the default pool limited to {len(MIN_VALUES_TYPES)} types, "
              f"minValues {MIN_TYPES}, and a workload selecting {NARROWED}"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(INSTANCE_TYPE, "In", *MIN_VALUES_TYPES, min_values=MIN_TYPES))
        pool = nodepool_factory(spec)
        inflate = inflate_factory(replicas=0, node_selector=pool.template_labels)
        pinned = inflate_factory("pinned", replicas=0,
                                 node_selector={**pool.template_labels, INSTANCE_TYPE: NARROWED})

    with step("scale inflate to 2"):
        inflate.scale(2)
        pods = expect.eventually_pods_running(inflate, 2)

    with step(f"expect every NodeClaim to keep at least {MIN_TYPES} instance types"):
        nodes = list(expect.pods_on(pods).values())
        expect.eventually_nodes_launched_by_karpenter(pool, nodes)
        claims = expect.nodeclaims(pool)
        too_few = {view.name(c): claim_requirement(c, INSTANCE_TYPE).get("values")
                   for c in claims}
        too_few = {name: values for name, values in too_few.items()
                   if len(values or []) < MIN_TYPES}
        assert not too_few, f"NodeClaims with fewer than minValues {MIN_TYPES} instance " \
                            f"types: {too_few}"
        assert len(claims) == 2, f"{len(claims)} NodeClaims for 2 pods that fit one NodeClaim " \
                                 f"of {MIN_TYPES} types each: {describe_claims(claims)}"

    with step(f"scale the {NARROWED} workload to 1: expect it Pending and no NodeClaim "
              f"added for {NEXT_BATCH_S}s (Strict: no relaxing)"):
        before = {view.name(c) for c in claims}

        def no_claim_added() -> Observation:
            now = expect.nodeclaims(pool)
            return Observation({view.name(c) for c in now} == before,
                               f"NodeClaims {describe_claims(now)}")
        pinned.scale(1)
        expect.consistently_pods_pending(pinned, 1, NEXT_BATCH_S, also=no_claim_added)


@pytest.mark.scenario("min-values-best-effort")
@pytest.mark.covers("options.MIN_VALUES_POLICY.BestEffort")
@pytest.mark.karpenter_settings(MIN_VALUES_POLICY="BestEffort")
@pytest.mark.karpenter_feature("min-values-policy")
@pytest.mark.modes("local", "kind",
                   reason="the harness sets Karpenter's settings in local and kind mode")
def test_best_effort_relaxes_min_values_and_says_so(nodepool_factory, inflate_factory, expect):
    """MIN_VALUES_POLICY BestEffort; the 5-type pool with minValues 3: a pod that leaves the
    pool's types open gets a NodeClaim of at least 3 types that says minValues was not
    relaxed; then a pod selecting one of the types still gets a node, of that type, and its
    NodeClaim says minValues was relaxed (under Strict it stays Pending). One after the
    other: in one batch Karpenter may put both on the relaxed NodeClaim."""
    with step(f"given the default pool limited to {len(MIN_VALUES_TYPES)} types, "
              f"minValues {MIN_TYPES}, a workload selecting {NARROWED} and one not"):
        spec = nodepool_factory.spec("default")
        narrow(spec, require(INSTANCE_TYPE, "In", *MIN_VALUES_TYPES, min_values=MIN_TYPES))
        pool = nodepool_factory(spec)
        pinned = inflate_factory("pinned", replicas=0,
                                 node_selector={**pool.template_labels, INSTANCE_TYPE: NARROWED})
        open_ = inflate_factory("open", replicas=0, node_selector=pool.template_labels)

    with step(f"scale the open workload to 1: expect a NodeClaim of at least "
              f"{MIN_TYPES} types, not relaxed"):
        open_.scale(1)
        node = next(iter(expect.pods_on(expect.eventually_pods_running(open_, 1)).values()))
        claim = expect.eventually_nodeclaim_of(pool, node)
        kept = claim_requirement(claim, INSTANCE_TYPE)
        relaxed = (view.meta(claim).get("annotations") or {}).get(MIN_VALUES_RELAXED)
        assert len(kept.get("values") or []) >= MIN_TYPES and relaxed == "false", \
            f"{claim['metadata']['name']}: {kept}, {MIN_VALUES_RELAXED}={relaxed!r}"

    with step(f"scale the pinned workload to 1: expect a {NARROWED} whose NodeClaim "
              f"says minValues was relaxed"):
        pinned.scale(1)
        node = next(iter(expect.pods_on(expect.eventually_pods_running(pinned, 1)).values()))
        expect.eventually_nodes_launched_by_karpenter(pool, [node])
        assert node.metadata.labels[INSTANCE_TYPE] == NARROWED, node.metadata.labels[INSTANCE_TYPE]
        claim = expect.eventually_nodeclaim_of(pool, node)
        relaxed = (view.meta(claim).get("annotations") or {}).get(MIN_VALUES_RELAXED)
        assert relaxed == "true", \
            f"{claim['metadata']['name']} ({claim_requirement(claim, INSTANCE_TYPE)}): " \
            f"{MIN_VALUES_RELAXED}={relaxed!r}, expected 'true'"
