"""The one polling thread (clusters/api/poller.py): how a tick's outcome and its errors end it or
not. Ticks are plain functions; no cluster."""

from __future__ import annotations

import time

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api import waits
from karpenter_e2e.clusters.api.poller import Poller


def run_until_done(p: Poller, timeout: float = 5) -> Poller:
    p.start()
    deadline = time.monotonic() + timeout
    while p._thread is not None and p._thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    p.stop()
    return p


def script(*outcomes):
    """A tick that plays ``outcomes`` in order: an exception is raised, anything else returned."""
    it = iter(outcomes)

    def tick():
        o = next(it)
        if isinstance(o, BaseException):
            raise o
        return o
    return tick


def test_a_tick_returning_true_ends_it():
    p = run_until_done(Poller(script(None, None, True, None), 0.001, name="t"))
    assert (p.ticks, p.error) == (3, None)


def test_transient_errors_are_ridden_out_within_the_grace_and_end_it_beyond(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.2)
    flaky = ApiException(status=503)
    p = run_until_done(Poller(script(flaky, None, flaky, flaky, flaky, True), 0.001, name="t"))
    assert (p.ticks, p.error) == (2, None)
    errors = [ApiException(status=503, reason=f"try {i}") for i in range(10000)]
    started = time.monotonic()
    p = run_until_done(Poller(script(None, *errors), 0.001, name="t"))
    assert 0.2 <= time.monotonic() - started < 2
    assert p.ticks == 1 and p.error in errors and errors.index(p.error) > 5  # the last one
    with pytest.raises(ApiException):
        p.raise_error()


def test_a_harness_bug_ends_it_at_once_and_skipped_errors_never_count(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.2)
    bug = KeyError("status")
    p = run_until_done(Poller(script(None, ApiException(status=503), bug, None), 0.001,
                              name="t"))
    assert p.ticks == 1 and p.error is bug
    gone = ApiException(status=404)
    p = run_until_done(Poller(script(*[gone] * 300, True), 0.001, name="t",
                              skip=lambda e: getattr(e, "status", None) == 404))
    assert (p.ticks, p.error) == (1, None)


def test_stop_ends_a_quiet_poller_and_wait_first_delays_the_first_tick():
    calls = []
    p = Poller(lambda: calls.append(time.monotonic()), 30, name="t", wait_first=True).start()
    began = time.monotonic()
    p.stop()
    assert time.monotonic() - began < 1 and calls == []
    Poller(lambda: None, 1, name="t").stop()  # before start: nothing to end
