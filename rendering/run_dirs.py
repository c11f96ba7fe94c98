"""The ``latest`` link of a reports directory: the last finished run's directory.

The plugin, the lane runner and the matrix all point it and read it the same way."""

from __future__ import annotations

import os
from pathlib import Path


def point(reports_dir: Path, run_dir: Path, name: str = "latest") -> None:
    """``reports_dir/name`` -> ``run_dir`` (inside it), replaced atomically, so a reader
    never sees it missing while another run on the same machine finishes."""
    link = reports_dir / name
    tmp = link.with_name(f".{name}-{run_dir.name}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.relative_to(reports_dir))
    os.replace(tmp, link)


def latest(reports_dir: Path, name: str = "latest") -> Path | None:
    """The run directory ``reports_dir/name`` points at, if a run finished there."""
    link = reports_dir / name
    return link.resolve() if link.exists() else None
