"""The one rule for transient API errors (clusters/api/waits.py TransientRun) as the watches over
the informer apply it: the node ledger, the timeline recorder and watch_until ride a run of
them out for the grace; past it, or on a harness bug, the error is the caller's. Scripted
API calls; no cluster."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api import informer as informer_module, waits
from karpenter_e2e.clusters.api.waits import Timeouts
from karpenter_e2e.fixtures import ledger as ledger_module, timeline as timeline_module
from karpenter_e2e.fixtures.ledger import NodeLedger
from karpenter_e2e.fixtures.timeline import SOURCES, Timeline
from karpenter_e2e.fixtures.watch import watch_until

FAST = Timeouts(poll=0.01)


@pytest.fixture
def short_grace(monkeypatch):
    monkeypatch.setattr(waits, "TRANSIENT_GRACE_S", 0.2)
    for module in (ledger_module, timeline_module):  # their pause after an error
        monkeypatch.setattr(module, "DEFAULTS", FAST)


def down(*_args, **_kwargs):
    raise ApiException(status=503, reason="apiserver down")


def until(done, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_ledger_rides_errors_out_for_the_grace_then_keeps_the_last_for_its_owner(short_grace):
    ledger = NodeLedger(SimpleNamespace(core=SimpleNamespace(list_node=down)), "t=1").start()
    started = time.monotonic()
    until(lambda: ledger.error is not None)
    assert time.monotonic() - started >= 0.2
    ledger.stop()
    with pytest.raises(ApiException, match="apiserver down"):
        ledger.raise_error()


def test_the_timeline_recorder_counts_errors_and_raises_what_ended_a_watch(short_grace):
    api = SimpleNamespace(list_namespaced_pod=down, list_node=down,
                          list_event_for_all_namespaces=down, list_namespaced_deployment=down,
                          list_cluster_custom_object=down)
    tl = Timeline("t", "suites/x.py::t", "abc123")
    tl.record(SimpleNamespace(core=api, apps=api, custom=api), "t=abc123", lambda: "e2e-abc123")
    until(lambda: tl._recorder is not None and len(tl._recorder.errors) == len(SOURCES))
    tl.stop()
    with pytest.raises(ApiException, match="apiserver down"):
        tl.raise_error()
    assert tl.recording is not None and tl.recording.errors["nodes: ApiException"] > 1


def test_a_harness_bug_ends_a_recorder_watch_at_once():
    def garbage(*_args, **_kwargs):
        return SimpleNamespace(data=b"not json")  # a list the recorder cannot read: a bug

    api = SimpleNamespace(list_namespaced_pod=garbage, list_node=garbage,
                          list_event_for_all_namespaces=garbage,
                          list_namespaced_deployment=garbage, list_cluster_custom_object=garbage)
    tl = Timeline("t", "suites/x.py::t", "abc123")
    tl.record(SimpleNamespace(core=api, apps=api, custom=api), "t=abc123", lambda: "e2e-abc123")
    until(lambda: tl._recorder is not None and len(tl._recorder.errors) == len(SOURCES), 1)
    tl.stop()
    with pytest.raises(ValueError):
        tl.raise_error()


class Flaky:
    """A list call failing ``errors`` times with a 503, then listing ``items``; the watch
    streams nothing."""

    def __init__(self, monkeypatch, errors: int, items: list[dict]):
        self.errors, self.items = errors, items

        class Watch:
            def stream(self, *_args, **_kwargs):
                yield from ()

            def stop(self):
                pass

        monkeypatch.setattr(informer_module.watch, "Watch", Watch)

    def __call__(self, **_kwargs):
        if self.errors:
            self.errors -= 1
            raise ApiException(status=503, reason="apiserver down")
        return {"items": self.items, "metadata": {"resourceVersion": "1"}}


def there(objects: dict) -> tuple[bool, str]:
    return "n1" in objects, f"{len(objects)} nodes"


def test_watch_until_rides_errors_out_within_the_grace(monkeypatch, short_grace):
    node = {"metadata": {"name": "n1", "resourceVersion": "1"}}
    _, objects = watch_until(Flaky(monkeypatch, 3, [node]), there, what="n1", timeout=10,
                             timeouts=FAST)
    assert set(objects) == {"n1"}


def test_watch_until_raises_the_error_once_it_outlasts_the_grace(monkeypatch, short_grace):
    started = time.monotonic()
    with pytest.raises(ApiException, match="apiserver down"):
        watch_until(Flaky(monkeypatch, 10**6, []), there, what="n1", timeout=30, timeouts=FAST)
    assert 0.2 <= time.monotonic() - started < 5
