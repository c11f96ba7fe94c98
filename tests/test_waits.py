"""The waiting primitive: deadlines are wall-clock, failures say expected vs observed."""

import threading
import time

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api import waits
from karpenter_e2e.clusters.api.waits import (
    ConsistencyViolated,
    Observation,
    StopWaiting,
    TransientRun,
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


def playing(*items):
    """A check that plays ``items`` in order (an exception is raised), then stays ok."""
    it = iter(items)

    def check():
        item = next(it, Observation(True, "ok"))
        if isinstance(item, BaseException):
            raise item
        return item
    return check


def test_a_run_of_transient_errors_is_ridden_out_for_the_grace_then_is_the_callers(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.2)
    run = TransientRun()
    assert run.ride_out(ConnectionResetError()) and run.ride_out(ConnectionResetError())
    time.sleep(0.25)
    assert not run.ride_out(ConnectionResetError())  # the run began 0.25 s ago
    run.clear()  # a look that worked: the next error begins a new run
    assert run.ride_out(ConnectionResetError())
    assert not run.ride_out(KeyError("status"))  # a harness bug is never ridden out


def test_consistently_rides_out_transient_errors_within_the_grace(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.5)
    check = playing(Observation(True, "ok"), *[ConnectionResetError("reset")] * 5)
    assert consistently(check, what="no nodes", duration=0.2, poll=0.01) is None


def test_consistently_fails_with_the_last_error_once_they_outlast_the_grace(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.2)
    errors = [ApiException(status=503, reason=f"try {i}") for i in range(1000)]
    started = time.monotonic()
    with pytest.raises(ConsistencyViolated) as err:
        consistently(playing(Observation(True, "ok"), *errors), what="no nodes", duration=30,
                     poll=0.01)
    assert 0.2 <= time.monotonic() - started < 2
    last = err.value.__cause__
    assert last in errors and last.reason in err.value.seen
    assert errors.index(last) > 5  # ridden out until then, at a 0.01 s poll


def test_consistently_raises_a_harness_bug_at_once_even_amid_transient_errors():
    started = time.monotonic()
    with pytest.raises(KeyError, match="nodeName"):
        consistently(playing(ConnectionResetError("reset"), KeyError("nodeName")),
                     what="a field", duration=30, poll=0.01)
    assert time.monotonic() - started < 1


# ---- a thread's waits, stopped from outside (check --compare-version's sides) ---------------
def test_a_stop_ends_the_threads_wait_once_and_the_teardowns_waits_run_to_their_end():
    stop = threading.Event()
    looks = []

    def never() -> Observation:
        looks.append(1)
        if len(looks) == 3:
            stop.set()
        return Observation(False, "not yet")

    with waits.stop_when(stop):
        with pytest.raises(waits.Stopped):
            eventually(never, what="x", timeout=30, poll=0.01)
        assert len(looks) == 3
        # Raised once: what the stopped thread does next (its teardown) waits as usual.
        assert eventually(lambda: Observation(True, "ok", 7), what="y", timeout=1) == 7


def test_a_stop_is_seen_by_consistently_and_by_a_pause_at_once():
    stop = threading.Event()
    stop.set()
    with waits.stop_when(stop):
        with pytest.raises(waits.Stopped):
            consistently(lambda: Observation(True, "fine"), what="x", duration=30, poll=0.01)
    started = time.monotonic()
    later = threading.Event()
    threading.Timer(0.1, later.set).start()
    with waits.stop_when(later), pytest.raises(waits.Stopped):
        waits.pause(30)
    assert time.monotonic() - started < 5


def test_unstoppable_waits_ignore_the_stop_and_it_holds_again_after_them():
    stop = threading.Event()
    stop.set()
    with waits.stop_when(stop):
        with waits.unstoppable():
            assert eventually(lambda: Observation(True, "down", "down"), what="d") == "down"
        with pytest.raises(waits.Stopped):
            waits.stop_point()


def test_a_stop_is_the_threads_own_and_outside_stop_when_nothing_stops():
    stop = threading.Event()
    stop.set()
    seen = []

    def other_thread():  # not inside stop_when: its waits go on
        seen.append(eventually(lambda: Observation(True, "ok", "ran"), what="z", timeout=1))
    with waits.stop_when(stop):
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen == ["ran"]
    waits.stop_point()  # no stop here: nothing raised
    assert issubclass(waits.Stopped, KeyboardInterrupt)  # torn down as Ctrl-C tears down
