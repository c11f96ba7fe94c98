"""aws-sim mode's pieces without a cluster: seeding, the moto extensions, the registrar's
reading of Karpenter's user data, and where the AWS provider's binary is cached."""

import base64
import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from moto.backends import get_backend

from karpenter_e2e.clusters.awssim import build as awsbuild, moto_ext, seed
from karpenter_e2e.clusters.awssim.registrar import node_for, parse_bootstrap
from karpenter_e2e.clusters.infra import versions

REGION = "us-west-2"
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
PRICES = moto_ext.Prices({"c6a.large": 0.0765, "c6a.xlarge": 0.153, "m5.4xlarge": 0.768,
                          "c6g.large": 0.068})


@pytest.fixture
def account(monkeypatch):
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        moto_ext.install(PRICES, lambda: get_backend("ec2")[seed.ACCOUNT][REGION])
        session = boto3.Session(region_name=REGION)
        yield session, seed.seed(session, REGION, "e2e", "v1.36.3", ZONES)


def test_seed_is_an_eks_account_after_getting_started(account):
    session, seeded = account
    ec2, ssm = session.client("ec2"), session.client("ssm")
    subnets = ec2.describe_subnets(Filters=[{"Name": "tag:karpenter.sh/discovery",
                                             "Values": ["e2e"]}])["Subnets"]
    assert sorted(s["AvailabilityZone"] for s in subnets) == ZONES
    assert ec2.describe_security_groups(Filters=[{"Name": "tag:karpenter.sh/discovery",
                                                  "Values": ["e2e"]}])["SecurityGroups"]
    cluster = session.client("eks").describe_cluster(name="e2e")["cluster"]
    assert cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == seed.SERVICE_CIDR
    assert session.client("iam").get_instance_profile(
        InstanceProfileName=seeded.instance_profile)["InstanceProfile"]["Roles"]
    assert session.client("sqs").get_queue_url(QueueName="e2e")["QueueUrl"] == seeded.queue_url
    for minor in ("1.35", "1.36"):
        for arch in ("x86_64", "arm64"):
            name = seed.SSM_PATH.format(minor=minor, arch=arch, variant="standard")
            image = ssm.get_parameter(Name=name)["Parameter"]["Value"]
            described = ec2.describe_images(ImageIds=[image])["Images"][0]
            assert described["Architecture"] == arch
            assert described["RootDeviceName"] == "/dev/xvda"
    assert seeded.amis["1.35"] != seeded.amis["1.36"]
    assert len({i for v in seeded.amis.values() for i in v.values()}) == 6


def test_set_ssm_parameter_moves_it_to_a_new_version(account):
    session, seeded = account
    name = seed.SSM_PATH.format(minor="1.36", arch="x86_64", variant="standard")
    seed.set_ssm_parameter(REGION, name, seeded.amis["1.35"]["x86_64/standard"])
    got = session.client("ssm").get_parameter(Name=name)["Parameter"]
    assert (got["Value"], got["Version"]) == (seeded.amis["1.35"]["x86_64/standard"], 2)


def test_spot_prices_are_derived_from_on_demand_per_zone(account):
    session, _ = account
    history = session.client("ec2").describe_spot_price_history(
        InstanceTypes=["c6a.large"], ProductDescriptions=["Linux/UNIX"])["SpotPriceHistory"]
    prices = {h["AvailabilityZone"]: float(h["SpotPrice"]) for h in history}
    assert set(prices) == set(ZONES)
    assert all(0.0765 * 0.3 < p < 0.0765 * 0.4 for p in prices.values())
    assert len(set(prices.values())) > 1  # zones are not all tied


def _karpenter_fleet(session, seeded, capacity_type: str, types: list[str]) -> dict:
    """CreateFleet shaped as Karpenter's AWS provider sends it: an instant fleet over a
    launch template whose security groups sit in NetworkInterfaces[0]."""
    ec2 = session.client("ec2")
    lt = ec2.create_launch_template(LaunchTemplateName=f"karpenter-{capacity_type}", LaunchTemplateData={
        "ImageId": seeded.amis["1.36"]["x86_64/standard"],
        "NetworkInterfaces": [{"DeviceIndex": 0, "Groups": [seeded.security_group]}],
        "UserData": base64.b64encode(b"#!/bin/bash").decode()})["LaunchTemplate"]
    overrides = [{"InstanceType": t, "SubnetId": seeded.subnets[z]} for t in types for z in ZONES[:2]]
    return ec2.create_fleet(
        Type="instant",
        TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        SpotOptions={"AllocationStrategy": "price-capacity-optimized"},
        OnDemandOptions={"AllocationStrategy": "lowest-price"},
        LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {
            "LaunchTemplateId": lt["LaunchTemplateId"], "Version": "$Latest"},
            "Overrides": overrides}],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "karpenter.sh/nodeclaim", "Value": "default-abcde"}]}])


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
def test_create_fleet_launches_the_cheapest_override(account, capacity_type):
    session, seeded = account
    # The most expensive type first: moto alone would launch it.
    fleet = _karpenter_fleet(session, seeded, capacity_type, ["m5.4xlarge", "c6a.xlarge", "c6a.large"])
    ids = fleet["Instances"][0]["InstanceIds"]
    inst = session.client("ec2").describe_instances(InstanceIds=ids)["Reservations"][0]["Instances"][0]
    assert inst["InstanceType"] == "c6a.large"
    if capacity_type == "spot":
        assert inst.get("InstanceLifecycle") == "spot"
        cheaper_zone = min(ZONES[:2], key=lambda z: PRICES.spot("c6a.large", z))
        assert inst["Placement"]["AvailabilityZone"] == cheaper_zone
    assert [g["GroupId"] for g in inst["SecurityGroups"]] == [seeded.security_group]


USER_DATA = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    apiServerEndpoint: https://127.0.0.1:6443
    cidr: 10.100.0.0/16
    name: e2e
  kubelet:
    config:
      clusterDNS:
      - 10.100.0.10
      evictionHard:
        memory.available: 100Mi
      kubeReserved:
        cpu: 70m
        ephemeral-storage: 1Gi
        memory: 442Mi
      maxPods: 29
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,team=a"

--//--
"""


def test_registrar_reads_kubelet_settings_from_karpenters_user_data():
    boot = parse_bootstrap(base64.b64encode(USER_DATA.encode()).decode())
    assert boot.labels == {"karpenter.sh/capacity-type": "spot", "karpenter.sh/nodepool": "default",
                           "team": "a"}
    assert boot.taints == [{"effect": "NoExecute", "key": "karpenter.sh/unregistered"}]
    assert boot.max_pods == 29
    instance = {"InstanceId": "i-0123456789abcdef0", "InstanceType": "c6a.large",
                "Placement": {"AvailabilityZone": "us-west-2b"},
                "PrivateDnsName": "ip-10-0-32-5.us-west-2.compute.internal",
                "PrivateIpAddress": "10.0.32.5"}
    itype = {"VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 4096},
             "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}}
    node = node_for(instance, itype, boot, REGION, price=0.0765)
    assert node["spec"]["providerID"] == "aws:///us-west-2b/i-0123456789abcdef0"
    assert node["metadata"]["labels"]["team"] == "a"
    assert node["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
    assert node["metadata"]["labels"]["eks-node-viewer/instance-price"] == "0.0765"
    # The rehearsal's registrar (--no-price-label) registers as EC2 instances join EKS:
    # no price label, so eks mode prices the node from Karpenter's /metrics.
    assert "eks-node-viewer/instance-price" not in node_for(instance, itype, boot, REGION,
                                                            price=None)["metadata"]["labels"]
    assert node["status"]["capacity"] == {"cpu": "2", "memory": "4194304Ki", "pods": "29",
                                          "ephemeral-storage": "20Gi"}
    assert node["status"]["allocatable"]["cpu"] == "1930m"
    assert node["status"]["allocatable"]["memory"] == f"{(4096 - 442 - 100) * 1024}Ki"


def test_provider_binary_is_cached_per_version():
    a, b = awsbuild.target("v1.15.0"), awsbuild.target("v1.15.0")
    assert a.path == b.path and a.path.name == "karpenter-aws-v1.15.0"
    assert a.module.endswith("clusters/awssim/gomod/provider-v1.15.0")  # the committed wrapper


@pytest.mark.parametrize("version", versions.AWS_PROVIDER_VERSIONS)
def test_wrapper_module_pins_the_provider_and_replaces_the_refused_module(version):
    gomod = (Path(awsbuild.target(version).module) / "go.mod").read_text()
    assert f"github.com/aws/karpenter-provider-aws {version}" in gomod
    assert f"sigs.k8s.io/karpenter {version}" in gomod  # a core version local mode builds
    assert version in versions.KARPENTER_VERSIONS
    assert "timestreamwrite => github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.35.25" in gomod


def test_on_demand_prices_come_from_the_providers_table(tmp_path):
    go = tmp_path / "p.go"
    go.write_text('var X = map[string]map[ec2types.InstanceType]float64{\n\t// us-east-1\n'
                  '\t"us-east-1": {\n\t\t// c6a family\n\t\t"c6a.large": 0.076500, '
                  '"c6a.xlarge": 0.153000,\n\t},\n\t"us-west-2": {\n\t\t"c6a.large": 9.0,\n\t},\n}\n')
    assert moto_ext.on_demand_prices(go) == {"c6a.large": 0.0765, "c6a.xlarge": 0.153}
    assert json.dumps(PRICES.on_demand)


def test_pids_using_matches_the_run_directory_as_a_whole_path(tmp_path):
    import subprocess
    import sys

    from karpenter_e2e.clusters.infra import process

    short, longer = tmp_path / "karpenter-e2e", tmp_path / "karpenter-e2e-awssim"
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", str(d / "bin")])
             for d in (short, longer)]
    try:
        assert process.pids_using(str(short)) == [procs[0].pid]
        assert process.pids_using(str(longer)) == [procs[1].pid]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_registrar_reserves_what_nodeadm_does_when_karpenter_names_nothing():
    from karpenter_e2e.clusters.awssim.registrar import Bootstrap, nodeadm_reserved
    assert round(nodeadm_reserved(2, 29)["cpu"] * 1000) == 70
    assert round(nodeadm_reserved(16, 234)["cpu"] * 1000) == 60 + 10 + 10 + 30
    instance = {"InstanceId": "i-1", "InstanceType": "c6a.large",
                "Placement": {"AvailabilityZone": "us-west-2a"}}
    itype = {"VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 4096}}
    alloc = node_for(instance, itype, Bootstrap(max_pods=29), REGION)["status"]["allocatable"]
    # one 1-CPU pod per 2-vCPU node, as Karpenter planned: never two
    assert alloc["cpu"] == "1930m"
    assert alloc["memory"] == f"{(4096 - 11 * 29 - 255 - 100) * 1024}Ki"


def test_instance_profiles_are_listed_by_path_as_iam_lists_them(account):
    # Karpenter's EC2NodeClass finalizer deletes every profile ListInstanceProfiles gives for
    # its /karpenter/<region>/<cluster>/<uid>/ prefix: unfiltered, it took foreign ones too.
    iam = boto3.client("iam", region_name=REGION)
    iam.create_instance_profile(InstanceProfileName="theirs", Path="/karpenter/us-west-2/c/u1/")
    iam.create_instance_profile(InstanceProfileName="foreign", Path="/team/")
    listed = iam.list_instance_profiles(PathPrefix="/karpenter/us-west-2/c/u1/")["InstanceProfiles"]
    assert [p["InstanceProfileName"] for p in listed] == ["theirs"]
    every = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert {"theirs", "foreign"} <= every
