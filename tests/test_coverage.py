"""The input inventory (clusters/karpenter/inputs.py), the scenarios' covers markers and the
coverage table generated from them (docs/coverage.md, rendering/coverage.py). Offline: the module
trees the citations are checked against are read from the Go module cache, skipped when
absent."""

import dataclasses
import os
import re
from pathlib import Path

import pytest

from karpenter_e2e.clusters.karpenter import inputs as inv
from karpenter_e2e.clusters.karpenter.mutants import Mutant
from karpenter_e2e.rendering import coverage, pages

ROOT = Path(__file__).resolve().parent.parent


def test_docs_coverage_md_is_up_to_date():
    assert coverage.OUT.read_text() == coverage.render(), \
        f"docs/coverage.md is stale: run {coverage.COMMAND}"


def test_check_says_stale_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "coverage.md"
    out.write_text("old\n")
    assert pages.write_or_check(out, coverage.render(), True, "coverage") == 1
    assert out.read_text() == "old\n"
    assert "stale; run karpenter-e2e pages" in capsys.readouterr().err
    assert pages.write_or_check(out, coverage.render(), False, "coverage") == 0
    assert pages.write_or_check(out, coverage.render(), True, "coverage") == 0


def test_pages_checks_every_page_and_refuses_an_unknown_one(capsys):
    assert pages.main(["--check"]) == 0
    with pytest.raises(SystemExit) as exc:
        pages.main(["--check", "coverge"])
    assert exc.value.code == 2
    assert "the pages: coverage, oracles, scenarios" in capsys.readouterr().err


def test_every_covers_id_is_in_the_inventory():
    tests = coverage.scan()
    unknown = sorted({f"{t.file}::{t.name}: {c}" for t in tests for c in t.covers
                      if c not in inv.BY_ID})
    assert not unknown, f"covers ids not in clusters/karpenter/inputs.py: {unknown}"
    assert all(t.scenario for t in tests if t.covers)


def test_the_scan_sees_every_scenario_marker_in_suites():
    """The table parses suites/ without importing it: it must see each scenario marker."""
    marked = sum(len(re.findall(r"^@pytest\.mark\.scenario\(", p.read_text(), re.M))
                 for p in (ROOT / "suites").glob("test_*.py"))
    covers = sum(len(re.findall(r"^@pytest\.mark\.covers\(", p.read_text(), re.M))
                 for p in (ROOT / "suites").glob("test_*.py"))
    tests = coverage.scan()
    assert sum(1 for t in tests if t.scenario) == marked
    assert sum(1 for t in tests if t.covers) == covers > 0


def test_inventory_entries_are_well_formed():
    ids = [i.id for i in inv.INPUTS]
    assert len(ids) == len(set(ids)), "duplicate input ids"
    for i in inv.INPUTS:
        assert i.group in inv.GROUPS, i.id
        assert re.fullmatch(r"[a-z]+(\.[A-Za-z_0-9-]+)+", i.id), i.id
        assert i.id.split(".")[0] in {i.group, "gates", "nodeclaim"}, i.id
        assert i.where and all(re.fullmatch(r"(pkg|kwok)/\S+\.(go|yaml)(:[\w.]+)?", w)
                               for w in i.where), i.id
        assert i.module in inv.VERSIONS, i.id
        assert bool(i.kwok) == bool(i.eks), f"{i.id}: a kwok reason needs what eks shows"
        assert len(set(i.proved_by)) == len(i.proved_by), i.id


def test_the_inputs_the_issue_names_are_listed():
    required = {
        "pod.requests", "pod.requests.ephemeral-storage", "pod.requests.extended",
        "pod.initContainers", "pod.sidecarContainers", "pod.overhead", "pod.hostPorts",
        "pod.nodeAffinity.required", "pod.nodeAffinity.preferred", "pod.podAffinity.required",
        "pod.podAffinity.preferred", "pod.podAntiAffinity.required",
        "pod.podAntiAffinity.preferred", "pod.topologySpread.maxSkew",
        "pod.topologySpread.minDomains", "pod.topologySpread.whenUnsatisfiable",
        "pod.topologySpread.nodeAffinityPolicy", "pod.topologySpread.nodeTaintsPolicy",
        "pod.topologySpread.matchLabelKeys", "pod.tolerations.NoSchedule",
        "pod.tolerations.NoExecute", "pod.tolerations.PreferNoSchedule", "pod.priority",
        "pod.doNotDisrupt", "daemonset.nodeSelector", "daemonset.requiredTerms",
        "daemonset.preferredTerms", "daemonset.karpenterLabels", "daemonset.arch",
        "nodepool.template.labels", "nodepool.template.annotations", "nodepool.template.taints",
        "nodepool.template.startupTaints", "nodepool.requirements.minValues",
        "nodepool.limits.cpu", "nodepool.limits.memory", "nodepool.limits.nodes",
        "nodepool.weight", "nodepool.consolidationPolicy.WhenEmpty",
        "nodepool.consolidationPolicy.WhenEmptyOrUnderutilized",
        "nodepool.consolidationPolicy.Balanced", "nodepool.consolidateAfter",
        "nodepool.budgets.nodes", "nodepool.budgets.reasons", "nodepool.budgets.schedule",
        "nodepool.template.expireAfter", "nodepool.template.terminationGracePeriod",
        "nodepool.replicas", "node.doNotDisrupt", "volume.storageClass.topology",
        "volume.pv.nodeAffinity", "options.MIN_VALUES_POLICY.Strict",
        "options.MIN_VALUES_POLICY.BestEffort", "options.BATCH_DURATIONS",
        "gates.SpotToSpotConsolidation", "gates.CapacityBuffer",
    }
    required |= {f"nodepool.requirements.{op}" for op in
                 ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")}
    assert required <= set(inv.BY_ID), sorted(required - set(inv.BY_ID))


def test_every_gate_of_the_pinned_release_is_an_input():
    from karpenter_e2e.clusters.karpenter import features
    gates = {g for g, gate in features.GATES.items()
             if features.semver(gate.since) <= features.semver(inv.VERSIONS[inv.CORE])}
    assert {f"gates.{g}" for g in gates} <= set(inv.BY_ID)


def test_every_mutant_named_proves_a_covered_input():
    table = coverage.rows(coverage.scan(), coverage.load(coverage.MUTANTS_DIR))
    for r in table:
        assert not r.proved or r.scenarios, r.input.id


# ---- the generator on made-up scenarios and mutants ---------------------------------------
# The inventory without its mutants, so that made-up mutants are all there is.
BARE = tuple(dataclasses.replace(i, proved_by=()) for i in inv.INPUTS)


def mutant(name: str, *scenarios: str) -> Mutant:
    return Mutant(name, Path(f"{name}.patch"), f"{name} breaks it", scenarios, "placement",
                  "v1.15.0", "0" * 64)


def test_a_mutant_not_about_the_input_is_listed_via_scenario():
    tests = [coverage.Test("t.py", "test_a", "spread", ("pod.topologySpread.topologyKey",),
                           (), False)]
    [row] = [r for r in coverage.rows(tests, [mutant("m1", "spread"), mutant("m2", "other")], BARE)
             if r.input.id == "pod.topologySpread.topologyKey"]
    assert row.scenarios == ("spread",) and row.proved == () and row.via == ("m1",)


def test_a_proving_mutant_must_name_a_covering_scenario():
    tests = [coverage.Test("t.py", "test_a", "other", ("pod.owner",), (), False)]
    inputs = tuple(dataclasses.replace(i, proved_by=("job-pods-ignored",))
                   if i.id == "pod.owner" else i for i in BARE)
    with pytest.raises(coverage.CoverageError, match="job-pods-ignored names spot-training"):
        coverage.rows(tests, [mutant("job-pods-ignored", "spot-training")], inputs)
    with pytest.raises(coverage.CoverageError, match="no mutants/job-pods-ignored.patch"):
        coverage.rows(tests, [], inputs)


def test_an_unknown_covers_id_is_refused():
    tests = [coverage.Test("t.py", "test_a", "s", ("pod.nope",), (), False)]
    with pytest.raises(coverage.CoverageError, match="pod.nope"):
        coverage.rows(tests, [], BARE)


def test_modes_and_nightly_are_named_only_when_no_covering_test_runs_everywhere():
    every = coverage.Test("t.py", "test_a", "drift", ("pod.owner",), (), False)
    eks = coverage.Test("t.py", "test_b", "drift", ("pod.owner",), ("eks", "aws-sim"), True)
    assert coverage._label("drift", [every, eks]) == "drift"
    assert coverage._label("drift", [eks]) == "drift (aws-sim, eks; nightly)"


def test_an_uncovered_input_says_why():
    text = coverage.render([], [], BARE)
    attach = next(line for line in text.splitlines() if line.startswith("| `volume.attachLimits`"))
    assert "no simulated node can show it" in attach and "eks only" in attach
    hostports = next(line for line in text.splitlines() if line.startswith("| `pod.hostPorts`"))
    assert "not covered yet" in hostports
    assert f"**0 of {len(inv.INPUTS)} inputs are covered**" in text


# ---- each citation against the module trees -------------------------------------------------
def module_tree(module: str) -> Path | None:
    """The pinned release of ``module`` in the Go module cache, else a patch release of the
    same minor (this test never downloads); None when there is neither."""
    cache = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    version = inv.VERSIONS[module]
    exact = cache / f"{module}@{version}"
    if exact.is_dir():
        return exact
    minor = version.rsplit(".", 1)[0]
    found = sorted(cache.glob(f"{module}@{minor}.*"))
    return found[-1] if found else None


def defines(source: str, name: str) -> bool:
    if "." in name:
        recv, method = name.split(".", 1)
        return re.search(rf"^func \(\w+ \*?{recv}(\[\w+\])?\) {method}\b", source, re.M) is not None
    return re.search(rf"^func {name}\b", source, re.M) is not None


@pytest.mark.parametrize("module", sorted(inv.VERSIONS))
def test_every_citation_names_a_file_and_function_of_the_module(module):
    tree = module_tree(module)
    if tree is None:
        pytest.skip(f"{module}@{inv.VERSIONS[module]} is not in the Go module cache")
    wrong = []
    for i in inv.INPUTS:
        if i.module != module:
            continue
        for w in i.where:
            path, _, func = w.partition(":")
            f = tree / path
            if not f.is_file():
                wrong.append(f"{i.id}: no {path}")
            elif func and not defines(f.read_text(), func):
                wrong.append(f"{i.id}: {path} defines no {func}")
    assert not wrong, f"in {tree}: " + "; ".join(wrong)
