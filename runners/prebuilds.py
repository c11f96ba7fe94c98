"""The matrix's builds: each column's binaries, one build at a time, ahead of its run.

One thread builds the columns in the order the runs will take them, so a release builds
while an earlier one runs, with one job too; a run waits only for its own column's build.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, kube_releases

_BUILD_LOCK = threading.Lock()  # one Karpenter build at a time (the cache's file lock, too)
# How often a waiting run checks that the build thread is still alive.
CHECK_S = 15.0
# One column's build at most: the build lock's wait, then Karpenter's and the control
# plane's go builds, each bounded by BUILD_BOUND_S. A run waits for the columns before
# its own too, so its bound is this times its place in the order.
COLUMN_BOUND_S = 3 * build.BUILD_BOUND_S


def split_column(column: str) -> tuple[str, str | None]:
    """'v1.12.1@1.35' -> ('v1.12.1', '1.35'); 'v1.12.1' -> ('v1.12.1', None): its default."""
    release, _, kube = column.partition("@")
    return release, kube or None


def prebuild(column: str) -> float:
    """The release's binary and its column's control plane (one build at a time here; a
    cached one costs nothing). Returns the seconds it took."""
    release, kube = split_column(column)
    with _BUILD_LOCK:
        t0 = time.monotonic()
        build.karpenter_binary(release)
        build.build_all(build.kube_targets(kube_releases.resolve(kube, release)))
        return time.monotonic() - t0


class BuildsAhead:
    """``columns`` built in a thread of their own, in order, by ``build_fn``. Once ``stop`` is
    set, the builds not yet begun are skipped (the build under way finishes: a go build is
    never left behind)."""

    def __init__(self, columns: list[str], stop: threading.Event,
                 build_fn: Callable[[str], float] = prebuild) -> None:
        self._done = {c: threading.Event() for c in columns}
        self._place = {c: i + 1 for i, c in enumerate(columns)}
        self._began = time.monotonic()
        self._result: dict[str, float | Exception] = {}
        self._stop = stop
        self._thread = threading.Thread(target=self._build_all, args=(list(columns), build_fn),
                                        daemon=True, name="matrix-builds")
        self._thread.start()

    def _build_all(self, columns: list[str], build_fn: Callable[[str], float]) -> None:
        for c in columns:
            try:
                if not self._stop.is_set():
                    self._result[c] = build_fn(c)
            except Exception as exc:  # noqa: BLE001 - handed to the run that waits for it
                self._result[c] = exc
            finally:
                self._done[c].set()

    def wait(self, column: str) -> float:
        """``column``'s build seconds, once built; its error raised (a ClusterError is the
        release's: a build that failed); 0.0 when the build was skipped by ``stop``. Raises
        a ClusterError once the builds up to ``column`` have outlived their bound."""
        bound = self._place[column] * COLUMN_BOUND_S
        deadline = self._began + bound
        while not self._done[column].wait(max(0.0, min(CHECK_S, deadline - time.monotonic()))):
            if not self._thread.is_alive():
                raise ClusterError(f"the build thread ended before building {column}")
            if time.monotonic() >= deadline:
                raise ClusterError(f"{column} is still not built {bound / 60:.0f} min after the "
                                   f"builds began ({self._place[column]} column(s) of at most "
                                   f"{COLUMN_BOUND_S / 60:.0f} min each): a build is stuck")
        got = self._result.get(column, 0.0)
        if isinstance(got, Exception):
            raise got
        return got

    def join(self) -> None:
        self._thread.join()
