"""What the nightly needs from the AWS account before it creates a cluster.

    python -m karpenter_e2e.clusters.eks.account spot-role
    python -m karpenter_e2e.clusters.eks.account check-stack --template cloudformation.yaml \
        --eksctl clusters/eks/eksctl.yaml
    python -m karpenter_e2e.clusters.eks.account deploy-stack --template cloudformation.yaml \
        --stack Karpenter-<cluster> --cluster <cluster>

``spot-role``: EC2 needs the spot service-linked role to launch spot capacity; an account
that never used spot has none, and Karpenter (which may not create it) then fails every
spot launch with AuthFailure.ServiceLinkedRoleCreationNotPermitted. Karpenter's
getting-started guide creates it once; so does this, idempotently.

``check-stack``: every IAM policy and role eksctl.yaml names must be one the getting-started
CloudFormation template creates, or the cluster's service-account stack fails (the template
split KarpenterControllerPolicy into six policies in v1.9).

``deploy-stack``: what ``aws cloudformation deploy --capabilities CAPABILITY_NAMED_IAM
--no-fail-on-empty-changeset`` does: a change set (CREATE for a new stack, UPDATE for one that
exists), executed and waited for; a change set with nothing to change is no error, so a reused
stack passes. Through boto3, so it reaches whatever endpoint boto3 is configured for.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import yaml
from botocore.exceptions import ClientError

from karpenter_e2e.clusters.api.waits import Observation, eventually
from karpenter_e2e.clusters.eks import aws

SPOT_SERVICE = "spot.amazonaws.com"
SPOT_ROLE = "AWSServiceRoleForEC2Spot"
# IAM's answer when the role exists (AWS returns InvalidInput, not EntityAlreadyExists):
# "Service role name AWSServiceRoleForEC2Spot has been taken in this account, please try a
# different suffix." (as quoted in chanzuckerberg/cztack#897)
_ROLE_TAKEN = "has been taken in this account"


class AccountError(RuntimeError):
    """The account lacks something the nightly needs; the message says what to do."""


def ensure_spot_role(iam) -> str:
    """Create the spot service-linked role unless it exists; 'created' or 'exists'."""
    try:
        iam.create_service_linked_role(AWSServiceName=SPOT_SERVICE)
        return "created"
    except ClientError as exc:
        code, message = aws.error_code(exc), exc.response.get("Error", {}).get("Message", "")
        if (code == "InvalidInput" and _ROLE_TAKEN in message) or code == "EntityAlreadyExists":
            return "exists"
        raise AccountError(
            f"cannot create the spot service-linked role ({code}: {message}); without it "
            f"every spot launch fails. Give the CI role iam:CreateServiceLinkedRole for "
            f"{SPOT_SERVICE}, or have an admin run once: aws iam create-service-linked-role "
            f"--aws-service-name {SPOT_SERVICE}") from exc


# ---- the stack's names ----------------------------------------------------------------------
class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Sub, !GetAtt, ...) read as their argument."""


_CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: (
    loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode)
    else loader.construct_sequence(node) if isinstance(node, yaml.SequenceNode)
    else loader.construct_mapping(node)))

# The cluster name as each file spells its placeholder.
_CLUSTER = re.compile(r"\$\{(ClusterName|CLUSTER_NAME)\}")


def _named(text: str) -> str:
    return _CLUSTER.sub("<cluster>", text)


def template_names(template: str) -> dict[str, set[str]]:
    """{'policy': ManagedPolicyName values, 'role': RoleName values}, cluster as <cluster>."""
    resources = yaml.load(template, Loader=_CfnLoader).get("Resources", {})
    found: dict[str, set[str]] = {"policy": set(), "role": set()}
    for res in resources.values():
        props = res.get("Properties") or {}
        if res.get("Type") == "AWS::IAM::ManagedPolicy" and "ManagedPolicyName" in props:
            found["policy"].add(_named(props["ManagedPolicyName"]))
        if res.get("Type") == "AWS::IAM::Role" and "RoleName" in props:
            found["role"].add(_named(props["RoleName"]))
    return found


def eksctl_names(eksctl: str) -> dict[str, set[str]]:
    """The account's own policies and roles eksctl.yaml refers to (AWS-managed ones aside)."""
    arns = re.findall(r"arn:aws:iam::\$\{AWS_ACCOUNT_ID\}:(policy|role)/([^\s\"']+)", eksctl)
    found: dict[str, set[str]] = {"policy": set(), "role": set()}
    for kind, name in arns:
        found[kind].add(_named(name))
    return found


def missing_from_stack(eksctl: str, template: str) -> list[str]:
    have, want = template_names(template), eksctl_names(eksctl)
    return sorted(f"{kind} {name}" for kind in want for name in want[kind] - have[kind])


# ---- deploying the stack ----------------------------------------------------------------------
# What CloudFormation says of a change set that changes nothing: as the change set's
# StatusReason ("The submitted information didn't contain changes. Submit different
# information to create a change set.") or, from some endpoints, at CreateChangeSet ("No
# updates are to be performed.").
_NO_CHANGES = ("didn't contain changes", "No updates are to be performed")
STACK_TIMEOUT_S = 900  # IAM and SQS resources: a few minutes on AWS


def deploy_stack(cfn, stack: str, template: str, parameters: dict[str, str],
                 timeout: float = STACK_TIMEOUT_S) -> str:
    """Create or update ``stack`` from ``template`` through a change set and wait for it;
    'created', 'updated' or 'no changes'. A failed stack is an AccountError naming the
    resources that failed and why."""
    status = aws.stack_status(cfn, stack)
    kind = "CREATE" if status in (None, "REVIEW_IN_PROGRESS") else "UPDATE"
    name = f"karpenter-e2e-{int(time.time())}"
    try:
        change_set = aws.call("cloudformation:CreateChangeSet", cfn.create_change_set,
                              StackName=stack, ChangeSetName=name, ChangeSetType=kind,
                              TemplateBody=template, Capabilities=["CAPABILITY_NAMED_IAM"],
                              Parameters=[{"ParameterKey": k, "ParameterValue": v}
                                          for k, v in parameters.items()])["Id"]
    except aws.AwsCheckError as exc:
        if any(s in str(exc) for s in _NO_CHANGES):
            return "no changes"
        raise AccountError(f"cannot make a change set for stack {stack}: {exc}") from exc

    def described() -> Observation:
        d = cfn.describe_change_set(ChangeSetName=change_set)
        return Observation(d["Status"] in ("CREATE_COMPLETE", "FAILED"),
                           f"change set {d['Status']}", d)

    d = eventually(described, what=f"the change set of stack {stack}", timeout=timeout, poll=2)
    if d["Status"] == "FAILED":
        if any(s in d.get("StatusReason", "") for s in _NO_CHANGES):
            cfn.delete_change_set(ChangeSetName=change_set)
            return "no changes"
        raise AccountError(f"the change set of stack {stack} failed: {d.get('StatusReason')}")
    aws.call("cloudformation:ExecuteChangeSet", cfn.execute_change_set, ChangeSetName=change_set)

    def settled() -> Observation:
        now = aws.stack_status(cfn, stack) or "absent"
        return Observation(not now.endswith("_IN_PROGRESS"), now, now)

    final = eventually(settled, what=f"stack {stack} to be {kind.lower()}d", timeout=timeout,
                       poll=5)
    if final not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
        raise AccountError(f"stack {stack} ended {final}: {_failed_resources(cfn, stack)}")
    return "created" if kind == "CREATE" else "updated"


def _failed_resources(cfn, stack: str) -> str:
    events = cfn.describe_stack_events(StackName=stack)["StackEvents"]
    failed = [f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '?')}" for e in events
              if e.get("ResourceStatus", "").endswith("_FAILED")]
    return "; ".join(failed) or "no resource events"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m karpenter_e2e.clusters.eks.account", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("spot-role", help="create the spot service-linked role unless it exists")
    check = sub.add_parser("check-stack", help="eksctl.yaml's IAM names exist in the template")
    check.add_argument("--template", type=Path, required=True)
    check.add_argument("--eksctl", type=Path, required=True)
    deploy = sub.add_parser("deploy-stack", help="create or update the getting-started stack "
                                                 "(aws cloudformation deploy, no change no error)")
    deploy.add_argument("--template", type=Path, required=True)
    deploy.add_argument("--stack", required=True)
    deploy.add_argument("--cluster", required=True, help="the template's ClusterName")
    args = p.parse_args(argv)
    if args.command == "deploy-stack":
        import boto3
        try:
            said = deploy_stack(boto3.client("cloudformation"), args.stack,
                                args.template.read_text(), {"ClusterName": args.cluster})
        except (AccountError, aws.AwsCheckError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"stack {args.stack}: {said}")
        return 0
    if args.command == "spot-role":
        import boto3
        try:
            print(f"spot service-linked role {SPOT_ROLE}: "
                  f"{ensure_spot_role(boto3.client('iam'))}")
        except AccountError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    missing = missing_from_stack(args.eksctl.read_text(), args.template.read_text())
    if missing:
        print(f"error: {args.eksctl} names what {args.template} does not create: "
              f"{', '.join(missing)}; eksctl's service-account stack would fail",
              file=sys.stderr)
        return 2
    print(f"every IAM policy and role {args.eksctl} names is in {args.template}")
    return 0


# Not a user command: the nightly's EKS job runs this module before eksctl makes its
# cluster (spot-role, check-stack; .github/workflows/nightly.yml).
if __name__ == "__main__":
    sys.exit(main())
