"""The sweeper: what counts as a harness leftover, age, dry run; cluster objects on an
in-memory fake, EC2 instances on moto (whose LaunchTime is 'now', so age is tested by
moving the sweeper's clock instead)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from karpenter_e2e.clusters.eks import sweep
from karpenter_e2e.clusters.eks.sweep import (
    EC2NODECLASSES,
    KWOKNODECLASSES,
    NAMESPACES,
    NODEPOOLS,
    harness_test_id,
    is_harness_instance,
    parse_age,
)
from karpenter_e2e.fixtures.isolation import RUN_LABEL, TEST_LABEL, TestScope

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CLUSTER = "e2e-test"


class FakeCluster:
    """The two calls the sweeper makes; ignores the selector on purpose, so the sweeper's
    own label check is what keeps unlabelled objects safe."""

    def __init__(self):
        self.objects: dict = {}  # (plural, name) -> {name, labels, created}
        self.deleted: list[tuple[str, str]] = []

    def add(self, kind, name: str, age: timedelta, labels: dict | None = None) -> None:
        created = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")  # the API's string form
        self.objects[(kind.plural, name)] = {"name": name, "labels": labels or {},
                                             "created": created}

    def list(self, kind, selector: str) -> list[dict]:
        assert selector == RUN_LABEL
        return [o for (plural, _), o in self.objects.items() if plural == kind.plural]

    def delete(self, kind, name: str) -> None:
        self.deleted.append((kind.plural, name))
        del self.objects[(kind.plural, name)]


RUN = {RUN_LABEL: "1129080000abcd"}


@pytest.fixture
def fake() -> FakeCluster:
    f = FakeCluster()
    f.add(NAMESPACES, "workshop-aaaaaa", timedelta(hours=5), RUN)
    f.add(NODEPOOLS, "default-aaaaaa", timedelta(hours=5), RUN)
    f.add(EC2NODECLASSES, "default-aaaaaa", timedelta(hours=5), RUN)
    f.add(KWOKNODECLASSES, "default-bbbbbb", timedelta(hours=4), RUN)
    f.add(NODEPOOLS, "default-cccccc", timedelta(minutes=20), RUN)  # a run still going
    f.add(NODEPOOLS, "team-facade", timedelta(days=30))  # a person's pool, no run label
    f.add(NAMESPACES, "kube-system", timedelta(days=30))
    return f


def test_cluster_sweep_deletes_old_labelled_objects_only(fake):
    swept = sweep.sweep_cluster(fake, timedelta(hours=3), now=NOW)

    assert fake.deleted == [("namespaces", "workshop-aaaaaa"), ("nodepools", "default-aaaaaa"),
                            ("ec2nodeclasses", "default-aaaaaa"),
                            ("kwoknodeclasses", "default-bbbbbb")]  # workloads, pools, classes
    assert {(x.kind, x.name) for x in swept} == set(fake.deleted)
    assert ("nodepools", "default-cccccc") in fake.objects
    assert ("nodepools", "team-facade") in fake.objects
    assert ("namespaces", "kube-system") in fake.objects


def test_cluster_dry_run_lists_and_deletes_nothing(fake):
    before = dict(fake.objects)

    swept = sweep.sweep_cluster(fake, timedelta(hours=3), now=NOW, dry_run=True)

    assert len(swept) == 4 and fake.deleted == [] and fake.objects == before
    report = sweep.SweepReport(True, objects=swept)
    assert report.summary().startswith("sweep would delete 4 objects")


def test_harness_pool_names_follow_test_scope_naming():
    scope = TestScope.for_test("1129080000abcd", "suites/test_x.py::test_y")
    assert harness_test_id(scope.name("default")) == scope.test_id
    assert harness_test_id(scope.name("Spot Training")) == scope.test_id
    assert harness_test_id(scope.name("x" * 60)) == scope.test_id  # base cut at 40
    for not_ours in ("default", "default-abc12", "default-abcdefg", "default-ABC123",
                     "-abc123", "default_abc123"):
        assert harness_test_id(not_ours) is None, not_ours


@pytest.mark.parametrize("tags, ours", [
    ({"karpenter.sh/nodepool": "default-abc123", TEST_LABEL: "abc123"}, True),
    # A person's pool that happens to end in six hex letters, without our test tag.
    ({"karpenter.sh/nodepool": "team-facade"}, False),
    # Our test tag, but naming another test than the pool's suffix.
    ({"karpenter.sh/nodepool": "default-abc123", TEST_LABEL: "def456"}, False),
    ({"karpenter.sh/nodepool": "default", TEST_LABEL: "abc123"}, False),
    ({TEST_LABEL: "abc123"}, False),
])
def test_instance_matching_rule(tags, ours):
    assert is_harness_instance({"eks:eks-cluster-name": CLUSTER, **tags}, CLUSTER) is ours
    assert is_harness_instance({"eks:eks-cluster-name": "other", **tags}, CLUSTER) is False


@pytest.fixture
def ec2(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("ec2", region_name="us-west-2")


def launch(ec2, **tags) -> str:
    tags = {"eks:eks-cluster-name": CLUSTER, **tags}
    return ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large",
        TagSpecifications=[{"ResourceType": "instance",
                            "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )["Instances"][0]["InstanceId"]


def states(ec2, ids) -> dict[str, str]:
    res = ec2.describe_instances(InstanceIds=list(ids))["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in res for i in r["Instances"]}


def test_instance_sweep_terminates_old_harness_instances_only(ec2):
    ours = launch(ec2, **{"karpenter.sh/nodepool": "default-abc123", TEST_LABEL: "abc123"})
    persons = launch(ec2, **{"karpenter.sh/nodepool": "team-facade"})
    other_cluster = launch(ec2, **{"karpenter.sh/nodepool": "default-abc123",
                                   TEST_LABEL: "abc123", "eks:eks-cluster-name": "prod"})
    launched = datetime.now(UTC)

    young = sweep.sweep_instances(ec2, CLUSTER, timedelta(hours=3), now=launched)
    assert young == []  # launched just now: a run may still be using it

    old = sweep.sweep_instances(ec2, CLUSTER, timedelta(hours=3),
                                now=launched + timedelta(hours=4))
    assert [x.name for x in old] == [ours]
    assert "NodePool default-abc123" in old[0].detail
    after = states(ec2, [ours, persons, other_cluster])
    assert after[ours] in ("shutting-down", "terminated")
    assert after[persons] == after[other_cluster] == "running"


def test_instance_dry_run_terminates_nothing(ec2):
    ours = launch(ec2, **{"karpenter.sh/nodepool": "default-abc123", TEST_LABEL: "abc123"})

    listed = sweep.sweep_instances(ec2, CLUSTER, timedelta(0), dry_run=True,
                                   now=datetime.now(UTC) + timedelta(minutes=1))

    assert [x.name for x in listed] == [ours]
    assert states(ec2, [ours])[ours] == "running"


@pytest.mark.parametrize("text, age", [("90m", timedelta(minutes=90)), ("3h", timedelta(hours=3)),
                                       ("2d", timedelta(days=2)), ("0s", timedelta(0))])
def test_parse_age(text, age):
    assert parse_age(text) == age


def test_parse_age_rejects_nonsense():
    with pytest.raises(ValueError, match="e.g. 3h"):
        parse_age("3 hours")


def test_cluster_objects_adapter_normalises_and_skips_uninstalled_kinds():
    from types import SimpleNamespace as NS

    from kubernetes.client.rest import ApiException

    class Kube:
        timeout = 5
        core = NS(list_namespace=lambda label_selector, _request_timeout: NS(items=[
            NS(metadata=NS(name="workshop-aaaaaa", labels=RUN, creation_timestamp=NOW))]))

        def list(self, kind, selector):
            if kind is EC2NODECLASSES:
                raise ApiException(status=404)  # local mode: no EC2NodeClass CRD
            return [{"metadata": {"name": "default-aaaaaa", "labels": RUN,
                                  "creationTimestamp": "2026-11-29T07:00:00Z"}}]

    api = sweep.ClusterObjects(Kube())
    assert api.list(EC2NODECLASSES, RUN_LABEL) == []
    swept = sweep.sweep_cluster(api, timedelta(hours=3), now=NOW, dry_run=True)
    assert {(x.kind, x.name, x.age) for x in swept} == {
        ("nodepools", "default-aaaaaa", timedelta(hours=5)),
        ("kwoknodeclasses", "default-aaaaaa", timedelta(hours=5))}


def test_sweep_command_explains_a_missing_kubeconfig(tmp_path, capsys):
    assert sweep.main(["--kubeconfig", str(tmp_path / "nope"), "--dry-run"]) == 2
    assert "kubeconfig" in capsys.readouterr().err


def karpenters_launch_template(ec2, nodeclass: str, test_id: str | None, cluster=CLUSTER) -> str:
    """A launch template tagged as Karpenter's launch template provider tags it."""
    tags = {"eks:eks-cluster-name": cluster, "karpenter.k8s.aws/ec2nodeclass": nodeclass,
            **({TEST_LABEL: test_id} if test_id else {})}
    name = f"karpenter.k8s.aws/{abs(hash((nodeclass, cluster)))}"
    ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={}, TagSpecifications=[
        {"ResourceType": "launch-template", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}])
    return name


def karpenters_instance_profile(iam, nodeclass: str, test_id: str | None, cluster=CLUSTER) -> str:
    """An instance profile where and as Karpenter's NodeClass controller makes it, holding a role."""
    tags = {"eks:eks-cluster-name": cluster, "karpenter.k8s.aws/ec2nodeclass": nodeclass,
            **({TEST_LABEL: test_id} if test_id else {})}
    name = f"{cluster}_{abs(hash(nodeclass))}"
    iam.create_instance_profile(InstanceProfileName=name, Path=f"/karpenter/us-west-2/{cluster}/uid/",
                                Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="KarpenterNodeRole")
    return name


def test_launch_template_and_instance_profile_sweep_takes_old_harness_ones_only(ec2):
    iam = boto3.client("iam", region_name="us-west-2")
    iam.create_role(RoleName="KarpenterNodeRole", AssumeRolePolicyDocument="{}")
    ours_lt = karpenters_launch_template(ec2, "default-abc123", "abc123")
    persons_lt = karpenters_launch_template(ec2, "team-facade", None)
    other_lt = karpenters_launch_template(ec2, "default-abc123", "abc123", cluster="prod")
    ours_ip = karpenters_instance_profile(iam, "default-abc123", "abc123")
    persons_ip = karpenters_instance_profile(iam, "team-facade", None)
    created = datetime.now(UTC)

    assert sweep.sweep_launch_templates(ec2, CLUSTER, timedelta(hours=3), now=created) == []
    assert sweep.sweep_instance_profiles(iam, CLUSTER, "us-west-2", timedelta(hours=3),
                                         now=created) == []
    later = created + timedelta(hours=4)
    listed = sweep.sweep_launch_templates(ec2, CLUSTER, timedelta(hours=3), now=later, dry_run=True)
    assert [x.name for x in listed] == [ours_lt]

    lts = sweep.sweep_launch_templates(ec2, CLUSTER, timedelta(hours=3), now=later)
    ips = sweep.sweep_instance_profiles(iam, CLUSTER, "us-west-2", timedelta(hours=3), now=later)

    assert [x.name for x in lts] == [ours_lt] and [x.name for x in ips] == [ours_ip]
    assert "EC2NodeClass default-abc123" in ips[0].detail
    left = {lt["LaunchTemplateName"] for lt in ec2.describe_launch_templates()["LaunchTemplates"]}
    assert left == {persons_lt, other_lt}
    assert {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]} \
        == {persons_ip}


def test_sweep_command_refuses_aws_sim_mixed_with_a_kubeconfig(tmp_path):
    with pytest.raises(SystemExit):
        sweep.main(["--aws-sim", "sim-x", "--kubeconfig", str(tmp_path / "k")])


def test_sweep_command_says_an_aws_sim_cluster_is_not_running(capsys):
    assert sweep.main(["--aws-sim", "sim-never-started", "--dry-run"]) == 2
    assert "aws-sim cluster 'sim-never-started' is not running" in capsys.readouterr().err
