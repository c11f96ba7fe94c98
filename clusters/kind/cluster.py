"""kind mode: a kind cluster on this machine's Docker, with kwok and Karpenter's KWOK provider
running in it as users and upstream's kind e2e install them.

    up:  Docker answers (clusters/kind/docker.py brings it up where it can) -> the node image
         (kind's published kindest/node where a registry answers, else one built with no
         registry: nodeimage.py) -> `kind create cluster` (control plane tainted at
         registration) -> kube-proxy and the CNI kept off Karpenter's nodes -> kwok from its
         own manifests and stages -> Karpenter's CRDs, then its chart (chart.py) with the
         release's image loaded by `kind load`
    down: the log follower stopped, `kind delete cluster`, the cluster's Docker network removed

Karpenter's log is followed from its pod into the run directory (karpenter.podlogs), so the
oracles read the same record as in local mode. The run directory, catalogue, CRDs, settings
and binaries are local mode's: ``KindCluster`` holds a ``LocalCluster`` named
``kind-<name>`` for them and starts none of its processes.

Long because the EKS rehearsal's hooks (clusters/rehearsal) live beside kind mode's own
bring-up; kwok, the kind config, the upgrade check and create failures are already apart, and
the Karpenter install (_install, start/stop/restart) is the next seam.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from karpenter_e2e.clusters.api.kube import Kube
from karpenter_e2e.clusters.api.waits import unstoppable
from karpenter_e2e.clusters.base import ClusterInfo, Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process, versions
from karpenter_e2e.clusters.infra.catalogue_table import ZONES, EC2Type
from karpenter_e2e.clusters.karpenter import compat, incluster, settings as ksettings
from karpenter_e2e.clusters.kind import chart, docker, images, kwok, nodeimage, upgrade
from karpenter_e2e.clusters.kind.config import CRITICAL_ADDONS_ONLY, kind_config
from karpenter_e2e.clusters.kind.diagnosis import create_failure
from karpenter_e2e.clusters.local.cluster import LocalCluster

log = logging.getLogger(__name__)

# kind's local-path-provisioner tolerates only the control-plane taint
# (pkg/build/nodeimage/const_storage.go): without this it would stay Pending, and Karpenter
# would launch a node for it inside some test's pool.
LOCAL_PATH = ("local-path-storage", "local-path-provisioner")
# Off Karpenter's nodes (kwok's simulations): what Karpenter's own chart does for itself.
# kube-proxy and the CNI there would be kwok fakes Karpenter counts as daemon overhead that
# local mode does not have.
NOT_ON_KARPENTER_NODES = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}]}}}
SYSTEM_DAEMONSETS = ("kube-proxy", "kindnet")
# Labels on the Docker network each cluster gets: `make sweep` finds leftovers by them.
NETWORK_LABEL = "karpenter-e2e.cluster"
CREATED_LABEL = "karpenter-e2e.created"
# Bounds, not measurements: `kind create cluster` took 1-2 min on this 2-core machine.
CREATE_TIMEOUT_S = 900
KIND_WAIT = "300s"


def run(cmd: list[str], timeout: float = 120,
        env: Mapping[str, str] | None = None) -> process.subprocess.CompletedProcess:
    """The one way kind mode runs a command (tests replace it): process.run's rules."""
    return process.run(cmd, timeout, env=dict(env) if env is not None else None)


class KindCluster:
    mode = "kind"

    context: str | None = None  # the kubeconfig it writes has one context

    def __init__(self, name: str = "karpenter-e2e", karpenter_version: str = versions.KARPENTER,
                 node_image: str | None = None,
                 catalogue_exclude: Callable[[EC2Type], bool] | None = None,
                 mutant=None, catalogue_selection: str = "curated",
                 kubernetes_version: str | None = None, settings: Mapping[str, str] | None = None):
        self.name = name
        # "built" (made here with no registry), "kindest" (kind's published one) or an image;
        # None: kindest where a registry answers, else built (resolved at up)
        self.node_image = node_image
        self.local = LocalCluster(self.files_name(name), karpenter_version,
                                  catalogue_exclude=catalogue_exclude, mutant=mutant,
                                  catalogue_selection=catalogue_selection,
                                  kubernetes_version=kubernetes_version, settings=settings)
        self.kubeconfig = self.local.kubeconfig
        self.network = f"karpenter-e2e-{name}"[:60]

    @staticmethod
    def files_name(name: str) -> str:
        """The name of its run directory (and lock files) in the per-user cache."""
        return f"kind-{name}"

    @staticmethod
    def node_container(name: str) -> str:
        """kind's name for the cluster's one node's container."""
        return f"{name}-control-plane"

    # ---- delegated to local mode ---------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        return self.local.lock_path

    @property
    def karpenter_version(self) -> str:
        return self.local.karpenter_version

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
        self.local.check_options()

    def known_settings(self, version: str):
        return self.local.known_settings(version)

    def cloud_problem(self) -> str | None:
        """The simulated cloud is Karpenter's own KWOK provider: nothing apart to fail."""
        return None

    def logs(self) -> dict[str, Path]:
        return {p.stem: p for p in self.local.logs_dir.glob("*.log")}

    # ---- tools ---------------------------------------------------------------------------
    def kind(self, *args: str, timeout: float = 120) -> process.subprocess.CompletedProcess:
        binary = build.build(nodeimage.kind_target())
        env = {**os.environ, "KIND_EXPERIMENTAL_DOCKER_NETWORK": self.network}
        return run([str(binary), *args], timeout=timeout, env=env)

    def helm(self) -> Path:
        return build.build(chart.helm_target())

    def kube(self) -> Kube:
        return Kube(self.kubeconfig)

    def check_tools(self) -> str:
        """Docker's version once a daemon answers (`karpenter-e2e docker up` starts one)."""
        ok, seen = docker.answers()
        if not ok:
            runtime = docker.runtime_command()
            raise ClusterError(
                f"{runtime} is not reachable (`{runtime} info`: {seen}): kind runs its nodes as "
                f"{runtime} containers; start it (`make docker` or `karpenter-e2e docker up` "
                f"installs and starts Docker on a Debian machine as root; elsewhere Docker "
                f"Desktop, or `sudo systemctl start docker`)")
        return seen

    def exists(self) -> bool:
        proc = self.kind("get", "clusters", timeout=30)
        return self.name in proc.stdout.split()

    def resolve_node_image(self) -> str:
        """The node image this cluster runs, made ready in Docker."""
        kube = self.local.kubernetes_version
        wanted = self.node_image
        kindest = f"kindest/node:{kube}"
        if wanted in (None, "kindest"):
            if images.exists(kindest):
                return kindest
            pulled = process.run(["docker", "pull", kindest], 300)
            if pulled.returncode == 0:
                return kindest
            if wanted == "kindest":
                raise ClusterError(f"docker pull {kindest} failed: "
                                   f"{(pulled.stderr or pulled.stdout).strip()[-300:]}")
            log.warning("no registry answers (docker pull %s: %s); using a node image built "
                        "here with no registry", kindest,
                        (pulled.stderr or pulled.stdout).strip().splitlines()[-1:])
            return nodeimage.ensure(kube)
        if wanted == "built":
            return nodeimage.ensure(kube)
        return wanted

    # ---- lifecycle -----------------------------------------------------------------------
    def info(self) -> ClusterInfo:
        state = self.local._state()
        return ClusterInfo(
            mode=self.mode, name=self.name, kubeconfig=self.kubeconfig,
            versions={"kubernetes": state.get("kubernetes", "unknown"),
                      "karpenter": state.get("karpenter_version", self.karpenter_version),
                      "kwok": versions.KWOK, "kind": versions.KIND,
                      "node image": state.get("node_image", "unknown")},
            zones=ZONES, karpenter_log=self.local.logs_dir / "karpenter.log",
            catalogue=self.local.catalogue_file,
            catalogue_selection=self.local.catalogue_selection,
            feature_gates=tuple(self.local.feature_gates),
            karpenter_settings=dict(self.local.settings),
            launch_latency_simulated=True)  # kwok in the cluster runs local mode's stages

    def status(self) -> Status:
        comps = {"kind": self.exists()}
        if comps["kind"]:
            kube = self.kube()
            comps["kwok"] = any(d.ready_replicas for d in incluster.deployments(
                kube, "kube-system", "app=kwok-controller"))
            comps["karpenter"] = self.karpenter_running()
        detail = "\n".join(f"{n:12} {'running' if ok else 'DOWN'}" for n, ok in comps.items())
        return Status(all(comps.values()) and len(comps) == 3, detail, comps)

    def _installed_as(self) -> tuple:
        """What Karpenter the cluster runs: release, build, Kubernetes, settings, catalogue."""
        state = self.local._state()
        return (state.get("karpenter_version"), state.get("karpenter_build", "release"),
                state.get("kubernetes"), ksettings.render(state.get("karpenter_settings", {})),
                state.get("catalogue_selection", "curated"))

    def _wanted(self) -> tuple:
        local = self.local
        return (self.karpenter_version, local._build_name(), local.kubernetes_version,
                ksettings.render(local.settings), local.catalogue_selection)

    def up(self, reuse: bool = False) -> ClusterInfo:
        self.local.check_options()  # a setting the release does not read: refused first
        docker_version = self.check_tools()
        exists = self.exists()
        if exists and reuse and self.status().running:
            running, wanted = self._installed_as(), self._wanted()
            if running == wanted:
                log.warning("reusing kind cluster %r", self.name)
                self._follow_logs()
                return self.info()
            if running[:3] + running[4:] == wanted[:3] + wanted[4:]:
                # Only the settings differ: what an operator does with new Helm values (the
                # cluster stays, Karpenter rolls out with them).
                self.restart_karpenter()
                return self.info()
            log.warning("kind cluster %r runs Karpenter %s (%s) on Kubernetes %s with %s "
                        "(catalogue %s), not %s (%s) on %s with %s (catalogue %s)",
                        self.name, *running, *wanted)
        if exists:
            log.warning("kind cluster %r left from before; recreating it", self.name)
            self.down()
        started = time.monotonic()
        try:
            self._up(docker_version)
        except BaseException:
            log.warning("bring-up of kind cluster %r failed; tearing down what was started",
                        self.name)
            self.down()
            raise
        log.warning("kind cluster %r ready in %.1fs", self.name, time.monotonic() - started)
        return self.info()

    def _up(self, docker_version: str) -> None:
        self.local._karpenter_binary(self.karpenter_version)  # before anything starts
        self.create(docker_version)
        self.start_karpenter()

    def create(self, docker_version: str) -> None:
        """The kind cluster with kwok in it, and no Karpenter yet: `kind create` on a network
        of its own, the system daemons kept off Karpenter's nodes, kwok from its manifests.
        The run directory starts empty."""
        local = self.local
        if local.run_dir.exists():
            shutil.rmtree(local.run_dir)
        local.logs_dir.mkdir(parents=True)
        build.build_all([build.find("kubectl", local.kubernetes_version), build.find("kwok")])
        self.helm()
        image = self.resolve_node_image()
        self._create_network()
        config = local.run_dir / "kind.yaml"
        config.write_text(kind_config(local.kubernetes_version))
        step = time.monotonic()
        proc = self.kind("create", "cluster", "--name", self.name, "--config", str(config),
                         "--kubeconfig", str(self.kubeconfig), "--image", image,
                         "--wait", KIND_WAIT, "--retain", timeout=CREATE_TIMEOUT_S)
        (local.logs_dir / "kind-create.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise ClusterError("kind could not create the cluster:\n" + create_failure(proc.stderr)
                               + f"\n(all of kind's output: {local.logs_dir / 'kind-create.log'})"
                               + self._node_diagnosis())
        log.warning("kind create cluster %r: %.0fs", self.name, time.monotonic() - step)
        server = json.loads(local.kubectl("version", "-o", "json"))["serverVersion"]["gitVersion"]
        local._save_state(name=self.name, kind=versions.KIND, kubernetes=server,
                          node_image=image, docker=docker_version, started=time.time())
        self.keep_system_daemons_off_karpenter_nodes()
        self.let_local_path_tolerate_the_taint()
        self.install_kwok()

    def _create_network(self) -> None:
        """A Docker network of this cluster's own (kind uses it through
        KIND_EXPERIMENTAL_DOCKER_NETWORK), labelled for `make sweep`."""
        process.run(["docker", "network", "rm", self.network], 60)
        proc = process.run(["docker", "network", "create", "-d=bridge",
                            "-o", "com.docker.network.bridge.enable_ip_masquerade=true",
                            "--label", f"{NETWORK_LABEL}={self.name}",
                            "--label", f"{CREATED_LABEL}={int(time.time())}",
                            self.network], 60)
        if proc.returncode != 0:
            raise ClusterError(f"docker network create {self.network} failed: "
                               f"{proc.stderr.strip()}")

    def gateway(self) -> str:
        """This machine's address on the cluster's Docker network: where a process here is
        reachable from the node and its pods (kind masquerades pod traffic leaving the node)."""
        proc = process.run(["docker", "network", "inspect", self.network, "--format",
                            "{{range .IPAM.Config}}{{.Gateway}} {{end}}"], 60)
        ipv4 = [a for a in proc.stdout.split() if a.count(".") == 3]
        if proc.returncode != 0 or not ipv4:
            raise ClusterError(f"no IPv4 gateway on Docker network {self.network}: "
                               f"{(proc.stderr or proc.stdout).strip()}")
        return ipv4[0]

    def _node_diagnosis(self) -> str:
        node = self.node_container(self.name)
        out = process.run(["docker", "exec", node, "journalctl", "--no-pager", "-n", "30",
                           "-u", "kubelet", "-u", "containerd"], 60)
        return f"\n--- {node}: kubelet and containerd ---\n{out.stdout[-4000:]}" \
            if out.returncode == 0 else ""

    def keep_system_daemons_off_karpenter_nodes(self) -> None:
        patch = json.dumps({"spec": {"template": {"spec": {"affinity": NOT_ON_KARPENTER_NODES}}}})
        for name in SYSTEM_DAEMONSETS:
            self.local.kubectl("-n", "kube-system", "patch", "daemonset", name, "--type=merge",
                               "-p", patch, check=name == "kube-proxy")

    def let_local_path_tolerate_the_taint(self) -> None:
        """Give kind's storage provisioner the control plane's toleration, and wait for it."""
        namespace, name = LOCAL_PATH
        toleration = {"key": CRITICAL_ADDONS_ONLY["key"], "operator": "Exists"}
        try:
            self.local.kubectl("-n", namespace, "patch", "deployment", name, "--type=json",
                               "-p", json.dumps([{"op": "add",
                                                  "path": "/spec/template/spec/tolerations/-",
                                                  "value": toleration}]))
            self.local.kubectl("-n", namespace, "rollout", "status", f"deployment/{name}",
                               "--timeout=120s", timeout=150)
        except ClusterError as exc:
            raise ClusterError(f"kind's {name} cannot run on the tainted control plane: "
                               f"{exc}") from None

    def load_image(self, ref: str) -> None:
        proc = self.kind("load", "docker-image", ref, "--name", self.name, timeout=600)
        if proc.returncode != 0:
            raise ClusterError(f"kind load docker-image {ref} failed: "
                               f"{(proc.stderr or proc.stdout).strip()[-500:]}")

    def install_kwok(self) -> None:
        kwok.install(self.local, self.load_image)

    # ---- Karpenter -----------------------------------------------------------------------
    def _karpenter(self) -> incluster.InCluster:
        return incluster.InCluster(self.kube(), chart.NAMESPACE, f"kind cluster {self.name!r}")

    def _follow_logs(self) -> None:
        incluster.follow_logs(self.kubeconfig, chart.NAMESPACE,
                              self.local.logs_dir / "karpenter.log")

    def start_karpenter(self, version: str | None = None) -> None:
        """Karpenter ``version`` running: where its Deployment is only stopped (scaled to 0)
        with this release, build and settings, scaled back; else installed, or upgraded, by
        its chart. Its log followed."""
        version = version or self.karpenter_version
        wanted = (version, *self._wanted()[1:])
        if self._installed_as() == wanted and self._installed():
            self._karpenter().start()
            self._follow_logs()
            return
        self._install(version)

    def _install(self, version: str) -> None:
        """`helm upgrade --install` of ``version``'s chart with this cluster's settings: its
        image loaded first, its CRDs applied before the controller (as upstream does)."""
        local = self.local
        binary = local._karpenter_binary(version)
        image = chart.image_ref(version, local._build_name(version), binary)
        if not images.exists(image):
            images.from_files(image, {"ko-app/karpenter": binary}, ["/ko-app/karpenter"])
        self.load_image(image)
        if version != local._state().get("crds_version"):
            local._install_crds(version)
            local._save_state(crds_version=version)
        reads_file = build.reads_catalogue_file(build.download_karpenter(version))
        if reads_file:
            local._prepare_catalogue(version)
            self._apply_catalogue()
        env = {"LOG_LEVEL": os.environ.get("KARPENTER_LOG_LEVEL", "debug"),
               **{k: v for k, v in local._karpenter_env(version).items() if v is not None}}
        self._follow_logs()
        started = time.monotonic()
        out = chart.upgrade_install(self.helm(), self.kubeconfig, version,
                                    chart.values(version, image, env, reads_file),
                                    local.run_dir / "karpenter-values.json")
        with open(local.logs_dir / "helm.log", "a") as fh:
            fh.write(out)
        self._karpenter().wait(True)
        local._save_state(karpenter_version=version, karpenter_image=image,
                          karpenter_settings=local.settings,
                          karpenter_build=local._build_name(version),
                          catalogue_selection=local.catalogue_selection)
        log.warning("Karpenter %s installed by its chart in kind cluster %r in %.0fs (%s)",
                    version, self.name, time.monotonic() - started, image)

    def _apply_catalogue(self) -> None:
        """The catalogue onto the node, where the chart's values mount it from."""
        node = self.node_container(self.name)
        images.docker("exec", node, "mkdir", "-p", str(Path(chart.CATALOGUE_ON_NODE).parent))
        images.docker("cp", str(self.local.catalogue_file), f"{node}:{chart.CATALOGUE_ON_NODE}")

    def _installed(self) -> bool:
        try:
            self._karpenter().deployment()
            return True
        except ClusterError:
            return False

    def karpenter_running(self) -> bool:
        """Whether Karpenter's Deployment has a ready replica; where the API cannot be asked
        because Docker stopped (the node is one of its containers), that is the error."""
        try:
            return self._karpenter().running()
        except Exception:
            self._require_docker("Karpenter cannot be asked whether it runs")
            raise

    def _require_docker(self, what: str) -> None:
        ok, seen = docker.answers()
        if not ok:
            raise ClusterError(
                f"Docker does not answer ({seen}): kind cluster {self.name!r}'s node is one of "
                f"its containers and stopped with it, so {what}. Once Docker is back, "
                f"`make sweep SWEEP_ARGS=--kind MAX_AGE=0s` removes what the run left "
                f"(container {self.node_container(self.name)}, network {self.network})")

    def stop_karpenter(self) -> None:
        if self._installed():
            self._karpenter().stop()

    def upgrade_karpenter(self, version: str) -> None:
        """What a platform team does: the new CRDs, then `helm upgrade` to the new chart;
        then the upgrade itself is checked: every replica runs the new image, the cluster's
        CRDs are the new release's, and no Karpenter webhook is left calling a Service that
        does not answer."""
        local = self.local
        local.check_version(version)
        support = compat.supported(version)
        if compat.minor(local.kubernetes_version) not in support:  # the cluster stays
            raise ClusterError(f"Karpenter {version} does not support this cluster's "
                               f"Kubernetes {local.kubernetes_version}: {support.text}")
        local._karpenter_binary(version)  # before anything changes
        self._install(version)
        local.karpenter_version = version
        log.warning("kind cluster %r: upgrade to %s checked: %s", self.name, version,
                    "; ".join(self.check_upgraded(version)))

    def check_upgraded(self, version: str) -> list[str]:
        return upgrade.check(self.kube(), self.local, self._karpenter(), version)

    def restart_karpenter(self) -> None:
        """Karpenter rolled out again with this cluster's settings (`helm upgrade` with the
        new values; a rollout restart where they are the same): the cluster's nodes and
        objects stay."""
        before = ksettings.render(self.local._state().get("karpenter_settings", {}))
        started = time.monotonic()
        if self._installed_as() == self._wanted():
            self.local.kubectl("-n", chart.NAMESPACE, "rollout", "restart",
                               "deployment/karpenter")
            self._karpenter().wait(True)
        else:
            self._install(self.karpenter_version)
        log.warning("kind cluster %r: Karpenter rolled out with %s (it ran with %s) in %.1fs",
                    self.name, ksettings.render(self.local.settings), before,
                    time.monotonic() - started)

    def karpenter_peak_memory_mib(self) -> float | None:
        return None  # in a pod: its cgroup is the node's, not this machine's /proc

    def karpenter_metrics(self) -> str | None:
        try:
            return self._karpenter().metrics()
        except ClusterError:
            return None

    # ---- down ----------------------------------------------------------------------------
    def down(self) -> None:
        """Delete the kind cluster, its network and our processes; safe to call twice."""
        with unstoppable():
            local = self.local
            incluster.stop_following(local.logs_dir / "karpenter.log")
            for pid in process.pids_using(str(local.run_dir)):
                process.terminate(pid)
            self._require_docker("it could not be deleted")
            if self.exists():
                proc = self.kind("delete", "cluster", "--name", self.name,
                                 "--kubeconfig", str(self.kubeconfig), timeout=300)
                if proc.returncode != 0:
                    raise ClusterError(f"kind delete cluster {self.name} failed: "
                                       f"{proc.stderr.strip()}")
            process.run(["docker", "network", "rm", self.network], 60)
            if local.run_dir.is_dir():
                for item in local.run_dir.iterdir():
                    if item != local.logs_dir:
                        shutil.rmtree(item) if item.is_dir() else item.unlink()
            log.warning("kind cluster %r is down; logs kept in %s", self.name, local.logs_dir)

