"""The behaviour matrix (runners/matrix.py): cells from JUnit, its renderings, bad input and
Ctrl-C, offline (no cluster)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from karpenter_e2e.clusters.infra import releases
from karpenter_e2e.rendering import matrix as rendering
from karpenter_e2e.rendering.matrix import Cell, Matrix
from karpenter_e2e.runners import matrix
from karpenter_e2e.runners.children import Children
from karpenter_e2e.runners.matrix import BadInput

SERVED = ["v1.0.8", "v1.1.5", "v1.5.5", "v1.6.4", "v1.9.0", "v1.12.1", "v1.14.3", "v1.15.0"]

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6" failures="1" errors="1" skipped="2">
 <testcase classname="suites.test_provisioning" name="test_up" time="15.2">
  <properties><property name="scenario" value="provisioning"/></properties></testcase>
 <testcase classname="suites.test_provisioning" name="test_ec2" time="0.0">
  <properties><property name="scenario" value="provisioning"/></properties>
  <skipped type="pytest.skip" message="local mode: asks EC2 what Karpenter launched">x</skipped>
 </testcase>
 <testcase classname="suites.test_provisioning" name="test_limits" time="40.1">
  <properties><property name="scenario" value="limits"/>
   <property name="timeline" value="/r/v1.6.4/runs/x/timelines/limits.png"/></properties>
  <failure message="AssertionError: expected 2 nodes, saw 3&#10;assert 3 == 2">long text</failure>
 </testcase>
 <testcase classname="suites.test_capacity" name="test_overlay" time="0.0">
  <properties><property name="scenario" value="node-overlay-capacity"/></properties>
  <skipped type="pytest.skip"
   message="/w/suites/test_capacity.py:40: Karpenter v1.6.4 lacks X: it appeared in v1.9.0">x</skipped>
 </testcase>
 <testcase classname="suites.test_consolidation" name="test_empty" time="3.0">
  <properties><property name="scenario" value="consolidation-empty"/></properties>
  <error message="failed on setup with &quot;ClusterError: Karpenter is not running&quot;">tb</error>
 </testcase>
 <testcase classname="suites.test_other" name="test_unmarked" time="1.0"/>
 <testcase time="10.2"/>
</testsuite></testsuites>
"""


def test_cells_from_junit(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    cells = matrix.classify_junit(path)
    assert set(cells) == {"provisioning", "limits", "node-overlay-capacity",
                          "consolidation-empty", "test_unmarked"}
    prov = cells["provisioning"]
    assert prov.status == "passed" and prov.seconds == 15.2
    assert prov.text.startswith("1 of 2 test cases passed, 1 skipped (first: local mode")
    assert cells["limits"] == Cell("failed", "AssertionError: expected 2 nodes, saw 3",
                                   "/r/v1.6.4/runs/x/timelines/limits.png",
                                   ["suites.test_provisioning::test_limits"], 40.1)
    skip = cells["node-overlay-capacity"]
    assert skip.status == "skipped"
    assert skip.text == "Karpenter v1.6.4 lacks X: it appeared in v1.9.0"
    assert cells["consolidation-empty"].status == "failed"
    assert cells["consolidation-empty"].text.startswith("error: failed on setup")
    assert cells["test_unmarked"].status == "passed"


def test_a_scenario_fails_if_one_of_its_tests_fails(tmp_path):
    path = tmp_path / "junit.xml"
    prop = '<properties><property name="scenario" value="drift"/></properties>'
    path.write_text(f"""<testsuites><testsuite>
 <testcase classname="s" name="a">{prop}</testcase>
 <testcase classname="s" name="b">{prop}
  <failure message="drift not replaced">x</failure></testcase>
</testsuite></testsuites>""")
    drift = matrix.classify_junit(path)["drift"]
    assert (drift.status, drift.text, drift.test) == ("failed", "drift not replaced", "b")
    md = rendering.to_markdown(Matrix(["v1.15.0"], ["drift"], {("drift", "v1.15.0"): drift}))
    assert "1. b: drift not replaced" in md


def test_a_failure_then_a_teardown_error_is_one_failed_test(tmp_path):
    """pytest writes two <testcase> entries for it; the second has the timeline property."""
    path = tmp_path / "junit.xml"
    scenario = '<property name="scenario" value="limits"/>'
    path.write_text(f"""<testsuites><testsuite>
 <testcase classname="suites.test_p" name="test_limit" time="10">
  <properties>{scenario}</properties>
  <failure message="karpenter_e2e.clusters.api.waits.WaitTimeout: timed out after 2s">x</failure>
 </testcase>
 <testcase classname="suites.test_p" name="test_limit" time="5">
  <properties>{scenario}<property name="timeline" value="t/limit.png"/></properties>
  <error message="failed on teardown with &quot;LeakedNodes: ...&quot;">x</error>
 </testcase>
</testsuite></testsuites>""")
    cell = matrix.classify_junit(path)["limits"]
    assert cell == Cell("failed",
                        "karpenter_e2e.clusters.api.waits.WaitTimeout: timed out after 2s",
                        "t/limit.png", ["suites.test_p::test_limit"], 15.0)
    assert rendering._cell_detail(cell) == "timed out after 2s"


SUITE = """
import pytest

@pytest.mark.scenario("alpha")
def test_passes():
    pass

@pytest.mark.scenario("beta")
def test_fails():
    assert 1 + 1 == 3, "one and one made three\\nsecond line"

@pytest.mark.scenario("gamma")
def test_skips():
    pytest.skip("Karpenter v1.6.4 lacks it: it appeared in v1.9.0")
"""


def test_the_plugin_writes_the_scenario_id_into_junit(pytester):
    """The real plugin's JUnit file: each test case names its scenario (a property)."""
    pytester.makepyfile(test_suite=SUITE)
    junit = pytester.path / "junit.xml"
    pytester.runpytest("-p", "no:cacheprovider", f"--junitxml={junit}").assert_outcomes(
        passed=1, failed=1, skipped=1)
    cells = matrix.classify_junit(junit)
    assert cells["alpha"].status == "passed"
    assert cells["beta"].status == "failed"
    assert cells["beta"].text == "AssertionError: one and one made three"
    assert cells["gamma"] == Cell("skipped", "Karpenter v1.6.4 lacks it: it appeared in v1.9.0",
                                  None, ["test_suite::test_skips"], cells["gamma"].seconds)


def sample() -> Matrix:
    vs = ["v1.6.4", "v1.12.1", "v1.15.0"]
    cells = {(s, v): Cell("passed") for s in ("provisioning", "limits") for v in vs}
    cells[("limits", "v1.12.1")] = Cell("failed", "AssertionError: expected 2 nodes | saw 3",
                                        "v1.12.1/runs/x/timelines/limits.png")
    cells[("node-overlay-capacity", "v1.6.4")] = Cell(
        "skipped", "Karpenter v1.6.4 lacks NodeOverlay: it appeared in v1.9.0")
    cells[("node-overlay-capacity", "v1.12.1")] = Cell("passed")
    cells[("node-overlay-capacity", "v1.15.0")] = Cell("passed")
    return Matrix(vs, ["provisioning", "limits", "node-overlay-capacity"], cells,
                  {"per_version": {"v1.6.4": {"exit": 0, "wall_s": 150.0, "log": "v1.6.4/pytest.log"}}})


def test_markdown_table_and_notes():
    md = rendering.to_markdown(sample())
    assert "| scenario | v1.6.4 | v1.12.1 | v1.15.0 |" in md
    assert "| provisioning | passed | passed | passed |" in md
    assert "| limits | passed | **FAILED** [1] | passed |" in md
    assert "| node-overlay-capacity | skipped [2] | passed | passed |" in md
    assert ("1. AssertionError: expected 2 nodes \\| saw 3 "
            "([timeline](v1.12.1/runs/x/timelines/limits.png))") in md
    assert "2. Karpenter v1.6.4 lacks NodeOverlay: it appeared in v1.9.0" in md
    assert "| v1.6.4 | 0 | - | 150.0 | v1.6.4/pytest.log |" in md
    assert md.splitlines()[2] == "7 passed, 1 failed, 1 skipped (3 scenarios x 3 releases)"
    assert ("Scenarios that pass on one release and fail on another (bisect candidates): "
            "limits.") in md


def test_json_round_trip_and_differences():
    m = sample()
    data = json.loads(json.dumps(m.to_json()))
    assert data["counts"] == {"passed": 7, "failed": 1, "skipped": 1, "not run": 0}
    assert data["cells"]["limits"]["v1.12.1"]["timeline"] == "v1.12.1/runs/x/timelines/limits.png"
    back = Matrix.from_json(data)
    assert back.cells == m.cells and back.versions == m.versions
    assert m.differing() == ["limits"]  # a skip is no difference


def test_heatmap_png(tmp_path):
    path = rendering.heatmap(sample(), tmp_path / "m.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_the_heatmap_shortens_cells():
    assert rendering._cell_detail(Cell("skipped", "Karpenter v1.6.4 lacks X: it appeared in "
                                               "v1.9.0 (pkg/apis/...)")) == "needs v1.9.0"
    text = rendering._cell_detail(Cell("failed", "AssertionError: " + "word " * 40))
    assert text.count("\n") == 2 and text.endswith("...") and "AssertionError" not in text
    assert rendering._cell_detail(Cell("passed")) == ""


def test_write_and_render_again(tmp_path):
    files = matrix.write(sample(), tmp_path)
    assert all(f.is_file() for f in files.values())
    (tmp_path / "matrix.png").unlink()
    assert matrix.main(["--render", str(tmp_path)]) == 0
    assert (tmp_path / "matrix.png").is_file()


def test_allure_results_tagged_by_version(tmp_path):
    runs = {}
    for v in ("v1.6.4", "v1.15.0"):
        d = tmp_path / v / "allure-results"
        d.mkdir(parents=True)
        (d / f"{v}-result.json").write_text(json.dumps(
            {"name": "test_up", "historyId": "h1", "testCaseId": "t1", "parameters": []}))
        (d / f"{v}-attachment.png").write_bytes(b"png")
        (d / "environment.properties").write_text(f"karpenter={v}\nmode=local\n")
        runs[v] = tmp_path / v
    assert matrix.merge_allure(runs, tmp_path / "out") == 2
    r = json.loads((tmp_path / "out" / "v1.6.4-result.json").read_text())
    assert r["historyId"] == "h1-v1.6.4" and r["testCaseId"] == "t1-v1.6.4"
    assert {"name": "karpenter", "value": "v1.6.4"} in r["parameters"]
    assert r["name"] == "test_up [v1.6.4]"
    assert (tmp_path / "out" / "v1.15.0-attachment.png").is_file()
    env = (tmp_path / "out" / "environment.properties").read_text()
    assert "karpenter=v1.6.4, v1.15.0" in env and "mode=local\n" in env


# ---- bad input ----------------------------------------------------------------------------
@pytest.fixture
def served(monkeypatch):
    monkeypatch.setattr(releases, "served", lambda *a, **k: list(SERVED))
    monkeypatch.setattr(releases, "_goproxy", lambda: "https://proxy.example")


@pytest.mark.parametrize("version, words", [
    ("v1.12.2", "is not served by the Go module proxy (GOPROXY=https://proxy.example); "
                "nearest served: v1.12.1 and v1.14.3"),
    ("v0.37.7", "is older than v1.0.0"),
    ("latest", "is not a release like"),
    ("1.12.1", "is not a release like"),
])
def test_bad_versions_are_releases_errors(served, version, words):
    with pytest.raises(BadInput) as err:
        matrix.check_versions(["v1.6.4", version])
    assert words in str(err.value)


def test_versions_sorted_and_default_from_the_proxy(served):
    assert matrix.check_versions(["v1.15.0", "v1.6.4"]) == ["v1.6.4", "v1.15.0"]
    with pytest.raises(BadInput, match="named twice"):
        matrix.check_versions(["v1.6.4", "v1.6.4"])
    assert matrix.default_versions(lambda: ["v0.37.7", *SERVED]) == SERVED


def test_an_unknown_scenario_is_the_plugins_usage_error(tmp_path):
    def runner(cmd, **_kw):
        assert "--collect-only" in cmd and cmd[cmd.index("--karpenter-scenario") + 1] == "nosuch,limits"
        return subprocess.CompletedProcess(cmd, 4, "", "ERROR: --karpenter-scenario: no collected test "
                                                       "has scenario id nosuch; known: limits\n")
    with pytest.raises(BadInput, match="no collected test has scenario id nosuch"):
        matrix.collect_scenarios("v1.15.0", ["nosuch", "limits"], ["suites"], [], tmp_path,
                                 runner)


def test_main_refuses_bad_input_within_seconds_and_starts_nothing(served, tmp_path, monkeypatch,
                                                                   capsys):
    started = []
    monkeypatch.setattr(matrix, "run_matrix", lambda *a, **k: started.append(a) or {})
    t0 = time.monotonic()
    assert matrix.main(["--versions", "v1.6.4 v1.12.2", "--reports-dir", str(tmp_path)]) == 2
    assert "v1.12.2 is not served" in capsys.readouterr().err
    assert matrix.main(["--versions", "v1.6.4", "--jobs", "0",
                        "--reports-dir", str(tmp_path)]) == 2
    repo = Path(__file__).resolve().parents[1]
    assert matrix.main(["--versions", "v1.6.4", "--scenarios", "limits,nosuch",
                        "--paths", str(repo / "suites"), "--reports-dir", str(tmp_path)]) == 2
    assert "scenario id nosuch" in capsys.readouterr().err
    assert time.monotonic() - t0 < 60 and not started
    assert not list(tmp_path.iterdir())  # nothing left behind


# ---- running ------------------------------------------------------------------------------
def test_a_version_that_does_not_build_fails_its_cells(tmp_path):
    from karpenter_e2e.clusters.errors import ClusterError

    def no_build(_v):
        raise ClusterError("go build failed\n./x.go:1: syntax error")
    r = matrix.run_version("v1.9.0", tmp_path, ["limits"], Children(), ["suites"], [],
                           "matrix-dev", build_fn=no_build)
    m = matrix.assemble(["v1.9.0"], ["limits", "provisioning"], {"v1.9.0": r}, tmp_path)
    assert m.cell("limits", "v1.9.0") == Cell("failed", "build failed: go build failed")
    assert m.cell("provisioning", "v1.9.0").status == "failed"


def test_an_interrupted_version_leaves_its_unfinished_cells_not_run(tmp_path):
    children = Children()
    children.interrupted.set()
    r = matrix.run_version("v1.15.0", tmp_path, ["limits"], children, ["suites"], [],
                           "matrix-dev", build_fn=lambda _v: 0.0)
    m = matrix.assemble(["v1.15.0"], ["limits"], {"v1.15.0": r}, tmp_path)
    assert m.cell("limits", "v1.15.0") == Cell("not run", "interrupted")


def test_cluster_names():
    assert matrix.cluster_name("matrix", "v1.12.1") == "matrix-v1-12-1"
    assert matrix.cluster_name("matrix-dev", "v1.0.8") == "matrix-dev-v1-0-8"


def test_versions_run_jobs_at_once_newest_first(monkeypatch, tmp_path):
    import threading
    lock, now, peak, order = threading.Lock(), [0], [0], []

    def fake_run(version, out, scenarios, children, paths, args, prefix, **_kw):
        with lock:
            order.append(version)
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.2)
        with lock:
            now[0] -= 1
        return matrix.VersionRun(version, {"limits": Cell("passed")}, 0, 0.2, 0.0,
                                 out / version / "pytest.log", None)
    monkeypatch.setattr(matrix, "run_version", fake_run)
    vs = ["v1.6.4", "v1.9.0", "v1.12.1", "v1.15.0"]
    runs = matrix.run_matrix(vs, ["limits"], tmp_path, 2, ["suites"], [], "matrix-dev",
                             build_fn=lambda _v: 0.0)
    assert set(runs) == set(vs) and peak[0] == 2
    assert set(order[:2]) == {"v1.15.0", "v1.12.1"}  # newest first
    m = matrix.assemble(vs, ["limits"], runs, tmp_path)
    assert m.counts()["passed"] == 4


def test_dry_run_lists_the_default_releases_and_starts_nothing(served, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.setattr(matrix, "run_matrix", lambda *a, **k: pytest.fail("ran"))
    repo = Path(__file__).resolve().parents[1]
    assert matrix.main(["--dry-run", "--scenarios", "limits", "--paths", str(repo / "suites"),
                        "--reports-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"1 scenario(s) x {len(SERVED)} release(s) ({' '.join(SERVED)})" in out
    assert "scenarios: limits" in out and not list(tmp_path.iterdir())


def test_with_lanes_a_version_runs_as_make_e2e_does_and_its_lanes_are_cleaned_up(tmp_path):
    seen = {}

    class Recording(Children):
        def run(self, child, timeout=None):
            seen["cmd"], seen["on_kill"] = child.cmd, child.on_kill
            return 0

    downs = []
    r = matrix.run_version("v1.12.1", tmp_path, ["limits"], Recording(), ["suites"], [],
                           "matrix", build_fn=lambda _v: 0.0, lanes=3)
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "karpenter_e2e", "e2e"]
    assert cmd[cmd.index("--clusters") + 1] == "3"
    tail = cmd[cmd.index("--") + 1:]
    assert tail[tail.index("--karpenter-cluster-name") + 1] == "matrix-v1-12-1"
    assert tail[tail.index("--karpenter-version") + 1] == "v1.12.1"
    assert tail[tail.index("--karpenter-scenario") + 1] == "limits"
    original = matrix.take_down
    matrix.take_down = downs.append
    try:
        seen["on_kill"]()
    finally:
        matrix.take_down = original
    assert downs == ["matrix-v1-12-1-c1", "matrix-v1-12-1-c2", "matrix-v1-12-1-c3",
                     "matrix-v1-12-1"]
    assert r.error.startswith("no JUnit file")  # nothing ran: no cell is made up
