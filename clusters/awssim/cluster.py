"""aws-sim mode: local mode's control plane and kwok, with Karpenter's real AWS provider
against a fake AWS (moto in a harness process, seeded like an EKS account).

Only the cloud differs from local mode: Karpenter is ``karpenter-provider-aws``'s
``./cmd/controller`` with its real CRDs; its AWS calls go to ``AWS_ENDPOINT_URL``, the fake
started by ``clusters.awssim.server`` (pid and log in the run directory), which also
registers a Node for every instance Karpenter launches. NodeClasses are EC2NodeClasses
rendered by eks mode's own code.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.waits import Observation, StopWaiting, eventually
from karpenter_e2e.clusters.awssim import build as awsbuild, provider_releases
from karpenter_e2e.clusters.awssim.seed import Seeded
from karpenter_e2e.clusters.base import ClusterInfo
from karpenter_e2e.clusters.eks.cluster import EksCluster, ami_spec as eks_ami_spec
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process, versions
from karpenter_e2e.clusters.infra.catalogue_table import ZONES
from karpenter_e2e.clusters.karpenter import features, settings as ksettings
from karpenter_e2e.clusters.karpenter.mutants import Mutant
from karpenter_e2e.clusters.local.cluster import LocalCluster, await_started

log = logging.getLogger(__name__)

REGION = "us-west-2"
REPO_ROOT = Path(__file__).resolve().parents[2]
CRDS = ("nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")


class AwsSimCluster(LocalCluster):
    mode = "aws-sim"
    feature_gates = ()  # the AWS provider runs with its defaults (its env sets none)
    NODECLASS_RESOURCE = "ec2nodeclass"  # stripped of finalizers, its instances stay in the
    # fake until `down` (or `make sweep SWEEP_ARGS="--aws-sim NAME"`)
    # Karpenter's AWS provider terminates the (fake) instance on Delete, and its node with it.
    DELETE_LEAVES_UNREGISTERED_NODES = False

    def __init__(self, name: str = "awssim-e2e",
                 karpenter_version: str = versions.AWS_PROVIDER,
                 apiserver_port: int | None = None, ami: str = "al2023@latest",
                 mutant: Mutant | None = None, kubernetes_version: str | None = None,
                 settings: dict[str, str] | None = None):
        super().__init__(name, karpenter_version, apiserver_port=apiserver_port, mutant=mutant,
                         kubernetes_version=kubernetes_version, settings=settings)
        self.ami = ami
        self.aws_file = self.run_dir / "aws.json"

    @staticmethod
    def release_settings(version: str) -> ksettings.Known:
        """What provider release ``version`` reads: the options and gates of the core it builds
        with (a provider version need not be a served core release: v1.13.1's core is
        v1.13.0), and the provider's own options (pkg/operator/options/options.go)."""
        core = provider_releases.core_of(version)
        base = ksettings.known(core, build.download_karpenter(core))
        provider = ksettings.read_options(awsbuild.module_dir(version))
        return ksettings.Known(version, {**base.options, **provider}, base.gates)

    @staticmethod
    def check_version(version: str) -> None:
        """A provider release: refused unless the proxy serves it and the core its go.mod
        requires (provider_releases.check names the runnable ones)."""
        provider_releases.check(version)

    # ---- the fake AWS --------------------------------------------------------------------
    def seeded(self) -> Seeded:
        try:
            return Seeded.from_json(self.aws_file.read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"the fake AWS of {self.name!r} is not seeded ({self.aws_file}: "
                               f"{exc})") from None

    def aws_endpoint(self) -> str | None:
        port = self._state().get("aws_port")
        return f"http://127.0.0.1:{port}" if port else None

    def _start_cloud(self) -> None:
        """Start the fake AWS while kwokctl starts the control plane (it boots and seeds in
        seconds; its registrar waits for the kubeconfig)."""
        port = process.free_port()
        log_path = self.logs_dir / "aws-sim.log"
        cmd = [sys.executable, "-m", "karpenter_e2e.clusters.awssim.server", "--run-dir", str(self.run_dir),
               "--port", str(port), "--region", REGION, "--cluster", self.name,
               "--kubernetes-version", self.kubernetes_version, "--kubeconfig", str(self.kubeconfig),
               "--pricing-go", str(awsbuild.pricing_table(self.karpenter_version)),
               "--zones", ",".join(ZONES),
               "--response-cache", str(build.cache_dir() / "aws-sim" / "responses.pickle")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        proc = process.spawn(cmd, log_path, self.run_dir, env)
        self._save_state(aws_pid=proc.pid, aws_port=port)
        self._fake = proc

    def _prepare_catalogue(self, version: str) -> None:
        """None here: the fake AWS serves EC2's instance types."""

    def _prepare_cloud(self) -> None:
        """Wait until the fake AWS is seeded (Karpenter starts next)."""
        proc, port = self._fake, self._state()["aws_port"]
        log_path = self.logs_dir / "aws-sim.log"

        def seeded() -> Observation:
            done = self.aws_file.exists()
            return Observation(done, "seeded" if done else f"not seeded yet (port {port})")

        await_started(proc, "the fake AWS", seeded, log_path,
                      what=f"the fake AWS on 127.0.0.1:{port} to be seeded", poll=0.2)

    def _stop_fake(self) -> None:
        pid = self._state().get("aws_pid")
        if pid:
            process.terminate(pid)
            self._save_state(aws_pid=None)

    def cloud_problem(self) -> str | None:
        """Why the fake AWS cannot answer Karpenter, or None while it runs."""
        state = self._state()
        if not state.get("aws_port"):
            return None  # never started: up() reports that itself
        pid = state.get("aws_pid")
        if pid and process.alive(pid):
            return None
        return (f"the fake AWS on 127.0.0.1:{state['aws_port']} is not running "
                f"({'stopped' if not pid else f'process {pid} exited'}; see {self.logs_dir / 'aws-sim.log'})")

    # ---- faults (--fault): break the cloud under a running Karpenter -----------------------
    def stop_cloud(self) -> None:
        """The fake AWS stops answering, as an unreachable AWS endpoint would."""
        self._stop_fake()

    def delete_interruption_queue(self) -> None:
        """Delete Karpenter's interruption queue in the fake, as a stack change might."""
        import boto3
        sqs = boto3.client("sqs", region_name=REGION, endpoint_url=self.aws_endpoint(),
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=self.name)["QueueUrl"])
        # Done when Karpenter has noticed: its interruption controller long-polls the queue
        # (up to 20 s), so a scenario failing sooner would find no word of it in the log.
        log = self.logs_dir / "karpenter.log"
        start = log.stat().st_size if log.exists() else 0

        def noticed() -> Observation:
            if not self.karpenter_running():
                raise StopWaiting("Karpenter is not running")
            with open(log, errors="replace") as fh:
                fh.seek(start)
                return Observation("NonExistentQueue" in fh.read(), "no queue error logged yet")

        eventually(noticed, what="Karpenter to log that its interruption queue is gone",
                   timeout=90, poll=1)

    # ---- Karpenter -----------------------------------------------------------------------
    def _karpenter_binary(self, version: str) -> Path:
        if self._runs_mutant(version):  # a patch to the provider, or to core as built into it
            return awsbuild.build_mutant(self.mutant)
        return awsbuild.binary(version)

    def _karpenter_command(self, binary: Path, version: str | None = None) -> list[str]:
        return [str(self._run_dir_link(binary))]

    def _karpenter_env(self, version: str | None = None) -> dict[str, str | None]:
        endpoint = self.aws_endpoint()
        if not endpoint:
            raise ClusterError(f"the fake AWS of {self.name!r} is not running: start the "
                               "cluster with `up`")
        env: dict[str, str | None] = {}
        if self.settings:  # the provider's defaults otherwise (no FEATURE_GATES of ours)
            version = version or self.karpenter_version
            options, on, off = ksettings.split(self.settings, self.known_settings(version).gates)
            env |= options
            if on or off:
                env["FEATURE_GATES"] = features.feature_gates_env(
                    provider_releases.core_of(version), on, off)
        return env | {"CLUSTER_NAME": self.name, "CLUSTER_ENDPOINT": self._apiserver_url(),
                "AWS_REGION": REGION, "AWS_ENDPOINT_URL": endpoint,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_SESSION_TOKEN": None, "AWS_PROFILE": None,
                "AWS_EC2_METADATA_DISABLED": "true",
                # No pricing API here: the binary's built-in on-demand prices are used.
                "ISOLATED_VPC": "true", "INTERRUPTION_QUEUE": self.name}

    def _apiserver_url(self) -> str:
        config = yaml.safe_load(self.kubeconfig.read_text())
        return config["clusters"][0]["cluster"]["server"]

    def crd_dirs(self, version: str) -> list[Path]:
        return [awsbuild.crd_dir(version)]

    def _install_crds(self, version: str | None = None) -> None:
        # Server-side with force: the provider's NodePool/NodeClaim CRDs carry the same
        # names as core's, with EC2NodeClass's CEL rules alongside.
        for d in self.crd_dirs(version or self.karpenter_version):
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(d))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     *(f"crd/{c}" for c in CRDS), timeout=90)

    # ---- what the suites see ---------------------------------------------------------------
    def info(self) -> ClusterInfo:
        base = super().info()
        return dataclasses.replace(
            base, versions={**base.versions, "karpenter_build": "karpenter-provider-aws"},
            nodeclass_group="karpenter.k8s.aws", nodeclass_kind="EC2NodeClass",
            nodeclass_version="v1", catalogue=None, aws_endpoint=self.aws_endpoint(),
            region=REGION)

    def render_nodeclass(self, name: str, labels: dict[str, str]) -> dict:
        """Exactly what eks mode renders, for the role and tags the fake was seeded with."""
        return EksCluster(self.name, self.kubeconfig, region=REGION,
                          ami=self.ami).render_nodeclass(name, labels)

    def ami_spec(self, ami: str) -> dict:
        """EC2NodeClass spec fields pinning ``ami``, as eks mode renders them."""
        return eks_ami_spec(ami)

    def cheapest_family(self, requirements: list[dict]) -> list[str]:
        raise ClusterError("aws-sim mode has no catalogue: Karpenter reads EC2's instance types")

    def _component_pids(self) -> dict[str, int]:
        pids = super()._component_pids()
        if self._state().get("aws_pid"):
            pids["aws-sim"] = self._state()["aws_pid"]
        return pids

    def down(self) -> None:
        # Karpenter, then the fake (its registrar talks to the API server), then the rest.
        self.stop_karpenter()
        self._stop_fake()
        super().down()
