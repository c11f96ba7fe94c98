"""The one list-then-watch loop: what the waits, the node ledger and the timeline consume.

An ``Informer`` lists a kind (``objects``, by name), then watches it from the list's
resourceVersion in windows the caller sizes. Within a window every ADDED, MODIFIED and DELETED
event updates ``objects`` and is handed to the caller. The watch ending with 410 Gone (as an
exception or as an ERROR event, whichever the client gives) makes the next window re-list, so
no event is lost silently: what changed while nobody watched shows in the new list. Any other
error is the caller's: a wait fails on it, a background recorder counts it and tries again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import watch
from kubernetes.client.rest import ApiException

# (event type, object) -> True to end the window early (e.g. a wait's predicate holds)
OnEvent = Callable[[str, Any], bool | None]
OnList = Callable[[dict[str, Any]], bool | None]  # True to end the window early


def name_of(obj: Any) -> str:
    """A typed client object's name or a plain dict's."""
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get("name", "")
    return obj.metadata.name


def _version_of(obj: Any) -> str | None:
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get("resourceVersion")
    return getattr(obj.metadata, "resource_version", None)


class Informer:
    """``list_fn`` (a client list call) with ``kwargs`` (selectors, namespace).

    ``deserialize=False`` keeps plain dicts (no typed models: 1000-pod scenarios).
    ``relist_every_window`` re-lists before each window, for callers that must see a
    deletion that happened between windows even without a 410 (the ledger, the waits).
    ``history=False`` lists only for a resourceVersion (``limit=1``): events from now on."""

    def __init__(self, list_fn: Callable[..., Any], *, deserialize: bool = True,
                 relist_every_window: bool = False, history: bool = True, **kwargs: Any):
        self.list_fn, self.kwargs = list_fn, kwargs
        self.deserialize, self.relist_every_window, self.history = (
            deserialize, relist_every_window, history)
        self.objects: dict[str, Any] = {}
        self.resource_version: str | None = None

    def relist(self, request_timeout: float = 10) -> dict[str, Any]:
        """List now; ``objects`` becomes what the list says (an empty dict without history)."""
        extra = {} if self.history else {"limit": 1}
        if self.deserialize:
            listing = self.list_fn(_request_timeout=request_timeout, **self.kwargs, **extra)
            if isinstance(listing, dict):
                items, rv = listing["items"], listing["metadata"]["resourceVersion"]
            else:
                items, rv = listing.items, listing.metadata.resource_version
        else:
            resp = self.list_fn(_request_timeout=request_timeout, _preload_content=False,
                                **self.kwargs, **extra)
            listing = json.loads(resp.data)
            items, rv = listing.get("items") or [], listing["metadata"]["resourceVersion"]
        self.objects = {name_of(o): o for o in items} if self.history else {}
        self.resource_version = rv
        return self.objects

    def window(self, seconds: float, on_event: OnEvent | None = None,
               on_list: OnList | None = None, stop: Callable[[], bool] = lambda: False) -> bool:
        """Re-list if needed (first window, after a 410, or every window when asked), then
        watch for ``seconds``. True when ``on_list`` or ``on_event`` ended it early."""
        if self.resource_version is None or self.relist_every_window:
            self.relist(request_timeout=min(30.0, seconds + 10))
            if on_list is not None and on_list(self.objects):
                return True
        w = watch.Watch()
        try:
            for event in w.stream(self.list_fn, resource_version=self.resource_version,
                                  timeout_seconds=max(1, int(seconds)),
                                  _request_timeout=int(seconds) + 5,
                                  **({} if self.deserialize else {"deserialize": False}),
                                  **self.kwargs):
                kind, obj = event["type"], event.get("object")
                if kind == "ERROR":
                    self.resource_version = None  # 410 Gone as an event: re-list
                    return False
                self.resource_version = _version_of(obj) or self.resource_version
                if kind == "DELETED":
                    self.objects.pop(name_of(obj), None)
                elif kind in ("ADDED", "MODIFIED"):
                    self.objects[name_of(obj)] = obj
                else:
                    continue  # BOOKMARK
                if on_event is not None and on_event(kind, obj):
                    return True
                if stop():
                    return False
        except ApiException as exc:
            if exc.status != 410:
                raise
            self.resource_version = None
        except KeyError as exc:
            # The client reads an ERROR event's object through a key it only sets when
            # deserialising: that is the same 410, seen without deserialising.
            if exc.args != ("raw_object",):
                raise
            self.resource_version = None
        finally:
            w.stop()
        return False
