"""File locks for work several processes (xdist workers, make, lanes) may race to do."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path, shared: bool = False) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def room(path: Path, exclusive: bool) -> Iterator[None]:
    """A readers-writer lock across processes that does not starve the writer: many may hold
    the room shared, one exclusively. A writer takes the turnstile, which keeps new readers
    out, waits for the room to empty, takes it, and only then lets the turnstile go."""
    turnstile = path.with_name(path.name + ".turnstile")
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
