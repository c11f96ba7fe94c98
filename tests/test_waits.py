"""The waiting primitive: deadlines are wall-clock, failures say expected vs observed."""

import time

import pytest

from karpenter_e2e.clusters.waits import (
    ConsistencyViolated,
    Observation,
    StopWaiting,
    WaitAborted,
    WaitTimeout,
    consistently,
    eventually,
)


def test_eventually_returns_the_matched_value():
    calls = iter([Observation(False, "1 Running"), Observation(True, "5 Running", value=[1, 2])])
    assert eventually(lambda: next(calls), what="5 pods", timeout=5, poll=0.01) == [1, 2]


def test_eventually_times_out_with_expected_seen_and_diagnosis():
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as err:
        eventually(lambda: Observation(False, "3 Running, 2 Pending"), what="5 Running pods",
                   timeout=0.3, poll=0.05, diagnose=lambda: "Karpenter is not running")
    assert time.monotonic() - started < 2
    msg = str(err.value)
    assert "expected 5 Running pods" in msg and "3 Running, 2 Pending" in msg
    assert "diagnosis: Karpenter is not running" in msg


def test_transient_errors_are_retried_and_reported():
    state = {"n": 0}

    def flaky():
        state["n"] += 1
        if state["n"] < 3:
            raise ConnectionError("connection refused")
        return Observation(True, "ok", "done")

    assert eventually(flaky, what="api", timeout=5, poll=0.01) == "done"
    with pytest.raises(WaitTimeout, match="ConnectionError: refused"):
        eventually(lambda: (_ for _ in ()).throw(ConnectionError("refused")), what="api",
                   timeout=0.2, poll=0.05)


def test_stop_waiting_ends_the_wait_at_once_with_the_reason():
    started = time.monotonic()
    with pytest.raises(WaitAborted) as err:
        eventually(lambda: (_ for _ in ()).throw(StopWaiting("Karpenter is not running")),
                   what="5 Running pods", timeout=30, diagnose=lambda: "verdict")
    assert time.monotonic() - started < 1
    assert str(err.value).startswith("gave up after 0s: expected 5 Running pods; "
                                     "because: Karpenter is not running")
    assert "diagnosis: verdict" in str(err.value)
    assert isinstance(err.value, AssertionError)  # a test failure, not an error


def test_a_broken_diagnosis_does_not_hide_the_timeout():
    with pytest.raises(WaitTimeout, match="diagnosis failed: RuntimeError"):
        eventually(lambda: Observation(False, "x"), what="y", timeout=0.1, poll=0.05,
                   diagnose=lambda: (_ for _ in ()).throw(RuntimeError("boom")))


def test_consistently_holds_for_the_duration():
    started = time.monotonic()
    assert consistently(lambda: Observation(True, "2 Pending", 2), what="pending", duration=0.3,
                        poll=0.05) == 2
    assert time.monotonic() - started >= 0.3


def test_consistently_fails_on_the_first_violation():
    seq = iter([Observation(True, "ok"), Observation(False, "a node appeared")])
    with pytest.raises(ConsistencyViolated, match="a node appeared"):
        consistently(lambda: next(seq), what="no nodes", duration=5, poll=0.01)


def test_a_harness_bug_inside_a_wait_fails_at_once_with_its_traceback():
    started = time.monotonic()
    with pytest.raises(ValueError, match="max"):
        eventually(lambda: Observation(max([]) > 0, "x"), what="a count", timeout=30, poll=0.01)
    assert time.monotonic() - started < 1
    with pytest.raises(KeyError):
        consistently(lambda: {}["nodeName"], what="a field", duration=30, poll=0.01)


def test_api_errors_the_cluster_may_stop_making_are_retried_but_bad_requests_are_not():
    from kubernetes.client.rest import ApiException
    state = {"n": 0}

    def overloaded():
        state["n"] += 1
        if state["n"] < 3:
            raise ApiException(status=503, reason="Service Unavailable")
        return Observation(True, "ok", "done")

    assert eventually(overloaded, what="api", timeout=5, poll=0.01) == "done"
    with pytest.raises(ApiException):
        eventually(lambda: (_ for _ in ()).throw(ApiException(status=422, reason="Invalid")),
                   what="api", timeout=30, poll=0.01)


def test_consistently_rides_out_one_transient_error_but_not_two_in_a_row():
    seq = iter([Observation(True, "ok"), ConnectionResetError("reset")]
               + [Observation(True, "ok")] * 1000)

    def check():
        item = next(seq)
        if isinstance(item, Exception):
            raise item
        return item

    assert consistently(check, what="no nodes", duration=0.2, poll=0.01) is None
    seq2 = iter([Observation(True, "ok"), ConnectionResetError("reset"),
                 ConnectionResetError("reset again")])

    def check2():
        item = next(seq2)
        if isinstance(item, Exception):
            raise item
        return item

    with pytest.raises(ConsistencyViolated, match="reset again"):
        consistently(check2, what="no nodes", duration=5, poll=0.01)
