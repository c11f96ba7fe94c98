"""What a check folder needs of Karpenter: the features (clusters/features.py) its manifests
and its expect.yaml use, read offline. The upgrade gate and release-diffs diff a folder on
two releases; one the older release lacks a feature for cannot be diffed (its check would be
refused, or would test something else), and that is said, with the release the feature came
in, instead of failing as a difference.

Only what the features table names and a manifest shows: a kind (CapacityBuffer,
NodeOverlay), a NodePool field (replicas, consolidationPolicy Balanced, Gte/Lte, disruption
without consolidateAfter), or a feature gate in expect.yaml's `karpenter:` block.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

from karpenter_e2e.checks import manifests
from karpenter_e2e.clusters.karpenter import features

_KINDS = {"CapacityBuffer": "capacity-buffer", "NodeOverlay": "node-overlay"}
_BY_GATE = {f.gate: f.name for f in features.FEATURES.values() if f.gate}


@functools.cache  # a run asks once per release pair; the folder does not change under it
def features_needed(folder: Path) -> tuple[str, ...]:
    """The features ``folder``'s check uses (names in clusters/features.py), sorted: its
    manifests, the files its steps apply among them, read as check reads them (kustomize
    rendered), and expect.yaml's `karpenter:` block. Reads only; check validates the rest."""
    bundle = manifests.load(folder, "needs", None)
    out = {_KINDS[m.kind] for m in bundle.manifests if m.kind in _KINDS}
    for m in bundle.manifests:
        if m.kind == "NodePool":
            out |= _nodepool(m.body.get("spec") or {})
    # the block alone, not checks.expectations.load: that module judges with the oracles
    # (fixtures), which the runners asking this must not import; check validates the file
    expect = folder / "expect.yaml"
    settings = (yaml.safe_load(expect.read_text()) or {}).get("karpenter") or {} \
        if expect.is_file() else {}
    out |= {_BY_GATE[k] for k in settings if k in _BY_GATE}
    return tuple(sorted(out))


def _nodepool(spec: dict) -> set[str]:
    out = set()
    if "replicas" in spec:
        out.add("static-capacity")
    disruption = spec.get("disruption")
    if disruption is not None and "consolidateAfter" not in disruption:
        # a pool without the block gets the CRD's default block, consolidateAfter in it
        out.add("optional-consolidate-after")
    if (disruption or {}).get("consolidationPolicy") == "Balanced":
        out.add("balanced-consolidation")
    requirements = ((spec.get("template") or {}).get("spec") or {}).get("requirements") or []
    if any(r.get("operator") in ("Gte", "Lte") for r in requirements):
        out.add("requirement-gte-lte")
    return out


def lacking(folder: Path, *versions: str) -> list[str]:
    """Why each of ``versions`` cannot run ``folder``'s check (features.missing's sentences)."""
    needed = features_needed(folder)
    return [why for v in versions for n in needed if (why := features.missing(v, n))]
