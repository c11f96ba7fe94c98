"""Local mode: a real control plane (kwokctl's binary runtime) and the real Karpenter.

Everything lives in one run directory (``<cache>/clusters/<name>/``): the kwokctl
workdir, the kubeconfig (never merged into ~/.kube/config), the catalogue, every
component's log and ``state.json``, which lets a later run find, reuse or clean up a
cluster a crashed run left behind.

Long because LocalCluster owns one process tree through its whole life (build, up, reuse,
crash recovery, log capture, down) and its steps share that state; the seam for a split is
the run directory's bookkeeping (state.json, reuse), not done yet.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.labels import REGISTERED
from karpenter_e2e.clusters.api.waits import (
    DEFAULTS,
    Observation,
    StopWaiting,
    WaitAborted,
    WaitTimeout,
    eventually,
    unstoppable,
)
from karpenter_e2e.clusters.base import ClusterInfo, Status
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import (
    build,
    catalogue,
    cluster_files,
    kube_releases,
    process,
    releases,
    versions,
)
from karpenter_e2e.clusters.infra.catalogue_table import ZONES, EC2Type
from karpenter_e2e.clusters.infra.filelock import file_lock, write_whole
from karpenter_e2e.clusters.karpenter import compat, features, mutants, settings as ksettings
from karpenter_e2e.clusters.karpenter.mutants import Mutant
from karpenter_e2e.clusters.local import stages

log = logging.getLogger(__name__)


def _sha256(path: Path) -> str:
    """The digest of the binary that really ran (named in the report beside its version)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

ASSETS = Path(__file__).parent / "assets"
# Creations on this machine take turns (see _up). A turn is kwokctl's create (bounded at
# 180 s) and the API's answer; 49-60 s each when ten clusters came up at once, load 21. A
# cluster waits for at most this long behind the others.
CREATE_TURN_BOUND_S = 900
# Alpha gates local mode turns on where the release has them (off by default in every release
# that knows them; clusters/karpenter/features.py GATES, which renders FEATURE_GATES per
# release), so the static-capacity and node-overlay scenarios can run. Both are inert for
# every other scenario: StaticCapacity acts only on NodePools that set spec.replicas, and
# NodeOverlay with no NodeOverlay objects hands the instance types on unchanged (its store
# marks each NodePool evaluated on the reconcile the NodePool's creation triggers).
# NodeRepair is on as in upstream's own KWOK e2e (its Makefile's featureGates.nodeRepair=true):
# the KWOK provider declares repair policies for a simulated fault (KWOKUnhealthy), which the
# node-repair scenario drives; no other scenario sets that condition.
FEATURE_GATES = ("NodeOverlay", "StaticCapacity", "NodeRepair")


# What Karpenter's process inherits from the caller's shell: only what finding files needs.
# Its settings come from the run (karpenter_settings), never from a stray variable.
INHERITED_ENV = ("PATH", "HOME", "TMPDIR", "TZ", "LANG")


def _base_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    # The harness's own knob for Karpenter's log level (a setting LOG_LEVEL overrides it).
    # Debug by default: its decisions (expiring, marking consolidatable, excluded types) are
    # what a red scenario needs explained, and it is a few lines per decision.
    env["LOG_LEVEL"] = os.environ.get("KARPENTER_LOG_LEVEL", "debug")
    return env


class LocalCluster:
    mode = "local"
    feature_gates = FEATURE_GATES
    NODECLASS_RESOURCE = "kwoknodeclass"

    context: str | None = None  # the kubeconfig it writes has one context

    def __init__(self, name: str = "karpenter-e2e", karpenter_version: str = versions.KARPENTER,
                 apiserver_port: int | None = None,
                 catalogue_exclude: Callable[[EC2Type], bool] | None = None,
                 mutant: Mutant | None = None, kubernetes_version: str | None = None,
                 settings: Mapping[str, str] | None = None,
                 catalogue_selection: str = "curated"):
        # Any release the Go module proxy serves from v1.0 on; refused here, in seconds,
        # before anything starts (releases.check says why and names the nearest served ones).
        self.check_version(karpenter_version)
        self.name = name
        self.karpenter_version = karpenter_version
        # A minor or release inside Karpenter's supported range (None: the release's default),
        # resolved to vX.Y.Z here, so a bad one is refused before anything is built.
        self.kubernetes_version = kube_releases.resolve(kubernetes_version, karpenter_version)
        self.apiserver_port = apiserver_port
        self.catalogue_exclude = catalogue_exclude
        # Which catalogue (catalogue_full: curated, full, families=...), before the exclusion.
        self.catalogue_selection = catalogue_selection
        # A patched Karpenter (the mutant matrix): it runs whenever Karpenter runs at the
        # version it patches (at start, or once upgraded to it); None for the release.
        self.mutant = mutant
        # Karpenter's own options and gates for this cluster (karpenter_settings: KEY=VALUE),
        # checked against the release by check_options and again at start.
        self.settings = dict(settings or {})
        self._known: dict[str, ksettings.Known] = {}
        self.run_dir = cluster_files.directory(name)
        self.kwok_workdir = self.run_dir / "kwok"
        self.kubeconfig = self.run_dir / "kubeconfig"
        self.logs_dir = self.run_dir / "logs"
        self.state_file = self.run_dir / "state.json"
        self.catalogue_file = self.run_dir / "instance-types.json"

    # ---- state ---------------------------------------------------------------------------
    def _state(self) -> dict:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self, **changes) -> None:
        write_whole(self.state_file, json.dumps(self._state() | changes, indent=1))

    @property
    def lock_path(self) -> Path:
        return cluster_files.owner_lock(self.name)

    def owner(self) -> str | None:
        """The test run that brought this cluster up (it takes it down at the end)."""
        return self._state().get("run_id")

    def set_owner(self, run_id: str) -> None:
        self._save_state(run_id=run_id)

    def render_nodeclass(self, name: str, labels: dict[str, str]) -> dict:
        # Karpenter's KWOK provider has no NodeClass settings: a name and labels are all.
        return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                "metadata": {"name": name, "labels": dict(labels)}}

    def cheapest_family(self, requirements: list[dict]) -> list[str]:
        """Types of the cheapest family fitting ``requirements`` in this cluster's catalogue."""
        return catalogue.cheapest_family(self.catalogue_types(), requirements)

    def catalogue_types(self) -> list[EC2Type]:
        """The types this cluster's Karpenter is offered: the selection, less the exclusion."""
        return catalogue.select(self.catalogue_exclude, self.catalogue_selection)

    def reap_orphan_nodes(self, selector: str) -> list[str]:
        """Delete nodes matching ``selector`` that no NodeClaim owns. Locally a node *is*
        the instance, so this is what the cloud's instance garbage collection would do."""
        return self._delete_unowned_nodes(selector)

    def _delete_unowned_nodes(self, selector: str) -> list[str]:
        out = self.kubectl("get", "nodes,nodeclaims", "-l", selector, "-o",
                           "jsonpath={range .items[*]}{.kind} {.metadata.name} "
                           "{.status.nodeName}{'\\n'}{end}")
        rows = [line.split() for line in out.splitlines() if line.strip()]
        owned = {r[2] for r in rows if r[0] == "NodeClaim" and len(r) > 2}
        orphans = [r[1] for r in rows if r[0] == "Node" and r[1] not in owned]
        for name in orphans:
            self.kubectl("delete", "node", name, "--ignore-not-found", "--wait=false")
        return orphans

    # The KWOK provider's Delete removes the NodeClaim object, not the node it created
    # (kwok/cloudprovider/cloudprovider.go): a NodeClaim deleted after launch but before
    # registration leaves its node, where a cloud would terminate the instance.
    DELETE_LEAVES_UNREGISTERED_NODES = True

    def end_unregistered_instances(self, selector: str) -> list[str]:
        """Delete nodes of ``selector`` that no NodeClaim owns and Karpenter never registered
        (no karpenter.sh/registered label): the instance termination the KWOK provider's
        Delete leaves out. Registered ones are left for the leak check."""
        if not self.DELETE_LEAVES_UNREGISTERED_NODES:
            return []
        return self._delete_unowned_nodes(f"{selector},!{REGISTERED}")

    def remove_without_karpenter(self, selector: str) -> list[str]:
        """With Karpenter gone nothing else will finish them: delete the NodeClaims, nodes
        and NodeClasses matching ``selector``, finalizers included. Returns 'Kind/name' of
        each. Locally nothing is left in a cloud by doing so."""
        out = self.kubectl("get", f"nodeclaim,node,{self.NODECLASS_RESOURCE}", "-l", selector,
                           "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name}{'\\n'}{end}")
        removed = [line.strip() for line in out.splitlines() if line.strip()]
        for ref in removed:
            kind, name = ref.split("/", 1)
            resource = {"NodeClaim": "nodeclaim", "Node": "node"}.get(kind, self.NODECLASS_RESOURCE)
            self.kubectl("patch", resource, name, "--type=merge",
                         "-p", '{"metadata":{"finalizers":null}}', check=False)
            self.kubectl("delete", resource, name, "--ignore-not-found", "--wait=false")
        return removed

    def _kwokctl_cluster_dir(self) -> Path:
        return self.kwok_workdir / "clusters" / self.name

    def _kwokctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        env = {**os.environ, "KWOK_WORKDIR": str(self.kwok_workdir)}
        cmd = [str(build.find("kwokctl").path), "--name", self.name, *args]
        proc = process.run(cmd, timeout, env=env, what=f"kwokctl {' '.join(args)}")
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        with open(self.logs_dir / "kwokctl.log", "a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}\n")
        return proc

    # ---- status --------------------------------------------------------------------------
    def _component_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        pid_dir = self._kwokctl_cluster_dir() / "pids"
        for f in sorted(pid_dir.glob("*.pid")) if pid_dir.is_dir() else []:
            try:
                pids[f.stem] = int(f.read_text().strip())
            except ValueError:
                continue
        if self._state().get("karpenter_pid"):
            pids["karpenter"] = self._state()["karpenter_pid"]
        return pids

    def status(self) -> Status:
        pids = self._component_pids()
        if not pids:
            return Status(False, f"no local cluster {self.name!r} (run dir {self.run_dir})")
        comps = {name: process.alive(pid) for name, pid in pids.items()}
        detail = "\n".join(f"{n:24} pid {pids[n]:<8} {'running' if ok else 'DEAD'}"
                           for n, ok in comps.items())
        return Status(all(comps.values()), detail, comps)

    def logs(self) -> dict[str, Path]:
        found = {p.stem: p for p in self.logs_dir.glob("*.log")}
        kwok_logs = self._kwokctl_cluster_dir() / "logs"
        found |= {p.stem: p for p in kwok_logs.glob("*.log")} if kwok_logs.is_dir() else {}
        return found

    def info(self) -> ClusterInfo:
        state = self._state()
        return ClusterInfo(
            mode=self.mode, name=self.name, kubeconfig=self.kubeconfig,
            # What the apiserver's /version said at bring-up, not what was asked for.
            versions={"kubernetes": state.get("kubernetes_running", "unknown"),
                      "karpenter": state.get("karpenter_version", self.karpenter_version),
                      "karpenter_build": state.get("karpenter_build", "release"),
                      "karpenter_sha256": state.get("karpenter_sha256", "unknown"),
                      "kwok": versions.KWOK, "etcd": versions.ETCD},
            zones=ZONES,
            karpenter_log=self.logs_dir / "karpenter.log",
            catalogue=self.catalogue_file,
            catalogue_selection=self.catalogue_selection,
            feature_gates=self.gates_on(state.get("karpenter_version", self.karpenter_version)),
            karpenter_settings=dict(state.get("karpenter_settings", self.settings)),
            # local mode's own nodes come from the KWOK provider through these kwok stages;
            # a mode built on it that makes its nodes otherwise (aws-sim) does not say so
            launch_latency_simulated=self.mode == "local",
        )

    def gates_on(self, version: str) -> tuple[str, ...]:
        """The gates the harness turns on that Karpenter ``version`` knows."""
        known = features.gates_known(version)
        _, on, off = ksettings.split(self.settings, known)
        return tuple(g for g in dict.fromkeys((*self.feature_gates, *on))
                     if g in known and g not in off)

    # ---- up ------------------------------------------------------------------------------
    def up(self, reuse: bool = False) -> ClusterInfo:
        """Bring the cluster up, or reuse a healthy one when ``reuse``; clean a broken one."""
        self.check_options()  # a setting the release does not read: refused before anything
        st = self.status()
        if st.components:
            running = (self._state().get("karpenter_version"),
                       self._state().get("karpenter_build", "release"),
                       self._state().get("kubernetes_version"),
                       ksettings.render(self._state().get("karpenter_settings", {})),
                       self._state().get("catalogue_selection", "curated"),
                       self._state().get("kwok_stages"))
            wanted = (self.karpenter_version, self._build_name(), self.kubernetes_version,
                      ksettings.render(self.settings), self.catalogue_selection,
                      self._kwok_stages_digest())
            if running != wanted and reuse and st.running \
                    and running[:3] + running[4:] == wanted[:3] + wanted[4:] and self._healthy():
                # Only the settings differ: what an operator does with new Helm values (the
                # control plane stays, Karpenter restarts with them).
                self.restart_karpenter()
                return self.info()
            if running != wanted:
                reuse = False  # never hand a test a Karpenter other than the one it asked for
                log.warning("local cluster %r runs Karpenter %s (%s) on Kubernetes %s with %s "
                            "(catalogue %s, kwok stages %s), not %s (%s) on %s with %s "
                            "(catalogue %s, kwok stages %s)",
                            self.name, *running, *wanted)
            if st.running and reuse and self._healthy():
                log.warning("reusing local cluster %r (%s)", self.name, self.run_dir)
                return self.info()
            why = "still running" if st.running else "left by a crashed run"
            log.warning("local cluster %r %s; cleaning it up first:\n%s", self.name, why, st.detail)
            self.down()
        started = time.monotonic()
        try:
            self._up()
        except BaseException:
            # Ctrl-C or a failure half-way: nothing of ours may stay running.
            log.warning("bring-up of %r failed; tearing down what was started", self.name)
            self.down()
            raise
        log.warning("local cluster %r ready in %.1fs (Kubernetes %s, Karpenter %s)", self.name,
                    time.monotonic() - started, self._state().get("kubernetes_running"),
                    self.karpenter_version)
        return self.info()

    def _up(self) -> None:
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir)
        self.logs_dir.mkdir(parents=True)
        build.build_all(build.kube_targets(self.kubernetes_version)
                        + [build.find(n) for n in ("etcd", "kwok", "kwokctl")])
        self._karpenter_binary(self.karpenter_version)
        # kwokctl picks etcd's and the controllers' ports itself, as "the first free one": two
        # clusters created at once pick the same and one apiserver ends up on the other's
        # etcd. From the choice of ports to a running control plane, creations therefore take
        # turns (3.8 s each, of a 6.9 s bring-up; CRDs and Karpenter start after the turn).
        with file_lock(self._create_lock(), f"creating {self.name}'s control plane",
                       CREATE_TURN_BOUND_S):
            port = self.apiserver_port or process.free_port()
            if process.port_in_use(port):
                owner = process.port_owner(port)
                raise ClusterError(f"port {port} on 127.0.0.1 is already in use"
                                   + (f" by {owner}" if owner else "")
                                   + "; choose another with --apiserver-port (pytest: "
                                   "--karpenter-apiserver-port) or stop that process")
            self._save_state(name=self.name, run_dir=str(self.run_dir), apiserver_port=port,
                             karpenter_version=self.karpenter_version,
                             kubernetes_version=self.kubernetes_version, started=time.time())
            self._start_cloud()
            config = self.run_dir / "kwokctl.yaml"
            # kwokctl takes the Stage documents beside its configuration instead of its
            # defaults (runtime/cluster.go): the same stages, with the launch latency.
            kwok_stages = self._kwok_stages()
            config.write_text(yaml.safe_dump_all([self._kwokctl_config(port), *kwok_stages],
                                                 sort_keys=False))
            self._save_state(kwok_stages=stages.digest(kwok_stages))
            proc = self._kwokctl("create", "cluster", "--config", str(config),
                                 "--kubeconfig", str(self.kubeconfig), "--wait", "60s", timeout=180)
            if proc.returncode == 0:
                # Still in turn: a component that gave up at start has left its port free,
                # and the next creation would take it as "the first free one".
                self._wait_api()
                self._restart_gave_up()
        if proc.returncode != 0:
            raise ClusterError("kwokctl could not create the control plane:\n"
                               + _tail(proc.stderr or proc.stdout, 25)
                               + f"\n(component logs: {self._kwokctl_cluster_dir() / 'logs'})")
        self._record_kubernetes_version()
        self._install_crds()
        self._prepare_cloud()
        self.start_karpenter(self.karpenter_version)
        self._check_components()

    # Components that exit when the apiserver is not healthy within their own start-up wait.
    RESTARTABLE = frozenset({"kube-controller-manager", "kube-scheduler"})

    def _create_lock(self) -> Path:
        return cluster_files.root() / ".create.lock"

    def _restart_gave_up(self) -> None:
        """On a loaded machine kube-controller-manager (or kube-scheduler) gives up at start
        when the apiserver is not healthy within its fixed 10 s wait ("failed to wait for
        apiserver being healthy ... rbac/bootstrap-roles failed"), and no ReplicaSet would
        then create a pod. The apiserver is ready by now (/readyz), so such a component is
        started again (``kwokctl start cluster`` starts only what is not running) and must
        then do its work: a probe namespace gets its default ServiceAccount from
        kube-controller-manager. Call it holding the create lock: kwokctl gave the dead
        component its port when the cluster was created, and another cluster created
        meanwhile would have picked that free port for itself ("bind: address already in
        use" on the restart, seen beside a soak)."""
        dead = self._dead()
        if dead and set(dead) <= self.RESTARTABLE:
            log.warning("%s exited during bring-up (%s); the apiserver is ready now, starting "
                        "it again", ", ".join(dead), _last_line(self._log_tails(dead)))
            # kwokctl takes a component for running while its pid answers signal 0, and an
            # exited one nobody has reaped yet (a zombie: process.alive says dead) does: it
            # would not start it again. Seen beside a soak: "Cluster is started" in 0.25 s,
            # no second start in kube-controller-manager's log, 60 s "dead" until the wait
            # gave up. Its pid file goes, so kwokctl starts it.
            for name in dead:
                (self._kwokctl_cluster_dir() / "pids" / f"{name}.pid").unlink(missing_ok=True)
            self._kwokctl("start", "cluster", timeout=60)
            self._wait_controllers_work()

    def _check_components(self) -> None:
        """Every component still running at the end of the bring-up. One that gave up after
        the creation's turn is started again in a turn of its own; any other component
        dead, or one dead again, is an error naming it and its log."""
        if self._dead():
            with file_lock(self._create_lock(), f"restarting {self.name}'s components",
                           CREATE_TURN_BOUND_S):
                self._restart_gave_up()
        dead = self._dead()
        if dead:
            raise ClusterError(f"{', '.join(dead)} exited during bring-up:\n"
                               + self._log_tails(dead))

    def _dead(self) -> list[str]:
        return [n for n, ok in self.status().components.items() if not ok]

    def _wait_controllers_work(self) -> None:
        probe = f"karpenter-e2e-probe-{os.getpid()}"
        self.kubectl("create", "namespace", probe, timeout=30)
        try:
            def served() -> Observation:
                out = self.kubectl("get", "serviceaccount", "default", "-n", probe, "-o",
                                   "name", timeout=10, check=False).strip()
                dead = self._dead()
                return Observation(bool(out) and not dead,
                                   f"dead: {dead}" if dead else "no default ServiceAccount yet")
            eventually(served, what="kube-controller-manager to work again (a namespace's "
                                    "default ServiceAccount)", timeout=DEFAULTS.api, poll=0.5,
                       diagnose=lambda: self._log_tails(sorted(self.RESTARTABLE)))
        finally:
            self.kubectl("delete", "namespace", probe, "--wait=false", timeout=30, check=False)

    def _start_cloud(self) -> None:
        """Start what the cloud provider needs while the control plane comes up: nothing here."""

    def _prepare_cloud(self) -> None:
        """What Karpenter's cloud provider needs before it starts: here, its catalogue."""
        self._prepare_catalogue(self.karpenter_version)

    def _prepare_catalogue(self, version: str) -> None:
        """The catalogue file Karpenter reads (releases up to v1.1.5 have it built in)."""
        text = catalogue.render_text(self.catalogue_types())
        if not self.catalogue_file.exists() or self.catalogue_file.read_text() != text:
            self.catalogue_file.parent.mkdir(parents=True, exist_ok=True)
            self.catalogue_file.write_text(text)

    def _kwok_stages(self) -> list[dict]:
        return stages.render(build.download_module("sigs.k8s.io/kwok", versions.KWOK))

    def _kwok_stages_digest(self) -> str:
        return stages.digest(self._kwok_stages())

    def _kwokctl_config(self, port: int) -> dict:
        b = {t.name: str(t.path) for t in build.kube_targets(self.kubernetes_version)}
        b |= {n: str(build.find(n).path) for n in ("etcd", "kwok")}
        return {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": {
                "runtime": "binary",
                "bindAddress": "127.0.0.1",  # nothing of ours listens beyond loopback
                "kubeApiserverPort": port,
                "kubeVersion": self.kubernetes_version,  # kwokctl picks flags by it
                "etcdVersion": versions.ETCD.lstrip("v"),
                "kwokVersion": versions.KWOK,
                "kubeApiserverBinary": b["kube-apiserver"],
                "kubeControllerManagerBinary": b["kube-controller-manager"],
                "kubeSchedulerBinary": b["kube-scheduler"],
                "kubectlBinary": b["kubectl"],
                "etcdBinary": b["etcd"],
                "kwokControllerBinary": b["kwok"],
                "quietPull": True,
            },
            # One instance of each: no leader election. With it, a loaded 2-core machine made
            # kube-controller-manager miss its 5 s lease renewal, log "leaderelection lost" and
            # exit (kwokctl does not restart it): no pod was created or deleted after that.
            "componentsPatches": [
                {"name": name, "extraArgs": [{"key": "leader-elect", "value": "false"}]}
                for name in ("kube-controller-manager", "kube-scheduler")],
        }

    def kubectl(self, *args: str, timeout: float = 60, check: bool = True) -> str:
        # The cluster's own kubectl: kubectl supports one minor of skew either way.
        kubectl = build.find("kubectl", self.kubernetes_version).path
        cmd = [str(kubectl), "--kubeconfig", str(self.kubeconfig), *args]
        proc = process.run(cmd, timeout, what=f"kubectl {' '.join(args)}")
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {_tail(proc.stderr, 10)}")
        return proc.stdout

    def _healthy(self, within: float = 30) -> bool:
        """API and Karpenter ready, looked at for up to ``within`` seconds: on a loaded
        machine one slow /readyz must not make a reused cluster be torn down and rebuilt
        under the run that was using it (seen with two aws-sim clusters at load 25)."""
        def ready() -> Observation:
            try:
                api = self.kubectl("get", "--raw", "/readyz", timeout=10).strip() == "ok"
            except ClusterError as exc:
                return Observation(False, f"API: {str(exc)[:200]}")
            karpenter = api and self._karpenter_ready()
            components = karpenter and self.status().running  # e.g. kube-controller-manager
            return Observation(components, "a component exited" if karpenter else
                               "Karpenter not ready" if api else "API not ready")

        try:
            eventually(ready, what=f"cluster {self.name!r} to be healthy", timeout=within, poll=2)
            return True
        except WaitTimeout:
            return False

    def _wait_api(self) -> None:
        def ready() -> Observation:
            out = self.kubectl("get", "--raw", "/readyz", timeout=10, check=False).strip()
            return Observation(out == "ok", out or "no answer")

        eventually(ready, what="kube-apiserver /readyz to answer ok", timeout=DEFAULTS.api,
                   poll=0.5, diagnose=lambda: self._log_tails(["kube-apiserver", "etcd"]))

    def _record_kubernetes_version(self) -> None:
        """The apiserver's own /version, for the report; a binary that is not the release
        asked for (a wrong cache entry) stops the bring-up."""
        running = json.loads(self.kubectl("get", "--raw", "/version", timeout=10))["gitVersion"]
        self._save_state(kubernetes_running=running)
        if running != self.kubernetes_version:
            raise ClusterError(f"kube-apiserver reports {running} at /version; "
                               f"{self.kubernetes_version} was asked for")

    def crd_dirs(self, version: str) -> list[Path]:
        module = build.download_karpenter(version)
        rel = [_core_crds(module), "kwok/apis/crds"]
        if self._runs_mutant(version) and any(
                p.startswith(tuple(f"{r}/" for r in rel)) for p in mutants.touched(self.mutant)):
            # A CRD mutant (a validation rule lost): its patched CRDs are what gets installed.
            return mutants.apply_to_dirs(self.mutant, module, rel,
                                         build.cache_dir() / "mutants" / "crds" / self.mutant.key)
        return [module / r for r in rel]

    def _install_crds(self, version: str | None = None) -> None:
        for d in self.crd_dirs(version or self.karpenter_version):
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(d))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh",
                     "crd/kwoknodeclasses.karpenter.kwok.sh", timeout=90)
        self.kubectl("apply", "--server-side", "-f", str(ASSETS / "default-nodeclass.yaml"))

    # ---- Karpenter -----------------------------------------------------------------------
    def start_karpenter(self, version: str | None = None) -> None:
        """Start karpenter-kwok as a local process and wait until /readyz answers ok."""
        version = version or self.karpenter_version
        binary = self._karpenter_binary(version)
        if version != self._state().get("crds_version"):
            self._install_crds(version)  # new CRDs first, then the controller
            self._save_state(crds_version=version)
        self._prepare_catalogue(version)
        # Its ports are picked, and the process started, in the creation turn: a control plane
        # created beside it (kwokctl takes "the first free one") then starts only after it.
        with file_lock(self._create_lock(), f"starting {self.name}'s Karpenter",
                       CREATE_TURN_BOUND_S):
            metrics, health = process.free_port(), process.free_port()
            log_path = self.logs_dir / "karpenter.log"
            env = {**_base_env(),
                   "KUBECONFIG": str(self.kubeconfig),
                   "DISABLE_LEADER_ELECTION": "true",
                   "METRICS_PORT": str(metrics),
                   "HEALTH_PROBE_PORT": str(health)}
            env.update(self._karpenter_env(version))
            env = {k: v for k, v in env.items() if v is not None}  # None: unset it
            with open(log_path, "a") as out:
                out.write(f"--- {binary.name} {version} starting {time.strftime('%H:%M:%S')} ---\n")
            proc = process.spawn(self._karpenter_command(binary, version), log_path,
                                 self.run_dir, env)
        self._save_state(karpenter_pid=proc.pid, karpenter_version=version,
                         karpenter_settings=self.settings,
                         catalogue_selection=self.catalogue_selection,
                         karpenter_build=self._build_name(version),
                         karpenter_sha256=_sha256(binary)[:16],
                         karpenter_metrics_port=metrics, karpenter_health_port=health)

        def ready() -> Observation:
            ok = self._karpenter_ready()
            return Observation(ok, "/readyz ok" if ok else f"/readyz on :{health} not ok yet")

        await_started(proc, f"Karpenter {version}", ready, log_path,
                      what=f"Karpenter {version} /readyz to answer ok", poll=0.5)

    def _karpenter_command(self, binary: Path, version: str | None = None) -> list[str]:
        # The catalogue as a flag, not INSTANCE_TYPES_FILE_PATH: the run directory in the
        # command line is how down() finds this process even if state.json is lost.
        if not build.reads_catalogue_file(build.download_karpenter(version or self.karpenter_version)):
            # Up to v1.1.5 the catalogue is built in and the binary takes no path.
            return [str(self._run_dir_link(binary))]
        return [str(binary), "--instance-types-file-path", str(self.catalogue_file)]

    def _run_dir_link(self, binary: Path) -> Path:
        """A link to ``binary`` in the run directory, to start it through: the run directory
        in its command line is how down() finds the process even if state.json is lost."""
        link = self.run_dir / binary.name
        if not link.is_symlink() or link.resolve() != binary.resolve():
            link.unlink(missing_ok=True)
            link.symlink_to(binary)
        return link

    def _karpenter_env(self, version: str | None = None) -> dict[str, str | None]:
        """Cloud-provider settings on top of the common environment (None unsets one), for
        Karpenter ``version``: its own gates and defaults (features.GATES), with ours on."""
        version = version or self.karpenter_version
        options, on, off = ksettings.split(self.settings, self.known_settings(version).gates)
        env: dict[str, str | None] = {
            **options,
            "FEATURE_GATES": features.feature_gates_env(version, tuple(self.feature_gates) + on,
                                                        off)}
        if build.serves_webhooks(build.download_karpenter(version)):
            # v1.0.x's KWOK main starts knative webhooks: they need a namespace, and are
            # turned off (no certificate, nothing calls them: its CRDs without conversion).
            env |= {"SYSTEM_NAMESPACE": "kube-system", "DISABLE_WEBHOOK": "true"}
        return env

    def _runs_mutant(self, version: str) -> bool:
        return self.mutant is not None and version == self.mutant.version

    def _build_name(self, version: str | None = None) -> str:
        if self._runs_mutant(version or self.karpenter_version):
            return f"mutant {self.mutant.key}"
        return "release"

    def _karpenter_binary(self, version: str) -> Path:
        return build.karpenter_binary(version, self.catalogue_exclude,
                                      self.mutant if self._runs_mutant(version) else None,
                                      self.catalogue_selection)

    @staticmethod
    def check_version(version: str) -> None:
        """Refuse a Karpenter this mode cannot run: local mode runs any core release the
        module proxy serves (aws-sim mode: provider releases, whose core is served)."""
        releases.check(version)

    def upgrade_karpenter(self, version: str) -> None:
        """What an operator does: stop the old controller, apply the new CRDs, start the new."""
        self.check_version(version)
        support = compat.supported(version)
        if compat.minor(self.kubernetes_version) not in support:  # the control plane stays
            raise ClusterError(f"Karpenter {version} does not support this cluster's "
                               f"Kubernetes {self.kubernetes_version}: {support.text}")
        self._karpenter_binary(version)  # before anything stops
        self.stop_karpenter()
        self.start_karpenter(version)
        self.karpenter_version = version

    def restart_karpenter(self) -> None:
        """Karpenter stopped and started again with this cluster's settings (the same
        release and build): the cluster's nodes and objects stay."""
        before = ksettings.render(self._state().get("karpenter_settings", {}))
        started = time.monotonic()
        self.stop_karpenter()
        self.start_karpenter()
        log.warning("local cluster %r: Karpenter restarted with %s (it ran with %s) in %.1fs",
                    self.name, ksettings.render(self.settings), before,
                    time.monotonic() - started)

    def _karpenter_ready(self) -> bool:
        state = self._state()
        if not process.alive(state.get("karpenter_pid")):
            return False
        try:
            url = f"http://127.0.0.1:{state['karpenter_health_port']}/readyz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, KeyError):
            return False

    def karpenter_peak_memory_mib(self) -> float | None:
        """Karpenter's peak resident memory so far (VmHWM), for the scale scenario."""
        pid = self._state().get("karpenter_pid")
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except (OSError, ValueError):
            pass
        return None

    def karpenter_metrics(self) -> str | None:
        """Karpenter's own Prometheus /metrics page, as text (None when it does not answer)."""
        port = self._state().get("karpenter_metrics_port")
        if not port or not self.karpenter_running():
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                return resp.read().decode()
        except (urllib.error.URLError, OSError):
            return None

    def stop_karpenter(self) -> None:
        pid = self._state().get("karpenter_pid")
        if pid:
            process.terminate(pid)
            self._save_state(karpenter_pid=None)

    def check_options(self) -> None:
        """Refuse a setting the release does not read (the rest the constructor refused).
        Without settings nothing is read: the release's module is downloaded (hundreds of MB
        into a fresh GOMODCACHE) only when its options are needed."""
        if self.settings:
            self.known_settings(self.karpenter_version)

    @staticmethod
    def release_settings(version: str) -> ksettings.Known:
        """What release ``version`` reads: its options.go (and the KWOK provider's) and gates."""
        return ksettings.known(version, build.download_karpenter(version))

    def known_settings(self, version: str) -> ksettings.Known:
        """What Karpenter ``version`` reads, with this cluster's settings checked against it."""
        if version not in self._known:
            self._known[version] = self.release_settings(version)
        ksettings.check(self.settings, self._known[version])
        return self._known[version]

    def cloud_problem(self) -> str | None:
        """The simulated cloud is Karpenter's own KWOK provider: nothing apart to fail."""
        return None

    def karpenter_running(self) -> bool:
        return process.alive(self._state().get("karpenter_pid"))

    # ---- down ----------------------------------------------------------------------------
    def down(self) -> None:
        """Stop everything of this cluster; safe to call twice and after a crash. Never cut
        short by a stop (waits.stop_when): it is what a stopped thread does last."""
        with unstoppable():
            self._down()

    def _down(self) -> None:
        if not self._kwokctl_cluster_dir().exists() and not self._component_pids() \
                and not process.pids_using(str(self.run_dir)):
            log.warning("no local cluster %r is running; nothing to take down", self.name)
            return
        ours = set(self._component_pids().values()) | set(process.pids_using(str(self.run_dir)))
        ports = process.ports_of(sorted(ours))
        self.stop_karpenter()
        self._keep_component_logs()
        if self._kwokctl_cluster_dir().exists() and build.find("kwokctl").path.exists():
            proc = self._kwokctl("delete", "cluster", "--kubeconfig", str(self.kubeconfig),
                                 timeout=120)
            if proc.returncode != 0:
                log.warning("kwokctl delete failed (%s); killing the processes directly",
                            _tail(proc.stderr, 3))
        # Whatever kwokctl missed (a crash mid-create): anything still running from our run dir.
        for pid in process.pids_using(str(self.run_dir)):
            process.terminate(pid)
        for pid in ours:
            process.terminate(pid)

        def released() -> Observation:
            # An exiting process can hold its listening socket a moment after it is gone.
            left = process.pids_using(str(self.run_dir))
            busy = sorted(ports & set(process.listening_ports()))
            return Observation(not left and not busy, f"processes {left}, listening ports {busy}")

        try:
            eventually(released, what=f"every process and port of {self.name!r} to be released",
                       timeout=30, poll=0.1)
        except WaitTimeout as exc:
            raise ClusterError(f"down left things behind: {exc.seen}") from None
        for item in self.run_dir.iterdir():
            if item != self.logs_dir:
                shutil.rmtree(item) if item.is_dir() else item.unlink()
        log.warning("local cluster %r is down; logs kept in %s", self.name, self.logs_dir)

    def _keep_component_logs(self) -> None:
        src = self._kwokctl_cluster_dir() / "logs"
        if src.is_dir():
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            for f in src.glob("*.log"):
                shutil.copy2(f, self.logs_dir / f.name)

    def _log_tails(self, names: list[str], lines: int = 15) -> str:
        logs = self.logs()
        return "\n".join(f"--- {n} ---\n{_tail_file(logs[n], lines)}" if n in logs else
                         f"--- {n} --- (no log of that name; logs: {', '.join(sorted(logs))})"
                         for n in names)


# The NodeClass label core writes on every NodeClaim from v1.1 (v1.NodeClassLabelKey).
KWOK_NODECLASS_LABEL = "karpenter.kwok.sh/kwoknodeclass"


def _core_crds(module: Path) -> str:
    """Which of a release's copies of the karpenter.sh CRDs to install: kwok/charts/crds (its
    KWOK provider's, with the karpenter.kwok.sh label rules) unless
    - they convert versions through a webhook, as v1.0.8's do for v1beta1 (no webhook runs
      here), or
    - their karpenter.kwok.sh rule refuses the NodeClass label core itself writes on every
      NodeClaim, as v1.1.x's do (the allowed list lacks kwoknodeclass: no NodeClaim could be
      created, whatever Karpenter decided);
    then pkg/apis/crds, core's own, which serve the same versions and carry no KWOK rule."""
    writes_label = "NodeClassLabelKey(" in _text(module / "pkg/apis/v1/labels.go")
    for crd in sorted((module / "kwok/charts/crds").glob("*.yaml")):
        text = crd.read_text()
        conversion = (yaml.safe_load(text) or {}).get("spec", {}).get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            return "pkg/apis/crds"
        if (writes_label and 'label domain "karpenter.kwok.sh" is restricted' in text
                and KWOK_NODECLASS_LABEL not in text):
            return "pkg/apis/crds"
    return "kwok/charts/crds"


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def await_started(proc: subprocess.Popen, name: str, ready: Callable[[], Observation],
                  log_path: Path, what: str, poll: float) -> None:
    """Wait (the default api deadline) until ``ready()`` holds for a process just started; if it exits
    first, fail at once with the line that says why; on timeout, stop it."""
    def check() -> Observation:
        if proc.poll() is not None:
            raise StopWaiting(f"{name} exited with code {proc.returncode} at start: "
                              f"{_first_failure(log_path)}\n"
                              f"last lines of {log_path}:\n{_tail_file(log_path, 15)}")
        return ready()

    try:
        eventually(check, what=what, timeout=DEFAULTS.api, poll=poll,
                   diagnose=lambda: f"{name} log tail:\n" + _tail_file(log_path, 30))
    except WaitAborted as exc:
        raise ClusterError(exc.seen) from None
    except WaitTimeout:
        process.terminate(proc.pid)
        raise


def _tail(text: str, lines: int) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])


def _first_failure(path: Path) -> str:
    """The line that says why a Go process died: its panic or first error, not the stack."""
    try:
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("panic:", "fatal error:")) or '"level":"ERROR"' in line:
                return line.strip()[:400]
    except OSError:
        pass
    return "(no panic or error line in its log)"


def _tail_file(path: Path, lines: int) -> str:
    try:
        return _tail(path.read_text(errors="replace"), lines)
    except OSError:
        return f"(no log at {path})"


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no log"
