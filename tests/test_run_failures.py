"""When a run goes wrong it must be fast, quiet and complete: a dead Karpenter, Ctrl-C, bad
options, two runs side by side, a cold build, a failing assert's message.

The cluster cases run the real suites in a child pytest against their own local cluster
(a few seconds to start with cached binaries) and measure what a person would wait for.
"""

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.api.waits import Observation, eventually
from karpenter_e2e.clusters.infra import build, process
from karpenter_e2e.clusters.local.cluster import LocalCluster

ROOT = Path(__file__).resolve().parent.parent
CONSOLIDATION_EMPTY = "suites/test_consolidation.py::test_empty_node_is_removed_after_consolidate_after"
PROVISIONING = "suites/test_provisioning.py::test_scale_up_provisions_nodes_that_satisfy_the_nodepool"
LIMITS = "suites/test_provisioning.py::test_nodepool_cpu_limit_is_never_exceeded"


def as_from_a_terminal() -> None:
    # A job started in the background by a script (`cmd &` without job control) ignores
    # SIGINT, and so would every child: the Ctrl-C tests then saw a run that never stopped.
    # A terminal's command has SIGINT's default action; so does the child here.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child(*args: str, name: str) -> subprocess.Popen:
    """The suites in a child pytest, in its own process group (as a terminal runs it)."""
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "--karpenter-cluster-name", name, "-o", "log_cli=false", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=as_from_a_terminal)


def finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return out


def nodeclaims(cluster: LocalCluster) -> list[str]:
    if not cluster.kubeconfig.exists():
        return []
    out = cluster.kubectl("get", "nodeclaims", "-o", "name", check=False, timeout=10)
    return out.split()


def act_at_first_nodeclaim(proc: subprocess.Popen, cluster: LocalCluster, act,
                           timeout: float) -> tuple[str, float]:
    """Once the child's scenario has launched a NodeClaim, ``act``; then the child's output
    and how long it ran on after the act. The cluster is taken down whatever happens."""
    try:
        eventually(lambda: Observation(bool(nodeclaims(cluster)), "no NodeClaim yet"),
                   what="a scenario to launch a NodeClaim", timeout=240, poll=0.5)
        act()
        acted = time.monotonic()
        out = finish(proc, timeout=timeout)
        return out, time.monotonic() - acted
    finally:
        cluster.down()


def assert_nothing_left(cluster: LocalCluster) -> None:
    assert process.pids_using(str(cluster.run_dir)) == []
    assert not cluster.status().components


# ---- a dead Karpenter costs seconds, not minutes --------------------------------------------
def test_karpenter_killed_mid_suite_costs_the_rest_of_the_run_seconds(tmp_path):
    name = f"rf-dead-{os.getpid()}"
    cluster = LocalCluster(name)
    outcomes = tmp_path / "outcomes.jsonl"
    proc = child(CONSOLIDATION_EMPTY, PROVISIONING, LIMITS, f"--karpenter-outcomes={outcomes}", name=name)
    # Kill it the way the issue saw it: SIGKILL while consolidation-empty has a node.
    out, after_kill = act_at_first_nodeclaim(
        proc, cluster, lambda: os.kill(cluster._state()["karpenter_pid"], signal.SIGKILL), 180)
    print(f"measured: Karpenter SIGKILLed -> run over in {after_kill:.1f}s")
    assert proc.returncode == 1, out[-4000:]
    rows = [json.loads(line) for line in outcomes.read_text().splitlines()]
    failed = {r["scenario"]: r for r in rows if r["when"] == "call" and r["outcome"] == "failed"}
    # All three fail, each at once with the verdict, as "aborted" (not a behaviour assertion).
    assert set(failed) == {"consolidation-empty", "provisioning", "limits"}, rows
    assert all(r["kind"] == "aborted" for r in failed.values()), rows
    assert out.count("because: Karpenter is not running") >= 3, out[-4000:]
    assert "diagnosis: Karpenter is not running" in out
    # Teardown removed what Karpenter no longer could, and said so; no test waited it out.
    assert "teardown removed the test's objects itself" in out, out[-4000:]
    assert not [r for r in rows if r["when"] == "teardown" and r["outcome"] == "failed"], rows
    assert after_kill < 30, f"the rest of the run took {after_kill:.0f}s after Karpenter died"
    assert_nothing_left(cluster)


# ---- Ctrl-C: seconds, one line, exit 130 ----------------------------------------------------
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_mid_scenario_exits_130_with_one_line(workers):
    name = f"rf-int-{'x' if workers else 's'}-{os.getpid()}"
    cluster = LocalCluster(name)
    proc = child(PROVISIONING, LIMITS, *workers, name=name)
    # What a terminal's Ctrl-C does: SIGINT to the whole process group.
    out, took = act_at_first_nodeclaim(proc, cluster, lambda: os.killpg(proc.pid, signal.SIGINT), 60)
    print(f"measured: Ctrl-C ({'xdist' if workers else 'serial'}) -> exit in {took:.1f}s")
    assert proc.returncode == 130, out[-4000:]
    assert took < 10, f"Ctrl-C to exit took {took:.1f}s"
    ours = [line for line in out.splitlines() if line.startswith("karpenter-e2e: interrupted")]
    assert ours == [f"karpenter-e2e: interrupted: local cluster {name!r} taken down; exit 130"], out
    assert "Traceback" not in out and "ExceptionGroup" not in out and "Error" not in out, out
    assert_nothing_left(cluster)


# ---- bad options: one message, before any test ----------------------------------------------
def test_a_missing_kubeconfig_is_one_usage_error_before_any_test():
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
                           "--karpenter-cluster=eks", "--karpenter-cluster-name=x",
                           "--karpenter-kubeconfig=/nonexistent/kc",
                           "-n", "2"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    out = proc.stdout + proc.stderr
    print(f"measured: missing kubeconfig -> usage error in {took:.1f}s")
    assert proc.returncode == 4, out  # pytest's usage error
    assert out.count("/nonexistent/kc") == 1, out
    assert not re.search(r"\b(passed|failed|error|skipped)\b", proc.stdout), out
    assert took < 10, f"took {took:.1f}s"


def test_an_unreachable_cluster_stops_the_session_after_one_error(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{process.free_port()}"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    proc = subprocess.run([sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider",
                           "--karpenter-cluster=eks", "--karpenter-cluster-name=x",
                           f"--karpenter-kubeconfig={kubeconfig}",
                           "--karpenter-eks-opt-in=x"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120,  # its lock file in a cache of its own, not the user's
                          env={**os.environ, "KARPENTER_E2E_CACHE": str(tmp_path / "cache")})
    out = proc.stdout
    assert proc.returncode != 0, out
    assert re.search(r"\b1 error\b", out) and "passed" not in out, out[-3000:]
    assert "Interrupted: cluster is not usable: EKS cluster 'x' API unreachable" in out, out[-3000:]


# ---- two runs, two sets of files, one "latest" ----------------------------------------------
def test_two_runs_write_their_own_reports_and_latest_points_at_the_last(tmp_path):
    (tmp_path / "test_tiny.py").write_text(textwrap.dedent("""
        import pytest
        @pytest.mark.scenario("tiny")
        def test_tiny(timings):
            timings.record(answer=42)
    """))
    reports = tmp_path / "reports"

    def run() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "pytest", str(tmp_path / "test_tiny.py"),
                                 "-p", "no:cacheprovider", "-p", "karpenter_e2e.fixtures.reporting",
                                 "-p", "karpenter_e2e.fixtures.plugin", "--rootdir", str(tmp_path),
                                 "--karpenter-reports-dir", str(reports)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    first, second = run(), run()  # side by side, as two people on one kept cluster
    outs = [p.communicate(timeout=120)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    runs = sorted((reports / "runs").iterdir())
    assert len(runs) == 2, runs
    for run_dir in runs:
        assert {"junit.xml", "summary.md", "timings"} <= {p.name for p in run_dir.iterdir()}
        assert "answer" in (run_dir / "summary.md").read_text()
        assert 'tests="1"' in (run_dir / "junit.xml").read_text()
    latest = reports / "latest"
    assert latest.is_symlink() and latest.resolve().parent == (reports / "runs").resolve()
    third = run()
    assert third.communicate(timeout=120)[0] and third.returncode == 0
    newest = (set((reports / "runs").iterdir()) - set(runs)).pop()
    assert latest.resolve() == newest.resolve()


# ---- a cold build says what it is doing ----------------------------------------------------
def test_a_build_shows_progress_and_the_last_duration(tmp_path, monkeypatch, caplog):
    # A stand-in compiler (this checks the harness's progress, not Go): takes ~1.5 s.
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\nsleep 1.5\nout=$4\nprintf x > \"${out}app\"\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setenv("KARPENTER_E2E_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "PROGRESS_S", 0.5)
    build.bin_dir().mkdir(parents=True)
    target = build.Target("app", "v1", "example.com/app", "example.com/app/cmd/app")
    caplog.set_level(logging.INFO, logger=build.log.name)
    for _ in range(2):
        build._build_group([target], cwd=tmp_path)
    lines = [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.INFO for r in caplog.records), caplog.records
    assert lines[0] == "building app v1 with go build (no earlier build recorded)"
    assert any(re.fullmatch(r"still building app v1: \ds so far", m) for m in lines), lines
    assert re.fullmatch(r"built app v1 in \ds", next(m for m in lines if m.startswith("built")))
    second = [m for m in lines if m.startswith("building")][1]
    assert re.fullmatch(r"building app v1 with go build \(last time on this machine: \ds\)",
                        second), lines
    assert any(re.fullmatch(r"still building app v1: \ds so far \(last time \ds\)", m)
               for m in lines), lines


# ---- a failing assert names objects, it does not dump them ---------------------------------
def test_a_failing_assert_about_a_pool_prints_its_name_not_its_body(tmp_path):
    (tmp_path / "test_msg.py").write_text(textwrap.dedent("""
        from karpenter_e2e.fixtures.nodepools import NodePool
        from karpenter_e2e.fixtures.workloads import Inflate
        def test_msg():
            pool = NodePool("team-a-abc123", {"spec": {"template": {"spec": {"requirements":
                [{"key": "k%d" % i, "operator": "In", "values": ["v"] * 20} for i in range(20)]}}}},
                "default-abc123")
            inflate = Inflate(object(), "workshop-abc123", "inflate")
            assert pool in [inflate]
    """))
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_msg.py"), "-v",
                           "-p", "no:cacheprovider", "--rootdir", str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "NodePool(name='team-a-abc123', nodeclass='default-abc123')" in proc.stdout
    assert "Inflate(namespace='workshop-abc123', name='inflate'" in proc.stdout
    message = [line for line in proc.stdout.splitlines() if line.startswith("E ")]
    assert not [m for m in message if "requirements" in m or "object at 0x" in m], message
