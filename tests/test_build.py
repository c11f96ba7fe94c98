"""Pinned builds: one place for versions, real version ldflags, clear errors."""

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, versions


def test_every_binary_is_keyed_by_version_in_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    paths = {t.path for t in build.targets()}
    assert tmp_path / "bin" / f"kube-apiserver-{versions.KUBERNETES}" in paths
    assert tmp_path / "bin" / f"etcd-{versions.ETCD}" in paths
    for v in versions.KARPENTER_VERSIONS:
        assert tmp_path / "bin" / f"karpenter-kwok-{v}" in paths  # never clashes with kwok's `kwok`
    assert len(versions.KARPENTER_VERSIONS) == 2


def test_kubernetes_reports_its_real_version():
    flags = " ".join(build.find("kube-apiserver").ldflags)
    assert f"k8s.io/component-base/version.gitVersion={versions.KUBERNETES}" in flags
    assert "k8s.io/client-go/pkg/version.gitMinor=" in flags
    assert build.find("kube-apiserver").tags == ("selinux", "notest", "grpcnotrace")


def test_wrapper_go_mod_pins_every_staging_module_to_the_matching_version():
    gomod = (build.GOMOD_DIR / "kubernetes" / "go.mod").read_text()
    replaces = [line.split() for line in gomod.splitlines() if "=>" in line]
    assert len(replaces) > 25
    assert all(r[3] == versions.staging_version() for r in replaces)
    assert f"k8s.io/kubernetes {versions.KUBERNETES}" in gomod


def test_unknown_binary_is_a_clear_error():
    with pytest.raises(ClusterError, match="pinned: .*kwok@v0.8.0"):
        build.find("kwok", "v0.1.0")
    # Karpenter: any release the proxy serves from v1.0 on (tests/test_versions.py)
    with pytest.raises(ClusterError, match="older than v1.0.0: the harness needs Karpenter's v1 APIs"):
        build.find("karpenter-kwok", "v0.1.0")


def test_missing_go_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ClusterError, match="Go is not on PATH"):
        build.check_go()


def test_old_go_is_a_clear_error(tmp_path, monkeypatch):
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho go1.19.3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError, match="go1.19.3; local mode needs Go >= 1.21"):
        build.check_go()
