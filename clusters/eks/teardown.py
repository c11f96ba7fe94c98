"""The nightly's tear-down: what Karpenter made goes before Karpenter, and what it could not
delete goes before the stack that holds its role.

    python -m karpenter_e2e.clusters.eks.teardown --eks-cluster N --region R karpenter-objects \
        --kubeconfig K --eks-opt-in N
    python -m karpenter_e2e.clusters.eks.teardown --eks-cluster N --region R instances
    python -m karpenter_e2e.clusters.eks.teardown --eks-cluster N --region R leftovers --stack Karpenter-N

Order (.github/workflows/nightly.yml): karpenter-objects, helm uninstall, instances, eksctl
delete cluster, leftovers. Karpenter deletes an EC2NodeClass's instance profile and launch
templates in its finalizer, so uninstalling it first leaves them holding the node role,
and the stack's delete then ends DELETE_FAILED.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from karpenter_e2e.clusters.api.kube import if_found
from karpenter_e2e.clusters.api.waits import Observation, WaitTimeout, eventually
from karpenter_e2e.clusters.eks import aws
from karpenter_e2e.clusters.errors import ClusterError

log = logging.getLogger(__name__)

# Karpenter's tags on the launch templates it creates (pkg/utils/utils.go GetTags, used by
# pkg/providers/launchtemplate/launchtemplate.go of aws/karpenter-provider-aws v1.15.2):
# eks:eks-cluster-name, kubernetes.io/cluster/<name>, karpenter.sh/nodepool and
# karpenter.k8s.aws/ec2nodeclass. Karpenter finds its own templates by the first
# (hydrateCache, DeleteAll); karpenter.k8s.aws/cluster has not been set since v1.1.
LAUNCH_TEMPLATE_TAG = "karpenter.k8s.aws/ec2nodeclass"
LAUNCH_TEMPLATE_PREFIX = "karpenter.k8s.aws/"  # launchtemplate.go LaunchTemplateName
# pkg/providers/instanceprofile/instanceprofile.go FormatPath("karpenter", region, cluster, uid)
PROFILE_PATH = "/karpenter/{region}/{cluster}/"
LIVE_STATES = ("pending", "running", "stopping", "stopped")

NODEPOOLS = ("karpenter.sh", "v1", "nodepools")
NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")
EC2NODECLASSES = ("karpenter.k8s.aws", "v1", "ec2nodeclasses")


class TeardownError(ClusterError):
    """Something would stay behind (and bill, or block the next delete); says what."""


@dataclass(frozen=True)
class Deadline:
    """How long a wait may take and how often it looks again (seconds)."""

    timeout: float = 900
    poll: float = 10


def wait_until_none(what: str, remaining: Callable[[], list[str]], deadline: Deadline) -> None:
    """Poll ``remaining()`` until it is empty, on a wall-clock deadline (the one wait)."""
    def look() -> Observation:
        left = remaining()
        return Observation(not left, ", ".join(left))

    try:
        eventually(look, what=f"no {what}", timeout=deadline.timeout, poll=deadline.poll)
    except WaitTimeout as exc:
        raise TeardownError(f"expected no {what} after {deadline.timeout:.0f}s; still there: "
                            f"{exc.seen}") from None


# ---- before Karpenter goes ---------------------------------------------------------------------
class KarpenterObjects:
    """Karpenter's cluster-scoped objects over the Kubernetes client; tests pass a fake."""

    def __init__(self, api_client):
        from kubernetes import client
        self.api = client.CustomObjectsApi(api_client)

    def names(self, kind: tuple[str, str, str]) -> list[str]:
        # A 404: the CRD is gone, and so are its objects.
        listing: dict = if_found(lambda: self.api.list_cluster_custom_object(*kind, _request_timeout=30),
                           {"items": []})
        return [o["metadata"]["name"] for o in listing["items"]]

    def delete(self, kind: tuple[str, str, str], name: str) -> None:
        if_found(lambda: self.api.delete_cluster_custom_object(*kind, name, _request_timeout=30))


def remove_karpenter_objects(objects, deadline: Deadline = Deadline()) -> None:
    """Delete every NodePool, wait for the NodeClaims (Karpenter terminates their
    instances), then every EC2NodeClass, and wait for those too (their finalizer deletes
    the instance profile and launch templates). Run while Karpenter is still installed."""
    for name in objects.names(NODEPOOLS):
        objects.delete(NODEPOOLS, name)
    wait_until_none("NodeClaims", lambda: objects.names(NODECLAIMS), deadline)
    for name in objects.names(EC2NODECLASSES):
        objects.delete(EC2NODECLASSES, name)
    wait_until_none("EC2NodeClasses", lambda: objects.names(EC2NODECLASSES), deadline)


# ---- what Karpenter left -----------------------------------------------------------------------
def terminate_instances(ec2, cluster: str, deadline: Deadline = Deadline()) -> list[str]:
    """Terminate the cluster's instances Karpenter launched and wait until they are gone:
    a running instance keeps its ENIs in the VPC eksctl is about to delete."""
    ids = [i.instance_id for i in aws.describe_instances(ec2, [
        {"Name": f"tag:{aws.CLUSTER_TAG}", "Values": [cluster]},
        {"Name": "tag-key", "Values": [aws.NODEPOOL_TAG]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)}])]
    for start in range(0, len(ids), 100):  # EC2 bounds the ids one request may carry
        aws.call("ec2:TerminateInstances", ec2.terminate_instances, InstanceIds=ids[start:start + 100])
    if ids:
        wait_until_none("Karpenter's instances", lambda: [i.instance_id for i in aws.describe_instances(
            ec2, [{"Name": "instance-state-name", "Values": [*LIVE_STATES, "shutting-down"]}],
            ids=ids)], deadline)
    return ids


def karpenter_launch_templates(ec2, cluster: str) -> list[dict]:
    """The cluster's launch templates Karpenter made (DescribeLaunchTemplates' entries: name,
    CreateTime, Tags)."""
    filters = [{"Name": f"tag:{aws.CLUSTER_TAG}", "Values": [cluster]},
               {"Name": "tag-key", "Values": [LAUNCH_TEMPLATE_TAG]}]
    found: list[dict] = []
    kwargs: dict[str, Any] = {"Filters": filters}
    while True:
        page = aws.call("ec2:DescribeLaunchTemplates", ec2.describe_launch_templates, **kwargs)
        found += [lt for lt in page.get("LaunchTemplates", [])
                  if lt["LaunchTemplateName"].startswith(LAUNCH_TEMPLATE_PREFIX)]
        if not page.get("NextToken"):
            return found
        kwargs["NextToken"] = page["NextToken"]


def delete_launch_template(ec2, name: str) -> None:
    aws.call("ec2:DeleteLaunchTemplate", ec2.delete_launch_template, LaunchTemplateName=name)


def delete_launch_templates(ec2, cluster: str) -> list[str]:
    names = [lt["LaunchTemplateName"] for lt in karpenter_launch_templates(ec2, cluster)]
    for name in names:
        delete_launch_template(ec2, name)
    return names


def karpenter_instance_profiles(iam, cluster: str, region: str) -> list[dict]:
    """Instance profiles Karpenter made for this cluster (ListInstanceProfiles' entries:
    name, CreateDate, Roles), found by the path Karpenter gives them."""
    path = PROFILE_PATH.format(region=region, cluster=cluster)
    return [p for page in iam.get_paginator("list_instance_profiles").paginate(PathPrefix=path)
            for p in page["InstanceProfiles"] if p["Path"].startswith(path)]  # re-checked


def delete_instance_profile(iam, profile: dict) -> None:
    """Take its roles out first: a profile holding the node role is what fails the stack's
    delete."""
    name = profile["InstanceProfileName"]
    for role in profile.get("Roles", []):
        aws.call("iam:RemoveRoleFromInstanceProfile", iam.remove_role_from_instance_profile,
                 InstanceProfileName=name, RoleName=role["RoleName"])
    aws.call("iam:DeleteInstanceProfile", iam.delete_instance_profile, InstanceProfileName=name)


def delete_instance_profiles(iam, cluster: str, region: str) -> list[str]:
    """Instance profiles Karpenter made for this cluster, after taking their role out."""
    profiles = karpenter_instance_profiles(iam, cluster, region)
    for profile in profiles:
        delete_instance_profile(iam, profile)
    return [p["InstanceProfileName"] for p in profiles]


def delete_stack(cfn, stack: str, deadline: Deadline = Deadline()) -> str:
    """Delete the stack and wait until it is gone; 'deleted' or 'absent'. DELETE_FAILED is
    an error naming the resources that failed and why."""
    def status() -> str | None:
        return aws.stack_status(cfn, stack)

    if status() is None:
        return "absent"
    cfn.delete_stack(StackName=stack)
    seen: list[str] = []

    def still_there() -> list[str]:
        now = status()
        if now == "DELETE_FAILED":
            raise TeardownError(f"stack {stack} DELETE_FAILED: {_failures(cfn, stack)}")
        seen[:] = [f"{stack} ({now})"] if now not in (None, "DELETE_COMPLETE") else []
        return seen

    wait_until_none(f"stack {stack}", still_there, deadline)
    return "deleted"


def _failures(cfn, stack: str) -> str:
    events = cfn.describe_stack_events(StackName=stack)["StackEvents"]
    failed = [f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason', '?')}" for e in events
              if e.get("ResourceStatus") == "DELETE_FAILED" and e["LogicalResourceId"] != stack]
    return "; ".join(failed) or "no resource events"


# ---- command line ------------------------------------------------------------------------------
def main(argv: list[str] | None = None, clients=None) -> int:
    p = argparse.ArgumentParser(prog="python -m karpenter_e2e.clusters.eks.teardown", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eks-cluster", required=True)
    p.add_argument("--region", default="us-west-2")
    sub = p.add_subparsers(dest="command", required=True)
    objects = sub.add_parser("karpenter-objects", help="delete NodePools and EC2NodeClasses, "
                                                       "wait until Karpenter has cleaned up")
    objects.add_argument("--kubeconfig", type=Path, required=True)
    objects.add_argument("--context", default=None)
    objects.add_argument("--eks-opt-in", default=None, help="must equal --eks-cluster")
    sub.add_parser("instances", help="terminate Karpenter's instances and wait")
    leftovers = sub.add_parser("leftovers", help="launch templates, instance profiles, stack")
    leftovers.add_argument("--stack", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    clients = clients or _boto3_clients(args.region)
    try:
        if args.command == "karpenter-objects":
            from karpenter_e2e.clusters.eks.cluster import (
                OPT_IN_CONFIGMAP,
                OPT_IN_NAMESPACE,
                KubeApi,
                check_opt_in,
            )
            api = KubeApi(args.kubeconfig, args.context)
            check_opt_in(args.eks_cluster, args.eks_opt_in,
                         api.config_map_data(OPT_IN_NAMESPACE, OPT_IN_CONFIGMAP), args.context)
            remove_karpenter_objects(KarpenterObjects(api.kube.api))
            print("NodePools, NodeClaims and EC2NodeClasses are gone")
        elif args.command == "instances":
            ids = terminate_instances(clients("ec2"), args.eks_cluster)
            print(f"terminated {len(ids)} instances {' '.join(ids)}".rstrip())
        else:
            lts = delete_launch_templates(clients("ec2"), args.eks_cluster)
            profiles = delete_instance_profiles(clients("iam"), args.eks_cluster, args.region)
            print(f"deleted launch templates {lts or 'none'}, instance profiles {profiles or 'none'}")
            print(f"stack {args.stack}: {delete_stack(clients('cloudformation'), args.stack)}")
    except (ClusterError, aws.AwsCheckError, ClientError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _boto3_clients(region: str):
    import boto3
    return lambda service: boto3.client(service, region_name=region)


# Not a user command: the nightly's EKS job runs this module to tear its cluster down, step
# by step between helm and eksctl (.github/workflows/nightly.yml).
if __name__ == "__main__":
    sys.exit(main())
