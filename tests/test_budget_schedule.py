"""A scheduled disruption budget's window, as Karpenter's Budget.IsActive reads its cron line."""

import calendar

import pytest

from karpenter_e2e.clusters.karpenter import schedule


def utc(y, mo, d, h=0, mi=0, s=0):
    return float(calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)))


def test_a_window_is_open_for_its_duration_after_each_hit():
    # 09:00 every day, for 8 hours
    assert schedule.active("0 9 * * *", "8h", utc(2026, 12, 7, 9, 0))
    assert schedule.active("0 9 * * *", "8h", utc(2026, 12, 7, 16, 59, 59))
    assert not schedule.active("0 9 * * *", "8h", utc(2026, 12, 7, 17, 0))  # (now - 8h, now]
    assert not schedule.active("0 9 * * *", "8h", utc(2026, 12, 7, 8, 59, 59))


def test_fields_lists_ranges_steps_names_and_descriptors():
    monday_10 = utc(2026, 12, 7, 10, 0)  # 2026-12-07 is a Monday
    assert schedule.active("*/15 10 * * MON-FRI", "1m", monday_10)
    assert not schedule.active("*/15 10 * * SAT,SUN", "1m", monday_10)
    assert schedule.active("0,30 10 7 DEC *", "1m", monday_10)
    assert schedule.active("@daily", "11h", monday_10)
    assert not schedule.active("@hourly", "30s", utc(2026, 12, 7, 10, 1))


def test_day_of_month_and_day_of_week_match_either_unless_one_is_a_star():
    monday_the_7th = utc(2026, 12, 7, 0, 0)
    assert schedule.active("0 0 1 * 1", "1m", monday_the_7th)  # not the 1st, but a Monday
    assert not schedule.active("0 0 1 * *", "1m", monday_the_7th)
    assert not schedule.active("0 0 * * 2", "1m", monday_the_7th)


def test_a_line_cron_would_refuse_is_an_error():
    with pytest.raises(ValueError):
        schedule.parse("0 25 * * *")
    with pytest.raises(ValueError):
        schedule.parse("0 9 * *")
