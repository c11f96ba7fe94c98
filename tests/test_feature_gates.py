"""Local mode's Karpenter feature gates: what it sets, what the suites see, and that both
pinned versions know the gates (an unknown gate would silently do nothing)."""

import pytest

from karpenter_e2e.clusters.awssim.cluster import AwsSimCluster
from karpenter_e2e.clusters.infra import build, versions
from karpenter_e2e.clusters.local.cluster import FEATURE_GATES, LocalCluster


def test_local_mode_turns_on_its_gates_and_tells_the_suites():
    cluster = LocalCluster("feature-gates-test")
    gates = dict(kv.split("=") for kv in cluster._karpenter_env()["FEATURE_GATES"].split(","))
    assert {g: gates[g] for g in FEATURE_GATES} == {g: "true" for g in FEATURE_GATES}
    # every other gate of the release named at its own default (clusters/karpenter/features.py)
    assert gates["ReservedCapacity"] == "true" and gates["SpotToSpotConsolidation"] == "false"
    assert cluster.info().feature_gates == FEATURE_GATES


def test_aws_sim_runs_the_provider_with_its_defaults():
    assert AwsSimCluster("feature-gates-test-aws").info().feature_gates == ()


@pytest.mark.parametrize("version", versions.KARPENTER_VERSIONS)
def test_both_pinned_versions_know_the_gates(version):
    module = build.download_karpenter(version)
    options = (module / "pkg/operator/options/options.go").read_text()
    for gate in FEATURE_GATES:
        assert f'"{gate}"' in options, f"Karpenter {version} has no {gate} feature gate"
