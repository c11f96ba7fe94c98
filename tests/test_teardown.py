"""The nightly's tear-down: Karpenter's objects before Karpenter (a fake cluster that
behaves like Karpenter's finalizers), then instances, launch templates and instance
profiles on moto, and the stack's delete on CloudFormation's recorded answers (moto's
CloudFormation needs extras this project does not install)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from karpenter_e2e.clusters.eks import teardown
from karpenter_e2e.clusters.eks.teardown import (
    EC2NODECLASSES,
    NODECLAIMS,
    NODEPOOLS,
    Deadline,
    TeardownError,
    delete_instance_profiles,
    delete_launch_templates,
    delete_stack,
    remove_karpenter_objects,
    terminate_instances,
)

CLUSTER, REGION = "karpenter-e2e-nightly", "us-west-2"
FAST = Deadline(timeout=2, poll=0)


class FakeKarpenter:
    """NodePools, NodeClaims, EC2NodeClasses; deleted objects linger ``lag`` looks, as
    Karpenter's finalizers make them; a class lingers while any NodeClaim exists."""

    def __init__(self, lag: int = 2):
        self.objects = {NODEPOOLS: {"default-abc123"}, NODECLAIMS: {"default-abc123-x2k"},
                        EC2NODECLASSES: {"default-abc123"}}
        self.deleting: dict[tuple, int] = {}
        self.lag = lag
        self.log: list[str] = []

    def names(self, kind):
        self._tick()  # every look is a moment in which Karpenter works on its finalizers
        return sorted(self.objects[kind])

    def _tick(self):
        for key in list(self.deleting):
            kind, name = key
            self.deleting[key] -= 1
            blocked = kind == EC2NODECLASSES and self.objects[NODECLAIMS]
            if self.deleting[key] <= 0 and not blocked:
                self.objects[kind].discard(name)
                del self.deleting[key]
                if kind == NODEPOOLS:  # Karpenter then deletes the pool's NodeClaims
                    self.delete(NODECLAIMS, *self.objects[NODECLAIMS])

    def delete(self, kind, *names):
        for name in names:
            self.log.append(f"delete {kind[2]} {name}")
            self.deleting.setdefault((kind, name), self.lag)


def test_returns_only_once_nodeclaims_and_nodeclasses_are_gone():
    k = FakeKarpenter()
    remove_karpenter_objects(k, FAST)
    assert all(not names for names in k.objects.values())
    assert k.log.index("delete nodepools default-abc123") \
        < k.log.index("delete ec2nodeclasses default-abc123")


def test_a_nodeclass_that_never_goes_is_an_error_naming_it():
    k = FakeKarpenter(lag=10**6)
    with pytest.raises(TeardownError, match=r"expected no NodeClaims after 0s; still there: "
                                            r"default-abc123-x2k"):
        remove_karpenter_objects(k, Deadline(timeout=0, poll=0))


# ---- instances, launch templates, instance profiles (moto) ---------------------------------------
@pytest.fixture
def ec2(fake_aws):
    return boto3.client("ec2", region_name=REGION)


@pytest.fixture
def iam(fake_aws):
    return boto3.client("iam", region_name=REGION)


def run_instance(ec2, **tags) -> str:
    tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
    return ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, TagSpecifications=[
        {"ResourceType": "instance", "Tags": tag_list}])["Instances"][0]["InstanceId"]


def test_terminates_karpenters_instances_of_this_cluster_only(ec2):
    ours = run_instance(ec2, **{"eks:eks-cluster-name": CLUSTER, "karpenter.sh/nodepool": "p"})
    system = run_instance(ec2, **{"eks:eks-cluster-name": CLUSTER})  # the managed node group's
    other = run_instance(ec2, **{"eks:eks-cluster-name": "prod", "karpenter.sh/nodepool": "p"})
    assert terminate_instances(ec2, CLUSTER, FAST) == [ours]
    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"]
              for i in r["Instances"]}
    assert states == {ours: "terminated", system: "running", other: "running"}


def launch_template(ec2, name: str, **tags) -> None:
    ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={},
                               TagSpecifications=[{"ResourceType": "launch-template", "Tags": [
                                   {"Key": k, "Value": v} for k, v in tags.items()]}])


def test_deletes_launch_templates_by_the_tags_karpenter_sets_now(ec2):
    # The tags v1.15's GetTags puts on a launch template (no karpenter.k8s.aws/cluster).
    karpenter_tags = {"eks:eks-cluster-name": CLUSTER, f"kubernetes.io/cluster/{CLUSTER}": "owned",
                      "karpenter.sh/nodepool": "default-abc123",
                      "karpenter.k8s.aws/ec2nodeclass": "default-abc123"}
    launch_template(ec2, "karpenter.k8s.aws/1234567890", **karpenter_tags)
    launch_template(ec2, "karpenter.k8s.aws/999", **{**karpenter_tags, "eks:eks-cluster-name": "prod"})
    launch_template(ec2, "eksctl-nodegroup", **{"eks:eks-cluster-name": CLUSTER})
    assert delete_launch_templates(ec2, CLUSTER) == ["karpenter.k8s.aws/1234567890"]
    left = {lt["LaunchTemplateName"] for lt in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert left == {"karpenter.k8s.aws/999", "eksctl-nodegroup"}


def test_deletes_instance_profiles_under_karpenters_path_and_frees_the_role(iam):
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action":
                        "sts:AssumeRole", "Principal": {"Service": "ec2.amazonaws.com"}}]})
    iam.create_role(RoleName=f"KarpenterNodeRole-{CLUSTER}", AssumeRolePolicyDocument=trust)
    for name, path in (("ours", f"/karpenter/{REGION}/{CLUSTER}/0f1e-uid/"),
                       ("prod", f"/karpenter/{REGION}/prod/aa-uid/"),
                       ("other-region", f"/karpenter/us-east-1/{CLUSTER}/bb-uid/")):
        iam.create_instance_profile(InstanceProfileName=name, Path=path)
        iam.add_role_to_instance_profile(InstanceProfileName=name,
                                         RoleName=f"KarpenterNodeRole-{CLUSTER}")

    assert delete_instance_profiles(iam, CLUSTER, REGION) == ["ours"]
    left = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert left == {"prod", "other-region"}


# ---- the stack (CloudFormation's recorded answers) -------------------------------------------------
STACK = f"Karpenter-{CLUSTER}"
GONE = f"Stack with id {STACK} does not exist"


def cfn(*answers):
    client = boto3.client("cloudformation", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    for op, answer in answers:
        if isinstance(answer, str):
            stub.add_client_error(op, "ValidationError", answer, 400)
        else:
            stub.add_response(op, answer)
    stub.activate()
    return client, stub


def stacks(status: str) -> dict:
    return {"Stacks": [{"StackName": STACK, "StackStatus": status,
                        "CreationTime": datetime(2026, 11, 30, tzinfo=UTC)}]}


def test_stack_delete_waits_until_the_stack_is_gone():
    client, stub = cfn(("describe_stacks", stacks("CREATE_COMPLETE")), ("delete_stack", {}),
                       ("describe_stacks", stacks("DELETE_IN_PROGRESS")),
                       ("describe_stacks", GONE))
    assert delete_stack(client, STACK, FAST) == "deleted"
    stub.assert_no_pending_responses()


def test_delete_failed_names_the_resource_and_why():
    reason = ("Cannot delete entity, must remove roles from instance profile first. "
              "(Service: Iam, Status Code: 409)")
    event = {"StackId": "arn:x", "EventId": "e1", "StackName": STACK,
             "LogicalResourceId": "KarpenterNodeRole", "ResourceStatus": "DELETE_FAILED",
             "ResourceStatusReason": reason, "Timestamp": datetime(2026, 11, 30, tzinfo=UTC)}
    client, _ = cfn(("describe_stacks", stacks("UPDATE_COMPLETE")), ("delete_stack", {}),
                    ("describe_stacks", stacks("DELETE_FAILED")),
                    ("describe_stack_events", {"StackEvents": [event]}))
    with pytest.raises(TeardownError, match=r"DELETE_FAILED: KarpenterNodeRole: Cannot delete "
                                            r"entity, must remove roles from instance profile"):
        delete_stack(client, STACK, FAST)


def test_absent_stack_is_no_error():
    client, _ = cfn(("describe_stacks", GONE))
    assert delete_stack(client, STACK, FAST) == "absent"


def test_leftovers_command_does_templates_and_profiles_before_the_stack(ec2, iam, capsys):
    client, stub = cfn(("describe_stacks", GONE))
    clients = {"ec2": ec2, "iam": iam, "cloudformation": client}.__getitem__
    assert teardown.main(["--eks-cluster", CLUSTER, "--region", REGION, "leftovers",
                          "--stack", STACK], clients=clients) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"stack {STACK}: absent"
