"""docs/scenarios.md is generated from the suites: a test fails when it is stale."""

from karpenter_e2e.rendering import pages, scenarios_page


def test_the_scenarios_page_is_up_to_date():
    assert pages.main(["--check", "scenarios"]) == 0, \
        "docs/scenarios.md is stale: run karpenter-e2e pages"


def test_every_scenario_test_says_what_it_proves():
    from karpenter_e2e.rendering.coverage import scan
    docs = scenarios_page.docstrings()
    missing = [f"{t.file}::{t.name}" for t in scan() if t.scenario and not docs[f"{t.file}::{t.name}"]]
    assert not missing, f"scenario tests without a docstring: {missing}"
