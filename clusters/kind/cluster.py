"""kind mode: a kind cluster (the user's Docker) as the control plane; kwok and the real
karpenter-kwok run as local processes against it, exactly as in local mode.

The run directory, kubeconfig, catalogue, logs and Karpenter's process are local mode's:
``KindCluster`` holds a ``LocalCluster`` named ``kind-<name>`` whose kubeconfig is the one
kind writes, and reuses its Karpenter and CRD handling unchanged.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.waits import (
    DEFAULTS,
    Observation,
    StopWaiting,
    WaitAborted,
    eventually,
)
from karpenter_e2e.clusters.base import ClusterInfo, Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, catalogue, process, versions
from karpenter_e2e.clusters.infra.catalogue_table import ZONES, EC2Type
from karpenter_e2e.clusters.local.cluster import LocalCluster

log = logging.getLogger(__name__)

# Keeps the suites' pods off the kind node, so they stay pending until Karpenter's kwok
# nodes exist; CoreDNS, kindnet and kube-proxy tolerate it.
CRITICAL_ADDONS_ONLY = {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}
# kubeadm's own control-plane taint: naming taints replaces kubeadm's defaults, and kind
# removes this one from a single-node cluster with `kubectl taint ... control-plane-`, which
# fails if it is absent (sigs.k8s.io/kind v0.30.0 pkg/cluster/internal/create/actions/
# kubeadminit/init.go).
KUBEADM_CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
# kind's local-path-provisioner tolerates only the control-plane taint
# (pkg/build/nodeimage/const_storage.go): without this it would stay Pending, and Karpenter
# would launch a node for it inside some test's pool.
LOCAL_PATH = ("local-path-storage", "local-path-provisioner")
# What kwokctl's binary runtime gives kwok in local mode: node and pod lifecycle stages
# from the kwok module, nodes picked by the annotation Karpenter's KWOK provider sets.
KWOK_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
               "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
               "kustomize/stage/pod/fast/pod-ready.yaml",
               "kustomize/stage/pod/fast/pod-complete.yaml",
               "kustomize/stage/pod/fast/pod-delete.yaml")
KWOK_NODES = "kwok.x-k8s.io/node=fake"


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """The one way kind mode runs a command (tests replace it): process.run's rules."""
    return process.run(cmd, timeout)


def spawn(cmd: list[str], log_path: Path, cwd: Path) -> int:
    """The one way kind mode starts a long-running process (tests replace it):
    process.spawn's rules; returns its pid."""
    return process.spawn(cmd, log_path, cwd).pid


def kind_config() -> str:
    """The cluster's kind config: the control plane registers already tainted, so no pod
    can land on it in a window between creation and a later taint."""
    init = {"kind": "InitConfiguration",
            "nodeRegistration": {"taints": [CRITICAL_ADDONS_ONLY, KUBEADM_CONTROL_PLANE]}}
    return yaml.safe_dump({"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
                           "nodes": [{"role": "control-plane",
                                      "kubeadmConfigPatches": [yaml.safe_dump(init)]}]},
                          sort_keys=False)


def kwok_config(module_dir: Path) -> str:
    return "---\n".join((module_dir / p).read_text() for p in KWOK_STAGES)


class KindCluster:
    mode = "kind"

    context: str | None = None  # the kubeconfig it writes has one context

    def __init__(self, name: str = "karpenter-e2e", karpenter_version: str = versions.KARPENTER,
                 node_image: str | None = None,
                 catalogue_exclude: Callable[[EC2Type], bool] | None = None,
                 mutant=None, catalogue_selection: str = "curated"):
        self.name = name
        self.node_image = node_image  # e.g. kindest/node:v1.35.x; kind's default otherwise
        self.local = LocalCluster(f"kind-{name}", karpenter_version,
                                  catalogue_exclude=catalogue_exclude, mutant=mutant,
                                  catalogue_selection=catalogue_selection)
        self.kubeconfig = self.local.kubeconfig

    # ---- delegated to local mode ---------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.local.lock_path

    def owner(self) -> str | None:
        return self.local.owner()

    def set_owner(self, run_id: str) -> None:
        self.local.set_owner(run_id)

    def render_nodeclass(self, name: str, labels: dict[str, str]) -> dict:
        return self.local.render_nodeclass(name, labels)

    def cheapest_family(self, requirements: list[dict]) -> list[str]:
        return self.local.cheapest_family(requirements)

    def reap_orphan_nodes(self, selector: str) -> list[str]:
        return self.local.reap_orphan_nodes(selector)

    def end_unregistered_instances(self, selector: str) -> list[str]:
        return self.local.end_unregistered_instances(selector)

    def remove_without_karpenter(self, selector: str) -> list[str]:
        return self.local.remove_without_karpenter(selector)

    def check_options(self) -> None:
        """Nothing to refuse beyond what the constructor already did."""

    def cloud_problem(self) -> str | None:
        """The simulated cloud is Karpenter's own KWOK provider: nothing apart to fail."""
        return None

    def karpenter_running(self) -> bool:
        return self.local.karpenter_running()

    def stop_karpenter(self) -> None:
        self.local.stop_karpenter()

    def start_karpenter(self, version: str | None = None) -> None:
        self.local.start_karpenter(version)

    def upgrade_karpenter(self, version: str) -> None:
        self.local.upgrade_karpenter(version)

    def karpenter_peak_memory_mib(self) -> float | None:
        return self.local.karpenter_peak_memory_mib()

    def karpenter_metrics(self) -> str | None:
        return self.local.karpenter_metrics()

    def logs(self) -> dict[str, Path]:
        return self.local.logs()

    # ---- kind ----------------------------------------------------------------------------
    def _kind(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = run(["kind", *args], timeout=timeout)
        if proc.returncode == process.NOT_FOUND:
            raise ClusterError("kind is not on PATH: kind mode creates its cluster with kind; "
                               "install it (go install sigs.k8s.io/kind@latest, or "
                               "https://kind.sigs.k8s.io/docs/user/quick-start/#installation)")
        return proc

    def check_tools(self) -> str:
        """kind's version, once kind and its container runtime both answer."""
        words = self._kind("version", timeout=30).stdout.split()  # kind v0.30.0 go1.26 ...
        version = words[1] if len(words) > 1 else "unknown"
        runtime = os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker")
        proc = run([runtime, "info", "--format", "{{.ServerVersion}}"], timeout=30)
        if proc.returncode != 0:
            why = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ClusterError(
                f"{runtime} is not reachable (`{runtime} info` failed: {why[0]}): kind runs its "
                f"nodes as {runtime} containers; "
                + ("install Docker" if proc.returncode == process.NOT_FOUND else
                   "start Docker (Docker Desktop, or `sudo systemctl start docker`) and make "
                   "sure this user may use it (group docker, or DOCKER_HOST)"))
        return version

    def exists(self) -> bool:
        proc = self._kind("get", "clusters", timeout=30)
        return self.name in proc.stdout.split()

    def let_local_path_tolerate_the_taint(self) -> None:
        """Give kind's storage provisioner the control plane's toleration, and wait for it."""
        namespace, name = LOCAL_PATH
        kubectl = [str(build.find("kubectl").path), "--kubeconfig", str(self.kubeconfig),
                   "-n", namespace]
        toleration = {"key": CRITICAL_ADDONS_ONLY["key"], "operator": "Exists"}
        for cmd in ([*kubectl, "patch", "deployment", name, "--type=json", "-p", json.dumps(
                        [{"op": "add", "path": "/spec/template/spec/tolerations/-",
                          "value": toleration}])],
                    [*kubectl, "rollout", "status", f"deployment/{name}", "--timeout=120s"]):
            proc = run(cmd, timeout=150)
            if proc.returncode != 0:
                raise ClusterError(f"kind's {name} cannot run on the tainted control plane "
                                   f"({' '.join(cmd[4:7])}): {proc.stderr.strip()}")

    def start_kwok(self) -> None:
        """kwok as a local process against kind's API: it makes Karpenter's nodes Ready and
        runs the pods bound to them."""
        module = build.download_module("sigs.k8s.io/kwok", versions.KWOK)
        config = self.local.run_dir / "kwok.yaml"
        config.write_text(kwok_config(module))
        port = process.free_port()
        # The run directory is in the command line: down() finds the process by it.
        pid = spawn([str(build.build(build.find("kwok"))), f"--kubeconfig={self.kubeconfig}",
                     f"--config={config}", "--manage-all-nodes=false",
                     f"--manage-nodes-with-annotation-selector={KWOK_NODES}",
                     f"--server-address=127.0.0.1:{port}", "--node-lease-duration-seconds=40"],
                    self.local.logs_dir / "kwok.log", self.local.run_dir)
        self.local._save_state(kwok_pid=pid, kwok_port=port)

        def ready() -> Observation:
            if not process.alive(pid):
                raise StopWaiting(f"kwok exited at start; see {self.local.logs_dir / 'kwok.log'}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return Observation(r.status == 200, f"/healthz {r.status}")
            except (urllib.error.URLError, OSError) as exc:
                return Observation(False, f"/healthz: {exc}")

        try:
            eventually(ready, what="kwok /healthz to answer", timeout=DEFAULTS.api, poll=0.5)
        except WaitAborted as exc:
            raise ClusterError(exc.seen) from None

    # ---- lifecycle -----------------------------------------------------------------------
    def info(self) -> ClusterInfo:
        state = self.local._state()
        return ClusterInfo(
            mode=self.mode, name=self.name, kubeconfig=self.kubeconfig,
            versions={"kubernetes": state.get("kubernetes", "unknown"),
                      "karpenter": state.get("karpenter_version", self.local.karpenter_version),
                      "kwok": versions.KWOK, "kind": state.get("kind", "unknown")},
            zones=ZONES, karpenter_log=self.local.logs_dir / "karpenter.log",
            catalogue=self.local.catalogue_file,
            catalogue_selection=self.local.catalogue_selection)

    def status(self) -> Status:
        state = self.local._state()
        comps = {"kind": self.exists(), "kwok": process.alive(state.get("kwok_pid")),
                 "karpenter": self.local.karpenter_running()}
        detail = "\n".join(f"{n:12} {'running' if ok else 'DOWN'}" for n, ok in comps.items())
        return Status(all(comps.values()), detail, comps)

    def up(self, reuse: bool = False) -> ClusterInfo:
        kind_version = self.check_tools()
        exists = self.exists()
        if exists and reuse and self.status().running:
            log.warning("reusing kind cluster %r", self.name)
            return self.info()
        if exists or process.pids_using(str(self.local.run_dir)):
            log.warning("kind cluster %r (or its processes) left from before; recreating it",
                        self.name)
            self.down()
        started = time.monotonic()
        try:
            self._up(kind_version)
        except BaseException:
            log.warning("bring-up of kind cluster %r failed; tearing down what was started",
                        self.name)
            self.down()
            raise
        log.warning("kind cluster %r ready in %.1fs", self.name, time.monotonic() - started)
        return self.info()

    def _up(self, kind_version: str) -> None:
        local = self.local
        if local.run_dir.exists():
            shutil.rmtree(local.run_dir)
        local.logs_dir.mkdir(parents=True)
        build.build_all([build.find("kubectl"), build.find("kwok")])
        local._karpenter_binary(local.karpenter_version)  # the release's own kind of build
        config = local.run_dir / "kind.yaml"
        config.write_text(kind_config())
        proc = self._kind("create", "cluster", "--name", self.name, "--config", str(config),
                          "--kubeconfig", str(self.kubeconfig), "--wait", "120s",
                          *(["--image", self.node_image] if self.node_image else []), timeout=600)
        if proc.returncode != 0:
            raise ClusterError("kind could not create the cluster:\n"
                               + "\n".join(proc.stderr.strip().splitlines()[-20:]))
        local._wait_api()
        server = json.loads(local.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
        local._save_state(name=self.name, kind=kind_version, kubernetes=server,
                          started=time.time())
        self.let_local_path_tolerate_the_taint()
        catalogue.write(local.catalogue_file, local.catalogue_types())
        self.start_kwok()
        local.start_karpenter()  # installs the CRDs and default NodeClass first

    def down(self) -> None:
        """Stop our processes and delete the kind cluster; safe to call twice."""
        local = self.local
        local.stop_karpenter()
        # kwok (and anything else of ours) by the run directory in its command line, not by a
        # recorded pid that may since belong to another process.
        for pid in process.pids_using(str(local.run_dir)):
            process.terminate(pid)
        if self.exists():
            proc = self._kind("delete", "cluster", "--name", self.name,
                              "--kubeconfig", str(self.kubeconfig), timeout=300)
            if proc.returncode != 0:
                raise ClusterError(f"kind delete cluster {self.name} failed: {proc.stderr.strip()}")
        if local.run_dir.is_dir():
            for item in local.run_dir.iterdir():
                if item != local.logs_dir:
                    shutil.rmtree(item) if item.is_dir() else item.unlink()
        log.warning("kind cluster %r is down; logs kept in %s", self.name, local.logs_dir)
