"""Karpenter's settings for a run: read from a release's options files, checked, and dealt."""

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.karpenter import settings as ks
from karpenter_e2e.runners import lanes

OPTIONS_GO = '''
const (
	MinValuesPolicyStrict     MinValuesPolicy = "Strict"
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)
func (o *Options) AddFlags(fs *FlagSet) {
	fs.StringVar(&o.LogLevel, "log-level", env.WithDefaultString("LOG_LEVEL", "info"), "...")
	fs.DurationVar(&o.BatchMaxDuration, "batch-max-duration",
		env.WithDefaultDuration("BATCH_MAX_DURATION", 10*time.Second), "...")
	fs.StringVar(&o.minValuesPolicyRaw, "min-values-policy",
		env.WithDefaultString("MIN_VALUES_POLICY", string(MinValuesPolicyStrict)), "...")
	fs.IntVar(&o.MetricsPort, "metrics-port", env.WithDefaultInt("METRICS_PORT", 8080), "...")
	fs.StringVar(&o.FeatureGates.inputStr, "feature-gates",
		env.WithDefaultString("FEATURE_GATES", featureGatesDefault()), featureGatesHelp())
}
'''


@pytest.fixture
def release(tmp_path):
    opts = tmp_path / "pkg" / "operator" / "options"
    opts.mkdir(parents=True)
    (opts / "options.go").write_text(OPTIONS_GO)
    return ks.known("v1.15.0", tmp_path)


def test_a_release_s_options_and_defaults_come_from_its_options_file(release):
    assert release.options["MIN_VALUES_POLICY"] == "Strict"
    assert release.options["BATCH_MAX_DURATION"] == "10s"
    assert release.options["LOG_LEVEL"] == "info"
    assert release.options["FEATURE_GATES"] is None  # not a literal
    assert release.default("CapacityBuffer") == "false"
    assert "METRICS_PORT" not in release.keys() and "FEATURE_GATES" not in release.keys()


def test_unknown_reserved_and_malformed_settings_are_refused_with_what_is_known(release):
    with pytest.raises(ClusterError, match="has no such option or feature gate; it reads "
                                           "BATCH_MAX_DURATION, LOG_LEVEL, MIN_VALUES_POLICY"):
        ks.check({"MIN_VALUE_POLICY": "BestEffort"}, release)
    with pytest.raises(ClusterError, match="the harness sets METRICS_PORT itself"):
        ks.check({"METRICS_PORT": "1"}, release)
    with pytest.raises(ClusterError, match="a feature gate is true or false"):
        ks.check({"CapacityBuffer": "on"}, release)
    with pytest.raises(ClusterError, match="expected KEY=VALUE"):
        ks.parse(["MIN_VALUES_POLICY"])
    ks.check({"MIN_VALUES_POLICY": "BestEffort", "CapacityBuffer": "true"}, release)


def test_settings_split_into_environment_and_gates(release):
    env, on, off = ks.split({"MIN_VALUES_POLICY": "BestEffort", "CapacityBuffer": "true",
                             "ReservedCapacity": "false"}, release.gates)
    assert env == {"MIN_VALUES_POLICY": "BestEffort"}
    assert on == ("CapacityBuffer",) and off == ("ReservedCapacity",)


def test_a_wanted_setting_matches_an_explicit_one_or_the_release_default(release):
    assert ks.mismatches({"MIN_VALUES_POLICY": "Strict"}, {}, release) == []
    assert ks.mismatches({"MIN_VALUES_POLICY": "BestEffort"}, {}, release) == \
        ["MIN_VALUES_POLICY=BestEffort (this Karpenter: Strict)"]
    assert ks.mismatches({"MIN_VALUES_POLICY": "BestEffort"},
                         {"MIN_VALUES_POLICY": "BestEffort"}, release) == []


def test_tests_needing_settings_get_a_serial_lane_of_their_own_per_set():
    tests = [lanes.PlannedTest("a", 50), lanes.PlannedTest("b", 40),
             lanes.PlannedTest("c", 30, settings=("MIN_VALUES_POLICY=BestEffort",)),
             lanes.PlannedTest("d", 20, settings=("MIN_VALUES_POLICY=BestEffort",)),
             lanes.PlannedTest("e", 10, settings=("CapacityBuffer=true",))]
    plan = lanes.deal(tests, clusters=4, workers=2)
    special = {lane.settings: [t.nodeid for t in lane.tests] for lane in plan if lane.settings}
    assert special == {("MIN_VALUES_POLICY=BestEffort",): ["c", "d"],
                       ("CapacityBuffer=true",): ["e"]}
    assert all(lane.serial for lane in plan if lane.settings)
    assert sorted(t.nodeid for lane in plan if not lane.settings for t in lane.tests) == ["a", "b"]
    assert [lane.index for lane in plan] == list(range(len(plan)))


def test_a_local_cluster_refuses_an_unknown_setting_before_anything_starts():
    from karpenter_e2e.clusters import backends
    backend = backends.create(backends.ClusterOptions(cluster_name="settings-refused",
                                                      karpenter_setting=("MIN_VALUE_POLICY=x",)))
    with pytest.raises(ClusterError, match="MIN_VALUE_POLICY: Karpenter v1.15.0 has no such "
                                           "option or feature gate; it reads .*MIN_VALUES_POLICY"):
        backend.up()
    assert not backend.run_dir.exists()


def test_settings_reach_karpenter_s_environment_and_nothing_of_the_shell(monkeypatch):
    from karpenter_e2e.clusters.local.cluster import LocalCluster, _base_env
    monkeypatch.setenv("MIN_VALUES_POLICY", "BestEffort")  # a stray variable in the shell
    monkeypatch.delenv("KARPENTER_LOG_LEVEL", raising=False)
    assert _base_env()["LOG_LEVEL"] == "debug"  # Karpenter's decisions, kept with a red run
    monkeypatch.setenv("KARPENTER_LOG_LEVEL", "info")
    assert "MIN_VALUES_POLICY" not in _base_env() and _base_env()["LOG_LEVEL"] == "info"
    cluster = LocalCluster("settings-env", settings={"BATCH_IDLE_DURATION": "2s",
                                                    "CapacityBuffer": "true",
                                                    "ReservedCapacity": "false"})
    env = cluster._karpenter_env()
    gates = dict(kv.split("=") for kv in env["FEATURE_GATES"].split(","))
    assert env["BATCH_IDLE_DURATION"] == "2s"
    assert gates["CapacityBuffer"] == "true" and gates["ReservedCapacity"] == "false"
    assert "CapacityBuffer" in cluster.info().feature_gates
    assert cluster.info().karpenter_settings["BATCH_IDLE_DURATION"] == "2s"


def test_eks_refuses_settings_kind_takes_them():
    from karpenter_e2e.clusters import backends
    with pytest.raises(ClusterError, match="--karpenter-setting is for local, aws-sim and kind"):
        backends.create(backends.ClusterOptions(cluster="eks",
                                                karpenter_setting=("LOG_LEVEL=debug",)))
    backends.create(backends.ClusterOptions(cluster="kind", karpenter_setting=("LOG_LEVEL=debug",)))


def test_aws_sim_takes_the_core_s_and_the_provider_s_options(monkeypatch):
    from karpenter_e2e.clusters import backends
    sim = backends.create(backends.ClusterOptions(
        cluster="aws-sim", karpenter_setting=("RESERVED_ENIS=1", "BATCH_IDLE_DURATION=2s",
                                              "SpotToSpotConsolidation=true")))
    sim.check_options()
    monkeypatch.setattr(sim, "aws_endpoint", lambda: "http://127.0.0.1:1")
    monkeypatch.setattr(sim, "_apiserver_url", lambda: "https://127.0.0.1:2")
    env = sim._karpenter_env()
    gates = dict(kv.split("=") for kv in env["FEATURE_GATES"].split(","))
    assert env["RESERVED_ENIS"] == "1" and env["BATCH_IDLE_DURATION"] == "2s"
    assert gates["SpotToSpotConsolidation"] == "true"
    bad = backends.create(backends.ClusterOptions(cluster="aws-sim",
                                                  karpenter_setting=("NO_SUCH=1",)))
    with pytest.raises(ClusterError, match="NO_SUCH: Karpenter v1.15.0 has no such option .*"
                                           "RESERVED_ENIS"):
        bad.check_options()


def test_aws_sim_reads_no_core_module_for_settings(monkeypatch):
    """A provider release's own version need not be a served core release (v1.13.1's core is
    v1.13.0): aws-sim's option check must not download sigs.k8s.io/karpenter at that version."""
    from karpenter_e2e.clusters.awssim.cluster import AwsSimCluster
    from karpenter_e2e.clusters.infra import build

    def refuse(version):
        raise AssertionError(f"downloaded core {version}")

    monkeypatch.setattr(build, "download_karpenter", refuse)
    AwsSimCluster("settings-awssim").check_options()


@pytest.mark.parametrize("version", ["v1.5.5", "v1.13.0"])
def test_settings_markers_plan_on_releases_without_the_option_or_gate(version):
    """min-values declares MIN_VALUES_POLICY=Strict, which v1.5.5 does not read (it is strict
    anyway); capacity-buffer's gate is unknown before v1.14.0, where the feature marker skips
    it. Neither may stop the plan; BestEffort gets its lane only where it exists."""
    import subprocess
    import sys
    from pathlib import Path
    proc = subprocess.run(
        [sys.executable, "-m", "karpenter_e2e", "e2e", "--dry-run", "--",
         "--karpenter-version", version, "--karpenter-scenario",
         "min-values,min-values-best-effort,capacity-buffer"],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("MIN_VALUES_POLICY=BestEffort" in proc.stdout) == (version == "v1.13.0"), proc.stdout
    assert "CapacityBuffer=true" not in proc.stdout
