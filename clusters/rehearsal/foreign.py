"""The sweep's safety, proven on the rehearsal's fake AWS: objects a sweep must never delete,
beside the leftovers of a killed run that it must delete.

``seed`` makes both through the EC2 and IAM APIs, tagged as their owners tag them:

- leftovers of a killed harness run: an instance, a launch template and an instance profile
  with Karpenter's tags for a harness NodePool/EC2NodeClass ('<base>-<test id>') and the
  harness's karpenter-e2e/test tag, in this cluster (what a run killed with its Karpenter
  leaves: nothing deleted them);
- foreign objects, each missing one of the three things ``sweep.is_harness_resource``
  requires: a team's pool in this cluster (no test tag), a harness-like name without the test
  tag, a harness-tagged object of another cluster, an untagged instance.

``check`` reads them back: after the sweep every foreign object is still there and every
leftover gone; after the teardown (which removes all of this cluster's Karpenter objects, by
design) the other cluster's and the untagged ones are still there. The seeded ids are kept in
a JSON file between the two.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from karpenter_e2e.clusters.api.labels import TEST_LABEL
from karpenter_e2e.clusters.eks import aws, teardown
from karpenter_e2e.clusters.errors import ClusterError

KILLED_TEST_ID = "dead01"
OTHER_CLUSTER = "rh-someone-else"
FOREIGN_TYPE = "t3.micro"


@dataclass(frozen=True)
class Seeded:
    what: str  # why it is foreign, or that it is a killed run's leftover
    kind: str  # instance | launch template | instance profile
    name: str  # instance id, launch template name, instance profile name
    swept: bool  # the sweep must delete it
    outlives_teardown: bool  # not this cluster's: the teardown must leave it too


@dataclass
class Objects:
    seeded: list[Seeded] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps([asdict(s) for s in self.seeded], indent=1)

    @classmethod
    def from_json(cls, text: str) -> Objects:
        return cls([Seeded(**s) for s in json.loads(text)])


def _tags(cluster: str, owner_tag: str, owner: str, test_id: str | None) -> list[dict]:
    tags = {aws.CLUSTER_TAG: cluster, f"kubernetes.io/cluster/{cluster}": "owned",
            owner_tag: owner}
    if test_id:
        tags[TEST_LABEL] = test_id
    return [{"Key": k, "Value": v} for k, v in tags.items()]


# (what, cluster or None for "this one", owner, test id, swept, outlives the teardown)
CASES = (
    ("leftover of a killed harness run", None, f"default-{KILLED_TEST_ID}", KILLED_TEST_ID,
     True, False),
    ("a team's own pool in this cluster (no test tag)", None, "team-facade", None, False, False),
    ("a harness-like name without the test tag", None, "batch-a1b2c3", None, False, False),
    ("a harness object of another cluster", OTHER_CLUSTER, f"default-{KILLED_TEST_ID}",
     KILLED_TEST_ID, False, True),
)


def seed(ec2, iam, cluster: str, region: str, ami: str) -> Objects:
    """One instance, launch template and instance profile per case, and an untagged
    instance; what was made."""
    out = Objects()
    for i, (what, other, owner, test_id, swept, outlives) in enumerate(CASES):
        where = other or cluster
        instance = ec2.run_instances(
            ImageId=ami, InstanceType=FOREIGN_TYPE, MinCount=1, MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": _tags(
                where, aws.NODEPOOL_TAG, owner, test_id)}])["Instances"][0]["InstanceId"]
        out.seeded.append(Seeded(what, "instance", instance, swept, outlives))
        lt_name = f"{teardown.LAUNCH_TEMPLATE_PREFIX}{where}/seeded-{i}"
        ec2.create_launch_template(
            LaunchTemplateName=lt_name, LaunchTemplateData={"ImageId": ami},
            TagSpecifications=[{"ResourceType": "launch-template", "Tags": _tags(
                where, aws.NODECLASS_TAG, owner, test_id)}])
        out.seeded.append(Seeded(what, "launch template", lt_name, swept, outlives))
        profile = f"{where}_seeded_{i}"
        iam.create_instance_profile(
            InstanceProfileName=profile,
            Path=teardown.PROFILE_PATH.format(region=region, cluster=where),
            Tags=_tags(where, aws.NODECLASS_TAG, owner, test_id))
        out.seeded.append(Seeded(what, "instance profile", profile, swept, outlives))
    untagged = ec2.run_instances(ImageId=ami, InstanceType=FOREIGN_TYPE, MinCount=1,
                                 MaxCount=1)["Instances"][0]["InstanceId"]
    out.seeded.append(Seeded("an untagged instance (no Karpenter, no harness)", "instance",
                             untagged, False, True))
    return out


def present(ec2, iam, s: Seeded) -> bool:
    """Whether ``s`` still exists (an instance: not shutting down or terminated)."""
    if s.kind == "instance":
        found = ec2.describe_instances(InstanceIds=[s.name])["Reservations"]
        states = [i["State"]["Name"] for r in found for i in r["Instances"]]
        return any(st in teardown.LIVE_STATES for st in states)
    if s.kind == "launch template":
        return bool(ec2.describe_launch_templates(Filters=[
            {"Name": "launch-template-name", "Values": [s.name]}])["LaunchTemplates"])
    names = {p["InstanceProfileName"] for page in
             iam.get_paginator("list_instance_profiles").paginate() for p in page["InstanceProfiles"]}
    return s.name in names


def check(ec2, iam, objects: Objects, after: str) -> list[str]:
    """One line per seeded object ('kept' / 'deleted', and whether that was right); raises
    ClusterError listing the wrong ones. ``after``: 'sweep' or 'teardown'."""
    if after not in ("sweep", "teardown"):
        raise ValueError(f"after {after!r}: sweep or teardown")
    lines, wrong = [], []
    for s in objects.seeded:
        if after == "sweep":
            want = not s.swept
        elif s.outlives_teardown:
            want = True
        else:
            continue  # this cluster's: the teardown deletes it, sweep or not
        there = present(ec2, iam, s)
        line = (f"{'kept' if there else 'deleted':7} {s.kind:16} {s.name:48} {s.what}"
                + ("" if there == want else "   <-- WRONG"))
        lines.append(line)
        if there != want:
            wrong.append(line)
    if wrong:
        raise ClusterError(f"after the {after}, {len(wrong)} seeded objects are wrong:\n"
                           + "\n".join(wrong))
    return lines


def save(path: Path, objects: Objects) -> None:
    path.write_text(objects.to_json())


def load(path: Path) -> Objects:
    if not path.exists():
        raise ClusterError(f"no {path}: seed the sweep's objects first (rehearsal seed-sweep)")
    return Objects.from_json(path.read_text())
