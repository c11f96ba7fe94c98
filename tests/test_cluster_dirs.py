"""A runner's finished cluster: red logs go with the report, the directory and its lock files go."""

import subprocess
import sys

import pytest

from karpenter_e2e.runners import cluster_dirs


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path / "cache"))
    logs = tmp_path / "cache" / "clusters" / "mut-x" / "logs"
    logs.mkdir(parents=True)
    (logs / "karpenter.log").write_text("the mutant's log\n")
    for suffix in (".lock", ".share", ".share.turnstile"):  # what the modes and the plugin make
        (tmp_path / "cache" / "clusters" / f"mut-x{suffix}").write_text("")
    return tmp_path / "cache" / "clusters"


def test_a_red_runs_logs_go_with_its_report(cache, tmp_path):
    said = cluster_dirs.retire("mut-x", tmp_path / "report")
    assert (tmp_path / "report" / "cluster-logs" / "karpenter.log").read_text() == "the mutant's log\n"
    assert str(tmp_path / "report" / "cluster-logs") in said
    assert sorted(p.name for p in cache.iterdir()) == []


def test_a_green_run_leaves_nothing(cache, tmp_path):
    assert cluster_dirs.retire("mut-x", None) == ""
    assert list(cache.iterdir()) == []
    assert not (tmp_path / "report").exists()


def test_a_cluster_still_running_is_left_alone(cache, tmp_path):
    where = cache / "mut-x"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               str(where / "etcd")])
    try:
        said = cluster_dirs.retire("mut-x", tmp_path / "report")
    finally:
        holder.kill()
        holder.wait()
    assert said == f"{where} is still in use: left in place"
    assert (where / "logs" / "karpenter.log").exists()
    assert not (tmp_path / "report").exists()


def test_an_unknown_cluster_is_nothing_to_do(cache):
    assert cluster_dirs.retire("never-made", None) == ""
