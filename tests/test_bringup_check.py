"""A component that exits during bring-up: kube-controller-manager or kube-scheduler (which
give up when the apiserver is not healthy within their own start-up wait, seen on a loaded
machine) are started again and must then work; anything else, or one dead again, fails the
bring-up, naming it and its log."""

import pytest

from karpenter_e2e.clusters.base import Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.local.cluster import LocalCluster

TAIL = "--- {} ---\nE1130 Error building controller context"


def cluster_with(monkeypatch, *states: dict[str, bool]) -> tuple[LocalCluster, list]:
    """A cluster whose status() answers ``states`` in turn (the last one from then on), and
    the kwokctl commands it ran."""
    cluster, answers, ran = LocalCluster("bringup-check-test"), list(states), []
    monkeypatch.setattr(cluster, "status", lambda: Status(
        False, "", answers.pop(0) if len(answers) > 1 else answers[0]))
    monkeypatch.setattr(cluster, "_log_tails", lambda names: TAIL.format(names[0]))
    monkeypatch.setattr(cluster, "_kwokctl", lambda *args, **kw: ran.append(args))
    monkeypatch.setattr(cluster, "_wait_controllers_work", lambda: None)
    return cluster, ran


def test_a_controller_that_gave_up_is_started_again(monkeypatch):
    dead = {"kube-apiserver": True, "kube-controller-manager": False}
    cluster, ran = cluster_with(monkeypatch, dead, dead,
                                {"kube-apiserver": True, "kube-controller-manager": True})
    cluster._check_components()
    assert ran == [("start", "cluster")]


def test_a_dead_controllers_pid_file_goes_before_kwokctl_starts_it(monkeypatch, tmp_path):
    """kwokctl skips a component whose pid answers signal 0, which an unreaped zombie does:
    the dead component's pid file is removed first, the others' stay."""
    dead = {"kube-apiserver": True, "kube-controller-manager": False}
    cluster, ran = cluster_with(monkeypatch, dead, dead,
                                {"kube-apiserver": True, "kube-controller-manager": True})
    pids = tmp_path / "pids"
    pids.mkdir()
    for name in ("kube-apiserver", "kube-controller-manager"):
        (pids / f"{name}.pid").write_text("123")
    monkeypatch.setattr(cluster, "_kwokctl_cluster_dir", lambda: tmp_path)
    monkeypatch.setattr(cluster, "_kwokctl", lambda *args, **kw: ran.append(
        (args, sorted(p.name for p in pids.iterdir()))))
    cluster._check_components()
    assert ran == [(("start", "cluster"), ["kube-apiserver.pid"])]


def test_a_controller_dead_again_is_an_error_naming_it(monkeypatch):
    cluster, ran = cluster_with(monkeypatch, {"kube-apiserver": True,
                                              "kube-controller-manager": False})
    with pytest.raises(ClusterError, match=r"kube-controller-manager exited during bring-up:\n"
                                           r"--- kube-controller-manager ---"):
        cluster._check_components()
    assert ran == [("start", "cluster")]


def test_another_component_dead_is_an_error_at_once(monkeypatch):
    cluster, ran = cluster_with(monkeypatch, {"kube-apiserver": True, "karpenter": False,
                                              "kube-controller-manager": False})
    with pytest.raises(ClusterError, match=r"karpenter, kube-controller-manager exited"):
        cluster._check_components()
    assert ran == []
    healthy, _ = cluster_with(monkeypatch, {"kube-apiserver": True})
    healthy._check_components()


def test_the_restart_happens_in_a_creation_turn(monkeypatch):
    """A dead component's port is free: the restart holds the create lock, so no cluster
    created meanwhile takes that port as "the first free one"."""
    import contextlib

    from karpenter_e2e.clusters.local import cluster as module

    held, ran_in_turn = [], []

    @contextlib.contextmanager
    def lock(path, doing, timeout):
        held.append(path)
        yield
        held.pop()

    monkeypatch.setattr(module, "file_lock", lock)
    cluster, ran = cluster_with(monkeypatch,
                                {"kube-apiserver": True, "kube-scheduler": False},
                                {"kube-apiserver": True, "kube-scheduler": False},
                                {"kube-apiserver": True, "kube-scheduler": True})
    monkeypatch.setattr(cluster, "_kwokctl", lambda *a, **kw: ran_in_turn.append((a, list(held))))
    cluster._check_components()
    assert ran_in_turn == [(("start", "cluster"), [cluster._create_lock()])]
    healthy, _ = cluster_with(monkeypatch, {"kube-apiserver": True})
    healthy._check_components()
    assert held == []
