"""Remove what earlier harness runs left behind (a crash, a cancelled CI job).

Cluster objects go when they carry the run label and are older than ``max_age``; in eks
and aws-sim mode so do the EC2 instances, launch templates and instance profiles Karpenter
made for a harness test (``is_harness_resource``). Age keeps a sweep from touching a run
still in progress. ``dry_run`` only lists.

    karpenter-e2e sweep --kubeconfig K --max-age 3h [--dry-run]
        [--eks-cluster NAME --eks-opt-in NAME --region R]
    # an aws-sim cluster and its fake AWS:
    karpenter-e2e sweep --aws-sim NAME --max-age 0s
    # kind clusters earlier runs left on this machine's Docker:
    karpenter-e2e sweep --kind --max-age 1h
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from karpenter_e2e.clusters.api.kube import Kind, if_found
from karpenter_e2e.clusters.api.labels import RUN_LABEL, TEST_LABEL
from karpenter_e2e.clusters.eks import aws, teardown
from karpenter_e2e.clusters.errors import ClusterError

log = logging.getLogger(__name__)

NAMESPACES = Kind("", "v1", "namespaces")
NODEPOOLS = Kind("karpenter.sh", "v1", "nodepools")
EC2NODECLASSES = Kind("karpenter.k8s.aws", "v1", "ec2nodeclasses")
KWOKNODECLASSES = Kind("karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses")
# Workloads first (their pods keep nodes busy), then pools (Karpenter drains their nodes),
# then the classes those pools referenced.
SWEPT_KINDS = (NAMESPACES, NODEPOOLS, EC2NODECLASSES, KWOKNODECLASSES)

# fixtures.isolation.TestScope.name: '<base: [a-z0-9-], at most 40>-<6 hex test id>'.
HARNESS_POOL = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}-(?P<test_id>[0-9a-f]{6})$")
SWEPT_STATES = ("pending", "running", "stopping", "stopped")


def harness_test_id(pool: str) -> str | None:
    m = HARNESS_POOL.match(pool or "")
    return m["test_id"] if m else None


def is_harness_resource(tags: dict[str, str], cluster: str, owner_tag: str) -> bool:
    """An AWS resource Karpenter made is the harness's only when all three hold:
    - it belongs to ``cluster`` (tag eks:eks-cluster-name);
    - its owner (tag ``owner_tag``: the NodePool of an instance, the EC2NodeClass of a launch
      template or instance profile) is named like a harness object, '<base>-<test id>';
    - its karpenter-e2e/test tag (copied from the EC2NodeClass tags) is that same test id.
    The name alone is not enough: 'team-facade' is a pool name a person might choose."""
    test_id = harness_test_id(tags.get(owner_tag, ""))
    return (tags.get(aws.CLUSTER_TAG) == cluster and test_id is not None
            and tags.get(TEST_LABEL) == test_id)


def is_harness_instance(tags: dict[str, str], cluster: str) -> bool:
    return is_harness_resource(tags, cluster, aws.NODEPOOL_TAG)


@dataclass(frozen=True)
class Leftover:
    kind: str
    name: str
    age: timedelta
    detail: str = ""


@dataclass
class SweepReport:
    dry_run: bool
    objects: list[Leftover] = field(default_factory=list)
    instances: list[Leftover] = field(default_factory=list)
    launch_templates: list[Leftover] = field(default_factory=list)
    instance_profiles: list[Leftover] = field(default_factory=list)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        swept = self.objects + self.instances + self.launch_templates + self.instance_profiles
        rows = [f"  {x.kind:16} {x.name:40} age {_age(x.age)} {x.detail}".rstrip() for x in swept]
        return (f"sweep {verb} {len(self.objects)} objects, {len(self.instances)} instances, "
                f"{len(self.launch_templates)} launch templates, "
                f"{len(self.instance_profiles)} instance profiles"
                + ("\n" + "\n".join(rows) if rows else ""))


class ClusterObjects:
    """Harness-labelled objects of one cluster, over the harness's client. Tests pass a fake
    with the same two methods."""

    def __init__(self, kube):
        self.kube = kube

    def list(self, kind: Kind, selector: str) -> list[dict]:
        """[{name, labels, created}] of ``kind``; [] when the kind is not installed here (e.g.
        no EC2NodeClass CRD in local mode)."""
        def listed() -> list[dict]:
            if kind is NAMESPACES:
                return [{"name": n.metadata.name, "labels": n.metadata.labels or {},
                         "created": n.metadata.creation_timestamp}
                        for n in self.kube.core.list_namespace(
                            label_selector=selector, _request_timeout=self.kube.timeout).items]
            return [{"name": o["metadata"]["name"], "labels": o["metadata"].get("labels", {}),
                     "created": o["metadata"]["creationTimestamp"]}
                    for o in self.kube.list(kind, selector)]

        return if_found(listed, [])

    def delete(self, kind: Kind, name: str) -> None:
        if kind is NAMESPACES:
            if_found(lambda: self.kube.core.delete_namespace(name, _request_timeout=self.kube.timeout))
        else:
            self.kube.delete(kind, name)


def sweep_cluster(api, max_age: timedelta, now: datetime | None = None,
                  dry_run: bool = False) -> list[Leftover]:
    now = now or datetime.now(UTC)
    swept = []
    for kind in SWEPT_KINDS:
        for obj in api.list(kind, RUN_LABEL):
            age = now - _when(obj["created"])
            # Re-checked here, not only trusted to the selector: the label is the safety line.
            if RUN_LABEL not in (obj.get("labels") or {}) or age < max_age:
                continue
            if not dry_run:
                api.delete(kind, obj["name"])
            swept.append(Leftover(kind.plural, obj["name"], age))
    return swept


def sweep_instances(ec2, cluster: str, max_age: timedelta, now: datetime | None = None,
                    dry_run: bool = False,
                    policy: aws.RetryPolicy = aws.RetryPolicy()) -> list[Leftover]:
    now = now or datetime.now(UTC)
    # The filters narrow the listing; is_harness_instance decides.
    candidates = aws.describe_instances(ec2, [
        {"Name": f"tag:{aws.CLUSTER_TAG}", "Values": [cluster]},
        {"Name": "tag-key", "Values": [TEST_LABEL]},
        {"Name": "instance-state-name", "Values": list(SWEPT_STATES)}], policy)
    swept = [Leftover("instance", i.instance_id, now - i.launch_time,
                      f"NodePool {i.tags.get(aws.NODEPOOL_TAG)}, {i.state}")
             for i in candidates
             if is_harness_instance(i.tags, cluster) and now - i.launch_time >= max_age]
    if not dry_run:
        ids = [x.name for x in swept]
        for start in range(0, len(ids), 100):  # EC2 bounds the ids one request may carry
            aws.call("ec2:TerminateInstances", ec2.terminate_instances, policy,
                     InstanceIds=ids[start:start + 100])
    return swept


def sweep_launch_templates(ec2, cluster: str, max_age: timedelta, now: datetime | None = None,
                           dry_run: bool = False) -> list[Leftover]:
    """Karpenter deletes a NodeClass's launch templates in its finalizer; a run that died
    with Karpenter leaves them."""
    now = now or datetime.now(UTC)
    swept = []
    for lt in teardown.karpenter_launch_templates(ec2, cluster):
        tags = {t["Key"]: t["Value"] for t in lt.get("Tags", [])}
        age = now - _when(lt["CreateTime"])
        if is_harness_resource(tags, cluster, aws.NODECLASS_TAG) and age >= max_age:
            if not dry_run:
                teardown.delete_launch_template(ec2, lt["LaunchTemplateName"])
            swept.append(Leftover("launch template", lt["LaunchTemplateName"], age,
                                  f"EC2NodeClass {tags[aws.NODECLASS_TAG]}"))
    return swept


def sweep_instance_profiles(iam, cluster: str, region: str, max_age: timedelta,
                            now: datetime | None = None, dry_run: bool = False) -> list[Leftover]:
    """The instance profiles Karpenter made for harness EC2NodeClasses (one each, under
    /karpenter/<region>/<cluster>/), their role taken out first."""
    now = now or datetime.now(UTC)
    swept = []
    for profile in teardown.karpenter_instance_profiles(iam, cluster, region):
        name = profile["InstanceProfileName"]
        # ListInstanceProfiles does not return tags; GetInstanceProfile does.
        tags = {t["Key"]: t["Value"] for t in aws.call(
            "iam:GetInstanceProfile", iam.get_instance_profile,
            InstanceProfileName=name)["InstanceProfile"].get("Tags", [])}
        age = now - _when(profile["CreateDate"])
        if is_harness_resource(tags, cluster, aws.NODECLASS_TAG) and age >= max_age:
            if not dry_run:
                teardown.delete_instance_profile(iam, profile)
            swept.append(Leftover("instance profile", name, age,
                                  f"EC2NodeClass {tags[aws.NODECLASS_TAG]}"))
    return swept


def parse_age(text: str) -> timedelta:
    """'90m', '3h', '2d', '0s' -> timedelta."""
    m = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if not m:
        raise ValueError(f"age {text!r}: expected a number and s, m, h or d, e.g. 3h")
    return timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m[2]]: int(m[1])})


def _when(value) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _age(age: timedelta) -> str:
    minutes = int(age.total_seconds() // 60)
    return f"{minutes // 60}h{minutes % 60:02d}m"


def sweep_aws(report: SweepReport, client, cluster: str, region: str,
              max_age: timedelta) -> None:
    """Instances first (they hold the launch templates' and profiles' use), then launch
    templates, then instance profiles. ``client(service)`` gives a boto3 client."""
    report.instances = sweep_instances(client("ec2"), cluster, max_age, dry_run=report.dry_run)
    report.launch_templates = sweep_launch_templates(client("ec2"), cluster, max_age,
                                                     dry_run=report.dry_run)
    report.instance_profiles = sweep_instance_profiles(client("iam"), cluster, region, max_age,
                                                       dry_run=report.dry_run)


def _aws_sim_target(name: str):
    """(kubeconfig, boto3 client factory, region) of a running aws-sim cluster's fake AWS."""
    import boto3

    from karpenter_e2e.clusters.awssim.cluster import REGION, AwsSimCluster
    sim = AwsSimCluster(name)
    endpoint = sim.aws_endpoint()
    if not endpoint or not sim.kubeconfig.exists():
        raise ClusterError(f"aws-sim cluster {name!r} is not running (no fake AWS in "
                           f"{sim.run_dir}): nothing to sweep")
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing",
                            aws_secret_access_key="testing")
    return sim.kubeconfig, (lambda service: session.client(service, endpoint_url=endpoint)), REGION


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e sweep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", type=Path, default=None,
                   help="the cluster's kubeconfig (required unless --aws-sim)")
    p.add_argument("--context", default=None)
    p.add_argument("--max-age", type=parse_age, default=timedelta(hours=3),
                   help="only what is older than this (default 3h; longer than any run)")
    p.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    p.add_argument("--eks-cluster", default=None, help="also sweep this EKS cluster's instances")
    p.add_argument("--eks-opt-in", default=None, help="must equal --eks-cluster")
    p.add_argument("--region", default="us-west-2")
    p.add_argument("--kind", action="store_true",
                   help="sweep the harness's kind clusters on this Docker (found by their "
                        "networks' labels) older than --max-age")
    p.add_argument("--aws-sim", default=None, metavar="NAME",
                   help="sweep the aws-sim cluster NAME: its objects and what Karpenter made "
                        "in its fake AWS (instances, launch templates, instance profiles)")
    args = p.parse_args(argv)
    if args.kind:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                            datefmt="%H:%M:%S")
        from karpenter_e2e.clusters.kind import sweep as kind_sweep
        swept = kind_sweep.sweep(args.max_age, dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        print("\n".join(f"{verb} {s}" for s in swept) or
              f"no kind cluster of the harness older than {_age(args.max_age)}")
        return 0
    if args.aws_sim and (args.eks_cluster or args.kubeconfig):
        p.error("--aws-sim names the cluster and its fake AWS: give no --kubeconfig or --eks-cluster")
    if not args.aws_sim and not args.kubeconfig:
        p.error("--kubeconfig is required (or --aws-sim NAME)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    from karpenter_e2e.clusters.eks.cluster import (
        OPT_IN_CONFIGMAP,
        OPT_IN_NAMESPACE,
        KubeApi,
        check_opt_in,
    )
    try:
        client, cluster, region = None, args.eks_cluster, args.region
        if args.aws_sim:
            args.kubeconfig, client, region = _aws_sim_target(args.aws_sim)
            cluster = args.aws_sim
        elif args.eks_cluster:
            import boto3
            client = lambda service: boto3.client(service, region_name=args.region)  # noqa: E731
        api = KubeApi(args.kubeconfig, args.context)
        if args.eks_cluster:  # deleting in an EKS cluster needs the same opt-in as testing it
            check_opt_in(args.eks_cluster, args.eks_opt_in,
                         api.config_map_data(OPT_IN_NAMESPACE, OPT_IN_CONFIGMAP), args.context)
        report = SweepReport(args.dry_run)
        report.objects = sweep_cluster(ClusterObjects(api.kube), args.max_age, dry_run=args.dry_run)
        if client:
            sweep_aws(report, client, cluster, region, args.max_age)
    except (ClusterError, aws.AwsCheckError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.summary())
    return 0
