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

from karpenter_e2e.clusters.infra.build import cache_dir
from karpenter_e2e.runners import cli

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
    assert steps["scenario suites (eks mode)"]["run"] == "make eks-night-suites"
    night = (REPO / ".ci" / "eks-night").read_text()
    assert "--karpenter-eks-opt-in $CLUSTER_NAME" in night[night.index("\nsuites() {"):]


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


# ---- the action (action.yml) and the example workflow for a manifest repository -------------
ACTION = REPO / "action.yml"
MANIFEST_WORKFLOW = REPO / "examples" / "manifest-repo-workflow.yml"


def test_manifest_repo_workflow_passes_actionlint(actionlint):
    proc = lint(actionlint, MANIFEST_WORKFLOW)
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_manifest_repo_workflow_uses_the_action_as_action_yml_declares_it(actionlint, tmp_path):
    """actionlint checks a local action's inputs against its action.yml (required inputs
    given, no unknown ones, outputs that exist): the example workflow with `uses: ./` beside
    a copy of action.yml (actionlint reads local actions only inside a git repository)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    shutil.copy(ACTION, tmp_path / "action.yml")
    workflow = tmp_path / ".github" / "workflows" / "karpenter.yml"
    workflow.parent.mkdir(parents=True)
    text = MANIFEST_WORKFLOW.read_text()
    assert "uses: platform-team/karpenter-e2e@main" in text
    workflow.write_text(text.replace("uses: platform-team/karpenter-e2e@main", "uses: ./"))
    proc = subprocess.run([str(actionlint), "-no-color", str(workflow)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"
    # and the same check fails a workflow that gives an input the action does not declare
    workflow.write_text(text.replace("uses: platform-team/karpenter-e2e@main", "uses: ./")
                        .replace("path: karpenter/", "folder: karpenter/"))
    proc = subprocess.run([str(actionlint), "-no-color", str(workflow)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "folder" in proc.stdout, proc.stdout


def test_manifest_repo_workflow_compares_with_the_base_branch():
    steps = yaml.safe_load(MANIFEST_WORKFLOW.read_text())["jobs"]["check"]["steps"]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # origin/<base> must be there
    action = next(s for s in steps if "karpenter-e2e@" in s.get("uses", ""))
    assert action["with"]["base"] == "origin/${{ github.base_ref }}"


def test_action_yml_is_a_well_formed_composite_action():
    """actionlint does not lint action.yml itself: its structure is checked here."""
    action = yaml.safe_load(ACTION.read_text())
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(action)
    assert action["runs"]["using"] == "composite"
    inputs, steps = action["inputs"], action["runs"]["steps"]
    assert {"path", "base", "karpenter-version", "python-version"} <= set(inputs)
    assert inputs["path"]["required"] is True
    for name, spec in inputs.items():
        assert spec.get("description"), name
        assert spec.get("required") or "default" in spec, f"{name}: optional without a default"
    ids = {s["id"] for s in steps if "id" in s}
    text = ACTION.read_text()
    for used in set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text)):
        assert used in inputs, f"inputs.{used} is not declared"
    for step_id, output in re.findall(r"steps\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z0-9_-]+)",
                                      text):
        assert step_id in ids, f"steps.{step_id}: no step has that id"
        assert f"{output}=" in next(s["run"] for s in steps if s.get("id") == step_id), output
    for i, step in enumerate(steps):
        assert ("run" in step) != ("uses" in step), f"step {i}: exactly one of run and uses"
        if "run" in step:
            assert step.get("shell") == "bash", f"step {i}: a composite run step needs shell"
            assert "${{" not in step["run"], f"step {i}: expressions go through env, not the script"
            proc = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True,
                                  text=True)
            assert proc.returncode == 0, f"step {i}: {proc.stderr}"
        else:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]
    # the verdict: the check's own exit code, after the upload, whatever happened before
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    last = steps[-1]
    assert upload["if"] == "always()" and last["if"] == "always()"
    assert steps.index(upload) < len(steps) - 1 and 'exit "$RC"' in last["run"]
    assert "karpenter-e2e check " in text and "make " not in text  # no make in between


def test_the_action_installs_a_console_script_that_exists():
    import tomllib
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["karpenter-e2e"] == "karpenter_e2e.runners.cli:main"
    assert cli.COMMANDS["check"].module == "checks.cli"
