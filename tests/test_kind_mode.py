"""kind mode's parts that need no Docker: the kind config, kwok's manifests, the chart's
values, the node image's recipe read from kind's own sources, Docker's bring-up decisions and
the pod-log follower. The real thing (a kind cluster on this machine's Docker) runs in
`make e2e-kind` and tests/test_kind_lifecycle.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions
from karpenter_e2e.clusters.karpenter import podlogs
from karpenter_e2e.clusters.kind import (
    chart,
    config as kind_config,
    docker,
    kwok as kind_kwok,
    nodeimage,
)
from karpenter_e2e.clusters.kind.cluster import KindCluster
from karpenter_e2e.clusters.local import stages

DOCKER_DOWN = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?")


@pytest.fixture
def cluster(tmp_path, monkeypatch) -> KindCluster:
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KIND_EXPERIMENTAL_PROVIDER", raising=False)
    return KindCluster("e2e")


# ---- the kind config ------------------------------------------------------------------------
def test_kind_config_registers_the_control_plane_tainted(monkeypatch):
    monkeypatch.setattr(kind_config, "cgroup_v1", lambda: False)
    [node] = yaml.safe_load(kind_config.kind_config("v1.36.3"))["nodes"]
    assert node["role"] == "control-plane"
    [patch] = [yaml.safe_load(p) for p in node["kubeadmConfigPatches"]]
    assert patch["kind"] == "InitConfiguration"
    taints = patch["nodeRegistration"]["taints"]
    assert {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"} in taints
    # kind removes this one from a single-node cluster and fails if it is not there.
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in taints


def test_kind_config_lets_kubelet_run_on_cgroup_v1_only_there(monkeypatch):
    monkeypatch.setattr(kind_config, "cgroup_v1", lambda: True)
    [node] = yaml.safe_load(kind_config.kind_config("v1.36.3"))["nodes"]
    kubelet = [yaml.safe_load(p) for p in node["kubeadmConfigPatches"]][1]
    assert kubelet == {"kind": "KubeletConfiguration", "failCgroupV1": False}
    # Kubernetes before 1.31 has no such field (and does not refuse v1)
    [node] = yaml.safe_load(kind_config.kind_config("v1.30.14"))["nodes"]
    assert len(node["kubeadmConfigPatches"]) == 1


def test_kwok_is_installed_from_its_own_manifests_kept_off_its_nodes():
    kustomization = kind_kwok.kwok_kustomization("kwok-kustomize")
    assert kustomization["resources"] == ["kwok-kustomize/kwok"]
    assert kustomization["images"] == [{"name": "registry.k8s.io/kwok/kwok",
                                        "newTag": versions.KWOK}]
    [patch] = [yaml.safe_load(p["patch"]) for p in kustomization["patches"]]
    spec = patch["spec"]["template"]["spec"]
    assert {"operator": "Exists", "key": "CriticalAddonsOnly", "effect": "NoSchedule"} \
        in spec["tolerations"]
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "kwok.x-k8s.io/node",
                                         "operator": "DoesNotExist"}]


def test_real_kwok_module_has_the_manifests_and_stages(go_module):
    module = go_module("sigs.k8s.io/kwok", versions.KWOK)
    assert (module / "kustomize/kwok/kustomization.yaml").is_file()
    assert [rel for rel in stages.MODULE_STAGES if not (module / rel).is_file()] == []


def test_system_daemons_are_kept_off_karpenters_nodes(cluster, monkeypatch):
    patched = []
    monkeypatch.setattr(cluster.local, "kubectl", lambda *a, **k: patched.append((a, k)))
    cluster.keep_system_daemons_off_karpenter_nodes()
    names = [a[4] for a, _ in patched]
    assert names == ["kube-proxy", "kindnet"]
    body = json.loads(patched[0][0][-1])
    [term] = body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "karpenter.sh/nodepool",
                                         "operator": "DoesNotExist"}]
    # kube-proxy must be there; kindnet is kind's CNI or the node image's stand-in
    assert patched[0][1] == {"check": True} and patched[1][1] == {"check": False}


# ---- Docker ---------------------------------------------------------------------------------
STATUS = "Name:\tpython3\nCapBnd:\t{}\n"


def test_missing_capabilities_are_read_from_the_bounding_set():
    assert docker.missing_capabilities(STATUS.format("000001fffeffffff"), 40) == \
        ["CAP_SYS_RESOURCE"]
    assert docker.missing_capabilities(STATUS.format("000001ffffffffff"), 40) == []
    # a kernel that knows fewer capabilities asks for fewer
    assert docker.missing_capabilities(STATUS.format("000000ffffffffff"), 39) == []


def test_capwrap_becomes_the_default_runtime_and_the_rest_of_daemon_json_stays():
    current = {"log-driver": "json-file", "runtimes": {"crun": {"path": "/usr/bin/crun"}}}
    wanted = docker.daemon_config(current, Path("/cache/capwrap-abc"))
    assert wanted == {"log-driver": "json-file", "default-runtime": "capwrap",
                      "runtimes": {"crun": {"path": "/usr/bin/crun"},
                                   "capwrap": {"path": "/cache/capwrap-abc"}}}


def test_a_daemon_that_answers_is_used_as_it_is(monkeypatch):
    monkeypatch.setattr(docker, "answers", lambda: (True, "28.1.1"))
    monkeypatch.setattr(docker, "missing_capabilities", lambda: [])
    monkeypatch.setattr(docker, "_install", lambda: pytest.fail("installed"))
    monkeypatch.setattr(docker.process, "spawn", lambda *a: pytest.fail("started"))
    assert docker.up() == "docker: docker 28.1.1 answers; nothing to start"


def test_a_daemon_without_capwrap_where_it_is_needed_is_refused_with_the_way_out(monkeypatch):
    monkeypatch.setattr(docker, "answers", lambda: (True, "20.10.24"))
    monkeypatch.setattr(docker, "missing_capabilities", lambda: ["CAP_SYS_RESOURCE"])
    monkeypatch.setattr(docker, "default_runtime", lambda: "runc")
    with pytest.raises(ClusterError, match=r"lacks CAP_SYS_RESOURCE.*karpenter-e2e docker up"):
        docker.up()


def test_no_docker_and_no_way_to_install_it_says_what_to_install(monkeypatch):
    monkeypatch.setattr(docker, "answers", lambda: (False, "docker: command not found"))
    monkeypatch.setattr(docker.shutil, "which", lambda name: None)
    monkeypatch.setattr(docker.os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match=r"install Docker .*Docker Desktop"):
        docker.up()


def test_podman_is_never_started_for_the_user(monkeypatch):
    monkeypatch.setenv("KIND_EXPERIMENTAL_PROVIDER", "podman")
    monkeypatch.setattr(docker, "answers", lambda: (False, "cannot connect to Podman"))
    with pytest.raises(ClusterError, match=r"podman does not answer.*start it yourself"):
        docker.up()


def test_down_stops_only_a_daemon_up_started(tmp_path, monkeypatch):
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    monkeypatch.setattr(docker.process, "terminate", lambda pid, grace: pytest.fail("stopped"))
    assert docker.down() == "docker: no dockerd of ours is running; nothing stopped"


def test_unreachable_docker_fails_the_cluster_with_how_to_start_it(cluster, monkeypatch):
    monkeypatch.setattr(docker, "answers", lambda: (False, DOCKER_DOWN))
    with pytest.raises(ClusterError) as err:
        cluster.check_tools()
    assert "docker is not reachable" in str(err.value)
    assert "make docker" in str(err.value) and "Cannot connect" in str(err.value)


# ---- the node image's recipe ----------------------------------------------------------------
def test_go_string_constants_are_read_with_their_sums():
    source = ('const image = "docker.io/x:v1"\n'
              'const other = "a\\"b"\n'
              'const manifest = `\nimage: ` + image + `\nend\n`\n')
    assert nodeimage.go_strings(source) == {"image": "docker.io/x:v1", "other": 'a"b',
                                            "manifest": "\nimage: docker.io/x:v1\nend\n"}


def test_kinds_own_sources_give_the_storage_manifest_and_images(go_module):
    parts = nodeimage.kind_parts(go_module("sigs.k8s.io/kind", versions.KIND))
    assert parts.storage_provisioner.startswith("docker.io/kindest/local-path-provisioner:")
    assert parts.storage_helper.startswith("docker.io/kindest/local-path-helper:")
    assert f"image: {parts.storage_provisioner}" in parts.storage_manifest
    assert parts.sandbox_image.startswith("registry.k8s.io/pause:")


def test_the_debian_mirror_is_the_one_apt_uses(tmp_path, monkeypatch):
    sources = tmp_path / "debian.sources"
    sources.write_text("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n")
    real = Path
    monkeypatch.setattr(nodeimage, "Path", lambda p: real(str(p).replace(
        "/etc/apt/sources.list.d", str(tmp_path)).replace("/etc/apt/sources.list",
                                                          str(tmp_path / "none"))))
    assert nodeimage.debian_mirror() == "http://mirror.example/debian"


def test_the_node_images_key_moves_with_every_pin():
    base = nodeimage.Pins("v1.36.3")
    assert base.key() != nodeimage.Pins("v1.35.4").key()
    assert base.key() != nodeimage.Pins("v1.36.3", capwrap="abc").key()
    assert base.key() != nodeimage.Pins("v1.36.3", crictl="v1.37.0").key()
    assert base.rootfs_key() == nodeimage.Pins("v1.35.4").rootfs_key()


# ---- the chart's values ---------------------------------------------------------------------
GATES_TEMPLATE = """
          env:
            - name: FEATURE_GATES
              value: "NodeRepair={{ .Values.settings.featureGates.nodeRepair }},\
PodDeletionCostManagement={{ .Values.settings.featureGates.podDeletionCostManagement }}"
"""


@pytest.fixture
def chart_values(tmp_path, monkeypatch):
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(
        {"logLevel": "info", "settings": {"batchMaxDuration": "10s", "minValuesPolicy": "Strict",
                                          "featureGates": {"nodeRepair": False}}}))
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "deployment.yaml").write_text(GATES_TEMPLATE)
    monkeypatch.setattr(chart, "chart_dir", lambda version: tmp_path)


def test_feature_gates_are_one_entry_the_charts_own(chart_values, tmp_path):
    # two FEATURE_GATES entries broke a later helm upgrade ("The order in patch list"): the
    # chart's gates get their values, the gates its template lacks ride after the last one
    assert chart.chart_gates("v1.15.0") == [("NodeRepair", "nodeRepair"),
                                            ("PodDeletionCostManagement",
                                             "podDeletionCostManagement")]
    values = chart.values("v1.15.0", "r/k:t", {"FEATURE_GATES": "NodeRepair=true,NodeOverlay=true,"
                                               "PodDeletionCostManagement=false"},
                          catalogue=False)
    assert values["settings"]["featureGates"] == {
        "nodeRepair": "true", "podDeletionCostManagement": "false,NodeOverlay=true"}
    assert values["controller"]["env"] == []
    with pytest.raises(ClusterError, match="last gate PodDeletionCostManagement must be given"):
        chart.values("v1.15.0", "r/k:t", {"FEATURE_GATES": "NodeOverlay=true"}, catalogue=False)
    # a chart whose template names no gate: the harness's own entry, the only one
    (tmp_path / "templates" / "deployment.yaml").write_text("env: []\n")
    values = chart.values("v1.15.0", "r/k:t", {"FEATURE_GATES": "NodeOverlay=true"}, False)
    assert values["controller"]["env"] == [{"name": "FEATURE_GATES", "value": "NodeOverlay=true"}]


def test_settings_go_through_the_charts_own_values_else_controller_env(chart_values):
    values = chart.values("v1.15.0", "karpenter-e2e.local/karpenter-kwok:v1.15.0-abc",
                          {"LOG_LEVEL": "debug", "MIN_VALUES_POLICY": "BestEffort",
                           "FEATURE_GATES": "NodeRepair=true", "PREFERENCE_POLICY": "Ignore"},
                          catalogue=False)
    assert values["logLevel"] == "debug"
    assert values["settings"] == {"minValuesPolicy": "BestEffort",
                                  "featureGates": {"nodeRepair": "true"}}
    # this chart has no preferencePolicy value: it goes as an environment entry
    assert values["controller"]["env"] == [{"name": "PREFERENCE_POLICY", "value": "Ignore"}]
    assert values["controller"]["image"] == {"repository": "karpenter-e2e.local/karpenter-kwok",
                                             "tag": "v1.15.0-abc", "digest": ""}


def test_the_catalogue_is_a_file_mounted_from_the_node(chart_values):
    values = chart.values("v1.15.0", "r/k:t", {}, catalogue=True)
    assert values["extraVolumes"] == [{"name": "karpenter-e2e-catalogue", "hostPath": {
        "path": chart.CATALOGUE_ON_NODE, "type": "File"}}]
    assert values["controller"]["extraVolumeMounts"][0]["mountPath"] == chart.CATALOGUE_IN_POD
    assert {"name": "INSTANCE_TYPES_FILE_PATH", "value": chart.CATALOGUE_IN_POD} \
        in values["controller"]["env"]


def test_a_mutant_is_an_image_of_its_own(tmp_path):
    binary = tmp_path / "karpenter"
    binary.write_bytes(b"release")
    release = chart.image_ref("v1.15.0", "release", binary)
    mutant = chart.image_ref("v1.15.0", "mutant limits-ignored-1a2b", binary)
    assert release.startswith("karpenter-e2e.local/karpenter-kwok:v1.15.0-")
    assert mutant.startswith("karpenter-e2e.local/karpenter-kwok:v1.15.0-limits-ignored-1a2b-")
    binary.write_bytes(b"rebuilt")
    assert chart.image_ref("v1.15.0", "release", binary) != release


def test_the_real_chart_has_the_values_the_harness_sets(go_module, monkeypatch):
    module = go_module("sigs.k8s.io/karpenter", versions.KARPENTER)
    monkeypatch.setattr(chart, "chart_dir", lambda version: module / "kwok" / "charts")
    gates = chart.chart_gates(versions.KARPENTER)
    assert ("NodeRepair", "nodeRepair") in gates and len(gates) >= 4
    values = yaml.safe_load((module / "kwok/charts/values.yaml").read_text())
    for path in chart.CHART_VALUES.values():
        assert chart._has_value(values, path), path
    for key in ("extraVolumes", "imagePullPolicy"):
        assert key in values
    assert {"env", "extraVolumeMounts", "image"} <= set(values["controller"])


# ---- Karpenter's log from its pod -----------------------------------------------------------
def pod(name, uid, *containers):
    statuses = [SimpleNamespace(name=c, restart_count=r, state=SimpleNamespace(
        running=object() if state == "running" else None,
        terminated=object() if state == "terminated" else None)) for c, r, state in containers]
    return SimpleNamespace(metadata=SimpleNamespace(name=name, uid=uid),
                           status=SimpleNamespace(container_statuses=statuses))


def test_each_started_controller_container_is_followed_once(tmp_path):
    kube = SimpleNamespace(pods=lambda ns, sel: [
        pod("karpenter-a", "u1", ("controller", 0, "running")),
        pod("karpenter-b", "u2", ("controller", 2, "terminated"), ("sidecar", 0, "running")),
        pod("karpenter-c", "u3", ("controller", 0, "waiting"))])
    follower = podlogs.Follower(kube, "kube-system", "app=karpenter", tmp_path / "k.log")
    assert follower.instances() == [("karpenter-a", "u1", 0), ("karpenter-b", "u2", 2)]


def test_lines_are_appended_whole(tmp_path):
    follower = podlogs.Follower(None, "kube-system", "x", tmp_path / "k.log")
    follower.write(b'{"level":"INFO"}')
    follower.write(b'{"level":"ERROR"}\n')
    assert (tmp_path / "k.log").read_text() == '{"level":"INFO"}\n{"level":"ERROR"}\n'


def test_a_karpenter_pod_not_running_is_described_from_the_cluster_s_own_objects():
    """What the verdict says when an in-cluster Karpenter is gone: its Deployment's ready
    replicas, each pod's state (deleted, restarting and why) and their recent events; None
    where no Deployment is found (local and aws-sim run it as a process)."""
    from datetime import UTC, datetime

    from kubernetes.client import models as m

    from karpenter_e2e.clusters.karpenter import incluster

    at = datetime(2026, 12, 7, 4, 5, 6, tzinfo=UTC)
    deployment = m.V1Deployment(
        metadata=m.V1ObjectMeta(name="karpenter", namespace="kube-system", generation=1),
        spec=m.V1DeploymentSpec(replicas=1, selector=m.V1LabelSelector(),
                                template=m.V1PodTemplateSpec(spec=m.V1PodSpec(
                                    containers=[m.V1Container(name="controller",
                                                              image="karpenter:v1.15.0")]))),
        status=m.V1DeploymentStatus(ready_replicas=0, observed_generation=1))
    pod = m.V1Pod(
        metadata=m.V1ObjectMeta(name="karpenter-abc-1", creation_timestamp=at,
                                deletion_timestamp=at),
        status=m.V1PodStatus(container_statuses=[m.V1ContainerStatus(
            name="controller", image="x", image_id="", ready=False, restart_count=2,
            last_state=m.V1ContainerState(terminated=m.V1ContainerStateTerminated(
                exit_code=137, reason="OOMKilled")),
            state=m.V1ContainerState(waiting=m.V1ContainerStateWaiting(
                reason="CrashLoopBackOff")))]))
    event = m.CoreV1Event(metadata=m.V1ObjectMeta(name="e"), reason="Killing",
                          message="Stopping container controller", last_timestamp=at,
                          involved_object=m.V1ObjectReference(kind="Pod",
                                                              name="karpenter-abc-1"))
    found = {"kube-system": [deployment], "karpenter": []}
    kube = SimpleNamespace(
        timeout=5,
        apps=SimpleNamespace(list_namespaced_deployment=lambda ns, **_: SimpleNamespace(
            items=found[ns])),
        pods=lambda ns, selector: [pod] if ns == "kube-system" else [],
        events_in=lambda ns, selector: [event])
    said = incluster.absence(kube)
    assert said is not None
    assert said.startswith("its Deployment kube-system/karpenter has 0/1 replica(s) ready")
    assert ("pod karpenter-abc-1: created 04:05:06, being deleted since 04:05:06, not ready, "
            "2 restart(s), last exit OOMKilled (137), waiting: CrashLoopBackOff") in said
    assert said.endswith("04:05:06 karpenter-abc-1 Killing: Stopping container controller")
    found["kube-system"] = []
    assert incluster.absence(kube) is None


def test_a_failed_kind_create_says_why_not_the_stack():
    out = ("Creating cluster \"x\" ...\nERROR: failed to create cluster: failed to init node with "
           "kubeadm: command \"docker exec --privileged x-control-plane kubeadm init\" failed\n"
           "[wait-control-plane] Waiting for the kubelet to boot up the control plane\n"
           "error execution phase wait-control-plane: could not initialize a Kubernetes cluster\n"
           "k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run\n"
           "\t/root/go/pkg/mod/k8s.io/kubernetes@v1.36.3/cmd/kubeadm/app/cmd/phases/workflow/"
           "runner.go:234\n")
    from karpenter_e2e.clusters.kind.diagnosis import create_failure

    said = create_failure(out)
    assert said.splitlines()[0].startswith("ERROR: failed to create cluster")
    assert "error execution phase wait-control-plane" in said and "runner.go" not in said
    assert create_failure("just a stack\n\tat x") == "just a stack\n\tat x"


def test_docker_gone_mid_run_is_the_error_the_guard_and_down_raise(monkeypatch, tmp_path):
    """The node is a Docker container: when Docker stops, asking the API fails, and the
    guard says why (not a connection error) and how to remove what is left once Docker is
    back; down() says the same instead of failing on `kind delete`."""
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path))
    cluster = KindCluster("gone")

    def refused():
        raise ConnectionRefusedError("connect: connection refused")

    monkeypatch.setattr(cluster, "_karpenter", lambda: SimpleNamespace(running=refused))
    monkeypatch.setattr(docker, "answers", lambda: (False, DOCKER_DOWN))
    with pytest.raises(ClusterError, match=r"Docker does not answer .* kind cluster 'gone''s "
                                           r"node is one of its containers") as exc:
        cluster.karpenter_running()
    assert "make sweep SWEEP_ARGS=--kind MAX_AGE=0s" in str(exc.value)
    assert "container gone-control-plane" in str(exc.value)
    with pytest.raises(ClusterError, match="so it could not be deleted"):
        cluster.down()
