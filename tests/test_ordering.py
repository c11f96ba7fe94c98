"""Longest scenarios first (fixtures/ordering.py): what xdist hands out first."""

import json

SUITE = """
import pytest, time
def test_short(): time.sleep(0.01)
def test_long(): time.sleep(0.3)
@pytest.mark.skip(reason="never runs")
def test_skipped(): pass
def test_middle(): time.sleep(0.1)
"""


def order(pytester) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "karpenter_e2e.fixtures.ordering")
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_untimed_tests_keep_their_order_and_skipped_ones_go_last(pytester):
    pytester.makepyfile(test_suite=SUITE)
    assert order(pytester) == ["test_short", "test_long", "test_middle", "test_skipped"]


def test_a_run_records_durations_and_the_next_orders_by_them(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering").assert_outcomes(passed=3, skipped=1)
    cached = json.loads((pytester.path / ".pytest_cache/v/karpenter_e2e/durations").read_text())
    assert cached["test_suite.py::test_long"] > cached["test_suite.py::test_middle"] > \
        cached["test_suite.py::test_short"]
    assert "test_suite.py::test_skipped" not in cached
    assert order(pytester) == ["test_long", "test_middle", "test_short", "test_skipped"]


def test_without_the_cache_plugin_nothing_breaks(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "karpenter_e2e.fixtures.ordering")
    result.assert_outcomes(passed=3, skipped=1)


def test_xdist_first_chunks_are_dealt_snake_wise():
    from karpenter_e2e.fixtures.ordering import for_load_scheduling
    ranks = list(range(20))  # 0 is the longest
    # 20 tests, 4 workers: xdist's first chunk is max(20 // 4 // 4, 2) = 2 per worker.
    laid = for_load_scheduling(ranks, 4, None)
    assert [laid[i * 2:i * 2 + 2] for i in range(4)] == [[0, 7], [1, 6], [2, 5], [3, 4]]
    assert laid[8:] == list(range(8, 20))
    # 48 tests, 4 workers: chunks of 3; the third round goes forward again.
    laid = for_load_scheduling(list(range(48)), 4, None)
    assert laid[:3] == [0, 7, 8] and laid[9:12] == [3, 4, 11]
    assert sorted(laid) == list(range(48))
    assert for_load_scheduling(list(range(5)), 4, None) == list(range(5))  # round-robin


def test_workers_collect_the_snake_order(pytester):
    pytester.makepyfile(test_suite="\n".join(f"def test_{i:02d}(): pass" for i in range(12)))
    result = pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering", "-n", "3", "-v")
    result.assert_outcomes(passed=12)


def test_the_workers_lay_the_collection_out_for_load_scheduling(pytester):
    # Each test records the position it ran at on its worker; with 12 equal-cost untimed
    # tests and 3 workers (chunk 2), worker of test_00 also runs test_05 next (snake).
    pytester.makeconftest("""
import json, os
def pytest_collection_finish(session):
    if hasattr(session.config, "workerinput"):
        with open(os.path.join(str(session.config.rootpath), "order.json"), "w") as f:
            json.dump([i.name for i in session.items], f)
""")
    pytester.makepyfile(test_suite="\n".join(f"def test_{i:02d}(): pass" for i in range(12)))
    pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering", "-n", "3").assert_outcomes(passed=12)
    order = json.loads((pytester.path / "order.json").read_text())
    assert order[:6] == ["test_00", "test_05", "test_01", "test_04", "test_02", "test_03"]
