"""check --compare-version's two sides at once: each release's check on a thread of its own
and on its own cluster (each spends most of its time waiting on Karpenter's clock, not on the
CPU), joined by the main thread, which alone receives Ctrl-C.

- The first side's error stops the second at its next wait (waits.stop_when): when the
  sides ran one after the other, the second never started after it. The second side's error
  lets the first finish (it had, then). Either way each side's Check takes its cluster down
  itself, as on Ctrl-C: Stopped is a KeyboardInterrupt.
- Ctrl-C stops both and waits for their teardowns; Ctrl-C again, while waiting, takes down
  from the main thread the cluster of a side still running (one in a long command that
  reaches no wait: a go build is stopped at its next progress line, a kwokctl create runs to
  its bound), and the process may exit: the sides are daemon threads.
- Each side's log lines begin with its release (``Labels``): the two sides' interleave.

aws-sim runs its two sides at once too: each cluster's fake AWS listens on a free port of
its own (awssim.cluster._start_cloud), as clusters of parallel runs always have.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator

from karpenter_e2e.clusters.api import waits

log = logging.getLogger("karpenter_e2e.check")


class Side(threading.Thread):
    """One release's check (``work``) on a thread of its own, its waits stopped by ``stop``;
    what it returned or raised, kept for the main thread."""

    def __init__(self, label: str, backend, work: Callable[[], tuple], stop: threading.Event,
                 ended: queue.Queue[Side]):
        # A daemon: after a second Ctrl-C it is left behind (its cluster taken down by the
        # main thread), and the process must then be able to exit.
        super().__init__(name=f"check {label}", daemon=True)
        self.label, self.backend, self.work, self.stop, self.ended = \
            label, backend, work, stop, ended
        self.result: tuple | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        Labels.mine.label = self.label
        try:
            with waits.stop_when(self.stop):
                self.result = self.work()
        except BaseException as exc:  # noqa: BLE001 - raised again in the main thread
            self.error = exc
        finally:
            self.ended.put(self)


class Labels(logging.Filter):
    """Each side's log lines begin with its release, ``[v1.15.0]``. A filter on the root
    logger's handlers, reading the label of the thread that logged (a thread a side starts
    itself, a timeline's watch say, has none)."""

    mine = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        label = getattr(self.mine, "label", None)
        if label and not getattr(record, "side", None):  # once, whatever the handlers
            vars(record)["side"] = label
            record.msg = f"[{label.replace('%', '%%')}] {record.msg}"
        return True

    @classmethod
    @contextlib.contextmanager
    def on_handlers(cls) -> Iterator[None]:
        labels, handlers = cls(), list(logging.getLogger().handlers)
        for h in handlers:
            h.addFilter(labels)
        try:
            yield
        finally:
            for h in handlers:
                h.removeFilter(labels)


def labels(backends: tuple) -> list[str]:
    """What each side's lines begin with: its release; the same release twice (a noise
    floor), its release and cluster."""
    found = [b.karpenter_version for b in backends]
    if len(set(found)) < len(found):
        found = [f"{b.karpenter_version} {b.name}" for b in backends]
    return found


def both(works: list[tuple[str, object, Callable[[], tuple]]], keep: bool) -> list[Side]:
    """Each (label, backend, work) on a side of its own, all started at once and joined as
    the module says; returns the sides, each with its result or its error."""
    stop, ended = threading.Event(), queue.Queue[Side]()
    sides = [Side(label, backend, work, stop, ended) for label, backend, work in works]
    with Labels.on_handlers():
        join(sides, stop, ended, keep)
    return sides


def join(sides: list[Side], stop: threading.Event, ended: queue.Queue[Side],
         keep: bool) -> None:
    """Start ``sides``, wait for all; the first side's error stops the others. On Ctrl-C,
    stop them all and wait for their teardowns; on Ctrl-C again, take down the cluster of a
    side still running (unless --keep-cluster), then re-raise."""
    try:
        for side in sides:
            side.start()
        for _ in sides:
            side = ended.get()
            if side.error is not None and side is sides[0] and not stop.is_set():
                log.warning("check: %s failed (%s); stopping %s, which takes its cluster "
                            "down", side.label, type(side.error).__name__,
                            ", ".join(s.label for s in sides[1:]))
                stop.set()
    except BaseException:  # Ctrl-C: Python delivers it to the main thread only
        stop.set()
        log.warning("check: interrupted; stopping both sides, each takes its cluster down")
        try:
            for side in sides:
                if side.ident is not None:  # started
                    side.join()
        finally:
            for side in sides:
                if side.is_alive() and not keep:  # interrupted again: down from here
                    try:
                        side.backend.down()
                    except Exception as exc:  # noqa: BLE001 - the other side's still to go
                        log.warning("check: cluster %r not taken down: %s: %s",
                                    side.backend.name, type(exc).__name__, exc)
        raise
