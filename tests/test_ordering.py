"""Longest scenarios first (fixtures/ordering.py): what xdist hands out first; only when
the ini asks (karpenter_e2e_order = durations), never in a host project by default."""

import json

SUITE = """
import pytest, time
def test_short(): time.sleep(0.01)
def test_long(): time.sleep(0.3)
@pytest.mark.skip(reason="never runs")
def test_skipped(): pass
def test_middle(): time.sleep(0.1)
"""


ASKED = "[pytest]\nkarpenter_e2e_order = durations\n"


def order(pytester) -> list[str]:
    result = pytester.runpytest("--collect-only", "-q", "-p", "karpenter_e2e.fixtures.ordering")
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_untimed_tests_keep_their_order_and_skipped_ones_go_last(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(ASKED)
    assert order(pytester) == ["test_short", "test_long", "test_middle", "test_skipped"]


def test_a_run_records_durations_and_the_next_orders_by_them(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(ASKED)
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


def test_a_durations_file_orders_a_fresh_clone(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(ASKED + "karpenter_e2e_durations = d.json\n")
    # test_long: untimed, 20
    (pytester.path / "d.json").write_text(json.dumps({"test_suite.py::test_middle": 30,
                                                      "test_suite.py::test_short": 25}))
    assert order(pytester) == ["test_middle", "test_short", "test_long", "test_skipped"]


def test_a_missing_durations_file_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nkarpenter_e2e_durations = nowhere.json\n")
    result = pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering")
    assert result.ret == 4 and "nowhere.json does not exist" in result.stdout.str() + result.stderr.str()


def test_a_host_project_keeps_its_order_and_its_cache(pytester):
    """Without the ini option the plugin neither reorders a project's tests nor records
    their durations, even once they have run."""
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering").assert_outcomes(passed=3, skipped=1)
    assert not (pytester.path / ".pytest_cache/v/karpenter_e2e").exists()
    assert order(pytester) == ["test_short", "test_long", "test_skipped", "test_middle"]


def test_a_misspelt_order_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nkarpenter_e2e_order = longest\n")
    result = pytester.runpytest("-p", "karpenter_e2e.fixtures.ordering")
    assert result.ret == 4 and "karpenter_e2e_order = 'longest'" in \
        result.stdout.str() + result.stderr.str()
