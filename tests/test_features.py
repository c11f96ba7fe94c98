"""The features-by-release table (clusters/karpenter/features.py): its entries, what it makes local
mode set per release (FEATURE_GATES, NodePools), the marker's skips, and each entry against
the released module trees that are in the Go module cache (offline: absent ones are skipped)."""

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.infra import releases
from karpenter_e2e.clusters.karpenter import features
from karpenter_e2e.fixtures.nodepools import for_version

SERVED = ["v1.0.8", "v1.1.5", "v1.5.5", "v1.6.4", "v1.9.0", "v1.10.0", "v1.11.0", "v1.11.1",
          "v1.11.2", "v1.12.0", "v1.12.1", "v1.13.0", "v1.14.0", "v1.14.1", "v1.14.3", "v1.15.0"]
ROOT = Path(__file__).resolve().parent.parent
HARNESS_GATES = ("NodeOverlay", "StaticCapacity", "NodeRepair")


def test_every_entry_names_a_served_release_and_its_evidence():
    for f in features.FEATURES.values():
        assert f.since in SERVED, f.name
        assert re.match(r"(pkg|kwok)/\S+\.(go|yaml): ", f.evidence), f.name
        assert f.gate is None or f.gate in features.GATES, f.name
    required = {"node-overlay", "capacity-buffer", "static-capacity", "node-limits",
                "do-not-disrupt-duration", "balanced-consolidation", "min-values-policy",
                "node-repair", "optional-consolidate-after", "budget-reasons",
                "termination-grace-period", "template-expire-after", "spot-to-spot-consolidation"}
    assert required <= set(features.FEATURES)


def test_a_release_before_the_feature_gets_the_reason():
    assert features.missing("v1.15.0", "node-overlay") is None
    assert features.missing("v1.9.0", "node-overlay") is None
    reason = features.missing("v1.6.4", "node-overlay")
    assert reason.startswith("Karpenter v1.6.4 lacks NodeOverlay (karpenter.sh/v1alpha1): it "
                             "appeared in v1.9.0 (first served release with "
                             "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml")
    assert features.missing("v1.0.8", "budget-reasons") is None
    with pytest.raises(features.UnknownFeature, match="unknown Karpenter feature 'overlay'"):
        features.missing("v1.15.0", "overlay")


@pytest.mark.parametrize("version,env", [
    ("v1.0.8", "SpotToSpotConsolidation=false"),
    ("v1.1.5", "SpotToSpotConsolidation=false,NodeRepair=true"),
    ("v1.5.5", "SpotToSpotConsolidation=false,NodeRepair=true,ReservedCapacity=false"),
    ("v1.12.1", "SpotToSpotConsolidation=false,NodeRepair=true,ReservedCapacity=true,"
                "NodeOverlay=true,StaticCapacity=true"),
    ("v1.15.0", "SpotToSpotConsolidation=false,NodeRepair=true,ReservedCapacity=true,"
                "NodeOverlay=true,StaticCapacity=true,CapacityBuffer=false,"
                "TerminateFirstDrift=false,TerminateFirstRepair=false,"
                "PodDeletionCostManagement=false"),
])
def test_feature_gates_name_every_gate_of_the_release_at_its_default_but_ours(version, env):
    assert features.feature_gates_env(version, HARNESS_GATES) == env


def test_local_mode_sets_and_reports_the_gates_of_the_release_it_runs(tmp_path, monkeypatch):
    from karpenter_e2e.clusters.local.cluster import LocalCluster
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    (tmp_path / "karpenter-versions.json").write_text(json.dumps(
        {"module": releases.MODULE, "fetched": time.time(), "versions": SERVED}))
    c = LocalCluster("features-test", "v1.1.5")
    assert c.gates_on("v1.1.5") == ("NodeRepair",)
    assert c.info().feature_gates == ("NodeRepair",)
    assert c.gates_on("v1.15.0") == HARNESS_GATES


def test_nodepools_are_rendered_valid_for_the_release():
    body = lambda: {"spec": {"disruption": {"consolidationPolicy": "WhenEmpty"}}}  # noqa: E731
    assert for_version(body(), "v1.14.3")["spec"]["disruption"]["consolidateAfter"] == "0s"
    assert "consolidateAfter" not in for_version(body(), "v1.15.0")["spec"]["disruption"]
    assert "consolidateAfter" not in for_version(body(), None)["spec"]["disruption"]  # unknown
    kept = {"spec": {"disruption": {"consolidateAfter": "30s"}}}
    assert for_version(kept, "v1.0.8")["spec"]["disruption"]["consolidateAfter"] == "30s"


def test_the_harness_label_stays_off_the_template_where_the_release_refuses_it():
    from karpenter_e2e.fixtures.isolation import TestScope
    from karpenter_e2e.fixtures.nodepools import NodeClassRef, load_spec, render_nodepool
    scope = TestScope.for_test("run1", "suites/test_x.py::test_y")
    ref = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "v1alpha1")
    old = render_nodepool(load_spec("default"), scope, ref, "nc", karpenter_version="v1.6.4")
    new = render_nodepool(load_spec("default"), scope, ref, "nc", karpenter_version="v1.9.0")
    assert "app.kubernetes.io/managed-by" not in old["spec"]["template"]["metadata"]["labels"]
    assert old["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "karpenter-e2e"
    assert new["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "karpenter-e2e"
    for body in (old, new):  # the run and test labels, by which everything is found, stay
        assert scope.labels.items() - {("app.kubernetes.io/managed-by", "karpenter-e2e")} <= \
            body["spec"]["template"]["metadata"]["labels"].items()


def test_every_shipped_nodepool_names_consolidate_after():
    for path in (ROOT / "fixtures" / "defaults").glob("nodepool-*.yaml"):
        disruption = yaml.safe_load(path.read_text())["spec"].get("disruption")
        assert disruption is None or "consolidateAfter" in disruption, path.name


# ---- the marker ------------------------------------------------------------------------------
SUITE = '''
import pytest

@pytest.mark.scenario("overlay")
@pytest.mark.karpenter_feature("node-overlay")
def test_overlay():
    pass

@pytest.mark.scenario("plain")
def test_plain():
    pass

@pytest.mark.scenario("old")
@pytest.mark.karpenter_feature("budget-reasons")
def test_old_feature():
    pass
'''


@pytest.fixture
def suite(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "karpenter-versions.json").write_text(json.dumps(
        {"module": releases.MODULE, "fetched": time.time(), "versions": SERVED}))
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_a_scenario_is_skipped_on_a_release_without_its_feature(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "-rs", "--karpenter-version", "v1.6.4",
                             "--karpenter-cluster-name", "features-marker-test")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*Karpenter v1.6.4 lacks NodeOverlay*appeared in v1.9.0*"])


def test_nothing_is_skipped_on_a_release_with_the_feature(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--karpenter-version", "v1.9.0",
                             "--karpenter-cluster-name", "features-marker-test")
    result.assert_outcomes(passed=3)


def test_an_unknown_feature_name_is_a_usage_error(suite):
    suite.makepyfile(test_bad='''
import pytest

@pytest.mark.karpenter_feature("no-such-thing")
def test_x():
    pass
''')
    result = suite.runpytest("-p", "no:cacheprovider", "--karpenter-cluster-name", "features-marker-test")
    assert result.ret == 4
    assert "unknown Karpenter feature 'no-such-thing'" in result.stdout.str() + result.stderr.str()


def test_an_unserved_version_stops_the_run_before_any_test(suite):
    result = suite.runpytest("-p", "no:cacheprovider", "--karpenter-version", "v1.12.2",
                             "--karpenter-cluster-name", "features-marker-test")
    assert result.ret == 4
    assert "nearest served: v1.12.1 and v1.13.0" in result.stdout.str() + result.stderr.str()


# ---- each entry against the module trees -----------------------------------------------------
def module(version: str) -> Path:
    """A release's module tree, if the Go module cache has it (this test never downloads)."""
    cache = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    return cache / f"sigs.k8s.io/karpenter@{version}"


def v1_nodepool(tree: Path) -> dict:
    doc = yaml.safe_load((tree / features.NODEPOOL_CRD).read_text())
    return next(v for v in doc["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def prop(schema: dict, *path: str):
    for p in path:
        schema = (schema or {}).get("properties", {}).get(p)
    return schema


def text(tree: Path, rel: str) -> str:
    p = tree / rel
    return p.read_text() if p.exists() else ""


PROBES = {
    "node-overlay": lambda t: (t / "pkg/apis/crds/karpenter.sh_nodeoverlays.yaml").exists(),
    "capacity-buffer": lambda t: (t / "pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml").exists(),
    "static-capacity": lambda t: prop(v1_nodepool(t), "spec", "replicas") is not None,
    "node-limits": lambda t: '"nodes"' in text(t, "pkg/controllers/nodepool/counter/controller.go")
    or "resources.Node" in text(t, "pkg/controllers/nodepool/counter/controller.go"),
    "do-not-disrupt-duration": lambda t: "func parseDoNotDisrupt" in text(t, "pkg/utils/pod/scheduling.go"),
    "balanced-consolidation": lambda t: "Balanced" in (prop(v1_nodepool(t), "spec", "disruption",
                                                            "consolidationPolicy") or {}).get("enum", []),
    "requirement-gte-lte": lambda t: "Gte" in prop(
        v1_nodepool(t), "spec", "template", "spec", "requirements")["items"]["properties"]
    ["operator"].get("enum", []),
    "min-values-policy": lambda t: "MIN_VALUES_POLICY" in text(t, features.OPTIONS),
    "spread-node-taints-policy": lambda t: "NodeInclusionPolicyIgnore" in text(
        t, "pkg/controllers/provisioning/scheduling/topologydomaingroup.go"),
    "scheduler-config": lambda t: "SCHEDULER_CONFIG" in text(t, features.OPTIONS),
    "preference-policy": lambda t: "PREFERENCE_POLICY" in text(t, features.OPTIONS),
    "spread-match-label-keys": lambda t: "MatchLabelKeys" in text(
        t, "pkg/controllers/provisioning/scheduling/topology.go"),
    "node-repair": lambda t: '"NodeRepair' in text(t, features.OPTIONS),
    "kwok-unhealthy-fault": lambda t: "KWOKUnhealthyCondition" in text(
        t, "kwok/cloudprovider/cloudprovider.go"),
    "optional-consolidate-after": lambda t: "consolidateAfter" not in (
        prop(v1_nodepool(t), "spec", "disruption").get("required") or []),
    "kwok-offering-labels": lambda t: "WellKnownLabels.Insert(requirement.Key)" in
    text(t, "kwok/cloudprovider/helpers.go"),
    "template-kubernetes-io-labels": lambda t: not any(
        r["message"] == 'label domain "kubernetes.io" is restricted'
        for r in prop(v1_nodepool(t), "spec", "template", "metadata", "labels")
        .get("x-kubernetes-validations", [])),
    "budget-reasons": lambda t: prop(v1_nodepool(t), "spec", "disruption", "budgets")["items"]
    ["properties"].get("reasons") is not None,
    "termination-grace-period": lambda t: prop(v1_nodepool(t), "spec", "template", "spec",
                                               "terminationGracePeriod") is not None,
    "template-expire-after": lambda t: prop(v1_nodepool(t), "spec", "template", "spec",
                                            "expireAfter") is not None,
    "spot-to-spot-consolidation": lambda t: '"SpotToSpotConsolidation' in text(t, features.OPTIONS),
    "pod-deletion-cost": lambda t: (t / "pkg/controllers/pod/deletioncost/controller.go").exists(),
    "spread-node-affinity-policy": lambda t: "tsc.NodeAffinityPolicy" in text(
        t, "pkg/controllers/provisioning/scheduling/topology.go"),
    "terminate-first-repair": lambda t: "FeatureGates.TerminateFirstRepair" in text(
        t, "pkg/controllers/disruption/repair.go"),
    "terminate-first-drift": lambda t: "func (d *StaticDrift) unreplaceableCommands" in text(
        t, "pkg/controllers/disruption/staticdrift.go"),
}


def test_every_feature_has_a_probe():
    assert set(PROBES) == set(features.FEATURES)


@pytest.mark.parametrize("name", sorted(features.FEATURES))
def test_the_feature_is_in_its_release_and_not_in_the_one_before(name):
    f = features.FEATURES[name]
    since = SERVED.index(f.since)
    trees = [(v, module(v)) for v in SERVED if module(v).is_dir()]
    if len(trees) < 2:
        pytest.skip("the Go module cache holds too few Karpenter releases (go mod download "
                    "sigs.k8s.io/karpenter@<version>)")
    for v, tree in trees:
        assert PROBES[name](tree) == (SERVED.index(v) >= since), \
            f"{name}: {v} {'lacks' if SERVED.index(v) >= since else 'already has'} it"


@pytest.mark.parametrize("version", SERVED)
def test_the_gate_table_matches_the_releases_options(version):
    tree = module(version)
    if not tree.is_dir():
        pytest.skip(f"{version} is not in the Go module cache")
    options = text(tree, features.OPTIONS)
    m = re.search(r'WithDefaultString\("FEATURE_GATES", "([^"]*)"\)', options)
    if m:
        upstream = dict(kv.split("=") for kv in m[1].split(","))
    else:  # v1.15.0: FeatureGate{Name: ..., Default: ...} declarations
        upstream = dict(re.findall(r'Name:\s+"(\w+)",\s+Default:\s+(true|false)', options))
    ours = {g: str(features.gate_default(version, g)).lower() for g in features.gates_known(version)}
    assert ours == upstream, version


def test_releases_without_offering_labels_get_them_backported():
    """v1.0.8 and v1.1.5's KWOK provider puts only an offering's zone and capacity type on a
    node; the harness's patch gives it v1.5.5's offering labels, and applies to both."""
    from karpenter_e2e.clusters.infra import build
    patch = build.OFFERING_LABELS_PATCH.read_text()
    new = module("v1.5.5")
    if new.is_dir():
        added = [ln[1:].strip() for ln in patch.splitlines()
                 if ln.startswith("+") and not ln.startswith("+++")]
        upstream = text(new, "kwok/cloudprovider/helpers.go") + text(
            new, "kwok/cloudprovider/cloudprovider.go")
        assert all(ln in upstream for ln in added if ln), "the backport is v1.5.5's own code"
    for version in ("v1.0.8", "v1.1.5"):
        tree = module(version)
        if not tree.is_dir():
            continue
        proc = subprocess.run(["git", "apply", "--check",
                               str(build.OFFERING_LABELS_PATCH)], cwd=tree,
                              capture_output=True, text=True)
        assert proc.returncode == 0, (version, proc.stderr)


@pytest.mark.parametrize("version,want", [
    ("v1.0.8", "pkg/apis/crds"),   # its KWOK chart converts v1beta1 through a webhook
    ("v1.1.5", "pkg/apis/crds"),   # its KWOK chart refuses the kwoknodeclass label core writes
    ("v1.5.5", "kwok/charts/crds"), ("v1.15.0", "kwok/charts/crds"),
])
def test_each_release_gets_karpenter_crds_that_can_hold_its_own_nodeclaims(version, want):
    from karpenter_e2e.clusters.local.cluster import _core_crds
    tree = module(version)
    if not tree.is_dir():
        pytest.skip(f"the Go module cache lacks sigs.k8s.io/karpenter@{version}")
    assert _core_crds(tree) == want
