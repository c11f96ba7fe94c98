"""What a runner's finished cluster leaves behind in the per-user cache.

A local cluster, once down, keeps its component logs in ``~/.cache/karpenter-e2e/clusters/
<name>/logs`` for whoever ran it by hand. A runner names its own clusters, so when one of its
runs ends it moves a red run's logs into that run's report (where a reader looks) and removes
the directory and its lock files: a matrix of a hundred clusters leaves nothing behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from karpenter_e2e.clusters.infra import cluster_files, process


def retire(cluster: str, red_report: Path | None, mode: str = "local") -> str:
    """Remove a down cluster's directory, first copying its logs to ``red_report /
    'cluster-logs'`` when given. A directory that a process still uses is left alone (the
    cluster is not down; ``make sweep`` is for that). Says what it did, for the runner's log."""
    from karpenter_e2e.clusters import backends
    cluster = backends.files_name(mode, cluster)
    where = cluster_files.directory(cluster)
    if not where.is_dir():
        return ""
    if process.pids_using(str(where)):
        return f"{where} is still in use: left in place"
    said = ""
    logs = where / "logs"
    if red_report is not None and logs.is_dir():
        shutil.copytree(logs, red_report / "cluster-logs", dirs_exist_ok=True)
        said = f"its cluster's logs are in {red_report / 'cluster-logs'}"
    shutil.rmtree(where, ignore_errors=True)
    for side in cluster_files.side_files(cluster):
        side.unlink(missing_ok=True)
    return said
