"""What eks-mode fixtures ask AWS: the instance behind a node, a pool's instances, the
EKS-optimized AMIs, a spot interruption sent to Karpenter's queue.

Every call retries on throttling (nightly runs share an account with other jobs); any
other AWS error is raised at once, as ``AwsCheckError`` with what was being asked.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import tenacity
from botocore.exceptions import ClientError

T = TypeVar("T")

THROTTLING = frozenset({"ThrottlingException", "RequestLimitExceeded", "Throttling",
                        "TooManyRequestsException"})
# Tags Karpenter's AWS provider puts on every instance it launches.
NODEPOOL_TAG = "karpenter.sh/nodepool"
CLUSTER_TAG = "eks:eks-cluster-name"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
LIVE_STATES = ("pending", "running")
PROVIDER_ID = re.compile(r"^aws:///(?P<zone>[a-z0-9-]+)/(?P<id>i-[0-9a-f]+)$")
SSM_AMI = "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/{arch}/standard/recommended/image_id"
SSM_ARCH = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "arm64"}


class AwsCheckError(RuntimeError):
    """AWS did not answer what a check asked; the message says what and why."""


@dataclass(frozen=True)
class RetryPolicy:
    """Throttling backoff: exponential from ``base`` up to ``cap`` seconds, bounded both by
    attempts and by wall clock, whichever comes first."""

    attempts: int = 8
    deadline: float = 120.0
    base: float = 0.5
    cap: float = 20.0


def error_code(exc: BaseException) -> str:
    return exc.response.get("Error", {}).get("Code", "") if isinstance(exc, ClientError) else ""


def call(what: str, fn: Callable[..., T], policy: RetryPolicy = RetryPolicy(), **kwargs: Any) -> T:
    """``fn(**kwargs)`` retried while AWS throttles; ``what`` names the call in errors."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(lambda e: error_code(e) in THROTTLING),
        stop=tenacity.stop_after_attempt(policy.attempts) | tenacity.stop_after_delay(policy.deadline),
        wait=tenacity.wait_exponential(multiplier=policy.base, max=policy.cap),
        reraise=True,
    )
    try:
        return retrying(fn, **kwargs)
    except ClientError as exc:
        code = error_code(exc)
        if code in THROTTLING:
            stats = retrying.statistics
            raise AwsCheckError(
                f"{what}: AWS still throttling ({code}) after {stats.get('attempt_number')} "
                f"attempts over {stats.get('delay_since_first_attempt', 0):.0f}s") from exc
        raise AwsCheckError(f"{what}: {code or 'error'}: {exc}") from exc


@dataclass(frozen=True)
class InstanceFacts:
    instance_id: str
    ami: str
    capacity_type: str  # "spot" | "on-demand", as Karpenter's label says
    subnet: str
    zone: str
    instance_type: str
    tags: dict[str, str] = field(default_factory=dict)
    state: str = ""
    launch_time: datetime | None = None

    @classmethod
    def from_ec2(cls, raw: dict) -> InstanceFacts:
        return cls(
            instance_id=raw["InstanceId"], ami=raw.get("ImageId", ""),
            capacity_type="spot" if raw.get("InstanceLifecycle") == "spot" else "on-demand",
            subnet=raw.get("SubnetId", ""), zone=raw.get("Placement", {}).get("AvailabilityZone", ""),
            instance_type=raw.get("InstanceType", ""),
            tags={t["Key"]: t["Value"] for t in raw.get("Tags", [])},
            state=raw.get("State", {}).get("Name", ""), launch_time=raw.get("LaunchTime"))


def describe_instances(ec2, filters: list[dict], policy: RetryPolicy = RetryPolicy(),
                       ids: list[str] | None = None) -> list[InstanceFacts]:
    """Every instance matching ``filters`` (all pages), or exactly ``ids``."""
    found: list[InstanceFacts] = []
    kwargs: dict[str, Any] = {"Filters": filters} if filters else {}
    if ids:
        kwargs["InstanceIds"] = ids
    while True:
        page = call("ec2:DescribeInstances", ec2.describe_instances, policy, **kwargs)
        found += [InstanceFacts.from_ec2(i) for r in page.get("Reservations", [])
                  for i in r.get("Instances", [])]
        if not page.get("NextToken"):
            return found
        kwargs["NextToken"] = page["NextToken"]


def discovery_zones(ec2, tag_key: str, tag_value: str,
                    policy: RetryPolicy = RetryPolicy()) -> tuple[str, ...]:
    """Zones of the subnets Karpenter discovers by tag: the zones it can launch into."""
    page = call("ec2:DescribeSubnets", ec2.describe_subnets, policy,
                Filters=[{"Name": f"tag:{tag_key}", "Values": [tag_value]}])
    return tuple(sorted({s["AvailabilityZone"] for s in page.get("Subnets", [])}))


def stack_status(cfn, stack: str) -> str | None:
    """A CloudFormation stack's status, or None where there is no such stack."""
    try:
        return cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise


def minor_of(version: str) -> tuple[int, int]:
    """'v1.35.2', '1.35' -> (1, 35)."""
    m = re.match(r"^v?(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return int(m[1]), int(m[2])


class AwsChecks:
    """The AWS facts eks-mode scenarios assert on, for one cluster in one region."""

    def __init__(self, ec2, ssm, sqs, region: str, cluster_name: str,
                 retry: RetryPolicy = RetryPolicy()):
        self.ec2, self.ssm, self.sqs = ec2, ssm, sqs
        self.region, self.cluster_name, self.retry = region, cluster_name, retry

    @classmethod
    def for_region(cls, region: str, cluster_name: str,
                   endpoint_url: str | None = None) -> AwsChecks:
        """Clients for AWS itself, or (``endpoint_url``) for aws-sim mode's fake AWS,
        which takes any credentials."""
        import boto3  # only eks mode needs credentials; building clients needs none
        extra = {"endpoint_url": endpoint_url, "aws_access_key_id": "testing",
                 "aws_secret_access_key": "testing"} if endpoint_url else {}
        return cls(*(boto3.client(s, region_name=region, **extra) for s in ("ec2", "ssm", "sqs")),
                   region=region, cluster_name=cluster_name)

    def instance_for_node(self, provider_id: str) -> InstanceFacts:
        m = PROVIDER_ID.match(provider_id or "")
        if not m:
            raise AwsCheckError(f"node providerID {provider_id!r} is not an EC2 instance "
                                "(expected aws:///<zone>/i-...)")
        try:
            found = describe_instances(self.ec2, [], self.retry, ids=[m["id"]])
        except AwsCheckError as exc:
            if not error_code(exc.__cause__).startswith("InvalidInstanceID"):
                raise
            found = []
        if not found:
            raise AwsCheckError(f"instance {m['id']} (node providerID {provider_id}) does not "
                                f"exist in {self.region}: terminated and forgotten, or the "
                                "node is in another account or region")
        return found[0]

    def instances_by_tags(self, nodepool: str | None = None,
                          nodeclass: str | None = None) -> list[InstanceFacts]:
        """Live (pending/running) instances Karpenter launched for this cluster."""
        filters = [{"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster_name]},
                   {"Name": "instance-state-name", "Values": list(LIVE_STATES)}]
        if nodepool:
            filters.append({"Name": f"tag:{NODEPOOL_TAG}", "Values": [nodepool]})
        if nodeclass:
            filters.append({"Name": f"tag:{NODECLASS_TAG}", "Values": [nodeclass]})
        return describe_instances(self.ec2, filters, self.retry)

    def eks_optimized_ami(self, k8s_minor: str, arch: str = "amd64") -> str:
        major, minor = minor_of(k8s_minor)
        if arch not in SSM_ARCH:
            raise ValueError(f"unknown architecture {arch!r}; one of {', '.join(SSM_ARCH)}")
        name = SSM_AMI.format(minor=f"{major}.{minor}", arch=SSM_ARCH[arch])
        try:
            return call(f"ssm:GetParameter {name}", self.ssm.get_parameter, self.retry,
                        Name=name)["Parameter"]["Value"]
        except AwsCheckError as exc:
            if error_code(exc.__cause__) == "ParameterNotFound":
                raise AwsCheckError(f"no EKS-optimized AL2023 AMI for Kubernetes "
                                    f"{major}.{minor} ({arch}) in {self.region}: {name} "
                                    "is not published") from exc
            raise

    def drift_amis(self, k8s_version: str, arch: str = "amd64") -> tuple[str, str]:
        """(AMI of the previous minor, AMI of the cluster's minor): pinning a NodeClass to
        the first and then the second is a real AMI drift."""
        major, minor = minor_of(k8s_version)
        return (self.eks_optimized_ami(f"{major}.{minor - 1}", arch),
                self.eks_optimized_ami(f"{major}.{minor}", arch))

    def queue_url(self, name: str) -> str:
        """URL of Karpenter's interruption queue (settings.interruptionQueue is its name)."""
        return call(f"sqs:GetQueueUrl {name}", self.sqs.get_queue_url, self.retry,
                    QueueName=name)["QueueUrl"]

    def send_spot_interruption(self, queue_url: str, instance_id: str) -> str:
        """Put the EventBridge event EC2 sends two minutes before reclaiming a spot instance
        on Karpenter's interruption queue; returns the SQS message id."""
        body = spot_interruption_event(instance_id, self.region, _account_of(queue_url))
        sent = call("sqs:SendMessage", self.sqs.send_message, self.retry,
                    QueueUrl=queue_url, MessageBody=json.dumps(body))
        return sent["MessageId"]


def spot_interruption_event(instance_id: str, region: str, account: str,
                            now: datetime | None = None) -> dict:
    # The shape of a real event: Karpenter picks the parser by source + detail-type and
    # reads the instance from detail["instance-id"].
    now = now or datetime.now(UTC)
    return {
        "version": "0", "id": str(uuid.uuid4()),
        "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
        "account": account, "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
        "resources": [f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    }


def _account_of(queue_url: str) -> str:
    # https://sqs.<region>.amazonaws.com/<account>/<name>: the queue's owner is the account.
    m = re.search(r"/(\d{12})/[^/]+$", queue_url)
    return m[1] if m else ""
