"""The plugin's options in someone else's project (issue #22): every pytest option it
registers begins with --karpenter- (clusters/flags.py), and so does its dest, so none can
clash with another Kubernetes pytest plugin's. No cluster is started."""

import pytest

from karpenter_e2e.clusters.flags import cli_flag, plugin_dest, plugin_flag
from karpenter_e2e.fixtures.settings import settings

# What pytest-kind (22.11.1) and pytest-helm-charts (1.3.5) register; each of the first
# three once stopped a run with "argparse.ArgumentError: conflicting option string".
NEIGHBOURS = {"--cluster-name", "--keep-cluster", "--kubeconfig", "--kind-bin", "--kind-image",
              "--kind-kubectl-bin"}


def registered(pytester: pytest.Pytester, *args: str) -> set[str]:
    """Every option string of the run's parser (pytest has no public listing of them)."""
    parser = pytester.parseconfig(*args)._parser
    return {name for group in [parser._anonymous, *parser._groups]
            for option in group.options for name in option.names()}


def test_every_plugin_option_begins_with_the_prefix(pytester):
    ours = registered(pytester) - registered(pytester, "-p", "no:karpenter_e2e")
    assert {"--karpenter-cluster", "--karpenter-cluster-name", "--karpenter-scenario",
            "--karpenter-reports-dir", "--karpenter-outcomes", "--karpenter-e2e-plan"} <= ours
    unprefixed = sorted(n for n in ours if not n.startswith("--karpenter-"))
    assert not unprefixed, f"plugin options without the --karpenter- prefix: {unprefixed}"
    assert not ours & NEIGHBOURS


def test_the_options_have_prefixed_dests_and_short_settings(pytester):
    config = pytester.parseconfig("--karpenter-cluster-name", "x", "--karpenter-keep-cluster",
                                  "--karpenter-version", "v1.12.1", "--karpenter-timeouts",
                                  "provision=60", "--karpenter-perf-pods", "3")
    assert config.getoption("karpenter_cluster_name") == "x"
    assert {d for d in vars(config.option) if d.startswith("karpenter_")} >= {
        "karpenter_cluster", "karpenter_keep_cluster", "karpenter_kubeconfig"}
    assert not {"cluster_name", "keep_cluster", "kubeconfig"} & set(vars(config.option))
    opts = settings(config)
    assert opts.cluster_name == "x" and opts.keep_cluster and opts.karpenter_version == "v1.12.1"
    assert opts.timeouts == "provision=60" and opts.perf_pods == 3


# What pytest-kind's pytest_addoption does (no dest given: argparse derives cluster_name, ...).
NEIGHBOUR = """
def pytest_addoption(parser):
    group = parser.getgroup("kind")
    group.addoption("--cluster-name", default="pytest-kind")
    group.addoption("--keep-cluster", action="store_true")
    group.addoption("--kubeconfig", default=None)
"""


def test_a_neighbour_with_the_old_names_keeps_its_values_and_ours_ours(pytester):
    pytester.makeconftest(NEIGHBOUR)
    config = pytester.parseconfig("--cluster-name", "theirs", "--kubeconfig", "/their/kc",
                                  "--karpenter-cluster-name", "ours")
    assert config.getoption("cluster_name") == "theirs" and config.option.kubeconfig == "/their/kc"
    opts = settings(config)
    assert opts.cluster_name == "ours" and opts.kubeconfig is None and not opts.keep_cluster


def test_the_old_names_are_gone(pytester):
    """No unprefixed aliases: they would bring the clash back."""
    result = pytester.runpytest("--cluster-name", "x")
    assert result.ret == 4
    assert "unrecognized arguments: --cluster-name" in result.stderr.str()


def test_one_mapping_for_flags():
    assert plugin_flag("cluster_name") == plugin_flag("cluster-name") == "--karpenter-cluster-name"
    assert plugin_flag("karpenter_version") == "--karpenter-version"
    assert plugin_flag("karpenter-e2e-plan") == "--karpenter-e2e-plan"
    assert plugin_dest("cluster-name") == "karpenter_cluster_name"
    assert plugin_dest("karpenter_version") == "karpenter_version"
    assert cli_flag("cluster_name") == "--cluster-name"  # the harness's own command lines


def test_timeouts_are_the_runs_own_and_no_module_global_changes(pytester):
    """--karpenter-timeouts goes into the run's config.stash; the library's defaults stay."""
    from dataclasses import FrozenInstanceError

    from karpenter_e2e.clusters.api import waits
    from karpenter_e2e.fixtures.settings import timeouts
    tuned = pytester.parseconfig("--karpenter-timeouts", "provision=7,cleanup=9.5")
    plain = pytester.parseconfig()
    assert (timeouts(tuned).provision, timeouts(tuned).cleanup) == (7, 9.5)
    assert timeouts(plain) == waits.DEFAULTS == waits.Timeouts()
    assert not hasattr(waits, "TIMEOUTS")
    with pytest.raises(FrozenInstanceError):
        waits.DEFAULTS.provision = 1  # type: ignore[misc]
    bad = pytester.parseconfig("--karpenter-timeouts", "provison=7")
    with pytest.raises(pytest.UsageError, match="--karpenter-timeouts 'provison=7': expected "
                                                "KIND=SECONDS with KIND one of api, provision"):
        timeouts(bad)


def test_a_wait_uses_the_timeouts_it_is_given():
    from karpenter_e2e.clusters.api import waits
    short = waits.Timeouts.parse("provision=0.3,poll=0.1")
    with pytest.raises(waits.WaitTimeout, match="timed out after 0s"):
        waits.eventually(lambda: waits.Observation(False, "no"), what="x", timeouts=short)


def test_cluster_options_are_the_registered_options_with_their_defaults():
    """backends.create reads ClusterOptions; each field is an option add_options registers,
    with the same default, so neither list can drift from the other."""
    import argparse
    from dataclasses import fields

    from karpenter_e2e.clusters import backends
    from karpenter_e2e.clusters.flags import adder
    p = argparse.ArgumentParser()
    backends.add_options(adder(p.add_argument))
    registered = vars(p.parse_args([]))
    assert {f.name for f in fields(backends.ClusterOptions)} == set(registered)
    assert backends.ClusterOptions.of(argparse.Namespace(**registered)) == backends.ClusterOptions()


def test_cluster_options_take_what_a_namespace_has_and_default_the_rest():
    from types import SimpleNamespace

    from karpenter_e2e.clusters.backends import ClusterOptions
    opts = ClusterOptions.of(SimpleNamespace(cluster="kind", cluster_name="x", unrelated=1))
    assert (opts.cluster, opts.cluster_name, opts.kind_image) == ("kind", "x", None)
