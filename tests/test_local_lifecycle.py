"""Local mode's lifecycle against real processes: faults give clear errors, nothing stays behind.

These start real clusters (a few seconds each with cached binaries; the first run builds
the binaries). Each uses its own cluster name, so they never touch the suites' cluster.
"""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_e2e.clusters.api.waits import Observation, eventually
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process
from karpenter_e2e.clusters.local.cluster import LocalCluster

ROOT = Path(__file__).resolve().parent.parent


def assert_nothing_left(cluster: LocalCluster, ports: list[int]) -> None:
    assert process.pids_using(str(cluster.run_dir)) == []
    listening = process.listening_ports()
    assert [p for p in ports if p in listening] == []
    assert not cluster.status().components


def ports_of(cluster: LocalCluster) -> list[int]:
    state = cluster._state()
    return [p for p in (state.get("apiserver_port"), state.get("karpenter_health_port"),
                        state.get("karpenter_metrics_port")) if p]


@pytest.fixture
def make_cluster():
    made: list[LocalCluster] = []

    def make(name: str, **kwargs) -> LocalCluster:
        c = LocalCluster(f"lc-{name}-{os.getpid()}", **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.down()


def test_up_down_and_down_again(make_cluster, caplog):
    c = make_cluster("updown")
    info = c.up()
    assert c.status().running and info.kubeconfig.exists()
    assert "karpenter" in c.status().components
    ports = ports_of(c)
    c.down()
    assert_nothing_left(c, ports)
    assert (c.logs_dir / "karpenter.log").exists()  # logs survive for a post-mortem
    caplog.clear()
    c.down()  # twice: a no-op that says so
    assert "nothing to take down" in caplog.text


def test_port_already_in_use_is_named_with_its_owner(make_cluster):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        c = make_cluster("port", apiserver_port=port)
        with pytest.raises(ClusterError, match=rf"port {port} .* in use by pid {os.getpid()}"):
            c.up()
    assert_nothing_left(c, [])


def test_a_cluster_left_by_a_crashed_run_is_reused_or_cleaned(make_cluster):
    first = make_cluster("crash")
    first.up()
    pids = first._component_pids()
    # A new run finds it: reuse keeps the very same processes...
    again = LocalCluster(first.name)
    again.up(reuse=True)
    assert again._component_pids() == pids
    # ...and without reuse, it is cleaned and started afresh.
    os.kill(pids["karpenter"], signal.SIGKILL)  # half-dead, as after a crash
    # SIGKILL is delivered asynchronously: wait until the kernel says it is gone.
    eventually(lambda: Observation(not process.alive(pids["karpenter"]), "still alive"),
               what="the killed Karpenter to be gone", timeout=10, poll=0.05)
    fresh = LocalCluster(first.name)
    assert not fresh.status().running
    fresh.up(reuse=True)  # unhealthy: never reused
    assert fresh.status().running
    assert set(fresh._component_pids().values()).isdisjoint(pids.values())


def test_new_settings_on_a_kept_cluster_restart_only_karpenter(make_cluster, caplog):
    first = make_cluster("settings")
    first.up()
    pids = first._component_pids()
    changed = LocalCluster(first.name, settings={"BATCH_IDLE_DURATION": "2s"})
    info = changed.up(reuse=True)
    now = changed._component_pids()
    assert now["karpenter"] != pids["karpenter"]
    assert {k: v for k, v in now.items() if k != "karpenter"} == \
        {k: v for k, v in pids.items() if k != "karpenter"}  # the control plane stayed
    assert info.karpenter_settings == {"BATCH_IDLE_DURATION": "2s"}
    environ = Path(f"/proc/{now['karpenter']}/environ").read_bytes().split(b"\0")
    assert b"BATCH_IDLE_DURATION=2s" in environ
    assert "Karpenter restarted with BATCH_IDLE_DURATION=2s (it ran with the release's " \
           "defaults)" in caplog.text


def test_karpenter_exiting_at_start_shows_its_log_tail(make_cluster, monkeypatch):
    monkeypatch.setenv("KARPENTER_LOG_LEVEL", "shouting")  # Karpenter rejects it and exits
    c = make_cluster("kexit")
    with pytest.raises(ClusterError) as err:
        c.up()
    assert "exited with code" in str(err.value)
    # Karpenter's own reason, picked out of its log above the stack trace.
    assert 'panic: validating cli flags / env vars, invalid LOG_LEVEL "shouting"' in str(err.value)
    assert_nothing_left(c, [])


def test_ctrl_c_during_up_leaves_nothing_behind(tmp_path):
    name = f"lc-int-{os.getpid()}"
    c = LocalCluster(name)
    proc = subprocess.Popen([sys.executable, "-m", "karpenter_e2e", "cluster", "up",
                             "--cluster-name", name],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True,
                            # as a terminal runs it, even when this run ignores SIGINT
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # Interrupt once the control plane processes exist, before Karpenter is ready.
        eventually(lambda: Observation(bool(c._component_pids()), str(c._component_pids())),
                   what="control plane processes to start", timeout=60, poll=0.1)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    try:
        assert proc.returncode == 130, out
        assert "interrupted" in out
        assert_nothing_left(c, [])
    finally:  # a failed verdict must not leave the cluster running (seen: up had finished)
        c.down()


def test_eks_guard_refuses_a_real_cluster_that_is_not_opted_in(make_cluster):
    """The local cluster stands in for an EKS cluster: without the marker, eks mode refuses."""
    from karpenter_e2e.clusters.eks.cluster import EksCluster

    local = make_cluster("eksguard")
    local.up()
    name = "stand-in"
    # Neither the marker ConfigMap nor a matching --eks-opt-in: refused, with the how-to.
    with pytest.raises(ClusterError, match=r"refusing to run against EKS cluster 'stand-in': "
                                           r"it has no ConfigMap kube-system/karpenter-e2e-opt-in"):
        EksCluster(name, local.kubeconfig, opt_in_name=name).up()
    # The marker names another cluster: refused.
    local.kubectl("-n", "kube-system", "create", "configmap", "karpenter-e2e-opt-in",
                  "--from-literal=cluster=production")
    with pytest.raises(ClusterError, match="names 'production', not 'stand-in'"):
        EksCluster(name, local.kubeconfig, opt_in_name=name).up()
    # The marker is right but the caller did not confirm: refused.
    local.kubectl("-n", "kube-system", "delete", "configmap", "karpenter-e2e-opt-in")
    local.kubectl("-n", "kube-system", "create", "configmap", "karpenter-e2e-opt-in",
                  f"--from-literal=cluster={name}")
    with pytest.raises(ClusterError, match="no --eks-opt-in was passed"):
        EksCluster(name, local.kubeconfig).up()
    # Both in place: the guard lets it through to the next check (no Karpenter Deployment here).
    with pytest.raises(ClusterError, match="Karpenter is not installed"):
        EksCluster(name, local.kubeconfig, opt_in_name=name).up()


def test_a_node_left_without_its_nodeclaim_fails_the_test_with_its_name(make_cluster,
                                                                          monkeypatch):
    from karpenter_e2e.clusters.api.kube import Kube
    from karpenter_e2e.fixtures import plugin
    from karpenter_e2e.fixtures.isolation import TestScope

    c = make_cluster("leak")
    info = c.up()
    kube = Kube(info.kubeconfig)
    scope = TestScope("run1", "abc123")
    # What a leaking Karpenter leaves: a node of the test's pool that it registered, with no
    # NodeClaim owning it. One it never registered is the simulated cloud's to end (the KWOK
    # provider's Delete leaves it): ended without failing the test.
    kube.core.create_node({"metadata": {"name": "leaked-node", "labels": {
        **scope.labels, "karpenter.sh/registered": "true"}}})
    kube.core.create_node({"metadata": {"name": "never-registered", "labels": scope.labels}})
    monkeypatch.setattr(plugin, "LEAK_GRACE_S", 2)
    session = plugin.ClusterSession(c, info, kube, "run1")
    with pytest.raises(plugin.LeakedNodes, match=r"left nodes behind .*: nodes \['leaked-node'\]; "
                                                 r"the harness deleted \['leaked-node'\]"):
        plugin._eventually_test_nodes_gone(session, scope, lambda: "")
    eventually(lambda: Observation(not kube.nodes(scope.selector), "node still there"),
               what="both nodes to be deleted", timeout=30)
