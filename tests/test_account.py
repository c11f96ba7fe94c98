"""What the nightly asks of the account before it makes a cluster: the spot service-linked
role (moto, and IAM's recorded answer where moto differs) and eksctl.yaml's IAM names
against a CloudFormation template (the checker the workflow runs on the real one)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from karpenter_e2e.clusters.eks import account
from karpenter_e2e.clusters.eks.account import AccountError, ensure_spot_role, missing_from_stack

EKSCTL = Path(__file__).resolve().parents[1] / "clusters" / "eks" / "eksctl.yaml"
SPLIT_POLICIES = ("NodeLifecycle", "IAMIntegration", "EKSIntegration", "Interruption",
                  "ResourceDiscovery", "ZonalShift")


def template(*policies: str) -> str:
    """A getting-started-shaped template: the node role and the given controller policies."""
    resources = ['  KarpenterNodeRole:\n    Type: "AWS::IAM::Role"\n    Properties:\n'
                 '      RoleName: !Sub "KarpenterNodeRole-${ClusterName}"\n']
    resources += [f"  KarpenterController{p}Policy:\n    Type: AWS::IAM::ManagedPolicy\n"
                  f"    Properties:\n      ManagedPolicyName: !Sub "
                  f"\"KarpenterController{p}Policy-${{ClusterName}}\"\n"
                  f"      PolicyDocument: !Sub |\n        {{}}\n" for p in policies]
    return "Parameters:\n  ClusterName: {Type: String}\nResources:\n" + "".join(resources)


# ---- 1: eksctl.yaml's names against the stack ---------------------------------------------------
def test_eksctl_yaml_names_only_what_the_split_stack_creates():
    assert missing_from_stack(EKSCTL.read_text(), template(*SPLIT_POLICIES)) == []


def test_a_policy_the_stack_does_not_create_is_named():
    # The pre-v1.9 name against a v1.9+ template: what made the nightly's cluster step fail.
    old = ("attachPolicyARNs:\n"
           "  - arn:aws:iam::${AWS_ACCOUNT_ID}:policy/KarpenterControllerPolicy-${CLUSTER_NAME}\n")
    assert missing_from_stack(old, template(*SPLIT_POLICIES)) == \
        ["policy KarpenterControllerPolicy-<cluster>"]
    # ...and the node role too, when the stack has another name for it.
    assert "role KarpenterNodeRole-<cluster>" in missing_from_stack(
        EKSCTL.read_text(), template(*SPLIT_POLICIES).replace("KarpenterNodeRole-", "NodeRole-"))


def test_check_stack_command_exit_codes(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(template(*SPLIT_POLICIES))
    bad.write_text(template("Legacy"))
    assert account.main(["check-stack", "--template", str(good), "--eksctl", str(EKSCTL)]) == 0
    assert account.main(["check-stack", "--template", str(bad), "--eksctl", str(EKSCTL)]) == 2
    assert "KarpenterControllerZonalShiftPolicy-<cluster>" in capsys.readouterr().err


# ---- 3: the spot service-linked role -----------------------------------------------------------
@pytest.fixture
def iam(fake_aws):
    return boto3.client("iam", region_name="us-east-1")


def test_spot_role_is_created_once(iam):
    assert ensure_spot_role(iam) == "created"
    # (moto names the role after the service differently from IAM's AWSServiceRoleForEC2Spot)
    [role] = iam.list_roles(PathPrefix="/aws-service-role/spot.amazonaws.com/")["Roles"]
    assert "spot.amazonaws.com" in str(role["AssumeRolePolicyDocument"])
    assert ensure_spot_role(iam) == "exists"  # a rerun in the same account


def stubbed(error_code: str, message: str):
    client = boto3.client("iam", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("create_service_linked_role", error_code, message, 400,
                          expected_params={"AWSServiceName": "spot.amazonaws.com"})
    stub.activate()
    return client


def test_iams_real_answer_for_an_existing_role_counts_as_exists():
    # What IAM says (moto answers EntityAlreadyExists instead).
    client = stubbed("InvalidInput", "Service role name AWSServiceRoleForEC2Spot has been "
                                     "taken in this account, please try a different suffix.")
    assert ensure_spot_role(client) == "exists"


@pytest.mark.parametrize("code, message", [
    ("AccessDenied", "User: arn:aws:sts::123456789012:assumed-role/ci/x is not authorized to "
                     "perform: iam:CreateServiceLinkedRole"),
    ("InvalidInput", "Invalid service name"),  # the same code, another reason: not forgiven
])
def test_other_failures_are_errors_that_say_what_to_do(code, message):
    with pytest.raises(AccountError, match=rf"{code}: .*iam:CreateServiceLinkedRole for "
                                           r"spot.amazonaws.com"):
        ensure_spot_role(stubbed(code, message))
