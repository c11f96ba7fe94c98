"""The harness must fail when Karpenter misbehaves: within the deadline, saying why.

Each check runs a real scenario in a child pytest against its own local cluster, with a
fault: Karpenter stopped, or instance types missing from the catalogue Karpenter reads.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_scenario(test: str, *args: str, deadline: float) -> tuple[subprocess.CompletedProcess, float]:
    name = f"neg-{re.sub(r'[^a-z0-9]+', '-', test.rsplit('::', 1)[-1].lower())[:20]}-{os.getpid()}"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", f"suites/{test}", "-p", "no:cacheprovider",
                           "--karpenter-cluster-name", name, "-o", "log_cli=false", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=deadline + 120)
    return proc, time.monotonic() - started


def failures(out: str) -> str:
    """The child's error lines: what a failed check here needs to say (the full output is long)."""
    return "\n".join(line for line in out.splitlines() if line.startswith("E ")) or out[-3000:]


def allure_attachments(results: Path) -> dict[str, str]:
    """Attachment name -> content, over every test result in an Allure results directory."""
    out = {}
    for f in results.glob("*-result.json"):
        for att in json.loads(f.read_text()).get("attachments", []):
            out[att["name"]] = (results / att["source"]).read_text(errors="replace")
    return out


def test_provisioning_fails_fast_when_karpenter_is_stopped(tmp_path):
    proc, took = run_scenario(
        "test_provisioning.py::test_scale_up_provisions_nodes_that_satisfy_the_nodepool",
        "--karpenter-fault=karpenter-stopped", f"--alluredir={tmp_path}", deadline=180)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "1 failed" in out
    assert "because: Karpenter is not running" in out
    assert "diagnosis: Karpenter is not running" in out
    assert took < 180, f"took {took:.0f}s"
    # The report a person reads names the same cause, with the evidence beside it.
    attachments = allure_attachments(tmp_path)
    assert attachments["verdict"].startswith("Karpenter is not running")
    # ...and what the machine did meanwhile, since every deadline assumes it ran.
    assert re.search(r"the machine meanwhile: steal [\d.]+ % of CPU time; (no stall over 1 s|"
                     r"STALLED)", attachments["verdict"]), attachments["verdict"]
    assert {"NodePools.yaml", "NodeClaims.yaml", "Nodes.yaml", "karpenter.log"} <= set(attachments)
    assert "categories.json" in {p.name for p in tmp_path.iterdir()}


def test_graviton_fails_with_no_instance_type_when_the_catalogue_has_no_arm64():
    proc, took = run_scenario("test_placement.py::test_arm64_pods_run_on_graviton_nodes",
                              "--karpenter-catalogue-without=arch=arm64", "--karpenter-timeouts=provision=45",
                              deadline=45)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    # The deadline is 45 s; the message rounds the elapsed time, a second late on a busy machine.
    timed_out = re.search(r"timed out after (\d+)s: expected 2 Running pods", out)
    assert timed_out and 45 <= int(timed_out.group(1)) <= 50, failures(out)
    verdict = re.search(r"diagnosis: (.*)", out)
    assert verdict and verdict.group(1).startswith("no instance type fits"), out[-3000:]


def test_gpu_placement_fails_when_gpu_families_are_missing():
    proc, took = run_scenario(
        "test_gpu.py::test_gpu_pods_only_on_gpu_nodes_and_cpu_pods_never",
        "--karpenter-catalogue-without=family=g4dn,g5", "--karpenter-timeouts=provision=45", deadline=45)
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:]
    assert "expected 2 Running pods of" in out and "gpu-app" in out, failures(out)
    verdict = re.search(r"diagnosis: (.*)", out)
    assert verdict and verdict.group(1).startswith("no instance type fits"), out[-3000:]


@pytest.fixture(autouse=True)
def _no_leftovers():
    yield
    # Each child run takes its own cluster down; nothing of theirs may still run.
    left = subprocess.run(["pgrep", "-f", "clusters/neg-"], capture_output=True, text=True).stdout
    assert not left.strip(), f"processes left by a negative run: {left}"
