"""The object view reads what the API server has not written yet as empty."""

from karpenter_e2e.clusters.api import objects as view


def test_a_fresh_object_reads_as_empty():
    fresh = {"metadata": {"name": "c1"}}
    assert view.name(fresh) == "c1" and view.labels(fresh) == {} and not view.deleting(fresh)
    assert view.status(fresh) == {} and view.conditions(fresh) == []
    assert view.condition(fresh, "Initialized") is None and not view.is_true(fresh, "Ready")
    assert view.status({"metadata": {"name": "x"}, "status": None}) == {}


def test_conditions_by_type():
    claim = {"metadata": {"name": "c", "deletionTimestamp": "2026-12-02T00:00:00Z"},
             "status": {"conditions": [{"type": "Launched", "status": "True"},
                                       {"type": "Initialized", "status": "Unknown"}]}}
    assert view.deleting(claim) and view.is_true(claim, "Launched")
    assert view.condition_status(claim, "Initialized") == "Unknown"
    assert not view.is_true(claim, "Initialized") and view.condition_status(claim, "Drifted") is None
