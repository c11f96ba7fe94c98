"""The matrix's builds ahead: one at a time, in the runs' order, overlapping earlier runs."""

from __future__ import annotations

import threading
import time

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build
from karpenter_e2e.rendering.matrix import Cell
from karpenter_e2e.runners import matrix, prebuilds


class Recorder:
    def __init__(self, fail: dict[str, Exception] | None = None, seconds: float = 0.1):
        self.events: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()
        self.fail = fail or {}
        self.seconds = seconds
        self.now = 0
        self.peak = 0

    def note(self, what: str, column: str) -> None:
        with self.lock:
            self.events.append((what, column, time.monotonic()))

    def build(self, column: str) -> float:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        self.note("build", column)
        time.sleep(self.seconds)
        with self.lock:
            self.now -= 1
        if column in self.fail:
            raise self.fail[column]
        return self.seconds


def test_builds_go_one_at_a_time_in_order_and_a_run_waits_for_its_own():
    rec = Recorder()
    ahead = prebuilds.BuildsAhead(["v1.15.0", "v1.14.3", "v1.12.1"], threading.Event(), rec.build)
    assert ahead.wait("v1.14.3") == pytest.approx(0.1)
    ahead.join()
    assert [c for _w, c, _t in rec.events] == ["v1.15.0", "v1.14.3", "v1.12.1"]
    assert rec.peak == 1


def test_a_failed_build_is_its_runs_error_and_the_others_go_on():
    rec = Recorder(fail={"v1.0.8": ClusterError("go build of karpenter-kwok v1.0.8 failed")})
    ahead = prebuilds.BuildsAhead(["v1.0.8", "v1.1.5"], threading.Event(), rec.build)
    with pytest.raises(ClusterError, match="v1.0.8 failed"):
        ahead.wait("v1.0.8")
    assert ahead.wait("v1.1.5") > 0


def test_a_harness_error_in_a_build_reaches_the_run_as_it_is():
    rec = Recorder(fail={"v1.0.8": KeyError("target")})
    ahead = prebuilds.BuildsAhead(["v1.0.8"], threading.Event(), rec.build)
    with pytest.raises(KeyError):
        ahead.wait("v1.0.8")


def test_a_run_stops_waiting_once_the_builds_up_to_its_column_outlive_their_bound(monkeypatch):
    monkeypatch.setattr(prebuilds, "COLUMN_BOUND_S", 0.2)
    monkeypatch.setattr(prebuilds, "CHECK_S", 0.05)
    release = threading.Event()
    ahead = prebuilds.BuildsAhead(["a", "b"], threading.Event(), lambda c: release.wait(30) and 0.0)
    started = time.monotonic()
    try:
        with pytest.raises(ClusterError, match=r"b is still not built 0 min after the builds "
                                               r"began \(2 column\(s\) of at most 0 min each\)"):
            ahead.wait("b")
        assert 0.35 < time.monotonic() - started < 5  # the bound of two columns, not CHECK_S
    finally:
        release.set()
        ahead.join()


def test_once_stopped_no_further_build_begins():
    stop = threading.Event()
    rec = Recorder(seconds=0.05)

    def build(column):
        stop.set()  # Ctrl-C while "a" builds: it finishes, "b" and "c" never start
        return rec.build(column)
    ahead = prebuilds.BuildsAhead(["a", "b", "c"], stop, build)
    assert ahead.wait("c") == 0.0
    ahead.join()
    assert [c for _w, c, _t in rec.events] == ["a"]


def test_with_one_job_the_next_release_builds_while_the_first_runs(monkeypatch, tmp_path):
    rec = Recorder(seconds=0.05)
    second_build_began = threading.Event()
    seen_during_first_run = []

    def build(column):
        if column == "v1.12.1":
            second_build_began.set()
        return rec.build(column)

    def fake_run(version, out, scenarios, children, paths, args, prefix, build_fn, **_kw):
        build_fn(version)
        rec.note("run start", version)
        if version == "v1.15.0":  # the first run (newest first) holds until the next build
            seen_during_first_run.append(second_build_began.wait(10))
        rec.note("run end", version)
        return matrix.VersionRun(version, {"limits": Cell("passed")}, 0, 0.5, 0.05,
                                 out / version / "pytest.log", None)
    monkeypatch.setattr(matrix, "run_version", fake_run)
    runs = matrix.run_matrix(["v1.12.1", "v1.15.0"], ["limits"], tmp_path, 1, ["suites"], [],
                             "matrix-dev", build_fn=build)
    assert set(runs) == {"v1.12.1", "v1.15.0"}
    assert seen_during_first_run == [True]  # v1.12.1 built while v1.15.0 ran
    at = {(w, c): t for w, c, t in rec.events}
    assert at[("run start", "v1.12.1")] >= at[("run end", "v1.15.0")]  # one job: runs in turn


@pytest.mark.parametrize("value, prefix", [("", []), ("0", []), ("10", ["nice", "-n", "10"])])
def test_build_niceness(monkeypatch, value, prefix):
    monkeypatch.setenv(build.BUILD_NICE_ENV, value)
    assert build._niced() == prefix


@pytest.mark.parametrize("value", ["-5", "20", "high"])
def test_a_bad_build_niceness_is_said(monkeypatch, value):
    monkeypatch.setenv(build.BUILD_NICE_ENV, value)
    with pytest.raises(ClusterError, match="a niceness from 0 to 19"):
        build._niced()
