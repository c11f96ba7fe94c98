"""How a run's tests are dealt out: to shards (machines), then to lanes (clusters) on one.

A lane is one cluster with its own Karpenter. Karpenter's disruption loop acts on one
command at a time for the whole cluster, and computes every consolidation on the way, so a
scenario that waits on it (``disruption_loop``) shares its Karpenter with no running test:
it runs on a *serial* lane (one pytest, one test at a time), and so does a test marked
``own_karpenter``. The other tests run on *plain* lanes, ``workers`` at a time (one pytest
with xdist); a serial lane with room takes them too, one at a time.

Tests are dealt longest first to whichever allowed worker frees first (LPT list
scheduling); lane k starts ``k * start_gap`` seconds late, since clusters come up one at a
time. The plan's makespan is the run's expected wall time.

Tests that need Karpenter settings run in *groups*, one per distinct set, on settings lanes:
one pytest per group, one after another, Karpenter restarted with the group's settings in
between (the control plane stays: a cluster's control plane, not its Karpenter, is most of
its CPU). As few settings lanes as keep the plan as short as one lane per group would.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlannedTest:
    nodeid: str
    seconds: float  # measured duration (or its module's typical cost)
    solo: bool = False  # marked own_karpenter
    skipped: bool = False  # will be skipped at collection (costs nothing, needs no cluster)
    chain: bool = False  # marked disruption_loop
    scenario: str = ""  # its scenario marker's id
    # Karpenter settings it needs that differ from the release's defaults (KEY=VALUE):
    # it runs on a serial lane whose Karpenter starts with them.
    settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", tuple(sorted(self.settings)))


# Seconds to stop a lane's Karpenter and start it with another group's settings: 1.2-2.7 s
# at a 1-minute load of 12 on 2 cores (68 s to bring a cluster up then), 6.3 and 12.6 s at
# about 20 (docs/measurements.md).
RESTART_S = 6.0


@dataclass
class Group:
    """Tests that need the same Karpenter settings: one pytest, on a Karpenter started with them."""
    settings: tuple[str, ...]
    tests: list[PlannedTest]

    @property
    def seconds(self) -> float:
        return sum(t.seconds for t in self.tests)


@dataclass
class Lane:
    index: int
    plain_workers: int  # 0: a serial lane
    start: float = 0.0  # when its cluster is expected up, relative to the run's start
    chain: list[PlannedTest] = field(default_factory=list)
    plain: list[PlannedTest] = field(default_factory=list)
    chain_end: float = 0.0
    plain_free: list[float] = field(default_factory=list)
    # A settings lane's groups, run in turn (KEY=VALUE beyond the release's defaults)
    groups: list[Group] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.chain_end = self.start
        self.plain_free = [self.start] * self.plain_workers

    @property
    def serial(self) -> bool:
        return self.plain_workers == 0

    @property
    def tests(self) -> list[PlannedTest]:
        return self.chain + self.plain + [t for g in self.groups for t in g.tests]

    @property
    def settings(self) -> tuple[str, ...]:
        """What its Karpenter is brought up with: a settings lane's first group's settings."""
        return self.groups[0].settings if self.groups else ()

    def place_group(self, group: Group) -> None:
        self.chain_end += (RESTART_S if self.groups else 0.0) + group.seconds
        self.groups.append(group)

    @property
    def makespan(self) -> float:
        return max([self.chain_end, *self.plain_free])

    def place_on_chain(self, test: PlannedTest) -> None:
        self.chain.append(test)
        self.chain_end += test.seconds

    def place_plain(self, test: PlannedTest) -> None:
        earliest = heapq.heappop(self.plain_free)
        heapq.heappush(self.plain_free, earliest + test.seconds)
        self.plain.append(test)


class PlanError(ValueError):
    """A plan that cannot be made (bad shard spec, no lanes)."""


def parse_shard(spec: str) -> tuple[int, int]:
    """'2/4' -> (2, 4): the second of four shards, 1-based."""
    head, sep, tail = spec.partition("/")
    if not sep or not head.isdigit() or not tail.isdigit():
        raise PlanError(f"shard {spec!r}: expected I/N, e.g. 1/4")
    i, n = int(head), int(tail)
    if n < 1 or not 1 <= i <= n:
        raise PlanError(f"shard {spec!r}: I must be between 1 and N (N >= 1)")
    return i, n


def _longest_first(tests: list[PlannedTest]) -> list[PlannedTest]:
    # Ties by node id: every machine computes the same plan from the same inputs.
    return sorted(tests, key=lambda t: (-t.seconds, t.nodeid))


def shard(tests: list[PlannedTest], i: int, n: int) -> list[PlannedTest]:
    """The i-th of n duration-balanced slices (deterministic: the same on every machine).
    Skipped tests are dealt round-robin so each shard reports its share of them."""
    loads = [(0.0, k) for k in range(n)]
    mine: list[PlannedTest] = []
    for t in _longest_first([t for t in tests if not t.skipped]):
        load, k = heapq.heappop(loads)
        heapq.heappush(loads, (load + t.seconds, k))
        if k == i - 1:
            mine.append(t)
    skipped = sorted((t for t in tests if t.skipped), key=lambda t: t.nodeid)
    mine += [t for j, t in enumerate(skipped) if j % n == i - 1]
    return mine


def _simulate(run: list[PlannedTest], clusters: int, workers: int, serial: int,
              start_gap: float) -> list[Lane]:
    """``serial`` lanes run one test at a time (their chain); the rest ``workers`` at once."""
    lanes = [Lane(k, 0 if k < serial else workers, start=k * start_gap)
             for k in range(clusters)]
    for t in run:
        alone = t.solo or t.chain
        slots: list[tuple[float, int, int, Lane]] = []  # (free at, kind, lane index, lane)
        for lane in lanes:
            if lane.serial:
                slots.append((lane.chain_end, 1, lane.index, lane))
            elif not alone:
                slots.append((min(lane.plain_free), 0, lane.index, lane))
        _, kind, _, lane = min(slots, key=lambda s: s[:3])
        (lane.place_plain if kind == 0 else lane.place_on_chain)(t)
    return lanes


def deal(tests: list[PlannedTest], clusters: int, workers: int,
         start_gap: float = 0.0) -> list[Lane]:
    """Deal the tests to ``clusters`` lanes: as many serial lanes as give the shortest plan
    (at least one when a test must run alone), the others running ``workers`` plain tests at
    once. Tests needing Karpenter settings run in groups on settings lanes, on top of the
    ``clusters`` (they are few and short: taking lanes from the rest lengthened the plan from
    240 s to 315 s): as few lanes as keep the plan no longer than one lane per group would.
    Lanes left with no test are dropped (no cluster is started for them); skipped tests go to
    the first lane's chain."""
    if clusters < 1 or workers < 1:
        raise PlanError(f"need at least one cluster and one worker (got {clusters} and {workers})")
    by_settings: dict[tuple[str, ...], list[PlannedTest]] = {}
    for t in _longest_first([t for t in tests if not t.skipped and t.settings]):
        by_settings.setdefault(t.settings, []).append(t)
    groups = [Group(s, ts) for s, ts in sorted(by_settings.items())]
    rest = [t for t in tests if not t.settings or t.skipped]
    lanes = _deal_default(rest, clusters, workers, start_gap) \
        if any(not t.skipped for t in rest) or not groups else []
    if groups:
        options = [_settings_lanes(groups, m, len(lanes), start_gap)
                   for m in range(1, len(groups) + 1)]
        one_each = makespan(lanes + options[-1])
        lanes += next(o for o in options if makespan(lanes + o) <= one_each + 1e-6)
    if not any(not t.skipped for t in rest) and groups:
        lanes[0].chain += sorted((t for t in rest if t.skipped), key=lambda t: t.nodeid)
    return lanes


def _settings_lanes(groups: list[Group], m: int, first: int, start_gap: float) -> list[Lane]:
    """``groups`` on ``m`` serial lanes, longest first to the lane that frees first."""
    lanes = [Lane(first + k, 0, start=(first + k) * start_gap) for k in range(m)]
    for g in sorted(groups, key=lambda g: (-g.seconds, g.settings)):
        min(lanes, key=lambda lane: (lane.chain_end, lane.index)).place_group(g)
    return lanes


def _deal_default(tests: list[PlannedTest], clusters: int, workers: int,
                  start_gap: float) -> list[Lane]:
    run = _longest_first([t for t in tests if not t.skipped])
    alone = any(t.solo or t.chain for t in run)
    plain = any(not (t.solo or t.chain) for t in run)
    low = 1 if alone else 0
    high = clusters if not plain else max(clusters - 1, low)
    spans = {s: makespan(_simulate(run, clusters, workers, s, start_gap))
             for s in range(low, high + 1)}
    serial = min(spans, key=lambda s: (round(spans[s], 6), s))
    lanes = _simulate(run, clusters, workers, serial, start_gap)
    used = [lane for lane in lanes if lane.tests] or lanes[:1]
    used[0].chain += sorted((t for t in tests if t.skipped), key=lambda t: t.nodeid)
    for k, lane in enumerate(used):
        lane.index = k
    return used


def makespan(lanes: list[Lane]) -> float:
    return max((lane.makespan for lane in lanes), default=0.0)
