"""The machine watch: steal from /proc/stat, stalls from a sleep that overran."""

import pytest

from karpenter_e2e.clusters.infra.stalls import MachineWatch, Stall, cpu_jiffies


def test_cpu_jiffies_reads_steal_and_total(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 1 50 800 5 0 4 40 0 0\ncpu0 50 0 25 400 2 0 2 20 0 0\n")
    assert cpu_jiffies(stat) == (40, 1000)
    stat.write_text("intr 1 2 3\n")
    with pytest.raises(ValueError, match="unexpected first line"):
        cpu_jiffies(stat)


def test_cpu_jiffies_of_this_machine():
    steal, total = cpu_jiffies()
    assert 0 <= steal <= total and total > 0


def test_an_overrun_sleep_is_a_stall_and_steal_is_a_share_of_the_window():
    clock = {"mono": 100.0, "wall": 1_700_000_000.0}
    jiffies = iter([(10, 1000), (10, 1500), (110, 2000), (110, 2100)])
    watch = MachineWatch(jiffies=lambda: next(jiffies), monotonic=lambda: clock["mono"],
                         wall=lambda: clock["wall"])
    watch._last = (clock["mono"], clock["wall"])
    watch._jiffies_at = (clock["mono"], *next(jiffies))

    def after(seconds):
        clock["mono"] += seconds
        clock["wall"] += seconds
        watch.tick()

    after(0.25)
    after(0.6)  # late, under the threshold
    assert watch.stalls == []
    after(29.25)  # the VM stopped for 29 s
    assert [(s.at, s.seconds) for s in watch.stalls] == [(1_700_000_000.85, 29.0)]
    for _ in range(20):  # on time, until the next steal count
        after(0.25)
    assert len(watch.stalls) == 1
    assert watch.steal == 100 and watch.total == 1000 and watch.steal_pct == 10.0
    assert watch.as_dict()["longest"] == {"at": "22:13:20", "seconds": 29.0}
    assert "1 stall(s) over 1 s, the longest 29.0 s at 22:13:20 UTC" in watch.line()


def test_a_quiet_watch_runs_on_the_poller_and_says_so():
    watch = MachineWatch(interval=0.05).start()
    try:
        import time
        deadline = time.monotonic() + 5
        while watch._poller.ticks < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert watch._poller.ticks >= 3
    finally:
        watch.stop()
    assert watch.total > 0 and "steal" in watch.line()


def test_a_window_gets_its_own_steal_and_the_stalls_that_overlap_it():
    watch = MachineWatch(jiffies=lambda: (80, 3000), wall=lambda: 120.0)
    watch.samples = [(100.0, 10, 1000), (105.0, 10, 1500), (110.0, 60, 2000), (115.0, 60, 2500)]
    watch.stalls = [Stall(101.0, 2.0), Stall(112.0, 29.0), Stall(200.0, 5.0)]
    steal, stalls = watch.during(106.0, 109.0)  # between samples: the ones around it count
    assert steal == pytest.approx(10.0) and stalls == []
    steal, stalls = watch.during(102.0, 130.0)  # from the sample before it up to now
    assert steal == pytest.approx(70 / 2000 * 100)
    assert stalls == [Stall(101.0, 2.0), Stall(112.0, 29.0)]
    text = watch.describe(111.0, 150.0)
    assert "STALLED 29.0 s" in text and "a timing bound in this window lost that much" in text
    text = watch.describe(150.0, 190.0)  # past the last sample: read up to now
    assert "steal 4.0 % of CPU time; no stall over 1 s" in text
    assert MachineWatch(jiffies=lambda: (0, 0)).during(0, 1) == (None, [])


def test_a_stall_in_a_tests_window_is_marked_on_its_timeline():
    import time

    from karpenter_e2e.fixtures.reporting import mark_stalls
    from karpenter_e2e.fixtures.timeline import Timeline
    timeline = Timeline("expiration", "suites/test_drift.py::test_x", "t1")
    watch = MachineWatch(jiffies=lambda: (0, 100))
    watch.stalls = [Stall(timeline.started - 100, 5.0), Stall(time.time() - 1, 28.4)]
    mark_stalls(timeline, watch)
    assert [m.label for m in timeline.marks] == ["machine stalled 28s"]


def test_a_watch_that_breaks_says_so_and_never_hides_the_run():
    calls = iter([(0, 100)])

    def jiffies():
        return next(calls)  # the second read raises StopIteration: a broken /proc

    watch = MachineWatch(interval=0.01, jiffies=jiffies).start()
    watch._jiffies_at = (watch._jiffies_at[0] - 10, *watch._jiffies_at[1:])  # due at once
    import time
    deadline = time.monotonic() + 5
    while watch._poller.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()  # raises nothing: the run's report is still written
    assert "the watch stopped early: StopIteration" in watch.line()
    assert watch.as_dict()["error"].startswith("StopIteration")
