"""The mutant matrix's own logic: patch files, bad input, and what counts as a kill."""

import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.karpenter import mutants
from karpenter_e2e.rendering.mutant_matrix import markdown
from karpenter_e2e.runners.mutant_matrix import (
    ROOT,
    Cell,
    Row,
    classify,
    known_scenarios,
    verdict,
)

PATCH = """# regression: limits ignored
# scenarios: limits, provisioning
# family: limits
# version: v1.15.0
--- a/hello.go
+++ b/hello.go
@@ -1,3 +1,3 @@
 package hello
 
-const Limit = 10
+const Limit = 1000
"""


def test_shipped_mutants_parse_and_name_known_scenarios():
    found = mutants.load()
    assert len(found) >= 12
    known = known_scenarios()
    for m in found:
        assert m.version == "v1.15.0", m.name
        assert m.patched or m.fault, m.name
        assert set(m.scenarios) <= known, (m.name, m.scenarios)
        assert m.family in {"limits", "consolidation", "drift", "placement", "capacity",
                            "lifecycle"}, m.name


def test_header_and_selection(tmp_path):
    (tmp_path / "limits-ignored.patch").write_text(PATCH)
    m = mutants.parse(tmp_path / "limits-ignored.patch")
    assert (m.name, m.scenarios, m.family) == ("limits-ignored", ("limits", "provisioning"), "limits")
    assert mutants.select([m], []) == [m]
    with pytest.raises(ClusterError, match="unknown mutant nope; known: limits-ignored"):
        mutants.select([m], ["nope"])
    (tmp_path / "bad.patch").write_text("# regression: x\n--- a/x\n+++ b/x\n")
    with pytest.raises(ClusterError, match="mutant bad: .* has no scenarios, family, version"):
        mutants.parse(tmp_path / "bad.patch")


def test_a_patch_that_does_not_apply_names_the_mutant_and_the_hunk(tmp_path, monkeypatch):
    module = tmp_path / "module"
    module.mkdir()
    (module / "hello.go").write_text("package hello\n\nconst Limit = 10\n")
    module.chmod(0o555)
    (tmp_path / "ok.patch").write_text(PATCH)
    # A relative path, as `make mutants` (MUTANT_DIR=mutants) gives it: git apply runs in the
    # copy, so the patch must be found from there too.
    monkeypatch.chdir(tmp_path)
    out = mutants.apply(mutants.parse(Path("ok.patch")), module, tmp_path / "copy")
    assert "1000" in (out / "hello.go").read_text()
    assert "= 10\n" in (module / "hello.go").read_text()  # the original is untouched
    (tmp_path / "stale.patch").write_text(PATCH.replace("const Limit = 10", "const Limit = 20"))
    with pytest.raises(ClusterError, match=r"mutant stale: does not apply .*hello\.go:1"):
        mutants.apply(mutants.parse(tmp_path / "stale.patch"), module, tmp_path / "copy2")


def row(scenario, outcome, when="call", kind="assertion"):
    return {"nodeid": "x", "scenario": scenario, "when": when, "outcome": outcome, "kind": kind,
            "exception": "WaitTimeout", "message": "timed out", "where": ""}


@pytest.mark.parametrize("rows,status", [
    ([row("limits", "passed", kind="")], "survived"),
    ([row("limits", "failed")], "killed"),
    ([row("limits", "passed", kind=""), row("limits", "failed", when="teardown")], "killed"),
    ([row("limits", "failed", kind="aborted")], "aborted"),
    ([row("limits", "failed", kind="error")], "error"),
    ([row("limits", "failed", when="setup")], "error"),  # setup says nothing about the mutant
    ([row("limits", "skipped", when="setup", kind="")], "skipped"),
    ([], "not run"),
])
def test_only_an_assertion_outside_setup_is_a_kill(rows, status):
    assert classify(rows, "limits").status == status


def test_a_kill_needs_every_claimed_scenario_and_a_passing_control():
    control = Row("control", claimed=["a", "b"], cells={"a": Cell("survived"), "b": Cell("survived")})
    both = Row("m", claimed=["a", "b"], cells={"a": Cell("killed"), "b": Cell("killed")})
    one = Row("m", claimed=["a", "b"], cells={"a": Cell("killed"), "b": Cell("survived")})
    none = Row("m", claimed=["a"], cells={"a": Cell("error")})
    assert verdict(both, control) == "killed"
    assert verdict(one, control) == "partial"
    assert verdict(none, control) == "survived"
    failing_control = Row("control", claimed=["a"], cells={"a": Cell("killed")})
    assert verdict(Row("m", claimed=["a"], cells={"a": Cell("killed")}), failing_control) == \
        "inconclusive"
    assert verdict(Row("m", claimed=["a"], error="does not build"), control) == "invalid"
    aborted = Row("m", claimed=["a"], cells={"a": Cell("aborted")})
    assert verdict(aborted, Row("control", cells={"a": Cell("survived")}), "aborted") == "killed"
    assert verdict(Row("m", claimed=["a"], cells={"a": Cell("aborted")}),
                   Row("control", cells={"a": Cell("survived")})) == "survived"


def test_an_oracle_mutant_is_killed_only_by_its_oracle_and_survives_without_the_oracles():
    control = Row("control", claimed=["a"], cells={"a": Cell("survived")})

    def case(message, without):
        row = Row("m", claimed=["a"], cells={"a": Cell("killed", message)})
        bare = Row("m-no-oracles", claimed=["a"], cells={"a": Cell(without)})
        return verdict(row, control, "killed", "daemons-fit", bare)
    by_it = "[call] OraclesFailed: Karpenter broke daemons-fit (oracles judge every run; ...)"
    by_two = "[call] OraclesFailed: Karpenter broke daemons-fit, plans-honest (oracles ...)"
    assert case(by_it, "survived") == "killed"
    assert case(by_it, "killed") == "survived"
    assert case(by_two, "survived") == "survived"  # not its oracle alone
    assert case("AssertionError: 3 nodes, expected 2", "survived") == "survived"


def test_a_generic_mutant_is_killed_only_when_its_oracle_fails_it_with_the_asserts_off():
    control = Row("control", claimed=["a"], cells={"a": Cell("survived")})

    def case(alone_status, alone_message, own="AssertionError: the daemon never ran"):
        row = Row("m", claimed=["a"], cells={"a": Cell("killed", own)})
        loose = Row("m-asserts-off", claimed=["a"], cells={"a": Cell(alone_status, alone_message)})
        return verdict(row, control, "killed", generic="daemons-fit", loose=loose)
    by_it = "[call] OraclesFailed: Karpenter broke daemons-fit (oracles judge every run; ...)"
    by_two = "[call] OraclesFailed: Karpenter broke daemons-fit, plans-honest (oracles ...)"
    by_other = "[call] OraclesFailed: Karpenter broke plans-honest (oracles judge every run; ...)"
    assert case("killed", by_it) == "killed"
    assert case("killed", by_two) == "killed"  # the generic verdict may name others beside it
    assert case("killed", by_other) == "survived"
    assert case("survived", "") == "survived"  # its asserts alone caught it
    assert case("killed", "[teardown] LeakedNodes: n1") == "survived"
    # the unmutated build must pass the scenario with the asserts off too
    failing = Row("control-1", claimed=["a"], cells={"a": Cell("killed", by_it)})
    row = Row("m", claimed=["a"], cells={"a": Cell("killed", "AssertionError: x")})
    loose = Row("m-asserts-off", claimed=["a"], cells={"a": Cell("killed", by_it)})
    assert verdict(row, control, generic="daemons-fit", loose=loose,
                   loose_control=failing) == "inconclusive"
    errored = Row("m-asserts-off", claimed=["a"], error="does not build")
    assert verdict(Row("m", claimed=["a"], cells={"a": Cell("killed")}), control,
                   generic="daemons-fit", loose=errored) == "invalid"


def test_matrix_markdown_names_findings():
    result = {"score": "1/2", "wall_s": 90, "jobs": 2,
              "controls": [{"name": "control", "regression": "plain", "status": "passed",
                            "run_s": 5, "cells": {"limits": {"status": "survived"}}}],
              "mutants": [
                  {"name": "a", "regression": "r", "status": "killed", "claimed": ["limits"],
                   "error": "", "build_s": 1, "run_s": 2,
                   "cells": {"limits": {"status": "killed", "message": "x | y", "where": ""}}},
                  {"name": "b", "regression": "r", "status": "invalid", "claimed": ["limits"],
                   "error": "mutant b: does not build: x.go:3: undefined", "build_s": 0,
                   "run_s": 0, "cells": {}}]}
    text = markdown(result)
    assert text.startswith("# Mutant kill matrix: 1/2 killed")
    assert "x \\| y" in text
    assert "**b** invalid: mutant b: does not build: x.go:3: undefined" in text


def test_bad_input_stops_the_matrix_before_anything_runs(tmp_path):
    (tmp_path / "x.patch").write_text(PATCH.replace("limits, provisioning", "no-such-scenario"))
    for args, message in ((["--mutants", "nope"], "unknown mutant nope"),
                          (["--mutant-dir", str(tmp_path)], "unknown scenario ids no-such-scenario"),
                          (["--mutant-dir", str(tmp_path / "missing")], "no mutant folder")):
        proc = subprocess.run([sys.executable, "-m", "karpenter_e2e", "mutants", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr


def test_a_fault_has_options_and_no_diff(tmp_path):
    (tmp_path / "no-arm64.fault").write_text(
        "# regression: no arm64 types\n# scenarios: graviton\n# family: placement\n"
        "# version: v1.15.0\n"
        "# fault: --karpenter-catalogue-without=arch=arm64 --karpenter-timeouts=provision=45\n")
    m = mutants.parse(tmp_path / "no-arm64.fault")
    assert not m.patched and m.fault == ("--karpenter-catalogue-without=arch=arm64",
                                         "--karpenter-timeouts=provision=45")
    (tmp_path / "empty.fault").write_text("# regression: x\n# scenarios: a\n# family: b\n# version: v\n")
    with pytest.raises(ClusterError, match="without a '# fault: <options>' line"):
        mutants.parse(tmp_path / "empty.fault")


def test_a_mutant_that_does_not_build_names_the_compiler_line(tmp_path, monkeypatch):
    """A real `go build` of the pinned module with a broken patch: the error names the mutant
    and the compiler's file:line, and nothing is cached."""
    from karpenter_e2e.clusters.infra import build

    (tmp_path / "broken.patch").write_text(
        "# regression: does not compile\n# scenarios: provisioning\n# family: lifecycle\n"
        "# version: v1.15.0\n"
        "--- a/kwok/main.go\n+++ b/kwok/main.go\n@@ -31,3 +31,3 @@\n func main() {\n"
        "-\tctx, op := operator.NewOperator()\n+\tctx, op := operator.NewOperator(1)\n"
        " \tinstanceTypes, err := kwok.ConstructInstanceTypes(ctx)\n")
    m = mutants.parse(tmp_path / "broken.patch")
    with pytest.raises(ClusterError, match=r"mutant broken: does not build: .*main\.go:32"):
        build.build_mutant(m)
    assert not build.mutant_path(m).exists()


CRD_PATCH = """# regression: a CEL rule lost
# scenarios: validation
# family: placement
# version: v1.15.0
--- a/crds/pool.yaml
+++ b/crds/pool.yaml
@@ -1,3 +1,2 @@
 rules:
-  - no-hostname
   - in-has-values
--- a/hello.go
+++ b/hello.go
@@ -1,3 +1,3 @@
 package hello
 
-const Limit = 10
+const Limit = 1000
"""


def test_a_crd_mutant_patches_copies_of_the_crd_folders_only(tmp_path):
    """The cluster installs CRDs from these copies: only the CRD hunks apply, the module and
    its other files stay as they are."""
    module = tmp_path / "module"
    (module / "crds").mkdir(parents=True)
    (module / "crds" / "pool.yaml").write_text("rules:\n  - no-hostname\n  - in-has-values\n")
    (module / "hello.go").write_text("package hello\n\nconst Limit = 10\n")
    (tmp_path / "crd.patch").write_text(CRD_PATCH)
    m = mutants.parse(tmp_path / "crd.patch")
    assert mutants.touched(m) == ["crds/pool.yaml", "hello.go"]
    [out] = mutants.apply_to_dirs(m, module, ["crds"], tmp_path / "copy")
    assert (out / "pool.yaml").read_text() == "rules:\n  - in-has-values\n"
    assert "no-hostname" in (module / "crds" / "pool.yaml").read_text()
    assert not (tmp_path / "copy" / "hello.go").exists()
    (module / "crds" / "pool.yaml").write_text("rules: []\n")  # the hunk no longer applies
    with pytest.raises(ClusterError, match="mutant crd: its CRD hunks do not apply"):
        mutants.apply_to_dirs(m, module, ["crds"], tmp_path / "copy2")


def test_the_shipped_crd_mutant_changes_the_installed_nodepool_crd(tmp_path):
    from karpenter_e2e.clusters.infra import build, versions
    m = mutants.parse(ROOT / "mutants" / "nodepool-crd-rules-dropped.patch")
    module = build.download_module("sigs.k8s.io/karpenter", m.version, versions.GO_TOOLCHAIN)
    dirs = mutants.apply_to_dirs(m, module, ["kwok/charts/crds", "kwok/apis/crds"], tmp_path / "c")
    crd = (dirs[0] / "karpenter.sh_nodepools.yaml").read_text()
    assert 'label "kubernetes.io/hostname" is restricted' in \
        (module / "kwok/charts/crds/karpenter.sh_nodepools.yaml").read_text()
    assert "requirements with operator 'In' must have a value defined" not in crd


def test_provider_mutants_run_in_aws_sim_only(tmp_path):
    core = tmp_path / "limits-ignored.patch"
    core.write_text(PATCH)
    provider = tmp_path / "spot-ignored.patch"
    provider.write_text(PATCH.replace("# version: v1.15.0\n", "# version: v1.15.0\n# module: "
                                      "github.com/aws/karpenter-provider-aws\n"))
    c, p = mutants.parse(core), mutants.parse(provider)
    assert (c.module, p.module) == (mutants.CORE, mutants.AWS_PROVIDER)
    assert c.runs_in("local") and c.runs_in("aws-sim") and p.runs_in("aws-sim")
    assert not p.runs_in("local") and not p.runs_in("kind")
    # By default each mode runs what only it can build; core mutants run in aws-sim by name.
    assert mutants.select([c, p], []) == [c]
    assert mutants.select([c, p], [], "aws-sim") == [p]
    assert mutants.select([c, p], ["limits-ignored", "spot-ignored"], "aws-sim") == [c, p]
    with pytest.raises(ClusterError, match="spot-ignored patches github.com/aws/karpenter-provider-aws, "
                                           "which local mode does not build: run it with --cluster aws-sim"):
        mutants.select([c, p], ["spot-ignored"])
    provider.write_text(PATCH.replace("# family", "# module: example.com/other\n# family"))
    with pytest.raises(ClusterError, match="module: 'example.com/other'; one of"):
        mutants.parse(provider)


def test_a_provider_patch_is_refused_outside_aws_sim():
    from types import SimpleNamespace

    from karpenter_e2e.clusters import backends
    opts = SimpleNamespace(cluster="local", cluster_name="x", karpenter_version="v1.15.0",
                           karpenter_patch=str(mutants.MUTANTS_DIR / "spot-interruption-ignored.patch"))
    with pytest.raises(ClusterError, match="patches github.com/aws/karpenter-provider-aws, which "
                                           "local mode does not build"):
        backends.create(backends.ClusterOptions.of(opts))
    opts.cluster = "aws-sim"
    sim = backends.create(backends.ClusterOptions.of(opts))
    assert sim.mutant.name == "spot-interruption-ignored" and sim.mode == "aws-sim"


def test_the_aws_sim_matrix_names_its_clusters_and_passes_the_mode(tmp_path, monkeypatch):
    from karpenter_e2e.runners import mutant_matrix
    m = mutants.parse(mutants.MUTANTS_DIR / "spot-interruption-ignored.patch")
    matrix = mutant_matrix.Matrix([m], tmp_path, 1, [], mode="aws-sim")
    seen = {}

    def run(child, timeout=None):
        seen["cmd"] = child.cmd
        return 1

    monkeypatch.setattr(matrix.children, "run", run)
    matrix.run_one(matrix.rows[m.name], m)
    cmd = seen["cmd"]
    assert cmd[cmd.index("--karpenter-cluster") + 1] == "aws-sim"
    assert cmd[cmd.index("--karpenter-cluster-name") + 1] == "sim-mut-spot-interruption-ignored"
    assert cmd[cmd.index("--karpenter-patch") + 1] == str(m.path)
    assert matrix.binary_name == "karpenter-aws"


def test_the_control_runs_in_parts_that_fit_the_deadline_and_cover_every_scenario():
    from karpenter_e2e.runners.mutant_matrix import CONTROL_PART_S, measured_seconds, parts
    seconds = {"a": 300.0, "b": 250.0, "c": 150.0, "d": 90.0, "e": 500.0}
    split = parts(["a", "b", "c", "d", "e", "nightly"], seconds, limit=400)
    assert sorted(s for p in split for s in p) == ["a", "b", "c", "d", "e", "nightly"]
    assert ["e"] in split and ["nightly"] in split  # too long, or never measured: alone
    for p in split:
        if len(p) > 1:
            assert sum(seconds[s] for s in p) <= 400
    assert len(split) == 4  # a+d, b+c, e, nightly
    # The shipped suites: every measured scenario is counted, and the plain control of the
    # whole matrix is cut into parts none of which is planned past CONTROL_PART_S.
    measured = measured_seconds()
    assert {"provisioning", "pod-do-not-disrupt", "limits"} <= set(measured)
    whole = parts(sorted(measured), measured)
    assert all(sum(measured[s] for s in p) <= CONTROL_PART_S for p in whole if len(p) > 1)
    assert sorted(s for p in whole for s in p) == sorted(measured)


def test_a_runs_release_and_control_plane_are_built_before_its_deadline_starts(tmp_path,
                                                                                monkeypatch):
    """A control asking for another Kubernetes minor built it inside its own child's 1500 s
    deadline on a fresh machine (25 min of cold build beside the runs) and ran out of time."""
    from karpenter_e2e.runners import mutant_matrix
    m = mutants.parse(mutants.MUTANTS_DIR / "match-label-keys-ignored.patch")
    assert mutant_matrix.setup_value(m.setup, "kubernetes-version") == "v1.33.13"
    matrix = mutant_matrix.Matrix([m], tmp_path, 1, [])
    events = []
    monkeypatch.setattr(mutant_matrix, "prebuild", lambda column: events.append(("build", column)))
    monkeypatch.setattr(matrix.children, "run",
                        lambda child, timeout=None: events.append(("run", child.tag)) or 0)
    setup, ctl, name, part = matrix.control_parts[0]
    matrix.run_one(ctl, None, setup, (name, part))
    matrix.run_one(matrix.rows[m.name], m, m.setup)
    assert events == [("build", f"{m.version}@v1.33.13"), ("run", name),
                      ("build", f"{m.version}@v1.33.13"), ("run", m.name)]


def test_a_run_whose_build_fails_does_not_start_and_says_why(tmp_path, monkeypatch):
    from karpenter_e2e.runners import mutant_matrix
    m = mutants.parse(mutants.MUTANTS_DIR / "match-label-keys-ignored.patch")
    matrix = mutant_matrix.Matrix([m], tmp_path, 1, [])

    def fail(column):
        raise ClusterError("go build of kube-apiserver v1.33.13 failed")
    monkeypatch.setattr(mutant_matrix, "prebuild", fail)
    monkeypatch.setattr(matrix.children, "run", lambda *a, **k: pytest.fail("started"))
    matrix.run_one(matrix.rows[m.name], m, m.setup)
    row = matrix.rows[m.name]
    assert row.error == "its build failed: go build of kube-apiserver v1.33.13 failed"
    assert row.rc == -1


@pytest.mark.parametrize("setup, value", [
    (("--karpenter-version", "v1.14.3", "--karpenter-upgrade-to", "v1.15.0"), "v1.14.3"),
    (("--karpenter-version=v1.12.1",), "v1.12.1"),
    (("--karpenter-setting", "CapacityBuffer=true"), None),
    (("--karpenter-version",), None),
])
def test_setup_values(setup, value):
    from karpenter_e2e.runners.mutant_matrix import setup_value
    assert setup_value(setup, "karpenter-version") == value
