"""`check`'s verdicts against a real local cluster and its real Karpenter: one folder of
tests/data/check per diagnosis rule, with no expect.yaml, so the default expectation (every
workload's pods run) must fail with that rule's verdict; unknown fields named, each one;
placeholders and a kustomization.yaml warned about.

KARPENTER_E2E_CHECK_CLUSTER names the cluster (default check-v-<pid>); a KARPENTER_VERSION
in the environment runs the same rules on another release (its wording differs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_e2e.clusters.infra import cluster_files

REPO = Path(__file__).resolve().parent.parent
CASES = REPO / "tests" / "data" / "check"
NAME = os.environ.get("KARPENTER_E2E_CHECK_CLUSTER") or f"check-v-{os.getpid()}"
VERSION = ["--karpenter-version", os.environ["KARPENTER_VERSION"]] \
    if os.environ.get("KARPENTER_VERSION") else []


@pytest.fixture(scope="module")
def cluster():
    subprocess.run([sys.executable, "-m", "karpenter_e2e", "cluster", "up", "--reuse",
                    "--cluster-name", NAME, *VERSION],
                   check=True, capture_output=True, cwd=REPO, timeout=600)
    yield NAME
    subprocess.run([sys.executable, "-m", "karpenter_e2e", "cluster", "down", "--cluster-name",
                    NAME], capture_output=True, cwd=REPO, timeout=300)
    shutil.rmtree(cluster_files.directory(NAME), ignore_errors=True)


def check(case: str, reports: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    proc = subprocess.run([sys.executable, "-m", "karpenter_e2e", "check", str(CASES / case),
                           "--cluster-name", NAME, "--keep-cluster", "--reports-dir",
                           str(reports), *VERSION],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    found = sorted(reports.glob("runs/check-*/check.json"))
    return proc, json.loads(found[-1].read_text()) if found else None


@pytest.mark.parametrize("case, workload, verdict, words", [
    ("no-pool-matches", "Deployment/shop/web", "no NodePool matches the pod", '"intent"'),
    ("no-pool-matches", "Deployment/shop/api", "no NodePool matches the pod", "team In [data]"),
    ("untolerated-taint", "Deployment/shop/web", "untolerated taint", "dedicated=batch"),
    ("limit-reached", "Deployment/shop/web", "NodePool limit reached", "NodePool"),
    ("no-instance-type", "Deployment/shop/huge", "no instance type fits",
     "no instance type has enough resources"),
    ("catalogue-lacks", "Deployment/shop/spark",
     "NodePool default: instance-family c6gd: the local catalogue has no such family; EKS "
     "would offer it", "no instance type fits"),
])
def test_pending_pods_fail_the_default_with_karpenters_reason(cluster, tmp_path, case,
                                                             workload, verdict, words):
    proc, result = check(case, tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert result["default_expectations"]
    [judged] = result["expectations"]
    assert not judged["ok"] and workload in judged["seen"], judged
    w = next(w for w in result["scale_out"]["workloads"] if w["workload"] == workload)
    assert w["pending"] >= 1, w
    assert w["diagnosis"].startswith(verdict), w["diagnosis"]
    assert words in w["diagnosis"], w["diagnosis"]
    assert "**FAILED**" in proc.stdout


def test_every_unknown_field_is_named_with_file_and_document(cluster, tmp_path):
    proc, result = check("unknown-fields", tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert result is None
    err = proc.stderr
    pools, workloads = CASES / "unknown-fields" / "nodepool.yaml", \
        CASES / "unknown-fields" / "workloads.yaml"
    for where, field in [(f"{pools} (document 0)", "spec.template.spec.expireAfterr"),
                         (f"{workloads} (document 1)", "spec.replica"),
                         (f"{workloads} (document 1)",
                          "spec.template.spec.containers[0].imagePullPolicyy"),
                         (f"{pools} (document 1)", "spec.amiSelectorTerm"),
                         (f"{pools} (document 1)", "spec.blockDeviceMapping")]:
        line = next((x for x in err.splitlines() if x.startswith(where) and field in x), None)
        assert line and f'unknown field "{field}"' in line, (where, field, err)
    # with the unknown fields ignored, the EC2NodeClass's own error is named too
    assert "spec.amiSelectorTerms: Required value" in err


def test_a_kustomization_is_rendered_and_its_placeholders_warned_about(cluster, tmp_path):
    proc, result = check("blueprint", tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    folder = CASES / "blueprint"
    assert f"{folder} is a kustomization: checking the 4 documents `kubectl kustomize` " \
        "renders from kustomization.yaml" in proc.stderr
    # named by the rendered document (kustomize's order) and its line there
    nodeclass = f"kustomize({folder})#doc 2 (EC2NodeClass/default)"
    assert f"{nodeclass}, line 8: placeholder <<CLUSTER_NAME>> was never filled in" \
        in proc.stderr
    assert f"{nodeclass}, line 11: placeholder $DISCOVERY_TAG was never filled in" \
        in proc.stderr
    [judged] = result["expectations"]
    assert judged["ok"] and judged["seen"] == "3 of 3 pods running"


def test_pods_a_quota_refuses_fail_the_default_with_the_quotas_message(cluster, tmp_path):
    proc, result = check("quota-refuses", tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    [judged] = result["expectations"]
    assert not judged["ok"] and "Deployment/shop/web: 3 of 5 pods not created" in judged["seen"]
    [w] = result["scale_out"]["workloads"]
    assert w["pods"] == 2 and w.get("running") == 2, w
    assert "exceeded quota: pods" in w["not_created"], w
    # the LimitRange was in force for every pod, though its file sorts after the workload's
    assert w["requests"] == ["cpu 0.5, memory 256Mi"], w
    # not waited out: the refusal decides the shortfall
    assert result["timings"]["settle_s"] < 60, result["timings"]


def test_the_report_has_the_oracles_table_with_each_finding():
    from karpenter_e2e.checks import report
    verdict = {"judged": ["karpenter-log-clean", "no-pod-ignored"],
               "not_applicable": {"daemons-fit": "no DaemonSet here"}, "errors": {},
               "findings": [{"oracle": "no-pod-ignored", "what": "1 pending pod(s) got no "
                             "decision", "evidence": ["p1: unschedulable since 10:00:00.0"]}]}
    lines = "\n".join(report._oracles(verdict))
    assert "## Oracles: FAILED, 1 finding(s)" in lines
    assert "| no-pod-ignored |" in lines and "**FAILED** (1)" in lines
    assert "not applicable: no DaemonSet here" in lines
    assert "`p1: unschedulable since 10:00:00.0`" in lines
    assert report._oracles(None) == []
