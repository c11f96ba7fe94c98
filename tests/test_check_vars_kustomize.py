"""`check`'s variables (${NAME}, $NAME from --vars, --var-from-env and --var) and a folder
that is a kustomization (rendered with the harness's own kubectl), offline: no cluster
starts. The kustomize tests run the built kubectl (`kubectl kustomize`, well under a second)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from karpenter_e2e.checks import baseline, cli, kustomize, manifests, variables
from karpenter_e2e.checks.manifests import ManifestError
from karpenter_e2e.checks.run import plan
from karpenter_e2e.checks.variables import Variables, VariablesError

REPO = Path(__file__).resolve().parent.parent
OVERLAY = REPO / "tests" / "data" / "check" / "kustomize-limits"
EXAMPLE = REPO / "examples" / "kustomize-overlay"

POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata:
      labels: {team: "${TEAM}", tier: $TIER}  # $IN_A_COMMENT
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {role: "KarpenterNodeRole-${CLUSTER_NAME}", amiSelectorTerms: [{alias: al2023@latest}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
    - name: c
      image: pause
      command: [sh, -c, "echo $HOME $$(POD_NAME) $${TEAM}"]
"""


def given(*pairs: str, env_names=(), environ=None, files=()) -> Variables:
    return variables.load(list(files), list(pairs), list(env_names), environ or {})


def pool_folder(tmp_path: Path) -> Path:
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "all.yaml").write_text(POOL)
    return d


@pytest.fixture(scope="module")
def kubectl() -> Path:
    """The harness's kubectl, as check renders with it (built on first use, as for a
    cluster; cached in ~/.cache/karpenter-e2e/bin)."""
    from karpenter_e2e.clusters.infra import build
    return build.build(build.find("kubectl"))


# ---- substitution --------------------------------------------------------------------------
def test_only_the_given_names_are_filled_as_envsubst_fills_them():
    text = ("a: ${X}-$X-$XY\n"          # $XY is another name, as envsubst reads it
            "b: $$X $${X} $$(K) $(K)\n"  # $$ escapes a name; Kubernetes' $(K), $$(K) stay
            "c: $home ${lower} $UNSET <<TEAM>>  # ${IN_A_COMMENT}\n"
            "# $ALL_COMMENT\n")
    filled = variables.fill(text, {"X": "1", "K": "no"})
    assert filled.text == ("a: 1-1-$XY\n"
                           "b: $X ${X} $$(K) $(K)\n"
                           "c: $home ${lower} $UNSET <<TEAM>>  # ${IN_A_COMMENT}\n"
                           "# $ALL_COMMENT\n")
    assert filled.used == {"X"}
    # unfilled, outside comments: ${any}, $UPPER and <<X>>; a script's $home is not warned
    assert filled.unfilled == [(1, "$XY"), (3, "${lower}"), (3, "$UNSET"), (3, "<<TEAM>>")]


def test_a_value_is_inserted_as_text_and_may_span_lines():
    filled = variables.fill("n: $N\ns: \"$S\"\nafter: ${AFTER}\n",
                            {"N": "3", "S": "a: b", "AFTER": "x\ny"})
    assert filled.text == "n: 3\ns: \"a: b\"\nafter: x\ny\n" and not filled.unfilled


def test_manifests_are_filled_and_what_is_left_is_warned_about(tmp_path):
    d = pool_folder(tmp_path)
    bundle = manifests.load(d, "c1", given("TEAM=data", "UNUSED=1"))
    pool, nodeclass, pod = (m.body for m in bundle.manifests)
    assert pool["spec"]["template"]["metadata"]["labels"] == {"team": "data", "tier": "$TIER"}
    assert nodeclass["spec"]["role"] == "KarpenterNodeRole-c1"
    # $HOME not given: untouched (and warned about: $$HOME says it is meant); Kubernetes'
    # $$(POD_NAME) as written; $${TEAM} escaped
    assert pod["spec"]["containers"][0]["command"][2] == "echo $HOME $$(POD_NAME) ${TEAM}"
    assert bundle.warnings == [f"{d / 'all.yaml'}:7: placeholder $TIER was never filled in",
                               f"{d / 'all.yaml'}:24: placeholder $HOME was never filled in",
                               f"--var UNUSED: used by no manifest of {d}"]


def test_a_number_stays_a_number_and_a_value_breaking_the_yaml_is_named(tmp_path):
    d = pool_folder(tmp_path)
    bundle = manifests.load(d, "c1", given("TEAM=data", "TIER=2"))
    assert bundle.nodepools[0].body["spec"]["template"]["metadata"]["labels"]["tier"] == 2
    with pytest.raises(ManifestError, match=r"all.yaml: line 7, column \d+: invalid YAML: .* "
                                            r"\(with the variables filled in\)"):
        manifests.load(d, "c1", given("TEAM=data", "TIER=[oops"))


def test_cluster_name_is_checks_own(tmp_path):
    env = tmp_path / "team.env"
    env.write_text("CLUSTER_NAME=prod-eu\nTEAM=data\n")
    vs = given("CLUSTER_NAME=mine", files=[env])
    assert vs.values == {"TEAM": "data"}
    assert vs.warnings == [f"{env}:1: ignored: CLUSTER_NAME is check's own, the cluster's name "
                           "(--cluster-name)",
                           "--var CLUSTER_NAME: ignored: CLUSTER_NAME is check's own, the "
                           "cluster's name (--cluster-name)"]
    bundle = manifests.load(pool_folder(tmp_path), "c1", vs)
    assert bundle.of_kind("EC2NodeClass")[0].body["spec"]["role"] == "KarpenterNodeRole-c1"


# ---- where variables come from --------------------------------------------------------------
def test_env_and_yaml_files_then_the_environment_then_var(tmp_path):
    env = tmp_path / "team.env"
    env.write_text("# the team's\n\nexport TEAM=data\nZONE='us-west-2a'\nNOTE=a # b\n"
                   'QUOTED="x=y"\n')
    yml = tmp_path / "more.yaml"
    yml.write_text("VERSION: 1.10\nSPOT: true\nTEAM: ml\nEMPTY:\n")
    vs = given("ZONE=us-west-2c", env_names=["REGION,TEAM"],
               environ={"REGION": "us-west-2", "TEAM": "env-team", "HOME": "/root"},
               files=[env, yml])
    assert vs.values == {"TEAM": "env-team", "ZONE": "us-west-2c", "NOTE": "a # b",
                         "QUOTED": "x=y", "VERSION": "1.10", "SPOT": "true", "EMPTY": "",
                         "REGION": "us-west-2"}
    assert "HOME" not in vs.values  # only the names asked for, never the whole environment
    assert set(vs.named) == {"REGION", "TEAM", "ZONE"}  # a file's names are never "unused"


@pytest.mark.parametrize("name,text,message", [
    ("bad.env", "TEAM=data\n\nno equals sign\n", r"bad.env:3: expected NAME=VALUE, got 'no "
                                                   r"equals sign'"),
    ("bad.env", "1TEAM=data\n", r"bad.env:1: expected NAME=VALUE"),
    ("bad.yaml", "TEAM: data\nZONES: [a, b]\n", r"bad.yaml:2: ZONES: expected a single value, "
                                                r"got a list"),
    ("bad.yaml", "TEAM: data\nnot-a-name: x\n", r"bad.yaml:2: not a variable name"),
    ("bad.yaml", "- TEAM\n", r"bad.yaml:1: expected a mapping of NAME: value"),
    ("bad.yml", "TEAM: [data\n", r"bad.yml:2:1: invalid YAML"),
])
def test_a_malformed_vars_file_names_the_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(VariablesError, match=message):
        given(files=[path])


def test_a_vars_file_beside_the_manifests_is_not_one_of_them(tmp_path):
    d = pool_folder(tmp_path)
    (d / "vars.yaml").write_text("TEAM: data\nTIER: gold\n")
    bundle = manifests.load(d, "c1", given(files=[d / "vars.yaml"]))
    assert len(bundle.manifests) == 3 and bundle.nodepools[0].body["spec"]["template"][
        "metadata"]["labels"] == {"team": "data", "tier": "gold"}


def test_malformed_vars_and_unset_environment_names_are_listed_together(tmp_path):
    with pytest.raises(VariablesError) as err:
        given("TEAM", "=x", "OK=1", env_names=["NOT_SET"], files=[tmp_path / "none.env"])
    assert str(err.value).splitlines() == [
        f"--vars {tmp_path / 'none.env'}: cannot be read (No such file or directory)",
        "--var-from-env NOT_SET: not set in the environment",
        "--var 'TEAM': expected NAME=VALUE, NAME as [A-Za-z_][A-Za-z0-9_]*",
        "--var '=x': expected NAME=VALUE, NAME as [A-Za-z_][A-Za-z0-9_]*"]


def test_bad_vars_are_bad_input_before_anything_starts(tmp_path, capsys):
    bad = tmp_path / "team.env"
    bad.write_text("TEAM data\n")
    junit = tmp_path / "junit.xml"
    code = cli.main([str(pool_folder(tmp_path)), "--vars", str(bad), "--cluster-name",
                     "chk-never", "--junit", str(junit)])
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "bad input, nothing started" in err and f"{bad}:1: expected NAME=VALUE" in err
    assert "bad input" in junit.read_text()


def test_the_parser_takes_vars_var_and_var_from_env():
    args = cli.parser().parse_args(["f/", "--vars", "a.env", "--vars", "b.yaml", "--var", "A=1",
                                    "--var", "B=2", "--var-from-env", "C,D"])
    assert args.vars == [Path("a.env"), Path("b.yaml")] and args.var == ["A=1", "B=2"]
    assert args.var_from_env == ["C,D"]


def test_the_base_gets_the_heads_variables(tmp_path):
    args = cli.parser().parse_args([str(pool_folder(tmp_path)), "--cluster-name", "chk-x"])
    base = tmp_path / "base"
    base.mkdir()
    (base / "all.yaml").write_text(POOL)
    plan_, note = cli._base_plan(baseline.Base("b", base, "folder"), args,
                                 given("TEAM=data", "TIER=gold"))
    assert plan_ is not None and not note
    labels = plan_.bundle.nodepools[0].body["spec"]["template"]["metadata"]["labels"]
    assert labels == {"team": "data", "tier": "gold"}
    # a vars file kept in the head's folder: the base's copy of it is no manifest either
    (args.folder / "vars.yaml").write_text("TEAM: ml\nTIER: gold\n")
    (base / "vars.yaml").write_text("TEAM: old\n")
    plan_, note = cli._base_plan(baseline.Base("b", base, "folder"), args,
                                 given(files=[args.folder / "vars.yaml"]))
    assert plan_ is not None and not note and len(plan_.bundle.manifests) == 3
    assert plan_.bundle.nodepools[0].body["spec"]["template"]["metadata"]["labels"] == {
        "team": "ml", "tier": "gold"}  # the head's values, on both sides


# ---- kustomize ------------------------------------------------------------------------------
def test_a_kustomization_is_rendered_and_only_what_it_lists_is_checked(kubectl):
    bundle = manifests.load(OVERLAY, "c1", given("TEAM=data"))
    assert bundle.kustomization == OVERLAY / "kustomization.yaml"
    by_kind = {m.kind: m for m in bundle.manifests}
    assert sorted(by_kind) == ["Deployment", "EC2NodeClass", "NodePool"]  # not stray.yaml's
    pool = by_kind["NodePool"]
    assert pool.body["spec"]["limits"] == {"cpu": "64"}  # the overlay's patch over the base's 8
    assert pool.body["spec"]["template"]["metadata"]["labels"] == {"team": "data"}
    assert by_kind["EC2NodeClass"].body["spec"]["role"] == "KarpenterNodeRole-c1"
    assert by_kind["Deployment"].body["spec"]["template"]["spec"]["nodeSelector"] == {
        "team": "data"}
    assert pool.where == f"kustomize({OVERLAY})#doc {pool.index} (NodePool/default)"
    assert not bundle.warnings
    p = plan(OVERLAY, None, "web=4", "", "c1", given("TEAM=data"))  # its own expect.yaml
    assert p.expect.expect and p.scale == {"web": 4}


def test_placeholders_left_in_rendered_documents_name_the_document(kubectl):
    bundle = manifests.load(OVERLAY, "c1")
    docs = {m.kind: m for m in bundle.manifests}
    assert bundle.warnings == [
        f"{docs['Deployment'].where}, line 22: placeholder $TEAM was never filled in",
        f"{docs['NodePool'].where}, line 11: placeholder ${{TEAM}} was never filled in"]


def test_a_kustomize_error_is_bad_input_with_kubectls_first_error_line(kubectl, tmp_path,
                                                                        capsys):
    d = tmp_path / "overlay"
    d.mkdir()
    (d / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    (d / "pool.yaml").write_text(POOL)  # a file it does not list: no fallback to the files
    with pytest.raises(ManifestError) as err:
        manifests.load(d)
    assert str(err.value).startswith(f"kustomize({d}): kubectl kustomize failed: error: "
                                     "accumulating resources")
    assert "missing.yaml" in str(err.value) and "\n" not in str(err.value)
    code = cli.main([str(d), "--cluster-name", "chk-never"])
    assert code == cli.EXIT_BAD_INPUT
    assert "kubectl kustomize failed: error: accumulating resources" in capsys.readouterr().err


def test_first_error_prefers_kubectls_error_line():
    assert kustomize.first_error("\nW0101 warning\nerror: bad thing\nusage\n") == \
        "error: bad thing"
    assert kustomize.first_error("panic: x\n") == "panic: x"
    assert kustomize.first_error("") == "no message"


def test_a_nested_kustomization_is_not_rendered_and_is_warned_about(tmp_path):
    d = pool_folder(tmp_path)
    (d / "overlays" / "prod").mkdir(parents=True)
    (d / "overlays" / "prod" / "kustomization.yaml").write_text("resources: [../..]\n")
    bundle = manifests.load(d, "c1", given("TEAM=a", "TIER=b"))
    assert bundle.kustomization is None and len(bundle.manifests) == 3
    nested = d / "overlays" / "prod" / "kustomization.yaml"
    assert bundle.warnings[:1] == [f"{nested}: not rendered: check renders only the kustomization "
                               f"at the top of the folder it is given (check {nested.parent} "
                               "to render this one); the folder's other files are applied as "
                               "written"]


def test_the_kustomize_example_renders_its_overlay(kubectl):
    p = plan(EXAMPLE, None, "", "", "c1")
    pool = p.bundle.nodepools[0].body
    assert pool["spec"]["limits"] == {"cpu": "32"}
    assert {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]
            }["karpenter.sh/capacity-type"] == ["spot"]
    [web] = p.bundle.workloads
    assert web.body["spec"]["replicas"] == 6 and not p.bundle.warnings


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


def test_a_git_base_that_is_an_overlay_gets_the_tree_around_it(kubectl, tmp_path):
    """An overlay's base is commonly ../base: the ref's copy must hold it too."""
    root = tmp_path / "repo"
    (root / "karpenter" / "overlays").mkdir(parents=True)
    shutil.copytree(OVERLAY / "base", root / "karpenter" / "base")
    overlay = root / "karpenter" / "overlays" / "prod"
    shutil.copytree(OVERLAY, overlay, ignore=shutil.ignore_patterns("base"))
    kust = overlay / "kustomization.yaml"
    kust.write_text(kust.read_text().replace("  - base\n", "  - ../../base\n"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    with baseline.resolve("main", overlay) as base:
        assert base.folder is not None and base.folder.name == "prod"
        bundle = manifests.load(base.folder, "c1", given("TEAM=data"))
        assert bundle.nodepools[0].body["spec"]["limits"] == {"cpu": "64"}
        assert str(base.folder).startswith(str(base._tmp))
