"""The one list-then-watch loop (clusters/api/informer.py) over a scripted client: what a window
sees, and that a 410 in any of its forms makes the next window re-list. No cluster."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from karpenter_e2e.clusters.api import informer as informer_module
from karpenter_e2e.clusters.api.informer import Informer


def obj(name: str, rv: str) -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv}}


class Script:
    """Lists and watch windows, in order; each window is a list of events or an exception."""

    def __init__(self, lists: list[list[dict]], windows: list):
        self.lists, self.windows, self.listed, self.watched_from = lists, windows, 0, []

    def list_fn(self, **kwargs):
        items = self.lists[min(self.listed, len(self.lists) - 1)]
        self.listed += 1
        return {"items": items, "metadata": {"resourceVersion": f"L{self.listed}"}}

    def install(self, monkeypatch):
        script = self

        class Watch:
            def stream(self, fn, resource_version=None, **kwargs):
                script.watched_from.append(resource_version)
                window = script.windows.pop(0)
                if isinstance(window, BaseException):
                    raise window
                yield from window

            def stop(self):
                pass

        monkeypatch.setattr(informer_module.watch, "Watch", Watch)
        return self


def test_a_window_lists_then_follows_events_and_resumes(monkeypatch):
    s = Script([[obj("a", "1")]], [
        [{"type": "ADDED", "object": obj("b", "2")}, {"type": "DELETED", "object": obj("a", "3")}],
        [{"type": "MODIFIED", "object": obj("b", "4")}],
    ]).install(monkeypatch)
    inf = Informer(s.list_fn)
    seen: list[tuple[str, str]] = []
    listed: list[set[str]] = []
    inf.window(1, on_event=lambda k, o: seen.append((k, o["metadata"]["name"])),
               on_list=lambda objs: listed.append(set(objs)))
    inf.window(1, on_event=lambda k, o: seen.append((k, o["metadata"]["name"])))
    assert listed == [{"a"}] and s.listed == 1  # resumed, not re-listed
    assert seen == [("ADDED", "b"), ("DELETED", "a"), ("MODIFIED", "b")]
    assert s.watched_from == ["L1", "3"] and set(inf.objects) == {"b"}


@pytest.mark.parametrize("gone", [
    [{"type": "ERROR", "object": {"code": 410}}],
    ApiException(status=410),
    KeyError("raw_object"),
], ids=["error-event", "api-exception", "undeserialised-error-event"])
def test_410_in_any_form_makes_the_next_window_relist(monkeypatch, gone):
    s = Script([[obj("a", "1")], [obj("b", "5")]], [gone, []]).install(monkeypatch)
    inf = Informer(s.list_fn)
    assert inf.window(1) is False and inf.resource_version is None
    inf.window(1)
    assert s.listed == 2 and set(inf.objects) == {"b"} and s.watched_from == ["L1", "L2"]


def test_other_errors_are_the_callers(monkeypatch):
    s = Script([[]], [ApiException(status=500), KeyError("other")]).install(monkeypatch)
    inf = Informer(s.list_fn)
    with pytest.raises(ApiException):
        inf.window(1)
    with pytest.raises(KeyError):
        inf.window(1)


def test_a_callback_ends_the_window_early_and_relist_every_window(monkeypatch):
    s = Script([[obj("a", "1")], [obj("a", "1")]], [
        [{"type": "ADDED", "object": obj("b", "2")}, {"type": "ADDED", "object": obj("c", "3")}],
    ]).install(monkeypatch)
    inf = Informer(s.list_fn, relist_every_window=True)
    assert inf.window(1, on_event=lambda k, o: o["metadata"]["name"] == "b") is True
    assert set(inf.objects) == {"a", "b"}  # c never came: the window ended at b
    assert inf.window(1, on_list=lambda objs: "a" in objs) is True and s.listed == 2


def test_without_history_the_list_only_gives_a_starting_point(monkeypatch):
    calls: list[dict] = []

    def list_fn(**kwargs):
        calls.append(kwargs)
        return {"items": [obj("old", "1")], "metadata": {"resourceVersion": "9"}}

    Script([[]], [[]]).install(monkeypatch)
    inf = Informer(list_fn, history=False)
    inf.window(1, on_list=lambda objs: pytest.fail("no list callback without history")
               if objs else None)
    assert calls[0]["limit"] == 1 and inf.objects == {} and inf.resource_version == "9"

