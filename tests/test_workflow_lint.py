"""The nightly workflow passes actionlint, built from the Go module proxy at a pinned version.

actionlint also runs shellcheck over every `run:` script when shellcheck is on PATH; it
is optional here (not installed on every machine); without it every script is at
least checked to parse (`bash -n`).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.local.build import cache_dir

ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint"
ACTIONLINT_VERSION = "v1.7.12"
REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"


@pytest.fixture(scope="session")
def actionlint() -> Path:
    """``<cache>/bin/actionlint-<version>``, built once with `go install` (under a lock:
    xdist workers may all ask at once)."""
    target = cache_dir() / "bin" / f"actionlint-{ACTIONLINT_VERSION}"
    if target.exists():
        return target
    if not shutil.which("go"):
        pytest.fail("Go is not on PATH: actionlint is built from the Go module proxy "
                    "(the harness needs Go for local mode anyway)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
                env = {**os.environ, "GOBIN": tmp, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
                proc = subprocess.run(["go", "install", f"{ACTIONLINT}@{ACTIONLINT_VERSION}"],
                                      env=env, cwd=tmp, capture_output=True, text=True,
                                      timeout=600)
                assert proc.returncode == 0, f"building actionlint failed:\n{proc.stderr[-3000:]}"
                os.replace(Path(tmp) / "actionlint", target)  # never a half-written binary
    return target


def lint(actionlint: Path, workflow: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(actionlint), "-no-color", str(workflow)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_nightly_workflow_passes_actionlint(actionlint):
    proc = lint(actionlint, WORKFLOW)
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_actionlint_catches_a_broken_workflow(actionlint, tmp_path):
    # The pass above means something only if the same binary fails a bad workflow.
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n"
                   "    steps:\n      - run: echo ${{ secrets.NOPE.missing }}\n"
                   "        if: ${{ github.nonexistent_context }}\n")
    proc = lint(actionlint, bad)
    assert proc.returncode != 0 and "nonexistent_context" in proc.stdout, proc.stdout


def test_nightly_always_sweeps_and_tears_down():
    steps = {s.get("name"): s for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["eks"]["steps"]}
    assert steps["sweep leftovers"]["if"].startswith("always()")
    assert steps["tear down"]["if"].startswith("always()")
    assert "--karpenter-eks-opt-in" in steps["scenario suites (eks mode)"]["run"]


def test_run_scripts_parse_as_bash():
    # Without shellcheck, at least every script must parse: `bash -n` on each `run:`.
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    scripts = [(f"{job}/{step.get('name', i)}", step["run"]) for job, spec in jobs.items()
               for i, step in enumerate(spec["steps"]) if "run" in step]
    assert scripts
    for name, script in scripts:
        text = re.sub(r"\$\{\{.*?\}\}", "x", script)  # expressions are filled in before bash
        proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
