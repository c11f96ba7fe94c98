"""The nightly's release pairs and its table, on rows made by hand."""

import pytest

from karpenter_e2e.rendering.release_diffs import markdown
from karpenter_e2e.runners import matrix, release_diffs

SERVED = ["v1.12.1", "v1.13.0", "v1.14.0", "v1.14.3", "v1.15.0"]


def test_pairs_are_consecutive_served_releases():
    assert release_diffs.chosen_pairs("", 0, SERVED)[0] == ("v1.12.1", "v1.13.0")
    assert len(release_diffs.chosen_pairs("", 0, SERVED)) == 4
    assert release_diffs.chosen_pairs("", 2, SERVED) == [("v1.14.0", "v1.14.3"),
                                                          ("v1.14.3", "v1.15.0")]
    assert release_diffs.chosen_pairs("v1.13.0:v1.15.0", 0, SERVED) == [("v1.13.0", "v1.15.0")]


@pytest.mark.parametrize("spec", ["v1.14.3", "v1.14.3:", "v1.14.3:v9.9.9"])
def test_a_bad_pair_is_bad_input(spec):
    with pytest.raises(matrix.BadInput):
        release_diffs.chosen_pairs(spec, 0, SERVED)


def test_one_minor_for_every_pair_must_be_inside_both_ranges():
    """1.30 is inside every served release's range; 1.36 is not inside v1.0.8's, and the
    refusal names that release's range, before any cluster starts."""
    release_diffs.outside_ranges([("v1.0.8", "v1.1.5"), ("v1.12.1", "v1.13.0")], "1.30")
    with pytest.raises(matrix.BadInput, match=r"v1\.0\.8 supports Kubernetes 1\.25-1\.31"):
        release_diffs.outside_ranges([("v1.0.8", "v1.1.5")], "1.36")
    with pytest.raises(matrix.BadInput, match="not a minor"):
        release_diffs.outside_ranges([("v1.0.8", "v1.1.5")], "latest")


def diff(status, field="nodeclaims", key="", a=1, b=2, why=""):
    return {"status": status, "field": field, "key": key, "a": a, "b": b, "why": why}


def test_the_table_counts_and_lists_every_difference():
    table = {"v1.14.3 -> v1.15.0": [
        {"folder": "workshop-basic", "exit": 0, "oracles": {"v1.14.3": [], "v1.15.0": []},
         "differences": [diff("expected", why="consolidation-price-filter (v1.15.0)"),
                         diff("noted", "events", "Nominated", 5, 6)]},
        {"folder": "capacity-split", "exit": 1, "oracles": {"v1.15.0": ["it-settles"]},
         "differences": [diff("suspect", "instance_types", "c5.large", 2, 0)]},
        {"folder": "explore (1 cases, seed s)", "exit": 0, "oracles": {}, "differences": [],
         "cases": [{"case": 0, "found": "clean", "minimal": ""}]}]}
    text = markdown(table, "now")
    assert "| v1.14.3 -> v1.15.0 | 3 | 1 | 1 | 1 | it-settles on v1.15.0 (capacity-split) | – |" in text
    assert "| capacity-split | suspect | instance_types | c5.large | 2 | 0 | – |" in text
    assert text.index("suspect | instance_types") < text.index("expected | nodeclaims")
    assert release_diffs.failed(table["v1.14.3 -> v1.15.0"])
    clean = [{"folder": "x", "exit": 0, "oracles": {}, "differences": [diff("noted")]}]
    assert not release_diffs.failed(clean)
    assert release_diffs.failed([{**clean[0], "exit": 3}])  # no verdict is no pass


def test_runs_of_several_jobs_join_into_one_table_oldest_pair_first(tmp_path):
    import json
    for name, pair in (("b", "v1.14.3 -> v1.15.0"), ("a", "v1.13.0 -> v1.14.0")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "release-diffs.json").write_text(json.dumps({pair: [
            {"folder": "workshop-basic", "exit": 0, "oracles": {}, "differences": []}]}))
    assert release_diffs.join([tmp_path / "b", tmp_path / "a"], tmp_path / "out") == 0
    text = (tmp_path / "out" / "release-diffs.md").read_text()
    assert text.index("| v1.13.0 -> v1.14.0 |") < text.index("| v1.14.3 -> v1.15.0 |")
    assert release_diffs.join([tmp_path / "nothing"], tmp_path / "out") == 2


def test_a_folder_the_older_release_cannot_run_is_not_diffed_and_says_why(tmp_path):
    from karpenter_e2e.runners.upgrade_gate import EXAMPLES
    row = release_diffs.check_pair(EXAMPLES / "capacity-buffer", "v1.13.0", "v1.14.0", tmp_path,
                                   "local")
    assert row["exit"] is None and "v1.13.0 lacks CapacityBuffer" in row["not_diffed"][0]
    assert not release_diffs.failed([row])
    text = release_diffs.markdown({"v1.13.0 -> v1.14.0": [row]}, "Started now")
    assert "| v1.13.0 -> v1.14.0 | 0 | 0 | 0 | 0 |" in text
    assert "- capacity-buffer: not diffed: Karpenter v1.13.0 lacks CapacityBuffer" in text


def test_a_check_that_crashed_before_judging_is_no_verdict_not_a_clean_pair(tmp_path):
    """An import error in the check's child exits 1, as a failed expectation does; on
    2026-12-06 such rows (v1.0.8 -> v1.1.5) read as 0 differences. No report, no verdict."""
    row = {"folder": "workshop-basic", "exit": 1, "judged": False, "differences": [],
           "oracles": {}}
    assert release_diffs.failed([row])
    text = release_diffs.markdown({"v1.0.8 -> v1.1.5": [row]}, "Started now")
    assert "workshop-basic (exit 1, no report)" in text
    case = {"folder": "explore", "exit": 0, "differences": [], "oracles": {},
            "cases": [{"case": 0, "found": "no verdict (exit 1, no report)", "minimal": ""}]}
    assert release_diffs.failed([case])
    assert "explore case 0" in release_diffs.markdown({"p": [case]}, "Started now")
