"""What the machine took away from a run: the hypervisor's steal time, and stalls.

Every timing bound on Karpenter (an expiry within 10 s, a consolidation within
consolidateAfter plus a margin) assumes the machine runs. On a VM it may not: the host can run
other guests on our vCPUs (steal, counted in /proc/stat) or stop the whole VM for a while
(seen from inside as a short sleep that overran). ``MachineWatch`` samples both on the one
poller thread, so a red timing assert can be read against what the machine did in its window.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from karpenter_e2e.clusters.api.poller import Poller

INTERVAL_S = 0.25
# A sleep of INTERVAL_S that overran by more than this is a stall: under make soak on 2 cores
# (1-minute load up to 21) such sleeps overran by 0.19 s at most (docs/measurements.md).
STALL_S = 1.0
STEAL_EVERY_S = 5.0


def _utc(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def cpu_jiffies(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs since boot, from /proc/stat's first line."""
    fields = stat.read_text().split("\n", 1)[0].split()
    if fields[:1] != ["cpu"] or len(fields) < 9:
        raise ValueError(f"{stat}: unexpected first line {' '.join(fields)!r}")
    counters = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return counters[7], sum(counters)


@dataclass(frozen=True)
class Stall:
    at: float  # wall-clock time the overrun sleep began
    seconds: float  # how far past its interval it woke


@dataclass
class MachineWatch:
    interval: float = INTERVAL_S
    threshold: float = STALL_S
    jiffies: Callable[[], tuple[int, int]] = cpu_jiffies
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    stalls: list[Stall] = field(default_factory=list)
    steal: int = 0  # steal jiffies over the watch
    total: int = 0  # all jiffies over the watch
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (wall, steal, total)
    _last: tuple[float, float] = (0.0, 0.0)
    _jiffies_at: tuple[float, int, int] = (0.0, 0, 0)
    _poller: Poller | None = None
    error: BaseException | None = None  # what ended the watch early, if anything

    def tick(self) -> None:
        mono, wall = self.monotonic(), self.wall()
        overrun = mono - self._last[0] - self.interval
        if overrun > self.threshold:
            self.stalls.append(Stall(self._last[1], round(overrun, 2)))
        self._last = (mono, wall)
        if mono - self._jiffies_at[0] >= STEAL_EVERY_S:
            self._count_jiffies(mono)

    def _count_jiffies(self, mono: float) -> None:
        steal, total = self.jiffies()
        self.steal += steal - self._jiffies_at[1]
        self.total += total - self._jiffies_at[2]
        self._jiffies_at = (mono, steal, total)
        self.samples.append((self.wall(), steal, total))

    def start(self) -> MachineWatch:
        mono = self.monotonic()
        self._last = (mono, self.wall())
        steal, total = self.jiffies()
        self._jiffies_at = (mono, steal, total)
        self.samples.append((self.wall(), steal, total))
        self._poller = Poller(self.tick, self.interval, name="machine-watch",
                              wait_first=True).start()
        return self

    def stop(self) -> MachineWatch:
        if self._poller is not None:
            self._poller.stop()
            self.error = self._poller.error  # said in line(): the run's report is written
            self._poller = None
            if self.error is None:
                self._count_jiffies(self.monotonic())
        return self

    @property
    def steal_pct(self) -> float:
        return 100.0 * self.steal / self.total if self.total else 0.0

    @property
    def longest(self) -> Stall | None:
        return max(self.stalls, key=lambda s: s.seconds, default=None)

    def during(self, start: float, end: float) -> tuple[float | None, list[Stall]]:
        """The steal share (None before two samples span it) and the stalls that overlap
        [start, end], wall-clock seconds; the steal is over the samples around the window."""
        stalls = [s for s in self.stalls if s.at < end and s.at + s.seconds + self.interval > start]
        before = [x for x in self.samples if x[0] <= start] or self.samples[:1]
        # A window that ends after the last sample (a test just over) is read up to now.
        after = [x for x in self.samples if x[0] >= end] or [(self.wall(), *self.jiffies())]
        if not before or not after or after[0][2] <= before[-1][2]:
            return None, stalls
        return 100.0 * (after[0][1] - before[-1][1]) / (after[0][2] - before[-1][2]), stalls

    def describe(self, start: float, end: float) -> str:
        steal, stalls = self.during(start, end)
        share = "steal not sampled yet" if steal is None else f"steal {steal:.1f} % of CPU time"
        if not stalls:
            return f"the machine meanwhile: {share}; no stall over {self.threshold:.0f} s"
        listed = ", ".join(f"{s.seconds:.1f} s at {_utc(s.at)}"
                           for s in stalls)
        return (f"the machine meanwhile: {share}; STALLED {sum(s.seconds for s in stalls):.1f} s "
                f"({listed} UTC): a 0.25 s sleep of this process woke that late, so the machine "
                f"or the process stopped; a timing bound in this window lost that much")

    def as_dict(self) -> dict:
        return {"steal_pct": round(self.steal_pct, 2), "stalls": len(self.stalls),
                "stalled_s": round(sum(s.seconds for s in self.stalls), 2),
                "longest": None if self.longest is None else {
                    "at": _utc(self.longest.at),
                    "seconds": self.longest.seconds},
                "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}"}

    def line(self) -> str:
        longest = self.longest
        stalls = (f"{len(self.stalls)} stall(s) over {self.threshold:.0f} s, the longest "
                  f"{longest.seconds:.1f} s at {_utc(longest.at)}"
                  " UTC" if longest else f"no stall over {self.threshold:.0f} s")
        text = f"steal {self.steal_pct:.1f} % of CPU time; {stalls}"
        if self.error is not None:
            text += f" (the watch stopped early: {type(self.error).__name__}: {self.error})"
        return text
