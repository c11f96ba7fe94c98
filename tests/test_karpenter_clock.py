"""Karpenter's clocks (clusters/karpenter/clock.py): the bounds built from them are the values
the scenarios, the oracles and check were measured against, so a change to one of Karpenter's
constants, or to a derivation, shows here first. No cluster."""

import pytest

from karpenter_e2e.clusters.karpenter import clock


def test_the_derived_bounds_keep_the_values_they_were_measured_with():
    assert {name: getattr(clock, name) for name in (
        "DISRUPTION_ROUND_S", "DISRUPTION_TOLERANCE_S", "DISRUPTION_ACT_S", "SETTLE_MARGIN_S",
        "NEXT_BATCH_S", "NOMINATION_WINDOW_S", "DECISION_BOUND_S", "SETTLE_QUIET_S")} == {
        "DISRUPTION_ROUND_S": 25,  # a 10 s poll + the 15 s validation
        "DISRUPTION_TOLERANCE_S": 35,  # + a KWOK node's termination
        "DISRUPTION_ACT_S": 45,  # + what a busy 2-core machine adds (disruption-controls)
        "SETTLE_MARGIN_S": 30,  # + a scheduling round (the it-settles oracle, check's settle)
        "NEXT_BATCH_S": 20,  # two batches of at most 10 s
        "NOMINATION_WINDOW_S": 20,
        "DECISION_BOUND_S": 20,
        "SETTLE_QUIET_S": 10,  # one batch (the suites' and check's settle waits)
    }


@pytest.mark.parametrize("text, seconds", [("30s", 30), ("1m30s", 90), ("720h", 2592000),
                                           ("500ms", 0.5), ("Never", None)])
def test_go_durations_as_karpenters_api_writes_them(text, seconds):
    assert clock.go_duration(text) == seconds


def test_anything_else_is_no_go_duration():
    with pytest.raises(ValueError, match="not a Go duration"):
        clock.go_duration("30 seconds")
