"""kind mode without kind or Docker: every command goes through kind's ``run``/``spawn``,
replaced here by a recorder that answers like the real tools would."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.kind import cluster as kind_mode
from karpenter_e2e.clusters.kind.cluster import KWOK_STAGES, KindCluster

DOCKER_DOWN = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?")


class Tools:
    """Answers commands by program name; records every command line."""

    def __init__(self, **answers):
        self.answers = {"kind": (0, "kind v0.30.0 go1.26.8 linux/amd64", ""),
                        "docker": (0, "28.1.1", ""), **answers}
        self.ran: list[list[str]] = []

    def __call__(self, cmd, timeout=120):
        self.ran.append(list(cmd))
        program = Path(cmd[0]).name
        if program == "kind" and cmd[1:3] == ["get", "clusters"]:
            code, out, err = self.answers.get("kind get clusters", (0, "", ""))
        else:
            code, out, err = self.answers.get(program, (0, "", ""))
        return subprocess.CompletedProcess(cmd, code, out, err)

    def commands(self, program: str) -> list[list[str]]:
        return [c for c in self.ran if Path(c[0]).name == program]


@pytest.fixture
def cluster(tmp_path, monkeypatch) -> KindCluster:
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KIND_EXPERIMENTAL_PROVIDER", raising=False)
    return KindCluster("e2e")


def use(monkeypatch, tools: Tools) -> Tools:
    monkeypatch.setattr(kind_mode, "run", tools)
    return tools


def test_missing_kind_says_what_to_install(cluster, monkeypatch):
    use(monkeypatch, Tools(kind=(127, "", "kind: command not found")))
    with pytest.raises(ClusterError, match=r"kind is not on PATH.*go install sigs.k8s.io/kind"):
        cluster.up()


def test_unreachable_docker_says_to_start_it(cluster, monkeypatch):
    use(monkeypatch, Tools(docker=(1, "", DOCKER_DOWN)))
    with pytest.raises(ClusterError) as err:
        cluster.up()
    msg = str(err.value)
    assert msg.startswith("docker is not reachable (`docker info` failed: Cannot connect")
    assert "start Docker" in msg and "group docker, or DOCKER_HOST" in msg


def test_missing_docker_says_to_install_it(cluster, monkeypatch):
    use(monkeypatch, Tools(docker=(127, "", "docker: command not found")))
    with pytest.raises(ClusterError, match="install Docker"):
        cluster.check_tools()


def test_kind_with_podman_checks_podman(cluster, monkeypatch):
    monkeypatch.setenv("KIND_EXPERIMENTAL_PROVIDER", "podman")
    tools = use(monkeypatch, Tools(podman=(125, "", "cannot connect to Podman")))
    with pytest.raises(ClusterError, match=r"podman is not reachable"):
        cluster.check_tools()
    assert tools.commands("docker") == []


def test_kind_config_registers_the_control_plane_tainted():
    [node] = yaml.safe_load(kind_mode.kind_config())["nodes"]
    assert node["role"] == "control-plane"
    [patch] = [yaml.safe_load(p) for p in node["kubeadmConfigPatches"]]
    assert patch["kind"] == "InitConfiguration"
    taints = patch["nodeRegistration"]["taints"]
    assert {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"} in taints
    # kind removes this one from a single-node cluster and fails if it is not there.
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in taints


def test_local_path_provisioner_gets_the_toleration_and_is_waited_for(cluster, monkeypatch):
    tools = use(monkeypatch, Tools())
    cluster.let_local_path_tolerate_the_taint()
    patch, rollout = tools.ran
    assert patch[1:] == ["--kubeconfig", str(cluster.kubeconfig), "-n", "local-path-storage",
                         "patch", "deployment", "local-path-provisioner", "--type=json", "-p",
                         '[{"op": "add", "path": "/spec/template/spec/tolerations/-", '
                         '"value": {"key": "CriticalAddonsOnly", "operator": "Exists"}}]']
    assert rollout[-4:] == ["rollout", "status", "deployment/local-path-provisioner",
                            "--timeout=120s"]


def test_local_path_failure_is_an_error(cluster, monkeypatch):
    use(monkeypatch, Tools(**{"kubectl-v1.36.3": (1, "", "deployments not found")}))
    with pytest.raises(ClusterError, match="local-path-provisioner cannot run .*not found"):
        cluster.let_local_path_tolerate_the_taint()


def test_up_creates_tainted_with_its_own_kubeconfig_then_starts_kwok_and_karpenter(
        cluster, monkeypatch):
    tools = use(monkeypatch, Tools())
    steps: list[str] = []
    local = cluster.local
    monkeypatch.setattr(kind_mode.build, "build_all", lambda targets: steps.append("build"))
    monkeypatch.setattr(local, "_wait_api", lambda: steps.append("api"))
    monkeypatch.setattr(local, "kubectl", lambda *a, **k:
                        '{"serverVersion": {"gitVersion": "v1.35.1"}}')
    monkeypatch.setattr(cluster, "let_local_path_tolerate_the_taint",
                        lambda: steps.append("local-path"))
    monkeypatch.setattr(cluster, "start_kwok", lambda: steps.append("kwok"))
    monkeypatch.setattr(local, "start_karpenter", lambda version=None: steps.append("karpenter"))

    info = cluster.up()

    creates = [c for c in tools.commands("kind") if c[1:3] == ["create", "cluster"]]
    config = local.run_dir / "kind.yaml"
    assert creates == [["kind", "create", "cluster", "--name", "e2e", "--config", str(config),
                        "--kubeconfig", str(local.run_dir / "kubeconfig"), "--wait", "120s"]]
    assert config.read_text() == kind_mode.kind_config()  # tainted at creation, not after
    assert steps == ["build", "api", "local-path", "kwok", "karpenter"]
    assert local.catalogue_file.exists()
    assert (info.mode, info.name, info.kubeconfig) == ("kind", "e2e", local.run_dir / "kubeconfig")
    assert info.versions["kubernetes"] == "v1.35.1" and info.versions["kind"] == "v0.30.0"
    assert info.nodeclass_kind == "KWOKNodeClass"


def test_up_reuses_a_running_cluster_without_creating(cluster, monkeypatch):
    tools = use(monkeypatch, Tools(**{"kind get clusters": (0, "other\ne2e\n", "")}))
    monkeypatch.setattr(kind_mode.process, "alive", lambda pid: True)
    monkeypatch.setattr(cluster.local, "karpenter_running", lambda: True)
    cluster.local._save_state(kwok_pid=os.getpid())

    cluster.up(reuse=True)

    assert not [c for c in tools.commands("kind") if "create" in c or "delete" in c]


def test_failed_create_is_an_error_and_cleans_up(cluster, monkeypatch):
    tools = Tools()
    created = []

    def run(cmd, timeout=120):
        if cmd[1:3] == ["create", "cluster"]:
            created.append(cmd)
            return subprocess.CompletedProcess(cmd, 1, "", "ERROR: failed to create cluster: "
                                               "port 6443 is already allocated")
        if cmd[1:3] == ["get", "clusters"] and created:
            return subprocess.CompletedProcess(cmd, 0, "e2e\n", "")  # half-made
        return tools(cmd, timeout)

    monkeypatch.setattr(kind_mode, "run", run)
    monkeypatch.setattr(kind_mode.build, "build_all", lambda targets: None)
    with pytest.raises(ClusterError, match="kind could not create the cluster:\nERROR: .*6443"):
        cluster.up()
    assert ["kind", "delete", "cluster", "--name", "e2e", "--kubeconfig",
            str(cluster.kubeconfig)] in tools.ran


def test_start_kwok_runs_kwok_against_kinds_kubeconfig(cluster, monkeypatch, tmp_path):
    module = tmp_path / "kwok-module"
    for rel in KWOK_STAGES:
        (module / rel).parent.mkdir(parents=True, exist_ok=True)
        (module / rel).write_text(f"kind: Stage\nmetadata: {{name: {Path(rel).stem}}}\n")
    spawned: list[list[str]] = []
    monkeypatch.setattr(kind_mode.build, "download_module", lambda *a, **k: module)
    monkeypatch.setattr(kind_mode.build, "build", lambda target: Path("/bin/kwok-v0.8.0"))
    monkeypatch.setattr(kind_mode, "spawn",
                        lambda cmd, log_path, cwd: spawned.append(cmd) or os.getpid())
    monkeypatch.setattr(kind_mode.urllib.request, "urlopen", lambda url, timeout:
                        contextlib.nullcontext(type("R", (), {"status": 200})()))
    cluster.local.logs_dir.mkdir(parents=True)

    cluster.start_kwok()

    [cmd] = spawned
    config = cluster.local.run_dir / "kwok.yaml"
    assert cmd[0] == "/bin/kwok-v0.8.0"
    assert f"--kubeconfig={cluster.kubeconfig}" in cmd and f"--config={config}" in cmd
    assert "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake" in cmd
    assert config.read_text().count("kind: Stage") == len(KWOK_STAGES)
    assert cluster.local._state()["kwok_pid"] == os.getpid()


def test_real_kwok_module_has_the_stage_files(kwok_module):
    # The paths above are the kwok module's; fail here, not at bring-up, if they move.
    # Read from the module cache only (local mode's builds put kwok there): no network.
    assert [rel for rel in KWOK_STAGES if not (kwok_module / rel).is_file()] == []
