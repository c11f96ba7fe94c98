"""The nightly eks job against the facts it depends on: the stack's policy names, the CLI
flags that make reruns work, the eksctl that knows the cluster's version, and a time budget
that always leaves the sweep and tear-down their turn."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from karpenter_e2e.clusters.eks import account, provider
from karpenter_e2e.clusters.infra import versions

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
EKSCTL = REPO / "clusters" / "eks" / "eksctl.yaml"

# eksctl version -> the newest EKS minor it is known to have created clusters with.
# eksctl >= 0.200 reads the supported versions from EKS (DescribeClusterVersions, in
# pkg/eks/versions_manager.go), so an older eksctl may accept a newer minor, but nothing
# vouches for the add-on and AMI handling it has never met; pin one that has run it.
EKSCTL_RUNS_WITH = {
    # Tagged 2025-10-02 (module proxy: github.com/weaveworks/eksctl@v0.215.0 .info), the day
    # EKS 1.34 came out; EKS 1.35 came in January 2026 (standard support ends 2027-03-27,
    # 14 months on). Its own version table (pkg/apis/eksctl.io/v1alpha5/types.go) ends at 1.33.
    "0.215.0": "1.34",
    # aws/karpenter-provider-aws v1.15.2, .github/actions/e2e/setup-cluster/action.yaml:
    # its e2e clusters are made with eksctl v0.217.0 at Kubernetes 1.37 (input defaults;
    # test_eksctl_table_agrees_with_upstreams_e2e reads them from the module).
    "0.217.0": "1.37",
}


def eks_job() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["eks"]


def steps() -> dict[str, dict]:
    return {s.get("name") or s["uses"]: s for s in eks_job()["steps"]}


NIGHT = REPO / ".ci" / "eks-night"


def night(step: str) -> str:
    """The body of one of .ci/eks-night's steps (a shell function), which the workflow's step
    runs as `make eks-night-<step>` and `make eks-rehearsal` runs in order."""
    text = NIGHT.read_text()
    start = text.index(f"\n{step.replace('-', '_')}() {{\n")
    return text[start:text.index("\n}\n", start)]


def runs(step: str, target: str) -> bool:
    return f"make {target}" in steps()[step]["run"]


def minor(version: str) -> tuple[int, int]:
    major, minor_, *_ = version.lstrip("v").split(".")
    return int(major), int(minor_)


# ---- 1: the policies eksctl.yaml attaches exist in the stack ----------------------------------
def test_eksctl_attaches_only_policies_upstreams_stack_defines(provider_module):
    # The getting-started template is not in the module zip (website/ is a nested module);
    # upstream's e2e, which deploys it, names the policies it attaches from it.
    upstream = provider.upstream_controller_policies(provider_module)
    assert len(upstream) == 6, upstream  # NodeLifecycle ... ZonalShift, since v1.9
    attached = {name.removesuffix("-<cluster>")
                for name in account.eksctl_names(EKSCTL.read_text())["policy"]}
    assert attached, "eksctl.yaml attaches no policy to Karpenter's service account"
    assert attached - upstream == set(), \
        f"eksctl.yaml attaches policies the v{versions.EKS_PROVIDER} stack does not define"
    assert attached == upstream, f"policies upstream attaches that eksctl.yaml does not: " \
                                 f"{sorted(upstream - attached)}"


def test_workflow_checks_the_downloaded_template_before_making_the_cluster():
    names = list(steps())
    assert runs("account (spot role, Karpenter's stack)", "eks-night-account")
    account_step = night("account")
    assert "karpenter_e2e.clusters.eks.account check-stack" in account_step
    assert account_step.index("check-stack") < account_step.index("account deploy-stack")
    assert names.index("account (spot role, Karpenter's stack)") \
        < names.index("cluster (create or reuse)")


def test_workflow_template_is_the_installed_release():
    # The stack comes from the same release as the chart and the CRDs the tests check.
    env = eks_job()["env"]
    assert f"'{versions.EKS_PROVIDER.lstrip('v')}'" in env["KARPENTER_VERSION"]
    assert "/v${KARPENTER_VERSION}/" in steps()["account (spot role, Karpenter's stack)"]["run"]


# ---- 3: the spot service-linked role, before anything launches --------------------------------
def test_workflow_makes_the_spot_role_before_the_cluster():
    run = night("account")
    assert "karpenter_e2e.clusters.eks.account spot-role" in run
    assert run.index("spot-role") < run.index("deploy-stack")
    assert "|| true" not in run  # only "already exists" is forgiven, by the module


# ---- 4: the device plugin for the GPU scenarios -----------------------------------------------
def test_workflow_installs_a_pinned_nvidia_device_plugin_with_karpenters_gpu_label():
    run = steps()["NVIDIA device plugin (GPU scenarios)"]["run"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", eks_job()["env"]["NVIDIA_DEVICE_PLUGIN_VERSION"])
    assert '--version "$NVIDIA_DEVICE_PLUGIN_VERSION"' in run
    values = yaml.safe_load((REPO / "clusters/eks/nvidia-device-plugin-values.yaml").read_text())
    [term] = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "karpenter.k8s.aws/instance-gpu-manufacturer",
                                         "operator": "In", "values": ["nvidia"]}]
    names = list(steps())
    assert names.index("NVIDIA device plugin (GPU scenarios)") \
        < names.index("scenario suites (eks mode)")


# ---- 7: a reused stack is not an error --------------------------------------------------------
def test_the_stack_deploy_tolerates_an_empty_changeset():
    # `aws cloudformation deploy --no-fail-on-empty-changeset`, through boto3
    # (account.deploy_stack; tests/test_rehearsal.py deploys twice against moto).
    run = night("account")
    assert '--stack "$STACK"' in run and "deploy-stack" in run
    assert 'STACK="Karpenter-${CLUSTER_NAME}"' in NIGHT.read_text()


# ---- 8: the pinned eksctl has run the cluster's Kubernetes version ----------------------------
def test_pinned_eksctl_has_run_the_clusters_kubernetes_version():
    pinned = eks_job()["env"]["EKSCTL_VERSION"]
    wanted = str(yaml.safe_load(EKSCTL.read_text())["metadata"]["version"])
    assert pinned in EKSCTL_RUNS_WITH, f"eksctl {pinned} is not in EKSCTL_RUNS_WITH: add it " \
                                       f"with the newest EKS version it is known to run, and why"
    assert minor(wanted) <= minor(EKSCTL_RUNS_WITH[pinned]), \
        f"eksctl {pinned} is known to run EKS up to {EKSCTL_RUNS_WITH[pinned]}; " \
        f"eksctl.yaml asks for {wanted}"


def test_eksctl_table_agrees_with_upstreams_e2e(provider_module):
    defaults = provider.upstream_e2e_defaults(provider_module)
    upstream = defaults["eksctl_version"].lstrip("v")
    assert EKSCTL_RUNS_WITH.get(upstream) == defaults["k8s_version"], defaults


# ---- 10: time budget and credentials ----------------------------------------------------------
def test_every_step_has_a_timeout_and_they_fit_the_job():
    job = eks_job()
    missing = [name for name, s in steps().items() if "timeout-minutes" not in s]
    assert not missing, f"steps without timeout-minutes (GitHub's default is 360): {missing}"
    total = sum(s["timeout-minutes"] for s in job["steps"])
    assert total <= job["timeout-minutes"], \
        f"step timeouts add up to {total} min, more than the job's {job['timeout-minutes']}: " \
        "a slow suite could leave the sweep and tear-down no time"


def test_suites_leave_the_sweep_and_tear_down_their_time():
    s = steps()
    assert s["scenario suites (eks mode)"]["timeout-minutes"] < eks_job()["timeout-minutes"] \
        - s["sweep leftovers"]["timeout-minutes"] - s["tear down"]["timeout-minutes"]


def test_credentials_outlive_the_job():
    creds = steps()["aws-actions/configure-aws-credentials@v4"]["with"]
    assert creds["role-duration-seconds"] > eks_job()["timeout-minutes"] * 60


# ---- 5, 6: tear-down order ---------------------------------------------------------------------
def test_teardown_removes_karpenters_objects_before_karpenter_and_leftovers_before_the_stack():
    assert runs("tear down", "eks-night-teardown")
    run = night("teardown")
    order = ["karpenter-objects", "helm uninstall karpenter", '"${teardown[@]}" instances',
             "EKS_CLUSTER_DELETE", 'leftovers --stack "$STACK"']
    assert "eksctl delete cluster" in NIGHT.read_text()  # the default EKS_CLUSTER_DELETE
    at = [run.index(step) for step in order]
    assert at == sorted(at), dict(zip(order, at, strict=True))
    assert "aws cloudformation delete-stack" not in run  # the module deletes it and waits
    assert "karpenter.k8s.aws/cluster" not in WORKFLOW.read_text() + NIGHT.read_text()


def test_every_night_step_is_a_workflow_step_and_the_rehearsal_runs_them_all():
    for step, target in [("opt the cluster in", "eks-night-opt-in"),
                         ("scenario suites (eks mode)", "eks-night-suites"),
                         ("sweep leftovers", "eks-night-sweep")]:
        assert runs(step, target), step
    assert "--karpenter-cluster=eks" in night("suites")
    assert "--max-age 0s" in night("sweep") or "MAX_AGE=0s" in night("sweep")
    rehearsal = yaml.safe_load(WORKFLOW.read_text())["jobs"]["eks-rehearsal"]
    assert any("make eks-rehearsal" in s.get("run", "") for s in rehearsal["steps"])
    make = (REPO / "Makefile").read_text()
    assert "$(MAKE) --no-print-directory eks-night " in make  # the same steps, in order


# ---- the nightly-only scenarios ----------------------------------------------------------------
def test_nightly_local_job_runs_the_nightly_only_scenarios():
    """`make e2e` skips scenarios marked nightly unless --karpenter-run-nightly: the nightly is where
    they run (and the upgrade gate, runners/upgrade_gate.py)."""
    local = yaml.safe_load(WORKFLOW.read_text())["jobs"]["local"]
    runs = [s.get("run", "") for s in local["steps"]]
    assert any("make e2e" in r and "--karpenter-run-nightly" in r for r in runs), runs
    gate = (REPO / "runners" / "upgrade_gate.py").read_text()
    assert 'f("run-nightly")' in gate, "the upgrade gate must run the nightly-only scenarios"
