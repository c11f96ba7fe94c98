"""The one polling thread: what ``throughout`` checks, the chaos tainter and the metrics
sampler run on.

``Poller(tick, interval)`` calls ``tick()`` every ``interval`` seconds on a daemon thread from
``start()`` to ``stop()``; ``tick`` returning True ends it (e.g. a violation was seen). What a
tick raises is sorted the way the waits sort it: ``skip(exc)`` (a 404 or 409 a tainter expects)
is no error at all; a transient API error is ridden out by the one rule (waits.TransientRun);
anything else, or a transient error past the rule's grace, ends the thread and is kept in
``error`` for the caller to raise, with its traceback, in its own thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from karpenter_e2e.clusters.api.waits import TransientRun


class Poller:
    def __init__(self, tick: Callable[[], bool | None], interval: float, *, name: str,
                 skip: Callable[[BaseException], bool] = lambda _e: False, wait_first: bool = False):
        self.tick, self.interval, self.name = tick, interval, name
        self.skip, self.wait_first = skip, wait_first
        self.ticks = 0  # ticks that returned (raised nothing)
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        errors = TransientRun()
        if self.wait_first and self._stop.wait(self.interval):
            return
        while not self._stop.is_set():
            try:
                done = self.tick()
                self.ticks += 1
                errors.clear()
                if done:
                    return
            except Exception as exc:  # noqa: BLE001 - sorted here, raised by the caller
                if not self.skip(exc) and not errors.ride_out(exc):
                    self.error = exc
                    return
            if self._stop.wait(self.interval):
                return

    def start(self) -> Poller:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self, join_timeout: float = 60) -> None:
        """End the thread (safe twice, and before start()); its error stays in ``error``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=join_timeout)

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error
