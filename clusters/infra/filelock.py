"""File locks for work several processes (xdist workers, make, lanes) may race to do, and
whole-file writes for files several writers may write at once."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from karpenter_e2e.clusters.api.waits import Observation, WaitTimeout, eventually
from karpenter_e2e.clusters.errors import ClusterError

LOCK_POLL_S = 0.5


@contextlib.contextmanager
def file_lock(path: Path, doing: str, timeout: float) -> Iterator[None]:
    """Hold ``path`` exclusively while ``doing``. A process that finds it held waits at most
    ``timeout`` seconds and says, every so often, who holds it and for what: each holder
    writes its pid and ``doing`` into the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        if not _take(fh):
            try:
                eventually(lambda: _attempt(fh, path), what=f"{path} to be free, for {doing}",
                           timeout=timeout, poll=LOCK_POLL_S)
            except WaitTimeout as exc:
                raise ClusterError(f"{exc}; if that process is stuck, stop it") from None
        try:
            fh.truncate(0)
            fh.write(f"pid {os.getpid()}: {doing}\n")
            fh.flush()
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _take(fh: IO[str]) -> bool:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _attempt(fh: IO[str], path: Path) -> Observation:
    if _take(fh):
        return Observation(True, "free")
    try:
        holder = path.read_text().strip() or "a process that has not said what it does"
    except OSError as exc:
        holder = f"unknown ({exc})"
    return Observation(False, f"held by {holder}")


def turnstile_of(room_path: Path) -> Path:
    """The file a writer takes before ``room_path`` itself (see ``room``)."""
    return room_path.with_name(room_path.name + ".turnstile")


@contextlib.contextmanager
def room(path: Path, exclusive: bool) -> Iterator[None]:
    """A readers-writer lock across processes that does not starve the writer: many may hold
    the room shared, one exclusively. A writer takes the turnstile, which keeps new readers
    out, waits for the room to empty, takes it, and only then lets the turnstile go."""
    turnstile = turnstile_of(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(turnstile, "a") as gate, open(path, "a") as fh:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(gate, fcntl.LOCK_UN)
            fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_whole(path: Path, text: str) -> None:
    """``text`` into ``path``, whole, whoever else writes it at once: a temporary file of this
    writer's own (process and thread: check --compare-version's two sides are threads of one
    process) beside it, renamed over it; the last rename wins and a reader never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
