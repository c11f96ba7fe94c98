"""aws-sim mode runs any AWS provider release whose core is served: the core paired from the
release's go.mod, the refusal of the others (with the runnable releases named), and the
wrapper module generated from upstream's go.mod, with a replace for each refused requirement
the build needs. Offline: go.mod texts and `go mod tidy` output are fixtures, the proxy's lists
are functions."""

import json

import pytest

from karpenter_e2e.clusters.awssim import build as awsbuild, provider_releases as pr
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions

# The shape of upstream's go.mod: v1.12.0 (a module replace of its own), v1.13.1 (a patch
# release on an older core), v1.14.1 (a core pseudo-version, never a release).
GO_MOD_1_12_0 = """module github.com/aws/karpenter-provider-aws

go 1.26.2

// TODO: migrate tablewriter to v1.0.8
// https://github.com/olekukonko/tablewriter/blob/c64d/MIGRATION.md?plain=1#L661
replace github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5

require (
	github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.35.17
	sigs.k8s.io/controller-runtime v0.23.1
	sigs.k8s.io/karpenter v1.12.0
)

require (
	sigs.k8s.io/yaml v1.6.0 // indirect
)
"""
GO_MOD_1_13_1 = GO_MOD_1_12_0.replace("go 1.26.2", "go 1.26.5").replace(
    "sigs.k8s.io/karpenter v1.12.0", "sigs.k8s.io/karpenter v1.13.0")
GO_MOD_1_14_1 = "module x\n\ngo 1.26.6\n\nrequire sigs.k8s.io/karpenter " \
                "v1.14.1-0.20260819221709-6e7eab7a0f48\n"

PROVIDERS = ["v1.0.8", "v1.8.2", "v1.10.0", "v1.10.1", "v1.12.0", "v1.13.1", "v1.14.1",
             "v1.14.3", "v1.15.0", "v1.15.1"]
CORES = ["v1.0.8", "v1.10.0", "v1.12.0", "v1.13.0", "v1.14.3", "v1.15.0"]
PAIRS = {"v1.0.8": "v1.0.5", "v1.8.2": "v1.8.0", "v1.10.0": "v1.10.0", "v1.10.1": "v1.10.0",
         "v1.12.0": "v1.12.0", "v1.13.1": "v1.13.0",
         "v1.14.1": "v1.14.1-0.20260819221709-6e7eab7a0f48", "v1.14.3": "v1.14.3",
         "v1.15.0": "v1.15.0", "v1.15.1": "v1.15.1"}


def check(version):
    return pr.check(version, providers=lambda: PROVIDERS, cores=lambda: CORES,
                    pair=PAIRS.__getitem__)


def test_the_core_is_what_the_providers_go_mod_requires():
    assert pr.core_requirement(GO_MOD_1_12_0) == "v1.12.0"
    assert pr.core_requirement(GO_MOD_1_13_1) == "v1.13.0"
    assert pr.core_requirement(GO_MOD_1_14_1) == "v1.14.1-0.20260819221709-6e7eab7a0f48"
    # a replace of core wins over the require; a directory replace cannot be paired
    assert pr.core_requirement(GO_MOD_1_12_0 + "replace sigs.k8s.io/karpenter => "
                                               "sigs.k8s.io/karpenter v1.12.1\n") == "v1.12.1"
    with pytest.raises(ClusterError, match="replaces sigs.k8s.io/karpenter with '../karpenter'"):
        pr.core_requirement(GO_MOD_1_12_0 + "replace sigs.k8s.io/karpenter => ../karpenter\n")
    with pytest.raises(ClusterError, match="does not require sigs.k8s.io/karpenter"):
        pr.core_requirement("module x\n\ngo 1.26\n")


def test_the_pinned_releases_pair_from_their_committed_wrapper_without_the_proxy():
    for v in versions.AWS_PROVIDER_VERSIONS:
        assert pr.check(v, providers=lambda: pytest.fail("asked the proxy"),
                        cores=lambda: pytest.fail("asked the proxy")) == v


def test_a_release_whose_core_is_served_runs_with_that_core():
    assert check("v1.12.0") == "v1.12.0"
    assert check("v1.13.1") == "v1.13.0"
    assert pr.runnable(PROVIDERS, CORES, PAIRS.__getitem__) == [
        "v1.10.0", "v1.10.1", "v1.12.0", "v1.13.1", "v1.14.3", "v1.15.0"]


RUNNABLE = ("runnable in aws-sim mode (core served): v1.10.0, v1.10.1 (core v1.10.0), v1.12.0, "
            "v1.13.1 (core v1.13.0), v1.14.3, v1.15.0")


def test_a_release_whose_core_is_not_served_is_refused_naming_the_core_and_the_runnable():
    with pytest.raises(pr.UnknownVersion) as exc:
        check("v1.15.1")
    text = str(exc.value)
    assert text.startswith("Karpenter's AWS provider v1.15.1 builds with core "
                           "sigs.k8s.io/karpenter v1.15.1, which the Go module proxy does not "
                           "serve")
    assert text.endswith(RUNNABLE)
    with pytest.raises(pr.UnknownVersion, match=r"core sigs.k8s.io/karpenter "
                                                r"v1\.14\.1-0\.2026.*does not serve"):
        check("v1.14.1")


def test_an_unserved_or_malformed_release_is_refused():
    with pytest.raises(pr.UnknownVersion) as exc:
        check("v1.16.0")
    assert "Karpenter's AWS provider v1.16.0 is not served by the Go module proxy" in str(exc.value)
    assert "nearest served: v1.15.1;" in str(exc.value) and str(exc.value).endswith(RUNNABLE)
    with pytest.raises(pr.UnknownVersion, match="not a release like"):
        check("1.12")
    with pytest.raises(pr.UnknownVersion, match="older than v1.0.0"):
        check("v0.37.7")


def test_target_refuses_before_anything_is_built(monkeypatch):
    monkeypatch.setattr(pr, "served_providers", lambda: PROVIDERS)
    monkeypatch.setattr(pr, "served_cores", lambda: CORES)
    monkeypatch.setattr(pr, "core_of", PAIRS.__getitem__)
    with pytest.raises(pr.UnknownVersion, match="v1.8.2 builds with core sigs.k8s.io/karpenter "
                                                "v1.8.0"):
        awsbuild.target("v1.8.2")
    t = awsbuild.target("v1.12.0")
    assert t.path.name == "karpenter-aws-v1.12.0"
    assert t.module.endswith("gomod/provider-v1.12.0") and "clusters/awssim" not in t.module


def test_the_pairing_is_kept_for_good(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    assert pr.core_of("v1.13.1", fetch=lambda v: GO_MOD_1_13_1) == "v1.13.0"
    assert pr.core_of("v1.13.1", fetch=lambda v: pytest.fail("fetched again")) == "v1.13.0"
    assert json.loads(pr.pairing_file().read_text()) == {"v1.13.1": "v1.13.0"}


# `go mod tidy` of the v1.15.0 wrapper without its replace (two of its blocks, as printed).
TIDY_1_15_0 = """go: downloading github.com/aws/aws-sdk-go-v2/service/fis v1.46.1
go: karpenter-e2e/clusters/awssim/gomod/provider-v1.15.0 imports
	github.com/aws/karpenter-provider-aws/cmd/controller imports
	github.com/aws/karpenter-provider-aws/pkg/controllers imports
	github.com/aws/karpenter-provider-aws/pkg/aws imports
	github.com/aws/aws-sdk-go-v2/service/timestreamwrite: github.com/aws/aws-sdk-go-v2/service/timestreamwrite@v1.43.1: reading https://proxy.golang.org/github.com/aws/aws-sdk-go-v2/service/timestreamwrite/@v/v1.43.1.zip: 403 Forbidden
	server response: This module version is not available.
go: karpenter-e2e/clusters/awssim/gomod/provider-v1.15.0 imports
	github.com/aws/karpenter-provider-aws/cmd/controller imports
	github.com/aws/karpenter-provider-aws/pkg/controllers imports
	github.com/aws/karpenter-provider-aws/pkg/providers/version tested by
	github.com/aws/karpenter-provider-aws/pkg/providers/version.test imports
	github.com/aws/karpenter-provider-aws/test/pkg/environment/aws imports
	github.com/aws/aws-sdk-go-v2/service/fis: github.com/aws/aws-sdk-go-v2/service/fis@v1.46.1: reading https://proxy.golang.org/github.com/aws/aws-sdk-go-v2/service/fis/@v/v1.46.1.zip: 403 Forbidden
	server response: This module version is not available.
go: github.com/example/gone@v0.1.0: reading https://proxy.golang.org/github.com/example/gone/@v/v0.1.0.mod: 410 Gone
"""  # noqa: E501 (go's own lines, as printed)


def test_the_refusals_a_build_needs_become_replaces_with_the_newest_served():
    refused = pr.refused_for_build(TIDY_1_15_0)
    # fis is reached only through a test: tidy -e leaves it, the build never needs it
    assert refused == [("github.com/aws/aws-sdk-go-v2/service/timestreamwrite", "v1.43.1"),
                       ("github.com/example/gone", "v0.1.0")]
    newest = {"github.com/aws/aws-sdk-go-v2/service/timestreamwrite": "v1.35.25",
              "github.com/example/gone": "v0.3.0"}
    assert pr.replace_lines(refused, newest.get) == [
        "replace github.com/aws/aws-sdk-go-v2/service/timestreamwrite => "
        "github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.35.25",
        "replace github.com/example/gone => github.com/example/gone v0.3.0"]
    del newest["github.com/example/gone"]
    with pytest.raises(pr.NotServed, match="v1.15.0 cannot be built from this Go module proxy .*"
                                           "refuses github.com/example/gone v0.1.0, which the "
                                           "controller needs, and serves no release of "
                                           "github.com/example/gone$"):
        pr.replace_lines(refused, newest.get, "v1.15.0")
    assert pr.refused_for_build("") == []


def test_the_generated_go_mod_carries_upstreams_replaces_and_the_refused_ones():
    replace = ("replace github.com/aws/aws-sdk-go-v2/service/timestreamwrite => "
               "github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.35.25")
    text = pr.wrapper_go_mod("v1.12.0", GO_MOD_1_12_0, [replace])
    body = [ln for ln in text.splitlines() if ln and not ln.startswith("//")]
    assert body == [
        "module karpenter-e2e/clusters/awssim/gomod/provider-v1.12.0",
        "go 1.26.2",
        "require github.com/aws/karpenter-provider-aws v1.12.0",
        "replace github.com/olekukonko/tablewriter => github.com/olekukonko/tablewriter v0.0.5",
        replace]
    with pytest.raises(ClusterError, match="replaces x/y with the directory ./y"):
        pr.wrapper_go_mod("v1.12.0", GO_MOD_1_12_0 + "replace x/y => ./y\n", [])


@pytest.mark.parametrize("version", versions.AWS_PROVIDER_VERSIONS)
def test_the_generator_writes_the_committed_wrappers_before_tidy(version):
    """Before `go mod tidy` fills in the requirements, the committed wrapper's directives are
    what the generator writes from upstream's go.mod (which has no replaces at these
    releases) and the one refused requirement."""
    committed = (pr.GOMOD_DIR / f"provider-{version}" / "go.mod").read_text()
    go_line = next(ln for ln in committed.splitlines() if ln.startswith("go "))
    replaces = [f"replace {a} => {b}" for a, b in pr._replaces(committed)]
    generated = pr.wrapper_go_mod(version, f"module {pr.MODULE}\n\n{go_line}\n", replaces)
    directives = [ln for ln in generated.splitlines() if ln and not ln.startswith("//")]
    assert directives[:3] == [f"module karpenter-e2e/clusters/awssim/gomod/provider-{version}",
                              go_line, f"require {pr.MODULE} {version}"]
    assert [ln for ln in committed.splitlines() if ln.startswith("replace ")] == directives[3:]


def test_a_mutant_of_a_release_aws_sim_cannot_run_is_refused_before_any_build(monkeypatch,
                                                                              tmp_path):
    from karpenter_e2e.clusters.karpenter.mutants import Mutant, MutantError
    monkeypatch.setattr(pr, "served_providers", lambda: PROVIDERS)
    monkeypatch.setattr(pr, "served_cores", lambda: CORES)
    monkeypatch.setattr(pr, "core_of", PAIRS.__getitem__)
    monkeypatch.setattr(awsbuild.build, "download_module", lambda *a: pytest.fail("downloaded"))
    m = Mutant("spot-ignored", tmp_path / "spot-ignored.patch", "r", ("interruption",), "f",
               "v1.15.1", "0" * 64, module=pr.MODULE)
    with pytest.raises(MutantError, match="its version v1.15.1 is not one aws-sim mode runs: "
                                          "Karpenter's AWS provider v1.15.1 builds with core "
                                          "sigs.k8s.io/karpenter v1.15.1"):
        awsbuild.build_mutant(m)
