"""An EKS-like cluster on this machine, for rehearsing the EKS night without an account.

    up-aws:       a kind cluster (kind mode's: node image with no registry, kwok in it), and
                  aws-sim's fake AWS (moto with the harness's extensions, and its registrar)
                  serving on the cluster network's gateway, seeded only with what AWS itself
                  publishes (the EKS-optimized AMIs and their SSM parameters). Writes the
                  environment the night's steps run in (``aws.env``: AWS_ENDPOINT_URL, the
                  region, credentials made up for this run, KUBECONFIG, helm and kubectl on PATH)
                  and the getting-started template (``cloudformation.yaml``, stack.py).
    cluster-up:   what the nightly's "cluster" and "Karpenter" steps do on EKS: eksctl's part (a
                  VPC, a subnet per zone and the node security group tagged
                  karpenter.sh/discovery, the EKS cluster record), then Karpenter's AWS provider
                  installed by its own charts (karpenter-crd, then karpenter with the nightly's
                  clusters/eks/karpenter-values.yaml) from the provider module's source, its
                  images made here with no registry and loaded into the node.
    cluster-down: what `eksctl delete cluster` does: the kind cluster (the control plane), the
                  EKS record and eksctl's network. The fake AWS stays for the teardown's last
                  step (leftovers, the stack).
    down:         the fake AWS stopped, the kind cluster and its network gone.

Nothing in eks mode knows any of this: the night's steps reach the fake through
AWS_ENDPOINT_URL, which boto3 and the AWS SDK for Go both honour. What is made up, and every
difference from the real night, is in docs/modes-eks-kind.md.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import string
import sys
import time
from pathlib import Path

import yaml

from karpenter_e2e.clusters.api.waits import Observation
from karpenter_e2e.clusters.awssim import build as awsbuild, seed
from karpenter_e2e.clusters.awssim.seed import Seeded
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, cluster_files, kube_releases, process, versions
from karpenter_e2e.clusters.infra.catalogue_table import ZONES
from karpenter_e2e.clusters.infra.filelock import write_whole
from karpenter_e2e.clusters.kind import chart as kindchart, images
from karpenter_e2e.clusters.kind.cluster import KindCluster
from karpenter_e2e.clusters.local.cluster import await_started
from karpenter_e2e.clusters.rehearsal import charts, foreign, leaks, safety, stack

log = logging.getLogger(__name__)

REGION = "us-west-2"
REPO_ROOT = Path(__file__).resolve().parents[2]
VALUES = REPO_ROOT / "clusters" / "eks" / "karpenter-values.yaml"
NAMESPACE = "kube-system"  # where the nightly installs Karpenter (karpenter-values.yaml, eksctl.yaml)
# The Secret Karpenter's pod reads its AWS settings from (controller.envFrom): on EKS, IRSA's
# webhook and the VPC give a pod its credentials and region; kind has neither.
AWS_SECRET = "karpenter-aws"
# kwok in a kind cluster manages only the nodes annotated so (kwok's kustomize/kwok config).
KWOK_NODE = "kwok.x-k8s.io/node=fake"
# The kind node stands for EKS's system node group: the cloud controller manager gives such a
# node its zone, and Karpenter's chart spreads its pods over zones (DoNotSchedule).
SYSTEM_NODE_ZONE = ZONES[0]


def _made_up(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


class Rehearsal:
    def __init__(self, name: str, karpenter_version: str = versions.AWS_PROVIDER,
                 images_for: tuple[str, ...] = versions.AWS_PROVIDER_VERSIONS):
        if not name.startswith("rh-"):
            raise ClusterError(f"rehearsal cluster {name!r}: its name must start with rh- (the "
                               "rehearsal's clusters are found and swept by that prefix)")
        self.name = name
        self.karpenter_version = karpenter_version
        self.images_for = tuple(dict.fromkeys((karpenter_version, *images_for)))
        # kind mode's cluster for the control plane and kwok; its KWOK Karpenter never starts.
        kube = kube_releases.default(karpenter_version)
        self.kind = KindCluster(name, kubernetes_version=kube)
        self.kubernetes_version = kube
        self.dir = cluster_files.directory(f"rehearsal-{name}")
        self.env_file = self.dir / "aws.env"
        self.template_file = self.dir / "cloudformation.yaml"
        self.charts_dir = self.dir / "charts"
        self.bin_dir = self.dir / "bin"
        self.logs_dir = self.dir / "logs"

    # ---- state ---------------------------------------------------------------------------
    def _state(self) -> dict:
        try:
            return json.loads((self.dir / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def _save_state(self, **changes) -> None:
        write_whole(self.dir / "state.json", json.dumps({**self._state(), **changes}, indent=1))

    def environment(self) -> dict[str, str]:
        """The night's environment (``aws.env``), as KEY -> value, PATH resolved."""
        if not self.env_file.exists():
            raise ClusterError(f"rehearsal {self.name!r} is not up: no {self.env_file} (run "
                               f"`karpenter-e2e rehearsal up-aws --name {self.name}` first)")
        env = {}
        for line in self.env_file.read_text().splitlines():
            key, _, value = line.partition("=")
            env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
        return env

    # ---- up-aws --------------------------------------------------------------------------
    def up_aws(self) -> None:
        started = time.monotonic()
        docker_version = self.kind.check_tools()
        if self._state().get("aws_pid") or self.kind.exists():
            log.warning("rehearsal %r left from before: taking it down first", self.name)
            self.down()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        self._save_state(started=time.time())
        try:
            for v in self.images_for:  # the slow builds first, before anything runs
                awsbuild.binary(v)
            self.kind.create(docker_version)
            self._label_system_node()
            self._start_fake()
            self._write_environment()
            self._link_tools()
            self.template_file.write_text(stack.template(awsbuild.module_dir(self.karpenter_version)))
        except BaseException:
            log.warning("rehearsal %r: up-aws failed; taking down what was started", self.name)
            self.down()
            raise
        log.warning("rehearsal %r: kind cluster and fake AWS on %s up in %.0fs", self.name,
                    self.environment()["AWS_ENDPOINT_URL"], time.monotonic() - started)

    def _label_system_node(self) -> None:
        node = self.kind.node_container(self.name)
        self.kind.local.kubectl("label", "node", node, "--overwrite",
                                f"topology.kubernetes.io/zone={SYSTEM_NODE_ZONE}",
                                f"topology.kubernetes.io/region={REGION}")

    def _start_fake(self) -> None:
        host, port = self.kind.gateway(), process.free_port()
        aws_log = self.logs_dir / "aws-sim.log"
        cmd = [sys.executable, "-m", "karpenter_e2e.clusters.awssim.server",
               "--run-dir", str(self.dir), "--host", host, "--port", str(port),
               "--region", REGION, "--cluster", self.name,
               "--kubernetes-version", self.kubernetes_version,
               "--kubeconfig", str(self.kind.kubeconfig),
               "--pricing-go", str(awsbuild.pricing_table(self.karpenter_version)),
               "--zones", ",".join(ZONES), "--seed", "published",
               "--node-annotation", KWOK_NODE,
               # Karpenter's AWS provider labels no price: eks mode reads its /metrics instead
               "--no-price-label",
               "--response-cache", str(build.cache_dir() / "aws-sim" / "responses.pickle")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        (self.dir / "aws.json").unlink(missing_ok=True)
        proc = process.spawn(cmd, aws_log, self.dir, env)
        self._save_state(aws_pid=proc.pid, aws_host=host, aws_port=port)

        def seeded() -> Observation:
            done = (self.dir / "aws.json").exists()
            return Observation(done, "seeded" if done else f"not seeded yet ({host}:{port})")

        await_started(proc, "the fake AWS", seeded, aws_log,
                      what=f"the fake AWS on {host}:{port} to be seeded", poll=0.3)

    def _write_environment(self) -> None:
        """What the night's steps run with. The credentials are made up for this run (the
        fake takes any), so a leak of them is found by searching every output for them."""
        state = self._state()
        lines = {
            "AWS_ENDPOINT_URL": f"http://{state['aws_host']}:{state['aws_port']}",
            "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "AKIA" + _made_up(string.ascii_uppercase + string.digits, 16),
            "AWS_SECRET_ACCESS_KEY": _made_up(string.ascii_letters + string.digits, 40),
            "KUBECONFIG": str(self.kind.kubeconfig),
            "CLUSTER_NAME": self.name,
            "PATH": f"{self.bin_dir}:$PATH",
        }
        self.env_file.touch(mode=0o600)
        self.env_file.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))

    def _link_tools(self) -> None:
        """helm and kubectl on the night's PATH, as the workflow's runner has them."""
        self.bin_dir.mkdir(exist_ok=True)
        for name, binary in (("helm", self.kind.helm()),
                             ("kubectl", build.build(build.find("kubectl",
                                                                self.kubernetes_version)))):
            link = self.bin_dir / name
            link.unlink(missing_ok=True)
            link.symlink_to(binary)

    # ---- cluster-up ----------------------------------------------------------------------
    def _clients(self, env: dict[str, str]):
        import boto3
        session = boto3.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                                region_name=env["AWS_REGION"])
        return lambda service: session.client(service, endpoint_url=env["AWS_ENDPOINT_URL"])

    def cluster_up(self) -> None:
        started = time.monotonic()
        env = self.environment()
        client = self._clients(env)
        self._eksctl_part(client)
        self._load_images()
        for v in self.images_for:
            charts.package(self.kind.helm(), awsbuild.module_dir(v), v, charts.image_repository(),
                           self.charts_dir)
        self._install_karpenter(env, client)
        log.warning("rehearsal %r: cluster up, Karpenter %s installed by its chart in %.0fs",
                    self.name, self.karpenter_version, time.monotonic() - started)

    def _eksctl_part(self, client) -> None:
        ec2 = client("ec2")
        found = ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [self.name]}])["Vpcs"]
        if found:  # the nightly reuses a cluster it finds
            log.warning("rehearsal %r: eksctl's network and cluster record exist; reused",
                        self.name)
            return
        out = Seeded(region=REGION, cluster=self.name, zones=list(ZONES))
        seed.network(ec2, self.name, list(ZONES), out)
        seed.eks_record(client("eks"), self.name, self.kubernetes_version, out)
        write_whole(self.dir / "eksctl.json", out.to_json())

    def _load_images(self) -> None:
        for v in self.images_for:
            ref = charts.image_ref(v)
            binary = awsbuild.binary(v)
            built = f"{charts.image_repository()}:{v.lstrip('v')}-{kindchart._file_digest(binary)}"
            if not images.exists(built):
                images.from_files(built, {"ko-app/controller": binary}, ["/ko-app/controller"])
            images.tag(built, ref)
            self.kind.load_image(ref)

    def values(self, env: dict[str, str], account: str) -> tuple[Path, Path]:
        """(the nightly's values with its placeholders filled, as envsubst fills them; the
        rehearsal's own: the AWS settings from the Secret)."""
        nightly = VALUES.read_text()
        for key, value in (("CLUSTER_NAME", self.name), ("AWS_ACCOUNT_ID", account)):
            nightly = nightly.replace("${" + key + "}", value)
        first, second = self.dir / "karpenter-values.yaml", self.dir / "rehearsal-values.yaml"
        first.write_text(nightly)
        # isolatedVPC: the fake has no Pricing API (moto serves none), so Karpenter keeps the
        # on-demand prices built into the release, as in an isolated VPC.
        second.write_text(yaml.safe_dump({
            "settings": {"isolatedVPC": True},
            "controller": {"envFrom": [{"secretRef": {"name": AWS_SECRET}}]}}, sort_keys=False))
        return first, second

    def _install_karpenter(self, env: dict[str, str], client) -> None:
        account = client("sts").get_caller_identity()["Account"]
        kube = self.kind.local
        secret = {k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
                                       "AWS_SECRET_ACCESS_KEY")}
        secret["AWS_EC2_METADATA_DISABLED"] = "true"  # no IMDS on a kind node
        manifest = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": AWS_SECRET, "namespace": NAMESPACE},
                    "stringData": secret}
        secret_file = self.dir / "aws-secret.json"
        secret_file.touch(mode=0o600)
        secret_file.write_text(json.dumps(manifest))
        try:
            kube.kubectl("apply", "-f", str(secret_file))
        finally:
            secret_file.unlink()
        nightly, own = self.values(env, account)
        version = self.karpenter_version.lstrip("v")
        kubeconfig = str(self.kind.kubeconfig)
        helm = self.kind.helm()
        # The workflow's "Karpenter (helm upgrade --install)" step, chart for chart.
        kindchart.run_helm(helm, ["upgrade", "--install", "karpenter-crd",
                                  str(charts.packaged(self.charts_dir, "karpenter-crd", version)),
                                  "--version", version, "--namespace", NAMESPACE,
                                  "--kubeconfig", kubeconfig, "--wait"],
                           f"helm upgrade --install karpenter-crd {version}")
        out = kindchart.run_helm(helm, ["upgrade", "--install", "karpenter",
                                        str(charts.packaged(self.charts_dir, "karpenter", version)),
                                        "--version", version, "--namespace", NAMESPACE,
                                        "--kubeconfig", kubeconfig, "--skip-crds",
                                        "--values", str(nightly), "--values", str(own),
                                        "--wait", "--timeout", "10m"],
                                 f"helm upgrade --install karpenter {version}", timeout=900)
        with open(self.logs_dir / "helm.log", "a") as fh:
            fh.write(out)

    # ---- the sweep's safety ----------------------------------------------------------------
    @property
    def _sweep_file(self) -> Path:
        return self.dir / "sweep-seeded.json"

    def seed_sweep(self) -> None:
        """A killed run's leftovers and foreign objects, for the night's sweep (foreign.py)."""
        client = self._clients(self.environment())
        published = Seeded.from_json((self.dir / "aws.json").read_text())
        ami = published.amis[seed.minors(self.kubernetes_version)[1]]["x86_64/standard"]
        objects = foreign.seed(client("ec2"), client("iam"), self.name, REGION, ami)
        foreign.save(self._sweep_file, objects)
        log.warning("rehearsal %r: seeded %d objects for the sweep (%d a killed run's)",
                    self.name, len(objects.seeded), sum(s.swept for s in objects.seeded))

    def check_sweep(self, after: str) -> list[str]:
        client = self._clients(self.environment())
        return foreign.check(client("ec2"), client("iam"), foreign.load(self._sweep_file), after)

    def check_opt_in(self) -> list[str]:
        """eks mode refuses this cluster without its opt-in (safety.py); the night's
        ConfigMap is put back after."""
        kube = self.kind.local

        def nodepools() -> list[str]:
            return kube.kubectl("get", "nodepools.karpenter.sh", "-o", "name").split()

        return safety.prove(self.name, self.kind.kubeconfig, REGION, kube.kubectl, nodepools,
                            self.dir / "opt-in-reports", REPO_ROOT)

    def check_leaks(self, roots: list[Path]) -> str:
        """The made-up credentials in no file the night wrote under ``roots`` (and the
        rehearsal's own logs), since up-aws."""
        env = self.environment()
        since = self._state().get("started", 0.0)
        # The rehearsal's own logs (the fake AWS, helm), and eks mode's run directory, where
        # it follows Karpenter's log (clusters/eks/cluster.py: eks-<cluster name>).
        searched = [*roots, self.logs_dir, cluster_files.directory(f"eks-{self.name}")]
        found = leaks.search(searched, {k: env[k] for k in leaks.SECRET_KEYS}, since=since,
                             skip=[self.env_file])
        return (f"no credential in {found.files} files ({found.size / 1e6:.1f} MB) written "
                f"since up-aws under {', '.join(map(str, searched))}")

    # ---- cluster-down --------------------------------------------------------------------
    def cluster_down(self) -> None:
        """`eksctl delete cluster`: the control plane and eksctl's own resources; what
        Karpenter made stays for the teardown's leftovers step, as on AWS."""
        env = self.environment()
        client = self._clients(env)
        if self.kind.exists():
            proc = self.kind.kind("delete", "cluster", "--name", self.name, "--kubeconfig",
                                  str(self.kind.kubeconfig), timeout=300)
            if proc.returncode != 0:
                raise ClusterError(f"kind delete cluster {self.name} failed: "
                                   f"{proc.stderr.strip()}")
        eks = client("eks")
        if self.name in eks.list_clusters()["clusters"]:
            eks.delete_cluster(name=self.name)
        ec2 = client("ec2")
        for vpc in ec2.describe_vpcs(Filters=[{"Name": "tag:Name", "Values": [self.name]}])["Vpcs"]:
            vpc_filter = [{"Name": "vpc-id", "Values": [vpc["VpcId"]]}]
            for group in ec2.describe_security_groups(Filters=vpc_filter)["SecurityGroups"]:
                if group["GroupName"] != "default":
                    ec2.delete_security_group(GroupId=group["GroupId"])
            for subnet in ec2.describe_subnets(Filters=vpc_filter)["Subnets"]:
                ec2.delete_subnet(SubnetId=subnet["SubnetId"])
            ec2.delete_vpc(VpcId=vpc["VpcId"])
        log.warning("rehearsal %r: control plane, EKS record and eksctl's network deleted",
                    self.name)

    # ---- down ----------------------------------------------------------------------------
    def down(self) -> None:
        pid = self._state().get("aws_pid")
        if pid:
            process.terminate(pid)
            self._save_state(aws_pid=None)
        self.kind.down()
        for path in (self.env_file, self.bin_dir / "helm", self.bin_dir / "kubectl"):
            path.unlink(missing_ok=True)
        log.warning("rehearsal %r is down; logs kept in %s", self.name, self.logs_dir)
