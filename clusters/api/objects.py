"""One view of the API's objects as the custom and dynamic clients return them (plain dicts):
name, labels, deletion, status and conditions, read the same way everywhere. A field the
API server has not written yet (no status, no conditions) reads as empty, not as a KeyError.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# The image of every container the harness makes (scenarios, generated cases, replayed pods):
# nothing runs it in local mode, and on a real node it only sleeps.
PAUSE_IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def name(obj: Obj) -> str:
    return meta(obj)["name"]


def labels(obj: Obj) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def deleting(obj: Obj) -> bool:
    """Has the API server set the object's deletionTimestamp (it is being deleted)?"""
    return bool(meta(obj).get("deletionTimestamp"))


def status(obj: Obj) -> Obj:
    return obj.get("status") or {}


def conditions(obj: Obj) -> list[Obj]:
    return status(obj).get("conditions") or []


def condition(obj: Obj, type_: str) -> Obj | None:
    return next((c for c in conditions(obj) if c.get("type") == type_), None)


def condition_status(obj: Obj, type_: str) -> str | None:
    """'True', 'False' or 'Unknown'; None when the object has no such condition."""
    c = condition(obj, type_)
    return c.get("status") if c else None


def is_true(obj: Obj, type_: str) -> bool:
    return condition_status(obj, type_) == "True"
