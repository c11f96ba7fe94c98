"""Kubernetes per Karpenter release: the compatibility table, the default minor, parsing
--kubernetes-version, its errors, the served-patch list and the generated wrapper module.
No cluster and no network: the proxy's list is a function or a planted cache file."""

import json
import subprocess
import time
from pathlib import Path

import pytest

from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, kube_releases, releases, versions
from karpenter_e2e.clusters.karpenter import compat
from karpenter_e2e.runners import matrix

GO_LIST = ("k8s.io/kubernetes v1.13.0 v1.29.6 v1.30.4 v1.30.14 v1.31.0 v1.31.14 v1.32.2 "
           "v1.32.13 v1.33.6 v1.33.13 v1.34.0 v1.34.4 v1.35.4 v1.36.1 v1.36.3 v1.37.2 "
           "v1.38.0-beta.0\n")
SERVED = releases.parse(GO_LIST, kube_releases.MODULE)


def served():
    return SERVED


def offline():
    raise ClusterError("cannot list the releases of k8s.io/kubernetes from the Go module proxy: "
                       "dial tcp: lookup proxy.golang.org: no such host")


@pytest.mark.parametrize("karpenter,oldest,newest", [
    ("v1.0.0", "1.25", "1.30"), ("v1.0.4", "1.25", "1.30"), ("v1.0.5", "1.25", "1.31"),
    ("v1.0.8", "1.25", "1.31"), ("v1.1.5", "1.25", "1.31"), ("v1.3.0", "1.25", "1.32"),
    ("v1.5.5", "1.26", "1.33"), ("v1.6.4", "1.26", "1.34"), ("v1.8.0", "1.26", "1.34"),
    ("v1.9.0", "1.26", "1.35"), ("v1.12.1", "1.26", "1.35"), ("v1.13.0", "1.26", "1.36"),
    ("v1.14.3", "1.26", "1.36"), ("v1.15.0", "1.26", "1.36"),
])
def test_the_table_gives_each_release_its_range(karpenter, oldest, newest):
    s = compat.supported(karpenter)
    assert (s.oldest, s.newest) == (compat.minor(oldest), compat.minor(newest))
    assert compat.minor(oldest) in s and compat.minor(newest) in s
    assert (s.newest[0], s.newest[1] + 1) not in s and (s.oldest[0], s.oldest[1] - 1) not in s


def test_releases_after_the_table_inherit_v1_14_and_say_so():
    assert not compat.supported("v1.14.3").inherited
    for v in ("v1.15.0", "v1.16.0"):
        s = compat.supported(v)
        assert s.inherited and "inherited from v1.14" in s.text and "1d927085dd81" in s.text


@pytest.mark.parametrize("karpenter,default", [
    ("v1.0.8", "v1.31.14"), ("v1.1.5", "v1.31.14"), ("v1.5.5", "v1.33.13"),
    ("v1.6.4", "v1.34.4"), ("v1.9.0", "v1.35.4"), ("v1.12.1", "v1.35.4"),
    ("v1.13.0", versions.KUBERNETES), ("v1.14.3", versions.KUBERNETES),
    ("v1.15.0", versions.KUBERNETES),
])
def test_each_release_defaults_to_the_newest_served_minor_in_its_range(karpenter, default):
    assert kube_releases.resolve(None, karpenter, served) == default


def test_the_pinned_default_needs_no_network():
    # v1.36.3 is the default of v1.13 on, and `1.36` means it even though v1.36.1 is served.
    for karpenter in versions.KARPENTER_VERSIONS:
        assert kube_releases.resolve(None, karpenter, offline) == versions.KUBERNETES
        for text in ("1.36", "v1.36", versions.KUBERNETES):
            assert kube_releases.resolve(text, karpenter, offline) == versions.KUBERNETES


@pytest.mark.parametrize("text", ["1.33", "v1.33", "v1.33.13", "1.33.13"])
def test_a_minor_or_a_release_is_accepted(text):
    assert kube_releases.resolve(text, "v1.6.4", served) == "v1.33.13"


def test_an_older_served_patch_is_run_when_named():
    assert kube_releases.resolve("v1.33.6", "v1.6.4", served) == "v1.33.6"


@pytest.mark.parametrize("text,karpenter,message", [
    ("1.36", "v1.0.8", r"Kubernetes 1.36 is outside what Karpenter v1.0.8 supports: "
                       r"Kubernetes 1.25-1.31 \(aws/karpenter-provider-aws .*@ 1d927085dd81\)"),
    ("1.37", "v1.15.0", r"1.37 is outside what Karpenter v1.15.0 supports: Kubernetes 1.26-1.36 "
                        r"\(inherited from v1.14"),
    ("1.25", "v1.5.5", "outside what Karpenter v1.5.5 supports: Kubernetes 1.26-1.33"),
    ("1.28", "v1.12.1", r"Kubernetes 1.28 is not served by the Go module proxy .*served minors: "
                        r"1.13, 1.29, 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36, 1.37"),
    ("v1.33.14", "v1.6.4", "v1.33.14 is not served .*served 1.33 releases: v1.33.6, v1.33.13"),
    ("latest", "v1.15.0", "is not a Kubernetes minor or release like 1.33, v1.33 or v1.33.13"),
    ("1", "v1.15.0", "is not a Kubernetes minor or release"),
    ("v1.33.x", "v1.15.0", "is not a Kubernetes minor or release"),
])
def test_bad_requests_are_refused_with_the_reason(text, karpenter, message):
    with pytest.raises(kube_releases.UnsupportedKubernetes, match=message):
        kube_releases.resolve(text, karpenter, served)


def test_the_range_is_checked_before_the_proxy_is_asked():
    with pytest.raises(kube_releases.UnsupportedKubernetes, match="outside what"):
        kube_releases.resolve("1.36", "v1.0.8", offline)


def test_pre_releases_are_not_served_and_a_minor_means_its_newest_patch():
    patches = kube_releases.served_patches(served)
    assert patches[(1, 30)] == "v1.30.14" and patches[(1, 37)] == "v1.37.2"
    assert (1, 38) not in patches  # v1.38.0-beta.0 is no release
    assert patches[(1, 36)] == versions.KUBERNETES


def test_the_list_is_cached_a_day_and_offline_without_one_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    monkeypatch.setattr(releases, "fetch", lambda **k: offline())
    with pytest.raises(ClusterError, match="no such host. Local mode needs that list once to "
                                           "run a Kubernetes other than the pinned v1.36.3 .*"
                                           "kubernetes-versions.json"):
        kube_releases.resolve("1.33", "v1.6.4")
    (tmp_path / "kubernetes-versions.json").write_text(json.dumps(
        {"module": kube_releases.MODULE, "fetched": time.time(), "versions": SERVED}))
    assert kube_releases.resolve("1.33", "v1.6.4") == "v1.33.13"
    assert releases.cache_file() == tmp_path / "karpenter-versions.json"  # Karpenter's own


def test_the_option_reaches_the_cluster_and_eks_refuses_it(monkeypatch):
    monkeypatch.setattr(kube_releases, "_served", served)
    monkeypatch.setattr(releases, "served", lambda *a, **k: ["v1.12.1", "v1.15.0"])
    monkeypatch.setattr(kube_releases, "unserved_staging", lambda _v: [])
    import argparse

    from karpenter_e2e.clusters.flags import adder
    p = argparse.ArgumentParser()
    backends.add_options(adder(p.add_argument))
    opts = p.parse_args(["--karpenter-version", "v1.12.1", "--kubernetes-version", "1.34"])
    assert backends.create(backends.ClusterOptions.of(opts)).kubernetes_version == "v1.34.4"
    opts = p.parse_args(["--karpenter-version", "v1.12.1"])
    assert backends.create(backends.ClusterOptions.of(opts)).kubernetes_version == "v1.35.4"
    opts = p.parse_args(["--cluster", "kind", "--kubernetes-version", "1.34"])
    assert backends.create(backends.ClusterOptions.of(opts)).local.kubernetes_version == "v1.34.4"
    opts = p.parse_args(["--cluster", "eks", "--kubernetes-version", "1.34"])
    with pytest.raises(ClusterError, match="--kubernetes-version is for local, aws-sim and kind"):
        backends.create(backends.ClusterOptions.of(opts))


def test_binaries_are_cached_per_release_beside_the_pinned_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    targets = build.kube_targets("v1.33.13")
    assert [t.path.name for t in targets] == [f"{n}-v1.33.13" for n in build.KUBE_BINARIES]
    assert build.find("kube-apiserver", "v1.33.13").path == tmp_path / "bin/kube-apiserver-v1.33.13"
    assert "k8s.io/component-base/version.gitVersion=v1.33.13" in " ".join(targets[0].ldflags)
    assert kube_releases.wrapper_dir(versions.KUBERNETES) == build.GOMOD_DIR / "kubernetes"


UPSTREAM = """module k8s.io/kubernetes

go 1.22.0

godebug default=go1.22

require (
\tgithub.com/x/y v1.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_the_wrapper_pins_each_staging_module_and_keeps_upstreams_go_lines():
    gomod = kube_releases.wrapper_go_mod("v1.30.14", UPSTREAM)
    assert "\n\tk8s.io/api => k8s.io/api v0.30.14\n" in gomod
    assert "\n\tk8s.io/client-go => k8s.io/client-go v0.30.14\n" in gomod
    assert "\ngo 1.22.0\n" in gomod and "\ngodebug default=go1.22\n" in gomod
    assert gomod.rstrip().endswith("require k8s.io/kubernetes v1.30.14")
    with pytest.raises(ClusterError, match="replaces the wrapper does not know"):
        kube_releases.wrapper_go_mod("v1.30.14", UPSTREAM + "replace foo => ../foo\n")


def test_the_committed_wrapper_is_what_the_generator_writes():
    """The pinned wrapper is the generator's output for v1.36.3 after `go mod tidy`: its part
    before the require blocks tidy adds is exactly wrapper_go_mod of upstream's go.mod."""
    modcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    upstream = Path(modcache) / "cache/download/k8s.io/kubernetes/@v" / f"{versions.KUBERNETES}.mod"
    if not upstream.is_file():
        pytest.skip(f"{upstream} is not in the module cache")
    committed = (build.GOMOD_DIR / "kubernetes" / "go.mod").read_text()
    generated = kube_releases.wrapper_go_mod(versions.KUBERNETES, upstream.read_text())
    assert committed.startswith(generated)


def test_the_matrix_axis_skips_combinations_outside_a_release_s_range():
    kube = matrix.check_kubernetes(["1.36", "v1.35"], served)
    assert kube == ["1.35", "1.36"]
    cols, skipped = matrix.columns(["v1.12.1", "v1.15.0"], kube)
    assert cols == ["v1.12.1@1.35", "v1.12.1@1.36", "v1.15.0@1.35", "v1.15.0@1.36"]
    assert list(skipped) == ["v1.12.1@1.36"]
    assert "outside what Karpenter v1.12.1 supports: Kubernetes 1.26-1.35" in skipped["v1.12.1@1.36"]
    assert matrix.columns(["v1.12.1"], []) == (["v1.12.1"], {})
    assert matrix.split_column("v1.12.1@1.35") == ("v1.12.1", "1.35")
    assert matrix.cluster_name("matrix", "v1.12.1@1.35") == "matrix-v1-12-1-1-35"
    with pytest.raises(matrix.BadInput, match="1.28 not served .*served minors: 1.13, 1.29"):
        matrix.check_kubernetes(["1.28"], served)
    with pytest.raises(matrix.BadInput, match="not a Kubernetes minor"):
        matrix.check_kubernetes(["latest"], served)


def test_an_upgrade_to_a_release_that_does_not_support_the_running_minor_is_refused(monkeypatch):
    from karpenter_e2e.clusters.local.cluster import LocalCluster
    monkeypatch.setattr(releases, "served", lambda *a, **k: ["v1.0.8", "v1.5.5", "v1.15.0"])
    monkeypatch.setattr(kube_releases, "_served", served)
    c = LocalCluster("kv-upgrade-test", "v1.0.8", kubernetes_version="1.31")
    c.kubernetes_version = "v1.25.16"  # as if it ran 1.25 (no served release of it here)
    monkeypatch.setattr(c, "stop_karpenter", lambda: pytest.fail("stopped Karpenter"))
    with pytest.raises(ClusterError, match="Karpenter v1.5.5 does not support this cluster's "
                                           "Kubernetes v1.25.16: Kubernetes 1.26-1.33"):
        c.upgrade_karpenter("v1.5.5")


PROXY = "https://proxy.golang.org/k8s.io"
TIDY_403 = (
    "go: karpenter-e2e/clusters/infra/gomod/kubernetes imports\n"
    "\tk8s.io/kubernetes/pkg/controller/endpointslice imports\n"
    "\tk8s.io/endpointslice/topologycache: k8s.io/endpointslice@v0.31.14: reading "
    f"{PROXY}/endpointslice/@v/v0.31.14.zip: 403 Forbidden\n"
    "\tserver response: This module version is not available.\n"
    "\tk8s.io/kube-scheduler/config/v1: k8s.io/kube-scheduler@v0.31.14: reading "
    f"{PROXY}/kube-scheduler/@v/v0.31.14.zip: 403 Forbidden\n")


def test_a_staging_module_the_proxy_does_not_serve_is_named_and_remembered(tmp_path, monkeypatch):
    """What `go mod tidy` said for v1.31.14 on this machine's proxy (docs/versions.md)."""
    assert kube_releases.missing_modules(TIDY_403) == ["k8s.io/endpointslice v0.31.14",
                                                       "k8s.io/kube-scheduler v0.31.14"]
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    (tmp_path / "gomod").mkdir()
    (tmp_path / "gomod" / "kubernetes-v1.31.14.unbuildable").write_text("no kube-scheduler")
    monkeypatch.setattr(build, "download_module", lambda *a: pytest.fail("downloaded"))
    with pytest.raises(ClusterError, match="no kube-scheduler .remembered in .*delete it"):
        kube_releases.wrapper_dir("v1.31.14")


def test_the_default_falls_back_to_the_newest_minor_that_can_be_built(monkeypatch):
    # v1.0.x/v1.1.x end at 1.31, whose staging modules this proxy does not all serve.
    lists = {"k8s.io/kubernetes": ["v1.30.14", "v1.31.14", "v1.36.3"],
             "k8s.io/kube-scheduler": ["v0.30.14", "v0.31.13"],
             "k8s.io/kube-controller-manager": ["v0.30.14", "v0.31.14"],
             "k8s.io/endpointslice": ["v0.30.14", "v0.31.13"]}
    monkeypatch.setattr(releases, "served", lambda module, **_kw: lists[module])
    monkeypatch.setattr(kube_releases, "_served", lambda: lists["k8s.io/kubernetes"])
    assert kube_releases.unserved_staging("v1.31.14") == ["k8s.io/kube-scheduler v0.31.14",
                                                          "k8s.io/endpointslice v0.31.14"]
    assert kube_releases.default("v1.1.5") == "v1.30.14"
