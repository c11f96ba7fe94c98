"""The EKS rehearsal's pieces that run without a cluster: the getting-started stack written from
the provider module (checked and deployed as the night does it), the provider's charts stamped
as its release stamps them, the chart repository an upgrade reads, the gate's eks options and
the registrar's annotation. The rehearsal itself ran end to end (records/eks-rehearsal-runs.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from karpenter_e2e.clusters.awssim import registrar
from karpenter_e2e.clusters.eks import account
from karpenter_e2e.clusters.eks.cluster import chart_ref, helm_upgrade_commands
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build
from karpenter_e2e.clusters.kind import chart as kindchart
from karpenter_e2e.clusters.rehearsal import charts, stack
from karpenter_e2e.runners import upgrade_gate

REPO = Path(__file__).resolve().parents[1]
EKSCTL = REPO / "clusters" / "eks" / "eksctl.yaml"
PROVIDER = "github.com/aws/karpenter-provider-aws"
REGION = "us-west-2"


@pytest.fixture(scope="module")
def module(go_module) -> Path:
    return go_module(PROVIDER, "v1.15.0")


# ---- the stack ---------------------------------------------------------------------------------
def test_the_template_names_what_eksctl_yaml_attaches(module):
    # The night's own check-stack, against the template written from the module.
    assert account.missing_from_stack(EKSCTL.read_text(), stack.template(module)) == []


def test_a_policy_the_module_no_longer_names_is_caught_by_check_stack(module):
    dropped = stack.template(module).replace("KarpenterControllerZonalShiftPolicy", "Gone")
    assert account.missing_from_stack(EKSCTL.read_text(), dropped) == \
        ["policy KarpenterControllerZonalShiftPolicy-<cluster>"]


def test_one_rule_per_interruption_message_the_release_parses(module):
    rules = {(r.source, r.detail_type) for r in stack.interruption_rules(module)}
    assert ("aws.ec2", "EC2 Spot Instance Interruption Warning") in rules
    assert ("aws.health", "AWS Health Event") in rules
    parsers = [p for p in (module / stack.PARSERS).glob("*/parser.go")
               if "DetailType()" in p.read_text()]
    assert len(rules) == len(parsers) >= 5


def test_the_stack_deploys_as_the_night_deploys_it_and_a_rerun_changes_nothing(module, fake_aws):
    cfn = boto3.client("cloudformation", region_name=REGION)
    template = stack.template(module)
    assert account.deploy_stack(cfn, "Karpenter-reh", template, {"ClusterName": "reh"}) == "created"
    assert account.deploy_stack(cfn, "Karpenter-reh", template, {"ClusterName": "reh"}) \
        == "no changes"
    iam = boto3.client("iam", region_name=REGION)
    assert iam.get_role(RoleName="KarpenterNodeRole-reh")["Role"]["Path"] == "/"
    policies = {p["PolicyName"] for p in iam.list_policies(Scope="Local")["Policies"]}
    assert {f"{p}-reh" for p in upgrade_gate_policies(module)} <= policies
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.get_queue_url(QueueName="reh")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
    events = boto3.client("events", region_name=REGION)
    rules = events.list_rules()["Rules"]
    assert len(rules) == len(stack.interruption_rules(module))
    for rule in rules:
        assert [t["Arn"] for t in events.list_targets_by_rule(Rule=rule["Name"])["Targets"]] \
            == [arn["QueueArn"]]


def upgrade_gate_policies(module: Path) -> set[str]:
    from karpenter_e2e.clusters.eks import provider
    return provider.upstream_controller_policies(module)


def test_deploy_stack_command_exit_codes(module, fake_aws, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    template = tmp_path / "cfn.yaml"
    template.write_text(stack.template(module))
    argv = ["deploy-stack", "--template", str(template), "--stack", "Karpenter-c", "--cluster", "c"]
    assert account.main(argv) == 0
    assert account.main(argv) == 0
    assert capsys.readouterr().out.splitlines() == ["stack Karpenter-c: created",
                                                     "stack Karpenter-c: no changes"]


def stubbed_cfn(*answers):
    client = boto3.client("cloudformation", region_name=REGION, aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    for method, response in answers:
        if isinstance(response, str):  # an error: its message
            stub.add_client_error(method, "ValidationError", response)
        else:
            stub.add_response(method, response)
    stub.activate()
    return client


def test_an_empty_change_set_as_aws_answers_it_is_no_error():
    # AWS makes the change set and fails it with this reason (moto refuses it at creation).
    cfn = stubbed_cfn(
        ("describe_stacks", {"Stacks": [{"StackName": "s", "StackStatus": "CREATE_COMPLETE",
                                         "CreationTime": "2026-12-07T00:00:00Z"}]}),
        ("create_change_set", {"Id": "arn:cs"}),
        ("describe_change_set", {"Status": "FAILED", "StatusReason": (
            "The submitted information didn't contain changes. Submit different information "
            "to create a change set."), "ChangeSetName": "x", "StackName": "s"}),
        ("delete_change_set", {}))
    assert account.deploy_stack(cfn, "s", "{}", {"ClusterName": "c"}) == "no changes"


def test_a_failed_stack_names_the_resource_and_why():
    cfn = stubbed_cfn(
        ("describe_stacks", "Stack with id s does not exist"),
        ("create_change_set", {"Id": "arn:cs"}),
        ("describe_change_set", {"Status": "CREATE_COMPLETE", "ChangeSetName": "x"}),
        ("execute_change_set", {}),
        ("describe_stacks", {"Stacks": [{"StackName": "s", "StackStatus": "ROLLBACK_COMPLETE",
                                         "CreationTime": "2026-12-07T00:00:00Z"}]}),
        ("describe_stack_events", {"StackEvents": [{
            "StackId": "s", "EventId": "1", "StackName": "s", "Timestamp": "2026-12-07T00:00:00Z",
            "LogicalResourceId": "KarpenterNodeRole", "ResourceStatus": "CREATE_FAILED",
            "ResourceStatusReason": "Role with name KarpenterNodeRole-c already exists."}]}))
    with pytest.raises(account.AccountError,
                       match="ROLLBACK_COMPLETE: KarpenterNodeRole: Role with name .* exists"):
        account.deploy_stack(cfn, "s", "{}", {"ClusterName": "c"})


# ---- the charts --------------------------------------------------------------------------------
def test_charts_are_stamped_as_the_release_stamps_them(module, tmp_path):
    for name in charts.CHARTS:
        copy = tmp_path / name
        shutil.copytree(module / "charts" / name, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        charts.stamp(copy, name, "v1.15.0", charts.IMAGE_REPOSITORY)
        meta = yaml.safe_load((copy / "Chart.yaml").read_text())
        assert (meta["version"], meta["appVersion"]) == ("1.15.0", "1.15.0")
    image = yaml.safe_load((tmp_path / "karpenter" / "values.yaml").read_text())["controller"]["image"]
    assert image == {"repository": charts.IMAGE_REPOSITORY, "tag": "1.15.0", "digest": ""}
    # what the source says before stamping: an earlier release (why stamping is needed)
    source = yaml.safe_load((module / "charts" / "karpenter" / "Chart.yaml").read_text())
    assert source["version"] != "1.15.0"


def test_the_packaged_chart_renders_the_nightly_values_and_the_image_made_here(module, tmp_path):
    helm = kindchart.helm_target().path
    if not helm.exists():
        pytest.skip("helm is not built yet (make e2e-kind builds it)")
    charts.package(helm, module, "v1.15.0", charts.IMAGE_REPOSITORY, tmp_path)
    values = tmp_path / "values.yaml"
    values.write_text((REPO / "clusters/eks/karpenter-values.yaml").read_text()
                      .replace("${CLUSTER_NAME}", "rh-t").replace("${AWS_ACCOUNT_ID}", "1" * 12))
    rendered = subprocess.run([str(helm), "template", "karpenter",
                               str(charts.packaged(tmp_path, "karpenter", "1.15.0")),
                               "--namespace", "kube-system", "--values", str(values)],
                              capture_output=True, text=True, check=True).stdout
    deployment = next(d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == charts.image_ref("v1.15.0")
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CLUSTER_NAME"] == env["INTERRUPTION_QUEUE"] == "rh-t"


# ---- the chart repository an upgrade reads ------------------------------------------------------
def test_an_upgrade_reads_a_directory_of_packaged_charts(tmp_path):
    for chart in ("karpenter", "karpenter-crd"):
        (tmp_path / f"{chart}-1.15.0.tgz").write_bytes(b"")
    crd, controller = helm_upgrade_commands("v1.15.0", namespace="kube-system",
                                            kubeconfig=Path("/k"), repo=str(tmp_path))
    assert crd[4] == str(tmp_path / "karpenter-crd-1.15.0.tgz")
    assert controller[4] == str(tmp_path / "karpenter-1.15.0.tgz")
    with pytest.raises(ClusterError, match="has no karpenter at v1.16.0"):
        chart_ref(str(tmp_path), "karpenter", "v1.16.0")
    assert chart_ref("oci://mirror.example/karpenter/", "karpenter", "1.0.0") == \
        "oci://mirror.example/karpenter/karpenter"


# ---- the gate on an EKS cluster ----------------------------------------------------------------
def gate_args(**kw):
    base = dict(perf_pods=0, diff=[], no_diff_examples=True, kubeconfig="/k", kube_context=None,
                eks_opt_in="rh-x", region=REGION, interruption_queue=None, chart_repo="/charts")
    return SimpleNamespace(**{**base, **kw})


def test_the_gate_says_what_one_eks_cluster_cannot_do():
    assert upgrade_gate.eks_refusals(gate_args()) == []
    refused = upgrade_gate.eks_refusals(gate_args(perf_pods=200, no_diff_examples=False,
                                                  kubeconfig=None))
    assert [r.split(":")[0] for r in refused] == [
        "the performance case needs a fresh cluster of FROM and one of TO, and an EKS cluster "
        "is one cluster", "the differential checks each folder on fresh clusters (`check` runs "
        "in local, aws-sim and kind mode)", "--kubeconfig names the EKS cluster (with "
        "--eks-opt-in, as eks mode asks)"]


def test_the_gate_passes_the_eks_options_to_its_pytest_runs():
    assert upgrade_gate.eks_args(gate_args()) == [
        "--karpenter-kubeconfig", "/k", "--karpenter-eks-opt-in", "rh-x",
        "--karpenter-region", REGION, "--karpenter-chart-repo", "/charts"]


def test_the_gate_refuses_an_eks_cluster_running_another_release():
    backend = SimpleNamespace(name="rh-x", up=lambda: SimpleNamespace(
        versions={"karpenter": "v1.15.0"}))
    with pytest.raises(ClusterError, match="runs Karpenter v1.15.0, not v1.14.3: install"):
        upgrade_gate.check_installed(backend, "v1.14.3")
    assert upgrade_gate.check_installed(backend, "1.15.0") == "v1.15.0"


# ---- the registrar on kind ---------------------------------------------------------------------
def test_the_registrar_marks_nodes_for_the_kwok_that_manages_them():
    instance = {"InstanceId": "i-0123456789abcdef0", "InstanceType": "m5.large",
                "Placement": {"AvailabilityZone": "us-west-2a"}, "PrivateIpAddress": "10.0.0.9",
                "PrivateDnsName": "ip-10-0-0-9.ec2.internal"}
    itype = {"VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 8192}}
    node = registrar.node_for(instance, itype, registrar.Bootstrap(), REGION,
                              annotations={"kwok.x-k8s.io/node": "fake"})
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    plain = registrar.node_for(instance, itype, registrar.Bootstrap(), REGION)
    assert "kwok.x-k8s.io/node" not in plain["metadata"]["annotations"]


def test_a_rehearsal_cluster_is_named_for_its_sweep():
    from karpenter_e2e.clusters.rehearsal.cluster import Rehearsal
    with pytest.raises(ClusterError, match="must start with rh-"):
        Rehearsal("night")
    assert build.cache_dir().name  # the cache is where the rehearsal keeps its files


# ---- the sweep's safety and the credentials ----------------------------------------------------
def _seeded(fake_aws):
    from karpenter_e2e.clusters.rehearsal import foreign
    ec2, iam = (boto3.client(s, region_name=REGION) for s in ("ec2", "iam"))
    ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    return ec2, iam, foreign.seed(ec2, iam, "rh-t", REGION, ami)


def test_the_sweep_deletes_the_killed_runs_leftovers_and_keeps_every_foreign_object(fake_aws):
    from datetime import timedelta

    from karpenter_e2e.clusters.eks import sweep
    from karpenter_e2e.clusters.rehearsal import foreign
    ec2, iam, objects = _seeded(fake_aws)
    swept = {s.name for s in objects.seeded if s.swept}
    assert {s.kind for s in objects.seeded if s.swept} == {
        "instance", "launch template", "instance profile"}
    assert len(objects.seeded) - len(swept) == 10  # 3 foreign cases x 3 kinds, one untagged
    with pytest.raises(ClusterError, match="3 seeded objects are wrong"):
        foreign.check(ec2, iam, objects, "sweep")  # nothing swept yet: the leftovers remain
    report = sweep.SweepReport(dry_run=False)
    sweep.sweep_aws(report, lambda s: {"ec2": ec2, "iam": iam}[s], "rh-t", REGION, timedelta(0))
    assert {x.name for x in report.instances + report.launch_templates
            + report.instance_profiles} == swept
    lines = foreign.check(ec2, iam, objects, "sweep")
    assert len(lines) == len(objects.seeded) and not any("WRONG" in ln for ln in lines)


def test_a_sweep_that_takes_a_foreign_object_is_caught(fake_aws):
    # The mutant: a sweep that trusts the cluster tag alone for launch templates.
    from datetime import timedelta

    from karpenter_e2e.clusters.eks import sweep, teardown
    from karpenter_e2e.clusters.rehearsal import foreign
    ec2, iam, objects = _seeded(fake_aws)
    sweep.sweep_aws(sweep.SweepReport(dry_run=False), lambda s: {"ec2": ec2, "iam": iam}[s],
                    "rh-t", REGION, timedelta(0))
    teardown.delete_launch_templates(ec2, "rh-t")
    with pytest.raises(ClusterError, match="2 seeded objects are wrong") as caught:
        foreign.check(ec2, iam, objects, "sweep")
    wrong = [ln for ln in str(caught.value).splitlines() if "WRONG" in ln]
    assert [ln.split()[:3] for ln in wrong] == [["deleted", "launch", "template"]] * 2


def test_after_the_teardown_the_other_clusters_objects_are_still_there(fake_aws):
    from karpenter_e2e.clusters.eks import teardown
    from karpenter_e2e.clusters.rehearsal import foreign
    ec2, iam, objects = _seeded(fake_aws)
    teardown.delete_launch_templates(ec2, "rh-t")
    teardown.delete_instance_profiles(iam, "rh-t", REGION)
    ec2.terminate_instances(InstanceIds=[s.name for s in objects.seeded
                                         if s.kind == "instance" and not s.outlives_teardown])
    assert len(foreign.check(ec2, iam, objects, "teardown")) == 4
    ec2.terminate_instances(InstanceIds=[s.name for s in objects.seeded
                                         if s.kind == "instance" and s.outlives_teardown])
    with pytest.raises(ClusterError, match="2 seeded objects are wrong"):
        foreign.check(ec2, iam, objects, "teardown")


def test_a_printed_credential_is_found_and_named(tmp_path):
    from karpenter_e2e.clusters.rehearsal import leaks
    secrets = {"AWS_ACCESS_KEY_ID": "AKIATESTTESTTEST0001", "AWS_SECRET_ACCESS_KEY": "s" * 40}
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "karpenter.log").write_text("nothing here\n")
    env = tmp_path / "aws.env"
    env.write_text("AWS_SECRET_ACCESS_KEY=" + "s" * 40)
    found = leaks.search([tmp_path], secrets, skip=[env])
    assert found.files == 1 and found.size > 0
    (tmp_path / "run" / "allure.json").write_text('{"env": "AKIATESTTESTTEST0001"}')
    with pytest.raises(ClusterError, match=r"allure.json: AWS_ACCESS_KEY_ID"):
        leaks.search([tmp_path], secrets, skip=[env])


@pytest.mark.parametrize("case", __import__(
    "karpenter_e2e.clusters.rehearsal.safety", fromlist=["cases"]).cases("rh-t"),
    ids=lambda c: c.what)
def test_each_opt_in_case_expects_what_eks_mode_really_says(case):
    # The rehearsal's check-opt-in looks for these words in pytest's output: they must be
    # eks mode's own refusal (as the plugin names its options), or the check could never pass.
    from karpenter_e2e.clusters.eks.cluster import check_opt_in
    from karpenter_e2e.clusters.flags import plugin_flag
    configmap = None if case.configmap is None else {"cluster": case.configmap}
    with pytest.raises(ClusterError) as refused:
        check_opt_in("rh-t", case.opt_in or "rh-t", configmap, flag=plugin_flag)
    assert case.refusal in str(refused.value)
    check_opt_in("rh-t", "rh-t", {"cluster": "rh-t"}, flag=plugin_flag)  # the night's: let in
