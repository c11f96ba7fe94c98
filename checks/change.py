"""`check --snapshot DIR --patch FILE`: a change to a replayed cluster, the what-if of an edit.

FILE is YAML, one document per object to change: its ``kind``, ``metadata.name`` (and
``metadata.namespace`` for a namespaced kind) and the fields to change, merged into the
object as a JSON merge patch (RFC 7386: a mapping merges key by key, null removes a key, a
list replaces). For example, a consolidation policy and a new budget::

    kind: NodePool
    metadata: {name: general}
    spec:
      disruption:
        consolidationPolicy: WhenEmptyOrUnderutilized
        budgets: [{nodes: "20%"}]

The replay rebuilds the snapshot as it was, verifies it, and only then applies the change to
the live objects, as a team would apply it to theirs: a NodePool edited after its NodeClaims
were launched reads as drifted where Karpenter would find it so. A change to a pool's budgets
takes effect when the replay releases the budgets it held, with the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from karpenter_e2e.checks.steps import merged

# What a change may edit: objects the replay recreates under their snapshot names. NodeClaims
# and Nodes are rebuilt under new names; a NodeClass is a KWOKNodeClass here (its AMIs,
# subnets and roles mean nothing to the KWOK provider).
EDITABLE = {"NodePool": False, "PodDisruptionBudget": True, "PriorityClass": False,
            "ReplicaSet": True, "StatefulSet": True, "DaemonSet": True, "Pod": True}


class ChangeError(ValueError):
    """A change file that cannot apply to this snapshot: bad input, said before any cluster."""


@dataclass(frozen=True)
class Edit:
    kind: str
    name: str
    namespace: str | None
    patch: dict

    @property
    def ref(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def load(path: Path, objects: dict[str, list[dict]]) -> list[Edit]:
    """The edits in ``path``, each checked against the snapshot's ``objects``."""
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise ChangeError(f"--patch {path}: {exc}") from exc
    if not docs:
        raise ChangeError(f"--patch {path}: no document in it")
    out = []
    for i, doc in enumerate(docs, 1):
        where = f"--patch {path}, document {i}"
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            raise ChangeError(f"{where}: a mapping with kind and metadata.name")
        kind, meta = doc.get("kind"), doc["metadata"]
        if kind not in EDITABLE:
            raise ChangeError(f"{where}: kind {kind!r} cannot be changed in a replay (editable: "
                              f"{', '.join(EDITABLE)}; NodeClaims and Nodes are rebuilt under "
                              "new names, a NodeClass is a KWOKNodeClass here)")
        name, ns = meta.get("name"), meta.get("namespace")
        if not name:
            raise ChangeError(f"{where}: no metadata.name")
        if EDITABLE[kind] and not ns:
            raise ChangeError(f"{where}: {kind} {name} is namespaced: give metadata.namespace")
        have = [o for o in objects.get(kind, []) if o["metadata"]["name"] == name
                and (not EDITABLE[kind] or o["metadata"].get("namespace", "default") == ns)]
        if not have:
            names = sorted(o["metadata"]["name"] for o in objects.get(kind, []))
            raise ChangeError(f"{where}: the snapshot has no {kind} {name!r}"
                              + (f" in {ns}" if ns else "")
                              + (f" (its {kind}s: {', '.join(names[:10])})" if names else ""))
        patch = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        patch["metadata"] = {k: v for k, v in meta.items() if k not in ("name", "namespace")}
        if not patch["metadata"]:
            del patch["metadata"]
        if not patch:
            raise ChangeError(f"{where}: {kind} {name} names nothing to change")
        out.append(Edit(kind, name, ns if EDITABLE[kind] else None, patch))
    return out


def budgets(edits: list[Edit], pool: dict) -> list | None:
    """The budgets the edits give ``pool``, or None when they leave them as they were."""
    for e in edits:
        if e.kind == "NodePool" and e.name == pool["metadata"]["name"]:
            spec = (e.patch.get("spec") or {}).get("disruption") or {}
            if "budgets" in spec:
                return list(spec["budgets"] or [])
    return None


def without_budgets(edit: Edit) -> dict:
    """The live patch of an edit: a NodePool's budgets wait for the replay's release."""
    if edit.kind != "NodePool":
        return edit.patch
    return merged(edit.patch, {"spec": {"disruption": {"budgets": None}}}) \
        if "budgets" in ((edit.patch.get("spec") or {}).get("disruption") or {}) else edit.patch


def describe(edits: list[Edit]) -> str:
    lines = ["## The change applied", "",
             "After the rebuild was verified, before Karpenter was let act:", ""]
    for e in edits:
        lines += [f"- {e.ref}:", "", "  ```yaml"]
        lines += ["  " + line for line in yaml.safe_dump(e.patch, sort_keys=False).splitlines()]
        lines += ["  ```", ""]
    return "\n".join(lines)
