"""When a NodePool's scheduled disruption budget is in force, as Karpenter reads it.

Budget.IsActive (pkg/apis/v1/nodepool.go): the schedule is a standard cron line read in UTC
(github.com/robfig/cron/v3 ParseStandard: minute hour day-of-month month day-of-week, or a
descriptor such as @daily), and a budget with a schedule is active when the schedule hit
within its duration before now: ``schedule.Next(now - duration) <= now``.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass

from karpenter_e2e.clusters.karpenter.clock import go_duration

DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
               "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
               "@hourly": "0 * * * *"}
MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
DAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
# (lowest, highest, names) of each field, as robfig/cron's bounds
FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, MONTHS), (0, 6, DAYS))


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_day: bool  # day-of-month or day-of-week is "*": both must match (else either)

    def hits(self, t: float) -> bool:
        """The schedule fires at the minute ``t`` (UTC) begins."""
        g = time.gmtime(t)
        weekday = (g.tm_wday + 1) % 7  # Python: Monday 0; cron: Sunday 0
        dom, dow = g.tm_mday in self.days, weekday in self.weekdays
        return g.tm_min in self.minutes and g.tm_hour in self.hours and \
            g.tm_mon in self.months and ((dom and dow) if self.any_day else (dom or dow))


def parse(line: str) -> Cron:
    """A standard cron line (5 fields) or a descriptor; ValueError when it is neither."""
    text = DESCRIPTORS.get(line.strip().lower(), line.strip())
    parts = text.split()
    if len(parts) != 5:
        raise ValueError(f"cron {line!r}: expected 5 fields or a descriptor")
    sets, stars = [], []
    for part, (low, high, names) in zip(parts, FIELDS, strict=True):
        sets.append(frozenset(_field(part, low, high, names)))
        stars.append(part in ("*", "?"))
    minutes, hours, days, months, weekdays = sets
    return Cron(minutes, hours, days, months, weekdays, any_day=stars[2] or stars[4])


def _field(part: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in part.split(","):
        span, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if span in ("*", "?"):
            first, last = low, high
        elif "-" in span:
            a, b = span.split("-", 1)
            first, last = _value(a, names), _value(b, names)
        else:
            first = _value(span, names)
            last = high if step_text else first
        if not low <= first <= last <= high or step < 1:
            raise ValueError(f"cron field {part!r} outside {low}-{high}")
        out.update(range(first, last + 1, step))
    return out


def _value(text: str, names: dict[str, int]) -> int:
    return names[text.lower()] if text.lower() in names else int(text)


def active(schedule: str, duration: str, at: float) -> bool:
    """Karpenter's Budget.IsActive at ``at``: the schedule hit at a minute in
    (at - duration, at]."""
    cron, span = parse(schedule), go_duration(duration) or 0.0
    minute = at - at % 60
    while minute > at - span:
        if cron.hits(minute):
            return True
        minute -= 60
    return False
