"""aws-sim mode when the cloud goes wrong, on one real aws-sim cluster shared by the module:
the sweeper removes what Karpenter made for a run that died; a deleted interruption queue
and a fake AWS that stopped answering each end a scenario with a verdict that names them;
after `down` nothing of the cluster runs. (A missing AMI, an alias whose SSM parameter does
not exist: suites/test_provisioning.py; an EC2NodeClass the API server rejects:
tests/test_diagnosis.py.)

The scenarios run in a child pytest against the module's cluster (``--karpenter-keep-cluster``), as a
person would run them. The last one stops the fake AWS; a test after it (xdist's order)
gets the cluster brought up again.
"""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from karpenter_e2e.clusters.api.waits import Observation, eventually
from karpenter_e2e.clusters.awssim.cluster import REGION, AwsSimCluster
from karpenter_e2e.clusters.infra import process

ROOT = Path(__file__).resolve().parent.parent
PROVISIONING = "suites/test_provisioning.py::test_scale_up_provisions_nodes_that_satisfy_the_nodepool"
INTERRUPTION = "suites/test_interruption.py::test_spot_interruption_cordons_drains_and_replaces"
LIVE = ["pending", "running", "stopping", "stopped"]


@pytest.fixture(scope="module")
def shared():
    cluster = AwsSimCluster(f"sim-faults-{os.getpid()}")
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
        # Whatever the tests broke, `down` leaves nothing of the cluster running.
        assert process.pids_using(str(cluster.run_dir)) == []
        assert not cluster.status().components


@pytest.fixture
def sim(shared):
    """The module's cluster, brought up afresh if a test before stopped its fake AWS (under
    xdist the order of the tests is not the file's)."""
    if shared.cloud_problem():
        shared.down()
        shared.up()
    return shared


def scenario(sim: AwsSimCluster, test: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", test, "-p", "no:cacheprovider",
                             "--karpenter-cluster=aws-sim", "--karpenter-cluster-name", sim.name,
                             "--karpenter-keep-cluster",
                             "-o", "log_cli=false", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def output(proc: subprocess.Popen, timeout: float) -> str:
    """The child's output; past ``timeout`` it is stopped and what it printed is the failure."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"the child run took over {timeout:.0f}s:\n{proc.communicate()[0][-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def fake(sim: AwsSimCluster, service: str):
    return boto3.client(service, region_name=REGION, endpoint_url=sim.aws_endpoint(),
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def tagged_for(sim: AwsSimCluster) -> dict[str, list[str]]:
    """What the fake holds for the cluster, read as broadly as AWS can list it: live
    instances and launch templates tagged with its name, instance profiles under the path
    Karpenter gives this cluster's."""
    ec2, iam = fake(sim, "ec2"), fake(sim, "iam")
    mine = {"Name": "tag:eks:eks-cluster-name", "Values": [sim.name]}
    instances = [i["InstanceId"] for r in ec2.describe_instances(Filters=[
        mine, {"Name": "instance-state-name", "Values": LIVE}])["Reservations"] for i in r["Instances"]]
    templates = [t["LaunchTemplateName"]
                 for t in ec2.describe_launch_templates(Filters=[mine])["LaunchTemplates"]]
    path = f"/karpenter/{REGION}/{sim.name}/"
    profiles = [p["InstanceProfileName"] for p in iam.list_instance_profiles(
        PathPrefix=path)["InstanceProfiles"] if p["Path"].startswith(path)]  # moto ignores the prefix
    return {"instance": instances, "launch template": templates, "instance profile": profiles}


def test_sweep_removes_what_karpenter_made_for_a_run_that_died(sim):
    proc = scenario(sim, PROVISIONING)
    try:
        def launched() -> Observation:
            left = tagged_for(sim)
            return Observation(all(left.values()), f"in the fake: {left}")

        eventually(launched, what="Karpenter to have launched an instance (with its launch "
                                  "template and instance profile)", timeout=240, poll=1)
    finally:  # the run dies mid-scenario: no teardown of its own
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    sim.stop_karpenter()  # and its Karpenter with it: nothing else will clean up
    try:
        left = tagged_for(sim)

        started = time.monotonic()
        swept = subprocess.run([sys.executable, "-m", "karpenter_e2e", "sweep", "--aws-sim",
                                sim.name, "--max-age", "0s"], cwd=ROOT, capture_output=True,
                               text=True, timeout=300)
        took = time.monotonic() - started

        assert swept.returncode == 0, swept.stderr[-2000:]
        for kind, names in left.items():
            for name in names:
                assert re.search(rf"^\s+{kind}\s+{re.escape(name)}\s", swept.stdout, re.M), \
                    f"{kind} {name} not in the sweep's report:\n{swept.stdout}"
        assert tagged_for(sim) == {k: [] for k in left}, swept.stdout
        # What the account had before Karpenter stays: only Karpenter's leftovers are swept.
        assert fake(sim, "iam").get_instance_profile(InstanceProfileName=sim.seeded().instance_profile)
        print(f"swept {sum(map(len, left.values()))} AWS leftovers in {took:.1f}s: {left}")
    finally:  # the next test needs it
        sim.start_karpenter()


def test_a_deleted_interruption_queue_is_named(sim):
    proc = scenario(sim, INTERRUPTION, "--karpenter-fault=interruption-queue-deleted")
    out = output(proc, timeout=600)

    assert proc.returncode == 1, out[-3000:]
    assert re.search(rf"sqs:GetQueueUrl {sim.name}: AWS.SimpleQueueService.NonExistentQueue", out), \
        out[-3000:]
    verdict = re.search(r"karpenter-e2e diagnosis -+\n(.*)", out)
    assert verdict and verdict.group(1).startswith("interruption queue missing (Karpenter log)"), \
        out[-3000:]


def test_the_fake_aws_stopping_mid_run_ends_the_wait_at_once_and_is_named(sim):
    started = time.monotonic()
    proc = scenario(sim, PROVISIONING, "--karpenter-fault=aws-stopped")
    out = output(proc, timeout=600)
    took = time.monotonic() - started

    assert proc.returncode == 1, out[-3000:]
    gave_up = re.search(r"gave up after (\d+)s: expected 5 Running pods.*; because: AWS not "
                        r"answering: the fake AWS on 127\.0\.0\.1:\d+ is not running", out)
    assert gave_up and int(gave_up.group(1)) < 10, out[-3000:]
    assert re.search(r"diagnosis: AWS not answering: the fake AWS on 127\.0\.0\.1:\d+ is not "
                     r"running", out), out[-3000:]
    assert took < 300, f"took {took:.0f}s"
    print(f"child run with the fake stopped: {took:.1f}s, gave up after {gave_up.group(1)}s")
