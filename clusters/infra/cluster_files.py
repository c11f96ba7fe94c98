"""Where a cluster lives in the per-user cache: its directory and the files beside it.

Every mode, the plugin and the runners name these through here, so a cluster that is
retired leaves none of them behind.
"""

from __future__ import annotations

from pathlib import Path

from karpenter_e2e.clusters.infra.build import cache_dir
from karpenter_e2e.clusters.infra.filelock import turnstile_of


def root() -> Path:
    """Where every cluster's directory is."""
    return cache_dir() / "clusters"


def directory(name: str) -> Path:
    """The cluster's own directory: kubeconfig, state, component logs."""
    return root() / name


def _beside(name: str, suffix: str) -> Path:
    # Appended, not Path.with_suffix: a name with a dot keeps all of it.
    where = directory(name)
    return where.with_name(where.name + suffix)


def owner_lock(name: str) -> Path:
    """Held by whoever brings the cluster up or takes it down."""
    return _beside(name, ".lock")


def share_room(name: str) -> Path:
    """The room xdist workers hold shared, and a test that needs Karpenter to itself
    (own_karpenter, disruption_loop) exclusively."""
    return _beside(name, ".share")


def side_files(name: str) -> list[Path]:
    """Every file beside the directory: the owner lock, the share room and its turnstile."""
    room = share_room(name)
    return [owner_lock(name), room, turnstile_of(room)]
