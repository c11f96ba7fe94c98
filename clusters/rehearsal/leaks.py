"""Credentials never printed: every file the night wrote, searched for the rehearsal's own.

The rehearsal's access key id and secret are made up for each run (cluster.py), so any
occurrence of either in a log, a report, Allure's results or the steps' output is a leak,
not a coincidence. What is searched is named in the answer, so a check that read nothing
cannot pass for one that found nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError

SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@dataclass(frozen=True)
class Searched:
    files: int
    size: int  # bytes read


def search(roots: Iterable[Path], secrets: dict[str, str], since: float = 0.0,
           skip: Iterable[Path] = ()) -> Searched:
    """Every file under ``roots`` modified at or after ``since`` (seconds since the epoch),
    but ``skip`` (the environment file that holds the credentials on purpose); a
    ClusterError naming the files that hold one of ``secrets``' values."""
    needles = {k: v.encode() for k, v in secrets.items() if v}
    if not needles:
        raise ClusterError("no credentials to search for")
    skipped = {p.resolve() for p in skip}
    files = size = 0
    found = []
    for root in roots:
        if not root.exists():
            continue  # e.g. eks mode's run directory before any run
        for path in sorted([root] if root.is_file() else root.rglob("*")):
            if not path.is_file() or path.resolve() in skipped or path.stat().st_mtime < since:
                continue
            data = path.read_bytes()
            files, size = files + 1, size + len(data)
            found += [f"{path}: {key}" for key, needle in needles.items() if needle in data]
    if found:
        raise ClusterError("credentials printed:\n" + "\n".join(found))
    return Searched(files, size)
