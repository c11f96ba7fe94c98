"""EKS mode: an existing EKS cluster with Karpenter's AWS provider, reached by kubeconfig.

Nothing is created or deleted here: ``up`` checks the cluster can run the suites and is
opted in, ``down`` leaves it as it is. The opt-in needs two keys held by different
people-or-places: a ConfigMap in the cluster naming it, and the same name on the command
line, so a stray kubeconfig context can never point the harness at the wrong cluster.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import client

from karpenter_e2e.clusters.api.kube import (
    Kube,  # the harness's one client: same loading, same timeouts
    if_found,
)
from karpenter_e2e.clusters.api.waits import DEFAULTS, Observation, eventually
from karpenter_e2e.clusters.base import ClusterInfo, Status
from karpenter_e2e.clusters.eks import aws
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import cli_flag
from karpenter_e2e.clusters.infra import cluster_files, process
from karpenter_e2e.clusters.karpenter import incluster
from karpenter_e2e.clusters.karpenter.incluster import Deployment

log = logging.getLogger(__name__)

OPT_IN_CONFIGMAP = "karpenter-e2e-opt-in"
OPT_IN_NAMESPACE = "kube-system"
KARPENTER_SELECTOR = incluster.SELECTOR
KARPENTER_NAMESPACES = ("kube-system", "karpenter")  # the chart's documented homes
CRDS = ("nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")
CHART_REPO = "oci://public.ecr.aws/karpenter"  # where the nightly installs from
CHART = f"{CHART_REPO}/karpenter"
CRD_CHART = f"{CHART_REPO}/karpenter-crd"
DISCOVERY_KEY = "karpenter.sh/discovery"
# An EC2 instance's launch, boot and kubelet join: about a minute, often two. Upstream's
# expiration e2e (sigs.k8s.io/karpenter test/suites/disruption/expiration_test.go) uses
# expireAfter 3m on real clouds against 30s on KWOK for the same reason.
NODE_LAUNCH_S = 120
# The bootstrap format of an AMI given by id: the EKS-optimized AL2023 AMIs the drift
# scenario reads from SSM, and the default for --eks-ami ami-...
AMI_FAMILY = "AL2023"
# stop_karpenter remembers the replica count on the Deployment itself, so a later
# process (another xdist worker, the next run after a crash) can restore it.
REPLICAS_BEFORE_STOP = incluster.REPLICAS_BEFORE_STOP


class KubeApi:
    """The few API calls eks mode makes, over the official client. Tests pass a fake
    with the same methods."""

    def __init__(self, kubeconfig: Path, context: str | None = None):
        self.kubeconfig, self.context = Path(kubeconfig), context
        if not Path(kubeconfig).is_file():
            raise ClusterError(f"kubeconfig {kubeconfig} does not exist; pass the EKS cluster's "
                               "kubeconfig (aws eks update-kubeconfig --kubeconfig <path> ...)")
        try:
            self.kube = Kube(Path(kubeconfig), context)
        except ValueError as exc:
            raise ClusterError(f"{exc} (context {context or '<current-context>'})") from None
        except yaml.YAMLError as exc:  # Kube passes these through
            raise ClusterError(f"cannot load kubeconfig {kubeconfig}: not YAML: "
                               f"{str(exc).splitlines()[0]}") from None

    def server_version(self) -> str:
        return client.VersionApi(self.kube.api).get_code(_request_timeout=10).git_version

    def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        cm = if_found(lambda: self.kube.core.read_namespaced_config_map(
            name, namespace, _request_timeout=self.kube.timeout))
        return None if cm is None else dict(cm.data or {})

    def deployments(self, namespace: str, selector: str) -> list[Deployment]:
        return incluster.deployments(self.kube, namespace, selector)

    def crd_established(self, name: str) -> bool:
        return self.kube.crd_established(name)

    def patch_deployment(self, namespace: str, name: str, body: dict) -> None:
        self.kube.apps.patch_namespaced_deployment(name, namespace, body,
                                                   _request_timeout=self.kube.timeout)

    def follow_logs(self, namespace: str, out: Path) -> None:
        """Karpenter's log from its pods into ``out`` (karpenter.podlogs), for the oracles."""
        incluster.follow_logs(self.kubeconfig, namespace, out, self.context)

    def stop_following(self, out: Path) -> None:
        incluster.stop_following(out)

    def metrics(self, deployment: Deployment) -> str | None:
        return incluster.metrics(self.kube, deployment)


def opt_in_howto(cluster: str, context: str | None = None,
                 flag: Callable[[str], str] = cli_flag) -> str:
    ctx = f" --context {context}" if context else ""
    return (f"to opt cluster {cluster!r} in (the harness then creates and deletes NodePools, "
            f"EC2NodeClasses and EC2 instances in it), run\n"
            f"  kubectl{ctx} -n {OPT_IN_NAMESPACE} create configmap {OPT_IN_CONFIGMAP} "
            f"--from-literal=cluster={cluster}\n"
            f"and pass {flag('eks-opt-in')} {cluster}")


def check_opt_in(cluster: str, opt_in_name: str | None, configmap: dict[str, str] | None,
                 context: str | None = None, flag: Callable[[str], str] = cli_flag) -> None:
    """Refuse unless the ConfigMap in the cluster and the caller both name ``cluster``.
    ``flag`` names the options as the caller's command line spells them (pytest's differ)."""
    where = f"ConfigMap {OPT_IN_NAMESPACE}/{OPT_IN_CONFIGMAP}"
    if configmap is None:
        raise ClusterError(f"refusing to run against EKS cluster {cluster!r}: it has no {where}; "
                           + opt_in_howto(cluster, context, flag))
    if configmap.get("cluster") != cluster:
        ctx = f" --context {context}" if context else ""
        raise ClusterError(f"refusing to run: the {where} of the cluster this kubeconfig reaches "
                           f"names {configmap.get('cluster')!r}, not {cluster!r}: check "
                           f"{flag('kubeconfig')} and its context first; only if this really is "
                           f"{cluster!r}, correct it:\n  kubectl{ctx} -n {OPT_IN_NAMESPACE} "
                           f"create configmap {OPT_IN_CONFIGMAP} --from-literal=cluster={cluster} "
                           f"--dry-run=client -o yaml | kubectl{ctx} apply -f -")
    if opt_in_name != cluster:
        said = f"{flag('eks-opt-in')} {opt_in_name}" if opt_in_name else f"no {flag('eks-opt-in')}"
        raise ClusterError(f"refusing to run against EKS cluster {cluster!r}: {said} was passed; "
                           f"pass {flag('eks-opt-in')} {cluster} (its {where} is in place)")


def chart_ref(repo: str, chart: str, version: str) -> str:
    """Chart ``chart`` at ``version`` in ``repo``: an OCI repository (helm takes --version), or a
    directory of packaged charts named as `helm package` and `helm pull` name them."""
    if "://" in repo:
        return f"{repo.rstrip('/')}/{chart}"
    packaged = Path(repo).expanduser() / f"{chart}-{version.removeprefix('v')}.tgz"
    if not packaged.is_file():
        raise ClusterError(f"no chart {packaged}: the chart repository {repo} is a directory, "
                           f"and it has no {chart} at {version}")
    return str(packaged)


def helm_upgrade_commands(version: str, *, namespace: str, kubeconfig: Path,
                          context: str | None = None, timeout: str = "5m",
                          repo: str = CHART_REPO) -> list[list[str]]:
    """CRDs first, then the controller, keeping the installed values (role, queue, cluster).

    Helm never upgrades a chart's ``crds/``, so CRDs come from the karpenter-crd chart;
    the nightly workflow installs them that way from the start."""
    chart_version = version.removeprefix("v")  # chart versions carry no "v"
    common = ["--version", chart_version, "--namespace", namespace,
              "--kubeconfig", str(kubeconfig), *(["--kube-context", context] if context else []),
              "--wait", "--timeout", timeout]
    return [["helm", "upgrade", "--install", "karpenter-crd",
             chart_ref(repo, "karpenter-crd", version), *common],
            # --reset-then-reuse-values (helm >= 3.14): the new chart's defaults plus our values.
            ["helm", "upgrade", "--install", "karpenter", chart_ref(repo, "karpenter", version),
             *common, "--skip-crds", "--reset-then-reuse-values"]]


def ami_spec(ami: str, family: str = AMI_FAMILY) -> dict:
    """The EC2NodeClass fields that select ``ami``: an alias ('al2023@latest') or an id
    ('ami-...'). An id says nothing of how the AMI bootstraps, so the CRD requires
    amiFamily with it (and rejects the object without)."""
    if ami.startswith("ami-"):
        return {"amiFamily": family, "amiSelectorTerms": [{"id": ami}]}
    return {"amiSelectorTerms": [{"alias": ami}]}


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """The one way eks mode runs a command (helm; tests replace it): process.run's rules."""
    return process.run(cmd, timeout)


class EksCluster:
    mode = "eks"

    def __init__(self, cluster_name: str, kubeconfig: Path, context: str | None = None,
                 region: str = "us-west-2", node_role: str | None = None,
                 subnet_tag: str | None = None, security_group_tag: str | None = None,
                 opt_in_name: str | None = None, karpenter_namespace: str | None = None,
                 ami: str = "al2023@latest", ami_family: str = AMI_FAMILY,
                 chart_repo: str | None = None,
                 api_factory=KubeApi, ec2=None, flag: Callable[[str], str] = cli_flag):
        self.name = cluster_name
        self.flag = flag  # how the refusals name the options (pytest: --karpenter-...)
        self.kubeconfig = Path(kubeconfig).expanduser()
        self.context = context
        self.region = region
        # The role name Karpenter's getting-started guide and eksctl.yaml create.
        self.node_role = node_role or f"KarpenterNodeRole-{cluster_name}"
        self.subnet_tag = subnet_tag or cluster_name
        self.security_group_tag = security_group_tag or cluster_name
        self.opt_in_name = opt_in_name
        self.karpenter_namespaces = ((karpenter_namespace,) if karpenter_namespace
                                     else KARPENTER_NAMESPACES)
        self.ami = ami
        self.ami_family = ami_family
        self.chart_repo = chart_repo or CHART_REPO
        self._api_factory = api_factory
        self._api = None
        self._ec2 = ec2
        self.run_dir = cluster_files.directory(f"eks-{cluster_name}")

    # ---- run ownership (the plugin's lock / owner protocol) ------------------------------
    @property
    def lock_path(self) -> Path:
        return cluster_files.owner_lock(self.run_dir.name)

    def owner(self) -> str | None:
        try:
            return json.loads((self.run_dir / "state.json").read_text()).get("run_id")
        except (OSError, ValueError):
            return None

    def set_owner(self, run_id: str) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "state.json").write_text(json.dumps({"run_id": run_id}))

    # ---- checks --------------------------------------------------------------------------
    def check_options(self) -> None:
        """Before any test: the kubeconfig exists and loads (no network)."""
        self.api()

    def api(self):
        if self._api is None:
            self._api = self._api_factory(self.kubeconfig, self.context)
        return self._api

    def _reachable(self) -> str:
        try:
            return self.api().server_version()
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure here means unreachable
            raise ClusterError(f"EKS cluster {self.name!r} API unreachable through "
                               f"{self.kubeconfig} (context {self.context or '<current>'}): "
                               f"{type(exc).__name__}: {exc}") from None

    def karpenter_deployment(self) -> Deployment:
        for ns in self.karpenter_namespaces:
            found = self.api().deployments(ns, KARPENTER_SELECTOR)
            if found:
                return found[0]
        raise ClusterError(f"Karpenter is not installed in EKS cluster {self.name!r}: no "
                           f"Deployment labelled {KARPENTER_SELECTOR} in namespace "
                           f"{' or '.join(self.karpenter_namespaces)}; install it with helm "
                           f"({CHART}, values in clusters/eks/karpenter-values.yaml)")

    def _check(self) -> tuple[str, Deployment]:
        """Everything up() and status() require, most fundamental first."""
        server = self._reachable()
        check_opt_in(self.name, self.opt_in_name,
                     self.api().config_map_data(OPT_IN_NAMESPACE, OPT_IN_CONFIGMAP), self.context,
                     self.flag)
        deployment = self.karpenter_deployment()
        missing = [c for c in CRDS if not self.api().crd_established(c)]
        if missing:
            raise ClusterError(f"Karpenter's CRDs {', '.join(missing)} are missing or not "
                               f"established in {self.name!r}; install the karpenter-crd chart "
                               f"({CRD_CHART}) at Karpenter's version {deployment.version}")
        return server, deployment

    def _zones(self) -> tuple[str, ...]:
        if self._ec2 is None:
            import boto3
            self._ec2 = boto3.client("ec2", region_name=self.region)
        try:
            zones = aws.discovery_zones(self._ec2, DISCOVERY_KEY, self.subnet_tag)
        except Exception as exc:  # noqa: BLE001 - no credentials, wrong region, denied
            raise ClusterError(f"cannot list the subnets of {self.name!r} in {self.region}: "
                               f"{type(exc).__name__}: {exc}") from None
        if not zones:
            raise ClusterError(f"no subnet in {self.region} is tagged {DISCOVERY_KEY}="
                               f"{self.subnet_tag}: Karpenter could launch nothing; tag the "
                               "cluster's private subnets (clusters/eks/eksctl.yaml does)")
        return zones

    # ---- lifecycle -----------------------------------------------------------------------
    @property
    def karpenter_log(self) -> Path:
        return self.run_dir / "logs" / "karpenter.log"

    def up(self, reuse: bool = True) -> ClusterInfo:
        """Check the existing cluster; ``reuse`` is implied: eks mode never creates one.
        Karpenter's log is followed from its pods into the run directory, for the oracles."""
        server, deployment = self._check()
        zones = self._zones()
        self.api().follow_logs(deployment.namespace, self.karpenter_log)
        info = ClusterInfo(mode=self.mode, name=self.name, kubeconfig=self.kubeconfig,
                           versions={"kubernetes": server, "karpenter": deployment.version},
                           nodeclass_group="karpenter.k8s.aws", nodeclass_kind="EC2NodeClass",
                           nodeclass_version="v1", zones=zones,
                           node_launch_s=NODE_LAUNCH_S, karpenter_log=self.karpenter_log)
        log.warning("using EKS cluster %r (Kubernetes %s, Karpenter %s in %s, zones %s)",
                    self.name, server, deployment.version, deployment.namespace,
                    ", ".join(info.zones))
        return info

    def down(self) -> None:
        if self._api is not None:
            self._api.stop_following(self.karpenter_log)
        log.warning("eks mode leaves EKS cluster %r and its Karpenter as they are; delete the "
                    "cluster with `eksctl delete cluster --name %s --region %s`",
                    self.name, self.name, self.region)

    def status(self) -> Status:
        try:
            server, d = self._check()
        except ClusterError as exc:
            return Status(False, str(exc))
        ready = d.ready_replicas > 0
        return Status(ready, f"EKS cluster {self.name}: Kubernetes {server}, Karpenter "
                             f"{d.version} {d.namespace}/{d.name} "
                             f"{d.ready_replicas}/{d.replicas} ready",
                      {"api": True, "opt-in": True, "karpenter": ready})

    def logs(self) -> dict[str, Path]:
        return {"karpenter": self.karpenter_log} if self.karpenter_log.exists() else {}

    def ami_spec(self, ami: str) -> dict:
        """EC2NodeClass spec fields pinning ``ami`` (for scenarios that change the AMI)."""
        return ami_spec(ami, self.ami_family)

    def render_nodeclass(self, name: str, labels: dict[str, str]) -> dict:
        return {
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": name, "labels": dict(labels)},
            "spec": {
                "role": self.node_role,
                **self.ami_spec(self.ami),
                "subnetSelectorTerms": [{"tags": {DISCOVERY_KEY: self.subnet_tag}}],
                "securityGroupSelectorTerms": [{"tags": {DISCOVERY_KEY: self.security_group_tag}}],
                # The run/test labels become instance tags: the sweeper finds leftovers by them.
                "tags": dict(labels),
            },
        }

    def reap_orphan_nodes(self, selector: str) -> list[str]:
        return []  # on EKS, Karpenter's own garbage collection terminates orphaned instances

    def end_unregistered_instances(self, selector: str) -> list[str]:
        return []  # Karpenter's Delete terminates the real instance

    def remove_without_karpenter(self, selector: str) -> list[str]:
        # Stripping finalizers here would orphan running instances; `make sweep` finds them
        # by Karpenter's tags and terminates them.
        return []

    def cloud_problem(self) -> str | None:
        """EKS is the real cloud: its errors reach the suites as Karpenter's own."""
        return None

    def karpenter_running(self) -> bool:
        """An API error is raised, not read as "not running": the waits that ask (their
        guard) ride a transient one out by the one rule, and fail at once on a bug."""
        try:
            return self.karpenter_deployment().ready_replicas > 0
        except ClusterError:  # not installed, or no kubeconfig to ask with
            return False

    def stop_karpenter(self) -> None:
        d = self.karpenter_deployment()
        if d.replicas:
            self.api().patch_deployment(d.namespace, d.name, {
                "metadata": {"annotations": {REPLICAS_BEFORE_STOP: str(d.replicas)}},
                "spec": {"replicas": 0}})
        self._wait_ready(False)

    def start_karpenter(self, version: str | None = None) -> None:
        """Scale Karpenter back up; with ``version``, upgrade it to that version first."""
        if version:
            self.upgrade_karpenter(version)
        d = self.karpenter_deployment()
        replicas = int(d.annotations.get(REPLICAS_BEFORE_STOP) or 0) or d.replicas or 1
        self.api().patch_deployment(d.namespace, d.name, {
            "metadata": {"annotations": {REPLICAS_BEFORE_STOP: None}},
            "spec": {"replicas": replicas}})
        self._wait_ready(True)

    def upgrade_karpenter(self, version: str) -> None:
        """What an operator does: helm-upgrade the CRDs, then the controller, to ``version``."""
        if not shutil.which("helm"):
            raise ClusterError("helm is not on PATH: upgrading Karpenter on EKS needs helm "
                               ">= 3.14 (https://helm.sh/docs/intro/install/)")
        d = self.karpenter_deployment()
        for cmd in helm_upgrade_commands(version, namespace=d.namespace,
                                         kubeconfig=self.kubeconfig, context=self.context,
                                         repo=self.chart_repo):
            proc = run(cmd, timeout=900)
            if proc.returncode != 0:
                raise ClusterError(f"{' '.join(cmd[:4])} failed: "
                                   + "\n".join(proc.stderr.strip().splitlines()[-10:]))
        running = self.karpenter_deployment().version
        if running != "v" + version.removeprefix("v"):
            raise ClusterError(f"helm upgraded Karpenter to {version}, but its Deployment runs "
                               f"{running}; check the chart's image settings")

    def karpenter_peak_memory_mib(self) -> float | None:
        return None  # the controller runs in a pod: its memory is not in this machine's /proc

    def karpenter_metrics(self) -> str | None:
        """/metrics through the API server's service proxy, as kind mode reads it: the
        offering prices the nodes' price comes from here (the AWS provider labels none)."""
        try:
            return self.api().metrics(self.karpenter_deployment())
        except ClusterError:
            return None

    def _wait_ready(self, want: bool) -> None:
        def check() -> Observation:
            d = self.karpenter_deployment()
            seen = f"{d.ready_replicas}/{d.replicas} replicas ready"
            return Observation((d.ready_replicas > 0) == want, seen)

        eventually(check, what=f"Karpenter to be {'ready' if want else 'stopped'}",
                   timeout=DEFAULTS.provision if want else DEFAULTS.api, poll=2)
