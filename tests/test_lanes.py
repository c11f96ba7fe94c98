"""Dealing tests to shards and lanes, sizing K, and merging the lanes' reports."""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from karpenter_e2e.runners import lanes, machine, merge
from karpenter_e2e.runners.e2e import _pop_option, _strip_workers, within
from karpenter_e2e.runners.lanes import PlannedTest


def t(name: str, seconds: float, solo: bool = False, skipped: bool = False,
      chain: bool = False) -> PlannedTest:
    return PlannedTest(f"suites/test_x.py::{name}", seconds, solo, skipped, chain)


SUITE = [t("a", 116), t("b", 94), t("c", 90), t("d", 90), t("e", 85), t("f", 80), t("g", 80),
         t("h", 75), t("i", 75), t("j", 70), t("k", 55, solo=True), t("l", 45), t("m", 25),
         t("n", 25), t("o", 20), t("p", 15), t("q", 15), t("r", 10), t("s", 5),
         t("z1", 300, skipped=True), t("z2", 300, skipped=True)]


@pytest.mark.parametrize("spec", ["3/2", "0/4", "1/0", "a/b", "2", "1/-1", ""])
def test_bad_shard_specs_are_usage_errors(spec):
    with pytest.raises(lanes.PlanError):
        lanes.parse_shard(spec)


def test_shards_partition_the_suite_and_balance_it():
    n = 3
    slices = [lanes.shard(SUITE, i, n) for i in range(1, n + 1)]
    ids = [x.nodeid for s in slices for x in s]
    assert sorted(ids) == sorted(x.nodeid for x in SUITE) and len(ids) == len(set(ids))
    loads = [sum(x.seconds for x in s if not x.skipped) for s in slices]
    assert max(loads) - min(loads) <= 116, loads  # no worse than the longest test
    # deterministic: the same inputs in another order give the same slices
    assert lanes.shard(list(reversed(SUITE)), 2, n) == slices[1]


def test_own_karpenter_tests_run_on_a_serial_lane_and_nothing_runs_beside_them():
    suite = SUITE + [t("d1", 100, chain=True), t("d2", 90, chain=True), t("d3", 60, chain=True)]
    plan = lanes.deal(suite, clusters=4, workers=3, start_gap=5)
    solo_lanes = [lane for lane in plan if any(x.solo for x in lane.tests)]
    assert solo_lanes and all(lane.serial and not lane.plain for lane in solo_lanes)
    placed = [x.nodeid for lane in plan for x in lane.tests]
    assert sorted(placed) == sorted(x.nodeid for x in suite)
    # disruption-loop tests never share a Karpenter with a running test: serial lanes only
    assert all(lane.serial for lane in plan if any(x.chain or x.solo for x in lane.tests))
    assert any(not lane.serial for lane in plan)
    # longest-first list scheduling: no lane ends later than the longest test plus the mean
    total = sum(x.seconds for x in suite if not x.skipped)
    assert lanes.makespan(plan) <= 116 + total / (3 * 3 + 1) + 3 * 5
    assert [lane.start for lane in plan] == [0, 5, 10, 15]


def test_a_plan_never_beats_its_longest_test_and_drops_empty_lanes():
    plan = lanes.deal([t("a", 100), t("b", 10)], clusters=4, workers=3)
    assert len(plan) == 1 and lanes.makespan(plan) == 100
    assert [lane.index for lane in plan] == [0]


def test_too_many_clusters_for_the_memory_is_refused_before_anything_starts():
    with pytest.raises(machine.SizeError, match="at most 2 fit"):
        machine.plan(clusters=5, workers=3, cores=2,
                     mem_mib=int(2.5 * machine.cluster_mib(3) / machine.MEMORY_HEADROOM))
    size = machine.plan(None, None, cores=2, mem_mib=24000)
    assert 1 <= size.clusters <= machine.MAX_CLUSTERS and size.workers >= 1
    with pytest.raises(machine.SizeError, match="for local and kind mode"):
        machine.plan(clusters=2, workers=2, mode="eks", cores=2, mem_mib=24000)


def test_runner_owns_the_worker_count_and_the_cluster_name():
    assert _strip_workers(["-k", "x", "-n", "4", "-n6", "--numprocesses=2", "-v"]) == \
        ["-k", "x", "-v"]
    assert _pop_option(["--cluster-name", "a", "-v"], "--cluster-name", "d") == ("a", ["-v"])
    assert _pop_option(["--cluster-name=b"], "--cluster-name", "d") == ("b", [])


def _run_dir(root, name, cases, failures=0, skipped=0):
    d = root / name
    (d / "allure-results").mkdir(parents=True)
    (d / "allure-results" / f"{name}-result.json").write_text("{}")
    (d / "allure-results" / "environment.properties").write_text(
        f"mode=local\ncluster={name}\nkarpenter=v1.15.0\nkarpenter_sha256=ab12\n")
    (d / "timings").mkdir()
    (d / "timings" / f"{name}.json").write_text(json.dumps(
        {"scenario": name, "test": name, "outcome": "passed", "values": {"nodes_used": 1}}))
    suite = ET.Element("testsuite", tests=str(len(cases)), failures=str(failures),
                       errors="0", skipped=str(skipped), time="10")
    for c in cases:
        ET.SubElement(suite, "testcase", name=c)
    root_el = ET.Element("testsuites")
    root_el.append(suite)
    ET.ElementTree(root_el).write(d / "junit.xml")
    return d


def test_merge_gives_one_junit_one_allure_directory_and_one_summary(tmp_path):
    a = _run_dir(tmp_path, "c1", ["t1", "t2"], failures=1)
    b = _run_dir(tmp_path, "c2", ["t3"], skipped=1)
    out = tmp_path / "merged"
    totals = merge.merge([a, b], out, wall=12.5)
    assert (totals.tests, totals.failures, totals.skipped, totals.passed) == (3, 1, 1, 1)
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "3" and len(suite.findall("testcase")) == 3
    assert sorted(p.name for p in (out / "allure-results").glob("*-result.json")) == \
        ["c1-result.json", "c2-result.json"]
    env = (out / "allure-results" / "environment.properties").read_text()
    assert "mode=local\n" in env and "cluster=c1, c2\n" in env
    assert "Ran: mode local, karpenter v1.15.0, karpenter_sha256 ab12" in \
        (out / "summary.md").read_text()
    assert "| c1 |" in (out / "summary.md").read_text() and "| c2 |" in (out / "summary.md").read_text()
    assert totals.line(12.5) == "1 failed, 1 passed, 1 skipped in 12.50s"
    assert merge.main([str(tmp_path / "m2"), str(a), str(tmp_path / "nope")]) == 2


def test_the_room_lets_readers_share_and_a_writer_in_alone(tmp_path):
    import subprocess
    import sys
    import time

    from karpenter_e2e.clusters.infra.filelock import room
    path = tmp_path / "c.share"
    go = tmp_path / "go"
    # Each holder says when it is in, and leaves only once the test says go: the readers are
    # both in at once however slowly the machine starts them.
    holder = ("import sys, time; from pathlib import Path; "
              "from karpenter_e2e.clusters.infra.filelock import room\n"
              "with room(Path(sys.argv[1]), exclusive=sys.argv[2] == 'x'):\n"
              "    Path(sys.argv[3]).write_text(str(time.time()))\n"
              "    deadline = time.monotonic() + 30\n"
              "    while not Path(sys.argv[4]).exists() and time.monotonic() < deadline:\n"
              "        time.sleep(0.02)\n"
              "    Path(sys.argv[3] + '.end').write_text(str(time.time()))\n")

    def start(kind: str, name: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", holder, str(path), kind,
                                 str(tmp_path / name), str(go)])

    def inside(*names: str) -> bool:
        deadline = time.monotonic() + 20
        while not all((tmp_path / n).exists() for n in names):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    readers = [start("s", "r1"), start("s", "r2")]
    assert inside("r1", "r2")  # the readers share the room
    writer = start("x", "w")
    time.sleep(0.5)  # the writer's chance to enter wrongly while the readers are in
    assert not (tmp_path / "w").exists()
    go.write_text("")
    for p in [*readers, writer]:
        assert p.wait(30) == 0
    r_end = [float((tmp_path / f"{n}.end").read_text()) for n in ("r1", "r2")]
    w_start = float((tmp_path / "w").read_text())
    assert w_start >= max(r_end)  # the writer waited for both to leave
    with room(path, exclusive=True):  # and the room is free again
        pass


def _settings_test(name: str, seconds: float, setting: str) -> PlannedTest:
    return PlannedTest(f"suites/test_s.py::{name}", seconds, settings=(setting,))


def test_settings_groups_share_lanes_as_long_as_the_plan_does_not_lengthen():
    # The default lanes take 300 s; eight short groups fit on far fewer than eight lanes.
    default = [t(f"d{k}", 100) for k in range(12)]
    groups = [_settings_test(f"s{k}", 30 + 10 * k, f"OPTION_{k}=on") for k in range(8)]
    plan = lanes.deal(default + groups, clusters=1, workers=4, start_gap=8)
    settings_lanes = [lane for lane in plan if lane.groups]
    assert 1 < len(settings_lanes) < 8
    one_each = lanes.makespan([lane for lane in plan if not lane.groups]
                              + lanes._settings_lanes(
                                  [lanes.Group(g.settings, [g]) for g in groups], 8, 1, 8))
    assert lanes.makespan(plan) <= one_each
    dealt = [(g.settings, [x.nodeid for x in g.tests]) for lane in settings_lanes
             for g in lane.groups]
    assert sorted(dealt) == sorted((g.settings, [g.nodeid]) for g in groups)
    for lane in settings_lanes:  # a restart between groups, none before the first
        assert lane.makespan == pytest.approx(lane.start + sum(g.seconds for g in lane.groups)
                                              + lanes.RESTART_S * (len(lane.groups) - 1))
        assert lane.settings == lane.groups[0].settings and lane.serial
    assert [lane.index for lane in plan] == list(range(len(plan)))


def test_a_settings_lane_runs_its_groups_in_turn_and_is_done_after_the_last(tmp_path):
    from karpenter_e2e.runners.children import Children
    from karpenter_e2e.runners.e2e import LaneRun
    lane = lanes.Lane(0, 0)
    lane.place_group(lanes.Group(("A=1",), [_settings_test("a", 1, "A=1")]))
    lane.place_group(lanes.Group(("B=2",), [_settings_test("b", 1, "B=2")]))
    run = LaneRun(lane, "lane-c1", tmp_path, ["-q"], None)
    assert [c.tag for c in run.waiting] == ["[c1 group1]", "[c1 group2]"]
    assert run.waiting[1].cmd[run.waiting[1].cmd.index("--karpenter-setting") + 1] == "B=2"
    for child in run.waiting:  # a stand-in for each group's pytest
        child.cmd = [sys.executable, "-c", "pass"]
    assert run.done() and run.procs == []  # never started (interrupted first): nothing runs
    children = Children()
    run.start(children)
    assert [c.tag for c in run.procs] == ["[c1 group1]"]
    deadline = time.monotonic() + 30
    while not run.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [c.tag for c in run.procs] == ["[c1 group1]", "[c1 group2]"]
    assert all(c.code == 0 for c in run.procs) and run.done()


def test_no_further_group_starts_once_interrupted(tmp_path):
    from karpenter_e2e.runners.children import Children
    from karpenter_e2e.runners.e2e import LaneRun
    lane = lanes.Lane(0, 0)
    for name in ("A=1", "B=2"):
        lane.place_group(lanes.Group((name,), [_settings_test(name, 1, name)]))
    run = LaneRun(lane, "lane-c1", tmp_path, [], None)
    for child in run.waiting:
        child.cmd = [sys.executable, "-c", "pass"]
    children = Children()
    run.start(children)
    children.interrupted.set()
    deadline = time.monotonic() + 30
    while not run.done() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [c.tag for c in run.procs] == ["[c1 group1]"] and run.waiting == []


def test_the_merged_summary_says_why_each_failed_test_failed(tmp_path):
    a = _run_dir(tmp_path, "c1", ["t1", "t2"], failures=1)
    tree = ET.parse(a / "junit.xml")
    case = next(c for c in tree.getroot().iter("testcase") if c.get("name") == "t2")
    case.set("classname", "suites.test_x")
    ET.SubElement(case, "failure", message="WaitTimeout: gave up after 65s waiting for "
                  "empty nodes ['n1'] to be removed\n" + "x" * 2000)
    tree.write(a / "junit.xml")
    merge.merge([a], tmp_path / "merged")
    text = (tmp_path / "merged" / "summary.md").read_text()
    assert "## Why they failed" in text
    line = next(x for x in text.splitlines() if x.startswith("- `suites.test_x::t2`"))
    assert "gave up after 65s waiting for empty nodes ['n1'] to be removed" in line
    assert line.endswith(" …") and len(line) < 700 and "t1" not in text.split("## Why")[1]
    clean = _run_dir(tmp_path, "c2", ["t3"])
    merge.merge([clean], tmp_path / "m2")
    assert "Why they failed" not in (tmp_path / "m2" / "summary.md").read_text()


def test_kinds_settings_lanes_count_toward_the_clusters_the_cores_allow():
    # six kind clusters on 2 cores (4 lanes by CPU and 2 settings lanes on top) overloaded the
    # machine as the settings lanes came up: for kind the whole plan stays within the 4
    tests = SUITE + [PlannedTest(f"suites/test_x.py::s{i}", 100, settings=(f"K{i}=v",))
                     for i in range(6)]
    size = machine.Size(4, 4, "test")
    kind = within(tests, size, machine.COSTS["kind"], asked=False)
    assert len(kind) == 4 and any(lane.groups for lane in kind)
    assert sorted(x.nodeid for lane in kind for x in lane.tests) == \
        sorted(x.nodeid for x in tests)
    assert len(within(tests, size, machine.COSTS["local"], asked=False)) > 4
    # asked for: as asked, settings lanes on top
    asked = within(tests, size, machine.COSTS["kind"], asked=True)
    assert [len(lane.tests) for lane in asked] == \
        [len(lane.tests) for lane in lanes.deal(tests, 4, 4, start_gap=150.0)]


def test_a_disruption_loop_test_runs_alone_where_xdist_workers_share_a_cluster(pytester):
    """eks and aws-sim mode run one pytest with xdist on one cluster (runners/e2e.py): there
    the plugin's room lock is what keeps a test alone on Karpenter. A disruption_loop test
    (marked on its module, as suites/test_drift.py is) takes it exclusively as an own_karpenter
    test does; before, only own_karpenter did, and an EKS night's disruption scenarios ran
    beside each other against bounds set for a loop that serves them alone."""
    from karpenter_e2e.fixtures.plugin import runs_alone

    pytester.makeini("[pytest]\nmarkers =\n    disruption_loop\n    own_karpenter(reason)\n")
    pytester.makepyfile(test_drift_like="""
import pytest
pytestmark = pytest.mark.disruption_loop
def test_drift(): pass
""", test_other="""
import pytest
@pytest.mark.own_karpenter("cluster-wide state")
def test_solo(): pass
def test_plain(): pass
""")
    items, _ = pytester.inline_genitems()
    assert {i.name: runs_alone(i) for i in items} == {
        "test_drift": True, "test_solo": True, "test_plain": False}
