"""Upgrade gate, part 1: upgrading Karpenter itself disrupts nothing (run by `make upgrade-gate`)."""

import time

import pytest

from karpenter_e2e.fixtures.scenario import Observation, settings, step, view

pytestmark = pytest.mark.upgrade_gate


@pytest.mark.scenario("upgrade-gate")
@pytest.mark.covers("nodeclaim.nodepoolHash")
def test_upgrade_disrupts_no_node_and_no_pod(nodepool_factory, inflate_factory, expect, cluster,
                                             request, timings):
    """Workshop pool with 5 running pods; Karpenter FROM -> TO: same NodeClaims, nodes and pods."""
    upgrade_to = settings(request.config).upgrade_to
    window = settings(request.config).upgrade_window
    from_version = cluster.info.versions["karpenter"]
    with step(f"given Karpenter {from_version}, the default pool and 5 running pods"):
        pool = nodepool_factory("default")
        inflate = inflate_factory(replicas=5, node_selector=pool.template_labels)
        pods = {p.metadata.uid for p in expect.eventually_pods_running(inflate, 5)}
        claims = {view.meta(c)["uid"] for c in expect.nodeclaims(pool)}
        nodes = {n.metadata.uid for n in expect.nodes(pool)}

    with step(f"upgrade Karpenter to {upgrade_to}: new CRDs first, then the controller"):
        started = time.time()
        cluster.backend.upgrade_karpenter(upgrade_to)
        if settings(request.config).upgrade_disrupt:
            # The deliberately disruptive step: a NodePool template change shipped with the
            # upgrade. Karpenter must (rightly) drift the nodes, and the gate must say so.
            nodepool_factory.patch(pool, {"spec": {"template": {"metadata": {"labels": {
                "upgrade-gate/disruptive-step": "template-change"}}}}})
        upgraded = time.time() - started

    with step(f"expect the same NodeClaims, nodes and pods for {window:.0f}s, none drifted"):
        def undisturbed() -> Observation:
            now_claims = expect.nodeclaims(pool)
            drifted = [view.name(c) for c in now_claims
                       if (view.condition(c, "Drifted") or {}).get("status") == "True"]
            now = ({view.meta(c)["uid"] for c in now_claims},
                   {n.metadata.uid for n in expect.nodes(pool)},
                   {p.metadata.uid for p in expect.live_pods(inflate)
                    if p.status.phase == "Running"})
            changed = [what for what, before, after in zip(("NodeClaims", "nodes", "pods"),
                                                         (claims, nodes, pods), now, strict=True)
                       if before != after]
            ok = not changed and not drifted
            seen = "unchanged" if ok else (f"changed: {', '.join(changed) or 'none'}; "
                                           f"Drifted NodeClaims: {drifted or 'none'}")
            return Observation(ok, seen)

        expect.consistently(undisturbed, what=f"the upgrade to {upgrade_to} to disrupt nothing",
                            duration=window)
    timings.record(upgrade_s=round(upgraded, 1), undisturbed_window_s=window)
    timings.notes["upgrade"] = f"{from_version} -> {upgrade_to}"
