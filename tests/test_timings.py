"""The timestamps scenarios read: always set by the API server, or a harness error."""

import pytest


def test_the_stamps_a_scenario_reads_are_always_there_or_a_harness_error():
    from karpenter_e2e.fixtures.timings import created_at, stamp, turned_at
    claim = {"metadata": {"name": "c1", "creationTimestamp": "2026-12-06T09:00:00Z"},
             "status": {"conditions": [{"type": "Initialized", "status": "True",
                                        "lastTransitionTime": "2026-12-06T09:00:05Z"}]}}
    assert turned_at(claim, "Initialized") - created_at(claim) == 5
    with pytest.raises(ValueError, match="no condition Drifted"):
        turned_at(claim, "Drifted")
    with pytest.raises(ValueError, match="c2's creationTimestamp: no timestamp"):
        created_at({"metadata": {"name": "c2"}})
    with pytest.raises(ValueError, match="x: no timestamp"):
        stamp(None, "x")
