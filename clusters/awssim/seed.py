"""Seed the fake AWS as an account looks after Karpenter's getting-started steps.

Through the ordinary API (boto3 against the fake's endpoint) wherever moto accepts it;
straight into moto's backends where it refuses what AWS itself publishes (SSM parameters
under ``/aws/``) or drops fields (an AMI's architecture and root device).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import asdict, dataclass, field

ACCOUNT = "123456789012"  # moto's default account
DISCOVERY_KEY = "karpenter.sh/discovery"
SERVICE_CIDR = "10.100.0.0/16"
AMI_DATE = "v20261101"
# (architecture, variant) pairs with a distinct AMI each. Karpenter keys an alias's images
# by id, so one image published under several variants would get mixed GPU requirements.
AMI_VARIANTS = (("x86_64", "standard"), ("arm64", "standard"), ("x86_64", "nvidia"))
SSM_PATH = "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/{arch}/{variant}/recommended/image_id"


@dataclass
class Seeded:
    """What the seeded account holds, for the cluster backend and the tests."""

    region: str
    cluster: str
    zones: list[str]
    vpc: str = ""
    subnets: dict[str, str] = field(default_factory=dict)  # zone -> subnet id
    security_group: str = ""
    node_role: str = ""
    instance_profile: str = ""
    queue_url: str = ""
    # "1.36" -> {"x86_64/standard": "ami-...", ...}
    amis: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Seeded:
        return cls(**json.loads(text))


def minors(kubernetes_version: str) -> tuple[str, str]:
    """'v1.36.3' -> ('1.35', '1.36'): the previous and the current minor."""
    major, minor = kubernetes_version.lstrip("v").split(".")[:2]
    return f"{major}.{int(minor) - 1}", f"{major}.{minor}"


def seed(session, region: str, cluster: str, kubernetes_version: str, zones: list[str]) -> Seeded:
    """Create the account's resources; ``session`` is a boto3 Session whose clients reach
    the fake (endpoint and dummy credentials set by the caller). Each part is what one
    author makes on a real account: eksctl (``network``, ``eks_record``), Karpenter's
    getting-started stack (``stack_resources``) and AWS itself (``published_amis``)."""
    ec2, iam, sqs, eks = (session.client(s) for s in ("ec2", "iam", "sqs", "eks"))
    out = Seeded(region=region, cluster=cluster, zones=list(zones))
    network(ec2, cluster, zones, out)
    stack_resources(iam, sqs, cluster, out)
    eks_record(eks, cluster, kubernetes_version, out)
    published_amis(ec2, region, kubernetes_version, out)
    return out


def network(ec2, cluster: str, zones: list[str], out: Seeded) -> None:
    """What eksctl makes for the cluster: a VPC, a private subnet per zone and the node
    security group, subnets and group tagged ``karpenter.sh/discovery=<cluster>``."""
    tag = {"Key": DISCOVERY_KEY, "Value": cluster}
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.create_tags(Resources=[vpc], Tags=[{"Key": "Name", "Value": cluster}])
    out.vpc = vpc
    for i, zone in enumerate(zones):
        sub = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i * 32}.0/19", AvailabilityZone=zone,
                                TagSpecifications=[{"ResourceType": "subnet", "Tags": [
                                    tag, {"Key": "Name", "Value": f"{cluster}-private-{zone}"}]}])
        out.subnets[zone] = sub["Subnet"]["SubnetId"]
    out.security_group = ec2.create_security_group(
        GroupName=f"{cluster}-node", Description="EKS node security group", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [tag]}])["GroupId"]


def stack_resources(iam, sqs, cluster: str, out: Seeded) -> None:
    """What the getting-started stack makes that Karpenter reads: the node role (with an
    instance profile, as the stack did before v1) and the interruption queue."""
    out.node_role = f"KarpenterNodeRole-{cluster}"
    iam.create_role(RoleName=out.node_role, AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "ec2.amazonaws.com"}}]}))
    # No managed policies attached: moto does not load AWS's managed policies by default,
    # and nothing Karpenter calls reads a role's policies.
    out.instance_profile = f"KarpenterNodeInstanceProfile-{cluster}"
    iam.create_instance_profile(InstanceProfileName=out.instance_profile)
    iam.add_role_to_instance_profile(InstanceProfileName=out.instance_profile,
                                     RoleName=out.node_role)
    out.queue_url = sqs.create_queue(QueueName=cluster, Attributes={
        "MessageRetentionPeriod": "300"})["QueueUrl"]


def eks_record(eks, cluster: str, kubernetes_version: str, out: Seeded) -> None:
    """The EKS cluster record eksctl's create leaves. Karpenter reads the service CIDR from
    DescribeCluster for AL2023's user data (without it the EC2NodeClass never turns Ready),
    and its endpoint when settings.clusterEndpoint is unset."""
    eks.create_cluster(
        name=cluster, version=minors(kubernetes_version)[1],
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/{cluster}-cluster-role",
        resourcesVpcConfig={"subnetIds": list(out.subnets.values()),
                            "securityGroupIds": [out.security_group]},
        kubernetesNetworkConfig={"serviceIpv4Cidr": SERVICE_CIDR, "ipFamily": "ipv4"})


def published_amis(ec2, region: str, kubernetes_version: str, out: Seeded) -> None:
    """The EKS-optimized AL2023 AMIs of the previous and the current minor, and their SSM
    parameters: what AWS publishes in every account. Runs in the fake's own process (its
    backends are patched directly)."""
    for minor in minors(kubernetes_version):
        out.amis[minor] = {}
        for arch, variant in AMI_VARIANTS:
            name = f"amazon-eks-node-al2023-{arch}-{variant}-{minor}-{AMI_DATE}"
            image = ec2.register_image(Name=name, Architecture=arch, RootDeviceName="/dev/xvda",
                                       VirtualizationType="hvm",
                                       Description=f"EKS-optimized AL2023 {variant} {arch} "
                                                   f"for Kubernetes {minor}")["ImageId"]
            out.amis[minor][f"{arch}/{variant}"] = image
    fix_amis(region, out)
    publish_ssm(region, out)


def fix_amis(region: str, seeded: Seeded) -> None:
    """moto's RegisterImage drops Architecture and RootDeviceName; Karpenter reads the
    first for each image's requirements and the second for its block devices."""
    from moto.backends import get_backend

    ec2 = get_backend("ec2")[ACCOUNT][region]
    for by_variant in seeded.amis.values():
        for key, image_id in by_variant.items():
            ami = ec2.amis[image_id]
            ami.architecture = key.split("/")[0]
            ami.root_device_name = "/dev/xvda"
            ami.owner_id = "602401143452"  # the account EKS publishes its AMIs from
            ami.creation_date = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)


def publish_ssm(region: str, seeded: Seeded) -> None:
    """The EKS-optimized AMI parameters. moto's PutParameter refuses names under /aws/
    (only AWS publishes there), so they go into its SSM backend directly."""
    for minor, by_variant in seeded.amis.items():
        for key, image_id in by_variant.items():
            arch, variant = key.split("/")
            set_ssm_parameter(region, SSM_PATH.format(minor=minor, arch=arch, variant=variant),
                              image_id)


def set_ssm_parameter(region: str, name: str, value: str) -> None:
    """Publish (or move) a parameter as AWS would, bumping its version."""
    from moto.backends import get_backend
    from moto.ssm.models import Parameter

    ssm = get_backend("ssm")[ACCOUNT][region]
    versions = ssm._parameters[name]
    versions.append(Parameter(account_id=ACCOUNT, name=name, value=value, parameter_type="String",
                              description=None, allowed_pattern=None, keyid=None,
                              last_modified_date=datetime.datetime.now(datetime.UTC),
                              version=len(versions) + 1, data_type="aws:ec2:image"))
