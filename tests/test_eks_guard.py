"""eks mode's checks on an existing cluster, on a fake API: the two-key opt-in, Karpenter
and its CRDs, the EC2NodeClass it renders, Karpenter's stop/start and helm upgrade."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import boto3
import pytest
from moto import mock_aws

from karpenter_e2e.clusters.eks import cluster as eks
from karpenter_e2e.clusters.eks.cluster import (
    CRDS,
    Deployment,
    EksCluster,
    KubeApi,
    helm_upgrade_commands,
)
from karpenter_e2e.clusters.errors import ClusterError

NAME = "e2e-test"
HOWTO = (f"kubectl -n kube-system create configmap karpenter-e2e-opt-in "
         f"--from-literal=cluster={NAME}")
IMAGE = "public.ecr.aws/karpenter/controller:1.15.2@sha256:0123abcd"


class FakeApi:
    def __init__(self, configmap: dict | None = None, namespace: str = "kube-system",
                 deployment: bool = True, crds=CRDS, reachable: bool = True):
        self.configmap, self.crds, self.reachable = configmap, set(crds), reachable
        self.deployment = (Deployment(namespace, "karpenter", IMAGE, 1, 1) if deployment else None)
        self.calls: list[str] = []
        self.patches: list[dict] = []

    def server_version(self) -> str:
        if not self.reachable:
            raise ConnectionRefusedError("connection refused")
        return "v1.35.2-eks-0123456"

    def config_map_data(self, namespace, name):
        self.calls.append(f"configmap {namespace}/{name}")
        return self.configmap

    def deployments(self, namespace, selector):
        self.calls.append(f"deployments {namespace} {selector}")
        d = self.deployment
        return [d] if d and d.namespace == namespace else []

    def crd_established(self, name):
        return name in self.crds

    def follow_logs(self, namespace, out):
        self.calls.append(f"follow logs {namespace} -> {out.name}")

    def stop_following(self, out):
        self.calls.append(f"stop following {out.name}")

    def metrics(self, deployment):
        self.calls.append(f"metrics {deployment.namespace}/{deployment.name}")
        return "# the page\n"

    def patch_deployment(self, namespace, name, body):
        self.patches.append(body)
        replicas = body["spec"]["replicas"]
        annotations = {k: v for k, v in {**self.deployment.annotations,
                                         **body["metadata"]["annotations"]}.items() if v is not None}
        # The fake's pods are ready the moment they are asked for.
        self.deployment = replace(self.deployment, replicas=replicas, ready_replicas=replicas,
                                  annotations=annotations)


@pytest.fixture
def ec2(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("ec2", region_name="us-west-2")
        vpc = client.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        for i, zone in enumerate(("us-west-2a", "us-west-2b", "us-west-2c")):
            tags = [{"Key": "karpenter.sh/discovery", "Value": NAME}] if zone != "us-west-2c" else []
            client.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=zone,
                                 TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}]
                                 if tags else [])
        yield client


def make(api: FakeApi, opt_in: str | None = NAME, ec2=None, **kwargs) -> EksCluster:
    return EksCluster(NAME, "/dev/null", region="us-west-2", opt_in_name=opt_in,
                      api_factory=lambda kubeconfig, context: api, ec2=ec2, **kwargs)


# ---- the opt-in ---------------------------------------------------------------------------
def test_refuses_without_the_configmap():
    api = FakeApi(configmap=None)
    with pytest.raises(ClusterError) as err:
        make(api).up()
    assert "has no ConfigMap kube-system/karpenter-e2e-opt-in" in str(err.value)
    assert HOWTO in str(err.value) and f"--eks-opt-in {NAME}" in str(err.value)
    assert not any(c.startswith("deployments") for c in api.calls)  # refused before looking


def test_refuses_a_configmap_naming_another_cluster():
    with pytest.raises(ClusterError, match=r"names 'prod', not 'e2e-test'") as err:
        make(FakeApi(configmap={"cluster": "prod"})).up()
    assert f"{HOWTO} --dry-run=client -o yaml | kubectl apply -f -" in str(err.value)


def test_refuses_without_the_option_even_with_the_configmap():
    with pytest.raises(ClusterError, match=r"no --eks-opt-in was passed; pass --eks-opt-in e2e-test"):
        make(FakeApi(configmap={"cluster": NAME}), opt_in=None).up()


def test_refuses_an_option_naming_another_cluster():
    with pytest.raises(ClusterError, match=r"--eks-opt-in prod was passed"):
        make(FakeApi(configmap={"cluster": NAME}), opt_in="prod").up()


def test_howto_names_the_context_when_one_is_used():
    with pytest.raises(ClusterError, match=r"kubectl --context ci-ctx -n kube-system create"):
        make(FakeApi(configmap=None), context="ci-ctx").up()


def test_accepts_with_both_keys_and_reports_the_cluster(ec2):
    info = make(FakeApi(configmap={"cluster": NAME}), ec2=ec2).up()

    assert (info.mode, info.name) == ("eks", NAME)
    assert (info.nodeclass_group, info.nodeclass_kind, info.nodeclass_version) == \
        ("karpenter.k8s.aws", "EC2NodeClass", "v1")
    assert info.versions == {"kubernetes": "v1.35.2-eks-0123456", "karpenter": "v1.15.2"}
    assert info.zones == ("us-west-2a", "us-west-2b")  # only the subnets tagged for discovery


# ---- what else up() requires -------------------------------------------------------------
def test_unreachable_api_is_a_clear_error():
    with pytest.raises(ClusterError, match=r"API unreachable .*ConnectionRefusedError"):
        make(FakeApi(configmap={"cluster": NAME}, reachable=False)).up()


def test_karpenter_missing_is_a_clear_error():
    with pytest.raises(ClusterError, match=r"Karpenter is not installed .* kube-system or karpenter"):
        make(FakeApi(configmap={"cluster": NAME}, deployment=False)).up()


def test_karpenter_is_found_in_the_karpenter_namespace_too(ec2):
    api = FakeApi(configmap={"cluster": NAME}, namespace="karpenter")
    assert make(api, ec2=ec2).up().versions["karpenter"] == "v1.15.2"
    # With a namespace given, only that one is searched.
    with pytest.raises(ClusterError, match="in namespace kube-system;"):
        make(api, karpenter_namespace="kube-system").up()


def test_missing_crd_is_a_clear_error():
    api = FakeApi(configmap={"cluster": NAME}, crds=CRDS[:2])
    with pytest.raises(ClusterError, match=r"ec2nodeclasses.karpenter.k8s.aws are missing"):
        make(api).up()


def test_no_discovery_subnets_is_a_clear_error(ec2):
    with pytest.raises(ClusterError, match=r"no subnet .* tagged karpenter.sh/discovery=other"):
        make(FakeApi(configmap={"cluster": NAME}), ec2=ec2, subnet_tag="other").up()


def test_bad_kubeconfig_path_and_content_are_clear_errors(tmp_path):
    with pytest.raises(ClusterError, match="does not exist"):
        KubeApi(tmp_path / "missing")
    garbage = tmp_path / "kubeconfig"
    for text in ("this: [is not yaml", "kind: Config\ncontexts: []\n"):
        garbage.write_text(text)
        with pytest.raises(ClusterError, match=f"cannot load kubeconfig {garbage}"):
            KubeApi(garbage)
    with pytest.raises(ClusterError, match="context no-such"):
        garbage.write_text("kind: Config\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n"
                           "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                           "users: [{name: u, user: {}}]\ncurrent-context: a\n")
        KubeApi(garbage, context="no-such")


def test_image_tag_is_the_karpenter_version():
    d = Deployment("ns", "karpenter", "", 1, 1)
    assert replace(d, image=IMAGE).version == "v1.15.2"
    assert replace(d, image="localhost:5000/karpenter/controller:v1.14.3").version == "v1.14.3"
    assert replace(d, image="localhost:5000/karpenter/controller").version == "unknown"


# ---- what it renders and does ------------------------------------------------------------
def test_render_nodeclass_is_an_ec2nodeclass_found_by_discovery_tags():
    labels = {"karpenter-e2e/run": "r1", "karpenter-e2e/test": "abc123"}
    body = make(FakeApi()).render_nodeclass("default-abc123", labels)

    assert body["apiVersion"] == "karpenter.k8s.aws/v1" and body["kind"] == "EC2NodeClass"
    assert body["metadata"] == {"name": "default-abc123", "labels": labels}
    spec = body["spec"]
    assert spec["role"] == f"KarpenterNodeRole-{NAME}"
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": NAME}}]
    assert spec["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": NAME}}]
    assert spec["tags"] == labels  # what the sweeper recognises instances by


def test_render_nodeclass_with_an_ami_id_role_and_own_tags():
    spec = make(FakeApi(), ami="ami-0abc", node_role="MyRole", subnet_tag="net",
                security_group_tag="sg").render_nodeclass("n", {})["spec"]
    assert spec["amiSelectorTerms"] == [{"id": "ami-0abc"}]
    assert spec["role"] == "MyRole"
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "net"}}]
    assert spec["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "sg"}}]


def test_karpenters_metrics_are_read_from_its_deployments_service():
    """The offering prices nodes are priced by on EKS (the AWS provider labels none) come
    from this page; it was None in eks mode before, so every price was unknown."""
    api = FakeApi(configmap={"cluster": NAME}, namespace="karpenter")
    assert make(api).karpenter_metrics() == "# the page\n"
    assert "metrics karpenter/karpenter" in api.calls
    assert make(FakeApi(deployment=False)).karpenter_metrics() is None  # not installed


def test_stop_and_start_scale_the_deployment_and_restore_its_replicas():
    api = FakeApi(configmap={"cluster": NAME})
    api.deployment = replace(api.deployment, replicas=2, ready_replicas=2)
    cluster = make(api)

    cluster.stop_karpenter()
    assert not cluster.karpenter_running()
    assert api.patches[-1] == {"metadata": {"annotations": {eks.REPLICAS_BEFORE_STOP: "2"}},
                               "spec": {"replicas": 0}}
    cluster.start_karpenter()
    assert cluster.karpenter_running() and api.deployment.replicas == 2
    assert eks.REPLICAS_BEFORE_STOP not in api.deployment.annotations


def test_karpenter_not_installed_is_not_running_but_an_api_error_is_the_waits_to_sort():
    assert not make(FakeApi(configmap={"cluster": NAME}, deployment=False)).karpenter_running()
    api = FakeApi(configmap={"cluster": NAME})
    api.deployments = lambda namespace, selector: (_ for _ in ()).throw(
        ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):  # transient: the wait asking rides it out
        make(api).karpenter_running()


def fake_helm(monkeypatch, api: FakeApi, rolls_out: bool = True) -> list[list[str]]:
    ran: list[list[str]] = []

    def run(cmd, timeout):
        ran.append(cmd)
        if cmd[3] == "karpenter" and rolls_out:  # the controller chart changes the image
            version = cmd[cmd.index("--version") + 1]
            api.deployment = replace(api.deployment, image=f"{IMAGE.split(':')[0]}:{version}")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(eks.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(eks, "run", run)
    return ran


def test_upgrade_karpenter_runs_helm_crds_first_then_checks_the_running_version(monkeypatch):
    api = FakeApi(configmap={"cluster": NAME})
    ran = fake_helm(monkeypatch, api)
    make(api, context="ctx").upgrade_karpenter("v1.16.0")
    assert [c[3] for c in ran] == ["karpenter-crd", "karpenter"]
    assert all("--kube-context" in c and "1.16.0" in c for c in ran)
    assert api.deployment.version == "v1.16.0"


def test_upgrade_that_does_not_roll_out_is_an_error(monkeypatch):
    api = FakeApi(configmap={"cluster": NAME})
    fake_helm(monkeypatch, api, rolls_out=False)
    with pytest.raises(ClusterError, match="runs v1.15.2"):
        make(api).upgrade_karpenter("1.16.0")


def test_start_karpenter_with_a_version_upgrades_then_scales_up(monkeypatch):
    api = FakeApi(configmap={"cluster": NAME})
    ran = fake_helm(monkeypatch, api)
    cluster = make(api)
    cluster.stop_karpenter()
    cluster.start_karpenter("1.16.0")
    assert len(ran) == 2 and cluster.karpenter_running()


def test_helm_upgrade_commands():
    crd, controller = helm_upgrade_commands("v1.16.0", namespace="kube-system",
                                            kubeconfig="/k/config")
    assert crd == ["helm", "upgrade", "--install", "karpenter-crd",
                   "oci://public.ecr.aws/karpenter/karpenter-crd", "--version", "1.16.0",
                   "--namespace", "kube-system", "--kubeconfig", "/k/config",
                   "--wait", "--timeout", "5m"]
    assert controller[:5] == ["helm", "upgrade", "--install", "karpenter",
                              "oci://public.ecr.aws/karpenter/karpenter"]
    assert controller[controller.index("--version") + 1] == "1.16.0"  # charts carry no "v"
    assert {"--skip-crds", "--reset-then-reuse-values", "--wait"} <= set(controller)
    assert "--kube-context" not in controller


def test_helm_failure_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(eks.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(eks, "run", lambda cmd, timeout: subprocess.CompletedProcess(
        cmd, 1, "", "Error: chart version 9.9.9 not found"))
    with pytest.raises(ClusterError, match="helm upgrade --install karpenter-crd failed: .*9.9.9"):
        make(FakeApi(configmap={"cluster": NAME})).upgrade_karpenter("9.9.9")


def test_missing_helm_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(eks.shutil, "which", lambda name: None)
    with pytest.raises(ClusterError, match="helm is not on PATH"):
        make(FakeApi(configmap={"cluster": NAME})).upgrade_karpenter("1.16.0")


def test_down_and_reap_touch_nothing():
    api = FakeApi(configmap={"cluster": NAME})
    cluster = make(api)
    cluster.down()
    assert cluster.reap_orphan_nodes("karpenter-e2e/test=abc123") == []
    assert api.patches == [] and api.calls == []


def test_up_reports_ec2s_launch_time_for_pacing(ec2):
    from karpenter_e2e.clusters.eks.cluster import NODE_LAUNCH_S
    assert make(FakeApi(configmap={"cluster": NAME}), ec2=ec2).up().node_launch_s == NODE_LAUNCH_S
