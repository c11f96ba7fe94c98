"""AwsChecks against moto (EC2, SQS) and botocore's Stubber (SSM's EKS AMI parameters and
throttling, which moto does not model)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from karpenter_e2e.clusters.eks.aws import AwsCheckError, AwsChecks, RetryPolicy

REGION = "us-west-2"
CLUSTER = "e2e-test"
AMI = "ami-12c6146b"  # one of moto's built-in images (looking them up costs seconds)
FAST = RetryPolicy(attempts=4, deadline=30, base=0, cap=0)  # retries without waiting


@pytest.fixture
def aws_env(monkeypatch):
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        yield


@pytest.fixture
def checks(aws_env) -> AwsChecks:
    clients = [boto3.client(s, region_name=REGION) for s in ("ec2", "ssm", "sqs")]
    return AwsChecks(*clients, region=REGION, cluster_name=CLUSTER, retry=FAST)


def launch(ec2, zone: str, spot: bool = False, itype: str = "m5.large", **tags) -> str:
    extra = {"InstanceMarketOptions": {"MarketType": "spot"}} if spot else {}
    tags = {"eks:eks-cluster-name": CLUSTER, **tags}
    return ec2.run_instances(
        ImageId=AMI, MinCount=1, MaxCount=1, InstanceType=itype,
        Placement={"AvailabilityZone": zone},
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
        **extra)["Instances"][0]["InstanceId"]


def test_instance_for_node_reads_spot_and_on_demand(checks):
    spot = launch(checks.ec2, "us-west-2a", spot=True, itype="c5.large",
                  **{"karpenter.sh/nodepool": "spot-abc123"})
    od = launch(checks.ec2, "us-west-2b", itype="m5.xlarge")

    s = checks.instance_for_node(f"aws:///us-west-2a/{spot}")
    o = checks.instance_for_node(f"aws:///us-west-2b/{od}")

    assert (s.instance_id, s.capacity_type, s.zone, s.instance_type) == \
        (spot, "spot", "us-west-2a", "c5.large")
    assert s.ami == AMI and s.subnet.startswith("subnet-")
    assert s.tags["karpenter.sh/nodepool"] == "spot-abc123"
    assert (o.capacity_type, o.zone, o.instance_type) == ("on-demand", "us-west-2b", "m5.xlarge")


def test_instance_for_node_missing_instance_says_so(checks):
    with pytest.raises(AwsCheckError, match=r"i-0123456789abcdef0 .* does not exist in us-west-2"):
        checks.instance_for_node("aws:///us-west-2a/i-0123456789abcdef0")


def test_instance_for_node_rejects_a_non_ec2_provider_id(checks):
    with pytest.raises(AwsCheckError, match="not an EC2 instance"):
        checks.instance_for_node("kwok://my-node")


def test_instances_by_tags_filters_pool_class_cluster_and_state(checks):
    a = launch(checks.ec2, "us-west-2a", **{"karpenter.sh/nodepool": "a-111111",
                                            "karpenter.k8s.aws/ec2nodeclass": "c1"})
    b = launch(checks.ec2, "us-west-2a", **{"karpenter.sh/nodepool": "b-222222",
                                            "karpenter.k8s.aws/ec2nodeclass": "c1"})
    gone = launch(checks.ec2, "us-west-2a", **{"karpenter.sh/nodepool": "a-111111"})
    checks.ec2.terminate_instances(InstanceIds=[gone])
    launch(checks.ec2, "us-west-2a", **{"karpenter.sh/nodepool": "a-111111",
                                        "eks:eks-cluster-name": "someone-elses"})

    assert {i.instance_id for i in checks.instances_by_tags(nodepool="a-111111")} == {a}
    assert {i.instance_id for i in checks.instances_by_tags(nodeclass="c1")} == {a, b}
    assert {i.instance_id for i in checks.instances_by_tags()} == {a, b}


def test_send_spot_interruption_puts_the_eventbridge_event_on_the_queue(checks):
    checks.sqs.create_queue(QueueName=CLUSTER)
    url = checks.queue_url(CLUSTER)

    checks.send_spot_interruption(url, "i-0abc")

    msgs = checks.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert len(msgs) == 1
    event = json.loads(msgs[0]["Body"])
    assert event["detail-type"] == "EC2 Spot Instance Interruption Warning"
    assert event["source"] == "aws.ec2"
    assert event["detail"] == {"instance-id": "i-0abc", "instance-action": "terminate"}
    assert event["region"] == REGION and event["version"] == "0"
    assert event["account"] == "123456789012"  # moto's account, read from the queue URL
    assert event["resources"] == ["arn:aws:ec2:us-west-2:123456789012:instance/i-0abc"]


def test_missing_queue_is_a_clear_error(checks):
    with pytest.raises(AwsCheckError, match="sqs:GetQueueUrl nope: .*NonExistentQueue"):
        checks.queue_url("nope")


# ---- SSM (Stubber: moto has no /aws/service/eks parameters) -------------------------------
def stubbed(service: str, retry: RetryPolicy = FAST):
    client = boto3.client(service, region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    sqs = boto3.client("sqs", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return AwsChecks(ec2, client, sqs, REGION, CLUSTER, retry=retry), Stubber(client)


def count_calls(checks: AwsChecks) -> list[int]:
    calls = [0]
    checks.ssm.meta.events.register("before-parameter-build.ssm.GetParameter",
                                    lambda **_: calls.__setitem__(0, calls[0] + 1))
    return calls


def ami_path(minor: str, arch: str) -> str:
    return (f"/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/{arch}/standard/"
            "recommended/image_id")


def parameter(name: str, value: str) -> dict:
    return {"Parameter": {"Name": name, "Type": "String", "Value": value, "Version": 1}}


def expect_ami_lookup(stub, minor: str, arch: str, ami: str) -> None:
    """The SSM GetParameter call the checks must make, and its answer."""
    stub.add_response("get_parameter", parameter(ami_path(minor, arch), ami),
                      {"Name": ami_path(minor, arch)})


def test_eks_optimized_ami_reads_the_ssm_parameter_with_the_ssm_arch_name():
    checks, stub = stubbed("ssm")
    expect_ami_lookup(stub, "1.35", "x86_64", "ami-amd")
    expect_ami_lookup(stub, "1.35", "arm64", "ami-arm")
    with stub:
        assert checks.eks_optimized_ami("v1.35.2", "amd64") == "ami-amd"
        assert checks.eks_optimized_ami("1.35", "arm64") == "ami-arm"
    stub.assert_no_pending_responses()


def test_drift_amis_are_the_previous_and_the_current_minor():
    checks, stub = stubbed("ssm")
    expect_ami_lookup(stub, "1.34", "x86_64", "ami-old")
    expect_ami_lookup(stub, "1.35", "x86_64", "ami-new")
    with stub:
        assert checks.drift_amis("v1.35.4") == ("ami-old", "ami-new")


def test_unpublished_ami_is_a_clear_error():
    checks, stub = stubbed("ssm")
    stub.add_client_error("get_parameter", service_error_code="ParameterNotFound")
    with stub, pytest.raises(AwsCheckError, match=r"no EKS-optimized AL2023 AMI for Kubernetes 1\.99"):
        checks.eks_optimized_ami("1.99")


def test_throttling_is_retried_until_it_passes():
    checks, stub = stubbed("ssm")
    name = ami_path("1.35", "x86_64")
    stub.add_client_error("get_parameter", service_error_code="ThrottlingException")
    stub.add_client_error("get_parameter", service_error_code="ThrottlingException")
    stub.add_response("get_parameter", parameter(name, "ami-after-2-throttles"), {"Name": name})
    calls = count_calls(checks)
    with stub:
        assert checks.eks_optimized_ami("1.35") == "ami-after-2-throttles"
    assert calls == [3]


def test_throttling_gives_up_after_the_bound_with_a_clear_error():
    checks, stub = stubbed("ssm", RetryPolicy(attempts=3, deadline=30, base=0, cap=0))
    calls = count_calls(checks)
    for code in ("RequestLimitExceeded", "Throttling", "TooManyRequestsException", "Throttling"):
        stub.add_client_error("get_parameter", service_error_code=code)
    with stub, pytest.raises(AwsCheckError,
                             match=r"still throttling \(TooManyRequestsException\) after 3 attempts"):
        checks.eks_optimized_ami("1.35")
    assert calls == [3]


def test_throttling_gives_up_at_the_wall_clock_deadline():
    checks, stub = stubbed("ssm", RetryPolicy(attempts=50, deadline=0.3, base=0.1, cap=0.1))
    calls = count_calls(checks)
    for _ in range(50):
        stub.add_client_error("get_parameter", service_error_code="ThrottlingException")
    with stub, pytest.raises(AwsCheckError, match="still throttling"):
        checks.eks_optimized_ami("1.35")
    assert 2 <= calls[0] <= 6  # ~0.1s apart for 0.3s, far from the 50 attempts allowed


def test_other_errors_are_not_retried():
    checks, stub = stubbed("ssm")
    stub.add_client_error("get_parameter", service_error_code="AccessDeniedException")
    stub.add_response("get_parameter", parameter("x", "never-reached"))
    calls = count_calls(checks)
    with stub, pytest.raises(AwsCheckError, match="AccessDeniedException"):
        checks.eks_optimized_ami("1.35")
    assert calls == [1]
