"""`check` against a real local cluster: an example passes, and the same examples with the
mistakes of the troubleshooting seed fail with the right diagnosis; a manifest the API server
rejects is named with the API's words; a check leaves nothing behind.

One cluster serves the tests that reuse it (``--keep-cluster``: each check empties it
again); the last test brings up and takes down a cluster of its own.
KARPENTER_E2E_CHECK_CLUSTER names the shared cluster (default check-t-<pid>; the last test's
own is that name with -own).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.infra import build, cluster_files, process

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
NAME = os.environ.get("KARPENTER_E2E_CHECK_CLUSTER") or f"check-t-{os.getpid()}"


def run_check(folder: Path, reports: Path, *args: str, name: str = NAME,
              keep: bool = True) -> tuple[subprocess.CompletedProcess, dict | None]:
    cmd = [sys.executable, "-m", "karpenter_e2e", "check", str(folder), "--cluster-name", name,
           "--reports-dir", str(reports), *(["--keep-cluster"] if keep else []), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=600)
    found = sorted(reports.glob("runs/check-*/check.json"))
    return proc, json.loads(found[-1].read_text()) if found else None


@pytest.fixture(scope="module")
def cluster():
    subprocess.run([sys.executable, "-m", "karpenter_e2e", "cluster", "up", "--reuse",
                    "--cluster-name", NAME], check=True, capture_output=True, cwd=REPO, timeout=600)
    yield NAME
    subprocess.run([sys.executable, "-m", "karpenter_e2e", "cluster", "down",
                    "--cluster-name", NAME], capture_output=True, cwd=REPO, timeout=300)
    shutil.rmtree(cluster_files.directory(NAME), ignore_errors=True)


def broken(tmp_path: Path, example: str, edit) -> Path:
    """A copy of an example with ``edit(docs_by_file)`` applied: the deliberate mistake."""
    out = tmp_path / example
    shutil.copytree(EXAMPLES / example, out)
    docs = {p.name: list(yaml.safe_load_all(p.read_text())) for p in out.glob("*.yaml")}
    edit(docs)
    for name, body in docs.items():
        (out / name).write_text(yaml.safe_dump_all(body, sort_keys=False))
    return out


def find(docs: dict, kind: str, name: str) -> dict:
    return next(d for ds in docs.values() for d in ds
                if d and d.get("kind") == kind and d["metadata"]["name"] == name)


def workload(result: dict, ref: str) -> dict:
    return next(w for w in result["scale_out"]["workloads"] if w["workload"] == ref)


def test_an_example_passes(cluster, tmp_path):
    """The control for the broken copies below: the weighted-pool example as written."""
    proc, result = run_check(EXAMPLES / "workshop-weight", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert result["passed"] and all(e["ok"] for e in result["expectations"])
    assert {p["name"]: p["nodes"] for p in result["scale_out"]["nodepools"]}["default"] == 0
    run = Path(result["files"]["json"]).parent
    assert (run / "check.md").read_text().count("| PASS |") == len(result["expectations"])
    assert (run / "timeline.png").stat().st_size > 0
    assert list((run / "allure-results").glob("*-result.json"))


def test_missing_toleration_is_an_untolerated_taint(cluster, tmp_path):
    def drop_toleration(docs):
        find(docs, "Deployment", "gpu-inference")["spec"]["template"]["spec"].pop("tolerations")

    proc, result = run_check(broken(tmp_path, "ml-platform", drop_toleration), tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    gpu = workload(result, "Deployment/ml/gpu-inference")
    assert gpu["pending"] == 2 and gpu.get("running", 0) == 0
    assert gpu["diagnosis"].startswith("untolerated taint"), gpu["diagnosis"]
    assert "nvidia.com/gpu" in gpu["diagnosis"]
    failed = {e["expectation"] for e in result["expectations"] if not e["ok"]}
    assert "Pending pods <= 0" in failed
    # the other workloads were not disturbed by the mistake
    assert workload(result, "Deployment/ml/web")["running"] == 3


def test_limit_too_small_is_a_nodepool_limit(cluster, tmp_path):
    def small_limit(docs):
        find(docs, "NodePool", "default")["spec"]["limits"]["cpu"] = "3"
        docs["expect.yaml"] = [{"expect": docs["expect.yaml"][0]["expect"]}]  # no scale-in

    proc, result = run_check(broken(tmp_path, "workshop-basic", small_limit), tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    inflate = workload(result, "Deployment/workshop/inflate")
    assert inflate["pending"] >= 1, inflate
    assert inflate["diagnosis"].startswith("NodePool limit reached"), inflate["diagnosis"]
    pool = next(p for p in result["scale_out"]["nodepools"] if p["name"] == "default")
    assert pool["limits"] == {"cpu": "3"}


def test_excluded_only_family_is_no_instance_type_fits(cluster, tmp_path):
    """The A10G pods fit only g5; a pool that excludes g5 leaves them nothing."""
    def exclude_g5(docs):
        reqs = find(docs, "NodePool", "gpu")["spec"]["template"]["spec"]["requirements"]
        reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn",
                     "values": ["g5"]})

    proc, result = run_check(broken(tmp_path, "ml-platform", exclude_g5), tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    gpu = workload(result, "Deployment/ml/gpu-inference")
    assert gpu["pending"] == 2
    assert gpu["diagnosis"].startswith("no instance type fits"), gpu["diagnosis"]


def test_api_rejection_names_file_document_and_message(cluster, tmp_path):
    def bad_duration(docs):
        find(docs, "NodePool", "weight-nodepool")["spec"]["disruption"]["consolidateAfter"] = \
            "thirty seconds"

    folder = broken(tmp_path, "workshop-weight", bad_duration)
    proc, result = run_check(folder, tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{folder / 'nodepools.yaml'} (document 0): the API server rejected NodePool " \
           "weight-nodepool" in proc.stderr
    assert "consolidateAfter" in proc.stderr and "thirty seconds" in proc.stderr
    assert result is None  # rejected before anything was applied
    kubeconfig = cluster_files.directory(NAME) / "kubeconfig"
    left = subprocess.run([str(build.find("kubectl").path), "--kubeconfig", str(kubeconfig),
                           "get", "nodepools,namespaces", "-o", "name"],
                          capture_output=True, text=True, check=True).stdout
    assert "nodepool" not in left and "namespace/workshop" not in left


def test_invalid_ec2nodeclass_is_judged_by_its_own_crd(cluster, tmp_path):
    def no_ami(docs):
        find(docs, "EC2NodeClass", "default")["spec"].pop("amiSelectorTerms")

    proc, _ = run_check(broken(tmp_path, "workshop-weight", no_ami), tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "the API server rejected EC2NodeClass default" in proc.stderr
    assert "amiSelectorTerms" in proc.stderr


def test_base_reports_the_added_pool(cluster, tmp_path):
    """check --base with a git ref on a real cluster: a repository whose last commit has the
    diff-base example and whose work tree has diff-head; the head's verdict, the spot pool
    added, inflate moved from on-demand to spot, the base's copy removed afterwards."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "diff-base", repo / "manifests")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "base"], cwd=repo, check=True)
    shutil.rmtree(repo / "manifests")
    shutil.copytree(EXAMPLES / "diff-head", repo / "manifests")
    before = set(Path(tempfile.gettempdir()).glob("karpenter-check-base-*"))
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    proc, head = run_check(repo / "manifests", tmp_path / "reports", "--base", "main",
                           "--junit", str(junit), "--summary", str(summary))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert set(Path(tempfile.gettempdir()).glob("karpenter-check-base-*")) == before
    d = json.loads(Path(head["files"]["diff_json"]).read_text())
    assert d["head"]["passed"] and d["base"]["passed"], d
    rows = {(r["kind"], r["name"]): r for r in d["rows"]}
    assert rows[("NodePool", "spot")]["status"] == "added"
    assert rows[("NodePool", "default")]["head"]["nodes"] == 0
    assert rows[("NodePool", "default")]["base"]["nodes"] >= 1
    inflate = rows[("workload", "Deployment/workshop/inflate")]
    assert set(inflate["base"]["capacity_types"]) == {"on-demand"}
    assert set(inflate["head"]["capacity_types"]) == {"spot"}
    md = summary.read_text()
    assert md.startswith("### Karpenter check:") and "pool `spot` (added)" in md
    assert "`main` (" in md  # the ref and its commit
    # settling, each expectation, and the oracles' verdict
    assert junit.read_text().count("<testcase") == 2 + len(head["expectations"])


def test_a_check_leaves_nothing_running(tmp_path):
    """Without --keep-cluster: its own cluster, taken down, its run directory removed, even
    when the API server rejected the manifests half-way."""
    name = f"{NAME}-own"

    def bad_replicas(docs):
        find(docs, "Deployment", "inflate")["spec"]["replicas"] = -1

    proc, _ = run_check(broken(tmp_path, "workshop-weight", bad_replicas), tmp_path,
                        name=name, keep=False)
    assert proc.returncode == 2 and "spec.replicas" in proc.stderr, proc.stderr[-2000:]
    run_dir = cluster_files.directory(name)
    assert not run_dir.exists()
    assert not process.pids_using(str(run_dir))
