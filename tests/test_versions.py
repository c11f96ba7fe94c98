"""Any Karpenter release the module proxy serves: the list (parsed, cached a day, stale when
offline), clear errors for bad versions, and which Go toolchain builds a release. Offline:
the proxy is replaced by a function or a planted cache file."""

import json
import time

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, releases, versions

GO_LIST = ("sigs.k8s.io/karpenter v0.37.7 v1.0.8 v1.1.5 v1.5.5 v1.6.4 v1.9.0 v1.10.0 v1.11.0 "
           "v1.11.1 v1.11.2 v1.12.0 v1.12.1 v1.13.0 v1.14.0 v1.14.1 v1.14.3 v1.15.0 "
           "v1.16.0-rc.1\n")
SERVED = releases.parse(GO_LIST)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    return tmp_path


def plant(cache, fetched: float, found=SERVED):
    (cache / "karpenter-versions.json").write_text(json.dumps(
        {"module": releases.MODULE, "fetched": fetched, "versions": found}))


def offline():
    raise ClusterError("cannot list the Karpenter releases from the Go module proxy: dial tcp: "
                       "lookup proxy.golang.org: no such host")


def test_the_list_is_releases_only_oldest_first():
    assert SERVED[0] == "v0.37.7" and SERVED[-1] == "v1.15.0"
    assert "v1.16.0-rc.1" not in SERVED  # a pre-release is not a release
    assert SERVED.index("v1.9.0") < SERVED.index("v1.10.0")  # by number, not by text
    with pytest.raises(ValueError, match="not a version list"):
        releases.parse("go: module lookup disabled by GOPROXY=off\n")


def test_a_fresh_cache_is_used_and_a_day_old_one_refetched(cache):
    now = time.time()
    plant(cache, now - 3600, ["v1.0.8", "v1.15.0"])
    assert releases.served(now, fetcher=lambda: pytest.fail("fetched with a fresh cache")) \
        == ["v1.0.8", "v1.15.0"]
    plant(cache, now - 25 * 3600, ["v1.0.8"])
    assert releases.served(now, fetcher=lambda: SERVED) == SERVED
    written = json.loads((cache / "karpenter-versions.json").read_text())
    assert written["versions"] == SERVED and written["fetched"] == now and written["fetched_at"]


def test_offline_uses_a_stale_list_and_without_one_says_so(cache, caplog):
    now = time.time()
    with pytest.raises(ClusterError, match="no such host. Local mode needs that list once .* "
                                           "pinned v1.15.0, v1.14.3 .*karpenter-versions.json"):
        releases.served(now, fetcher=offline)
    plant(cache, now - 3 * 24 * 3600)
    assert releases.served(now, fetcher=offline) == SERVED
    assert "using the list fetched 72 h ago" in caplog.text


def test_the_pinned_versions_need_no_list(cache):
    for v in versions.KARPENTER_VERSIONS:
        assert releases.check(v, served_list=lambda: pytest.fail("asked the proxy")) == v


@pytest.mark.parametrize("version,message", [
    ("v1.12.1", None),
    ("v1.0.8", None),
    ("v1.12.2", r"Karpenter v1.12.2 is not served by the Go module proxy .*nearest served: "
                r"v1.12.1 and v1.13.0"),
    ("v1.3.0", "nearest served: v1.1.5 and v1.5.5"),
    ("v1.99.0", "nearest served: v1.15.0 \\("),
    ("v0.37.7", "older than v1.0.0: the harness needs Karpenter's v1 APIs"),
    ("1.12.1", "is not a release like v1.15.0"),
    ("v1.12", "is not a release like"),
])
def test_bad_versions_are_refused_with_the_reason(version, message):
    if message is None:
        assert releases.check(version, served_list=lambda: SERVED) == version
    else:
        with pytest.raises(releases.UnknownVersion, match=message):
            releases.check(version, served_list=lambda: SERVED)


def test_nearest_below_v1_is_never_suggested():
    with pytest.raises(releases.UnknownVersion) as exc:
        releases.check("v1.0.0", served_list=lambda: SERVED)
    assert "nearest served: v1.0.8 (" in str(exc.value)


def test_a_cluster_of_an_unserved_version_is_refused_before_anything_starts(cache):
    from karpenter_e2e.clusters.local.cluster import LocalCluster
    plant(cache, time.time())
    started = time.monotonic()
    with pytest.raises(ClusterError, match="nearest served: v1.12.1 and v1.13.0"):
        LocalCluster("versions-test", "v1.12.2")
    assert time.monotonic() - started < 5
    assert not (cache / "clusters").exists()
    assert LocalCluster("versions-test", "v1.12.1").karpenter_version == "v1.12.1"


def test_a_served_version_gets_a_target_keyed_by_version(cache):
    plant(cache, time.time())
    t = build.find("karpenter-kwok", "v1.12.1")
    assert t.path == cache / "bin" / "karpenter-kwok-v1.12.1"
    assert "-X sigs.k8s.io/karpenter/pkg/operator.Version=v1.12.1" in t.ldflags
    assert t.toolchain == build.FROM_GO_MOD
    # make build builds what it built before: the pinned two
    assert [t.version for t in build.targets() if t.name == "karpenter-kwok"] == \
        list(versions.KARPENTER_VERSIONS)


def test_a_catalogue_embedded_build_is_named_so():
    t = build.karpenter_target("v1.0.8")
    a, b = (build.embedded_path(t, text) for text in ('[{"name": "a"}]', '[{"name": "b"}]'))
    assert a.name.startswith("karpenter-kwok-v1.0.8-embedded-catalogue-") and a != b


@pytest.mark.parametrize("go_mod,required", [
    ("module sigs.k8s.io/karpenter\n\ngo 1.24.6\n", (1, 24, 6)),
    ("module x\ngo 1.26.3\ntoolchain go1.26.9\n", (1, 26, 9)),
    ("module x\ngo 1.27\n", (1, 27, 0)),
    ("module x\ngo 1.26.9\n\nrequire (\n\tgo.uber.org/zap v1.27.0\n)\n", (1, 26, 9)),
])
def test_the_go_mod_says_which_go_it_needs(go_mod, required):
    assert releases.go_requirement(go_mod) == required


@pytest.mark.parametrize("required,toolchain", [
    ((1, 24, 6), "local"),       # v1.0.8
    ((1, 26, 3), "local"),       # v1.12.1
    ((1, 26, 8), "local"),
    ((1, 26, 9), "go1.27.3"),    # v1.15.0
    ((1, 26, 10), "go1.27.3"),   # v1.14.3
])
def test_the_machines_go_builds_what_it_can_else_the_pinned_toolchain(required, toolchain):
    assert releases.choose_toolchain(required, "go1.26.8", ("go1.27.3",)) == toolchain


def test_the_oldest_pinned_toolchain_that_is_new_enough_is_chosen():
    assert releases.choose_toolchain((1, 26, 9), "go1.26.8", ("go1.27.3", "go1.26.10")) == "go1.26.10"
    with pytest.raises(ClusterError, match="needs Go >= 1.28.0; the machine's go is go1.26.8 and "
                                           "no pinned toolchain \\(go1.27.3\\)"):
        releases.choose_toolchain((1, 28, 0), "go1.26.8", ("go1.27.3",))


def test_the_pinned_releases_get_the_toolchain_they_got_before():
    for v in versions.KARPENTER_VERSIONS:
        module = build.download_karpenter(v)
        assert build.toolchain_for(module) == versions.GO_TOOLCHAIN, v


def test_a_failed_build_quotes_the_compilers_line():
    output = ("go: downloading k8s.io/api v0.35.0\n# sigs.k8s.io/karpenter/kwok\n"
              "kwok/main.go:32:38: too many arguments in call to operator.NewOperator\n")
    assert build.compiler_lines(output) == [
        "kwok/main.go:32:38: too many arguments in call to operator.NewOperator"]
    assert build.compiler_lines("go: sigs.k8s.io/karpenter@v9 requires go >= 1.30 (running go "
                                "1.26.8; GOTOOLCHAIN=local)\n")[0].startswith("go: sigs.k8s.io")


@pytest.mark.parametrize("version,message", [
    ("v0.37.0", "mutant old: version: v0.37.0 is older than v1.0.0; the harness needs Karpenter's v1 APIs"),
    ("1.15", "mutant old: version: '1.15' is not a release like v1.15.0"),
])
def test_a_mutant_header_takes_any_release_from_v1_on(tmp_path, version, message):
    from karpenter_e2e.clusters.karpenter import mutants
    patch = ("# regression: x\n# scenarios: limits\n# family: provisioning\n# version: {v}\n"
             "--- a/kwok/main.go\n+++ b/kwok/main.go\n@@ -1 +1 @@\n-a\n+b\n")
    (tmp_path / "old.patch").write_text(patch.format(v="v1.12.1"))
    assert mutants.parse(tmp_path / "old.patch").version == "v1.12.1"  # served is checked at build
    (tmp_path / "old.patch").write_text(patch.format(v=version))
    with pytest.raises(ClusterError, match=message):
        mutants.parse(tmp_path / "old.patch")


def test_a_mutant_of_an_unserved_release_is_refused_before_it_builds(cache):
    from karpenter_e2e.clusters.karpenter.mutants import Mutant
    plant(cache, time.time())
    m = Mutant("m", cache / "m.patch", "x", ("limits",), "provisioning", "v1.12.2", "0" * 64)
    with pytest.raises(ClusterError, match="mutant m: its version: Karpenter v1.12.2 is not served.*"
                                           "nearest served: v1.12.1 and v1.13.0"):
        build.build_mutant(m)
    assert not (cache / "bin").exists()
