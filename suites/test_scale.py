"""Scale (Karpenter's basic performance case): 1000 pods out, then back in."""

import time
from collections import Counter

import allure
import pytest

from fixtures.expect import INSTANCE_TYPE, pod_phase
from fixtures.waits import Observation

pytestmark = pytest.mark.scale
# Budgets, overridable like upstream's KARPENTER_PERF_THRESHOLDS (--perf-thresholds or the
# KARPENTER_E2E_PERF_THRESHOLDS variable, e.g. "scale_out=90,scale_in=1500"). scale_out is
# Karpenter's KWOK perf threshold for this case (test/suites/perf); scale_in is the measured
# 949.6s (README) with a quarter's margin.
DEFAULT_THRESHOLDS = {"scale_out": 120.0, "scale_in": 1200.0}


@pytest.mark.scenario("scale")
def test_thousand_pods_scale_out_and_back_in(nodepool_factory, inflate_factory,
                                            expect, cluster, timings, perf_thresholds):
    """500 x 900m/3100Mi + 500 x 3500m/28Gi: time to all Running, nodes used, scale-in time."""
    budget = {**DEFAULT_THRESHOLDS, **perf_thresholds}
    with allure.step("given a wide pool and two workloads at 0"):
        pool = nodepool_factory("scale")
        small = inflate_factory("small", replicas=0, node_selector=pool.template_labels,
                                cpu="900m", memory="3100Mi")
        large = inflate_factory("large", replicas=0, node_selector=pool.template_labels,
                                cpu="3500m", memory="28Gi")

    def running(count: int) -> Observation:
        pods = small.pods() + large.pods()
        phases = Counter(pod_phase(p) for p in pods)
        return Observation(phases.get("Running", 0) == count == len(pods),
                           f"{dict(phases)}; {len(expect.nodes(pool))} nodes", phases)

    with allure.step("scale both to 500"):
        started = time.time()
        small.scale(500)
        large.scale(500)
        expect.eventually(lambda: running(1000), "1000 Running pods", timeout=900, poll=5)
        scale_out = time.time() - started
        timings.record(scale_out_s=round(scale_out, 1))
        nodes = expect.nodes(pool)
        types = Counter(n.metadata.labels[INSTANCE_TYPE] for n in nodes)

    with allure.step("scale both to 0 and wait for the nodes to be consolidated away"):
        started = time.time()
        small.scale(0)
        large.scale(0)
        expect.eventually(lambda: Observation(not expect.nodes(pool),
                                              f"{len(expect.nodes(pool))} nodes left"),
                          "every node of the pool to be consolidated",
                          timeout=budget["scale_in"] + 60, poll=5)
        scale_in = time.time() - started

    timings.record(scale_out_threshold_s=budget["scale_out"], nodes=len(nodes),
                   scale_in_s=round(scale_in, 1), scale_in_threshold_s=budget["scale_in"],
                   karpenter_peak_rss_mib=cluster.backend.karpenter_peak_memory_mib() or -1)
    timings.notes["types"] = ", ".join(f"{t}×{n}" for t, n in types.most_common())

    with allure.step("expect both within their budgets"):
        # Polled every 5s, so each figure is up to 5s late.
        assert scale_out <= budget["scale_out"], \
            f"1000 pods Running after {scale_out:.0f}s, over the {budget['scale_out']:.0f}s budget"
        assert scale_in <= budget["scale_in"], \
            f"nodes consolidated after {scale_in:.0f}s, over the {budget['scale_in']:.0f}s budget"
