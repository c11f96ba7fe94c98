"""`check --base`: the comparison of two check results (pure functions, on hand-made results),
the base resolved from a folder or a git ref (a throwaway repository), and the CLI's handling
of --base, --junit and --summary before any cluster starts. The real run on a cluster is
tests/test_check_examples.py::test_base_reports_the_added_pool.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from karpenter_e2e.checks import baseline, cli, diff, report
from karpenter_e2e.checks.baseline import BaseError

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def node(name, pool, itype="c6a.large", cap="on-demand", zone="us-west-2a", price=0.0765):
    return {"name": name, "nodepool": pool, "instance_type": itype, "capacity_type": cap,
            "zone": zone, "price": price, "labels": {}, "created": 0.0}


def pod(name, workload, node_name="", phase="Running"):
    return {"namespace": "workshop", "name": name, "workload": workload, "phase": phase,
            "node": node_name, "requests": {}, "labels": {}}


def result(pools, nodes, pods, passed=True, expectations=None, folder="head"):
    exps = expectations if expectations is not None else [
        {"expectation": "pending: 0", "ok": passed, "seen": "0 Pending", "phase": "scale-out"}]
    return {"folder": folder, "run_id": f"check-{folder}", "mode": "local", "passed": passed,
            "settled": True, "settle_error": "", "karpenter_version": "v1.15.0",
            "expectations": exps, "started": 100.0, "finished": 130.0,
            "snapshot": {"at": 0.0, "nodes": nodes, "pods": pods,
                         "pools": [{"name": p, "limits": {}, "resources": {},
                                    "consolidation": ""} for p in pools]}}


WEB = "Deployment/workshop/web"
BATCH = "Job/workshop/batch"


@pytest.fixture
def pair():
    """Base: web on two on-demand nodes of `default`, batch on one node of `batch`.
    Head: `spot` added, web moved onto it (three spot nodes, one pod Pending); batch and its
    pool as they were; `default` empty."""
    base = result(["default", "batch"],
                  [node("n1", "default"), node("n2", "default"), node("b1", "batch", "m6i.large",
                                                                       price=0.096)],
                  [pod("w1", WEB, "n1"), pod("w2", WEB, "n2"), pod("j1", BATCH, "b1")],
                  folder="base")
    head = result(["default", "batch", "spot"],
                  [node("s1", "spot", "c6a.large", "spot", "us-west-2b", 0.03),
                   node("s2", "spot", "c6a.large", "spot", "us-west-2c", 0.03),
                   node("s3", "spot", "c5.large", "spot", "us-west-2c", 0.035),
                   node("b1", "batch", "m6i.large", price=0.096)],
                  [pod("w1", WEB, "s1"), pod("w2", WEB, "s2"), pod("w3", WEB, "s3"),
                   pod("w4", WEB, phase="Pending"), pod("j1", BATCH, "b1")])
    return base, head


def rows_by_name(rows):
    return {(r["kind"], r["name"]): r for r in rows}


def test_compare_says_what_was_added_changed_and_kept(pair):
    rows = diff.compare(*pair)
    by = rows_by_name(rows)
    spot, default, web = by[("NodePool", "spot")], by[("NodePool", "default")], by[("workload", WEB)]
    assert spot["status"] == "added" and spot["base"] is None and spot["head"]["nodes"] == 3
    assert spot["head"]["capacity_types"] == {"spot": 3}
    assert spot["head"]["zones"] == {"us-west-2b": 1, "us-west-2c": 2}
    assert spot["head"]["cost_per_hour"] == 0.095
    assert spot["head"]["cost_per_month"] == round(0.095 * 730, 2)
    assert default["status"] == "changed" and default["base"]["nodes"] == 2
    assert default["head"]["nodes"] == 0 and default["head"]["cost_per_hour"] == 0
    assert web["status"] == "changed"
    assert (web["base"]["pending"], web["head"]["pending"]) == (0, 1)
    assert web["base"]["instance_types"] == {"c6a.large": 2}
    assert web["head"]["instance_types"] == {"c6a.large": 2, "c5.large": 1}
    assert by[("NodePool", "batch")]["status"] == "unchanged"
    assert by[("workload", BATCH)]["status"] == "unchanged"
    assert by[("NodePool", "batch")]["head"]["pending"] is None  # a pool has no Pending pods


def test_rows_are_ordered_total_then_changes_then_unchanged(pair):
    rows = diff.compare(*pair)
    assert rows[0]["kind"] == "total" and rows[0]["status"] == "changed"
    statuses = [r["status"] for r in rows[1:]]
    assert statuses == sorted(statuses, key=diff.ORDER.__getitem__)
    assert statuses[0] == "added" and statuses[-1] == "unchanged"
    total = rows[0]
    assert (total["base"]["nodes"], total["head"]["nodes"]) == (3, 4)
    assert (total["base"]["pending"], total["head"]["pending"]) == (0, 1)


def test_a_removed_pool_and_a_base_with_nothing(pair):
    base, head = pair
    rows = rows_by_name(diff.compare(head, base))  # the other way round: spot removed
    assert rows[("NodePool", "spot")]["status"] == "removed"
    assert rows[("NodePool", "spot")]["head"] is None
    added = diff.compare(None, head)  # the folder did not exist at the base
    assert {r["status"] for r in added if r["kind"] != "total"} == {"added"}
    assert added[0]["base"] is None and "nodes" in added[0]["changed"]


def test_an_unknown_price_is_no_cost():
    head = result(["p"], [node("n", "p", price=None)], [pod("a", WEB, "n")])
    row = rows_by_name(diff.compare(head, head))[("NodePool", "p")]
    assert row["head"]["cost_per_hour"] is None and row["head"]["cost_per_month"] is None
    assert row["status"] == "unchanged"


def test_identical_sides_are_all_unchanged(pair):
    _, head = pair
    rows = diff.compare(head, head)
    assert {r["status"] for r in rows} == {"unchanged"}
    md = diff.markdown(diff.summary(head, head, "`main`"))
    assert "→" not in md and "Unchanged: " in md


def test_markdown_puts_changes_in_the_table_and_summarises_the_rest(pair):
    base, head = pair
    s = diff.summary(base, head, "`origin/main` (0123456789ab) `manifests`",
                     timings={"base_s": 20.0, "head_s": 25.0})
    md = diff.markdown(s)
    lines = md.splitlines()
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| | nodes |")
    assert table[1].startswith("| **total** | 3 → **4** |")
    assert table[2].startswith("| pool `spot` (added) | – → **3** |")
    assert "$0.0950" in table[2] and "$69.35" in table[2]  # 0.095 $/h x 730 h
    assert any(line.startswith(f"| workload `{WEB}` |") and "0 → **1**" in line
               for line in table)
    assert not any("batch" in line for line in table)  # unchanged: not in the table
    unchanged = next(line for line in lines if line.startswith("Unchanged: "))
    assert "pool `batch` (1 nodes, $0.0960/h)" in unchanged and f"workload `{BATCH}`" in unchanged
    assert "**Head PASSED (1 of 1 expectations held)**; base PASSED" in md
    assert "Wall time: base 20.0s, head 25.0s" in md
    assert len(md) < 3000  # a pull-request comment, not a report


def test_markdown_names_the_heads_failures_and_a_base_note(pair):
    base, head = pair
    head = {**head, "passed": False, "expectations": [
        {"expectation": "pending: 0", "ok": False, "seen": "1 Pending", "phase": "scale-out"}]}
    md = diff.markdown(diff.summary(None, head, "`main`", "`x` does not exist at `main`"))
    assert "**Head FAILED (0 of 1 expectations held)**; base: not checked" in md
    assert "Failed on head: `pending: 0`" in md
    assert "Base: `x` does not exist at `main`" in md


def test_many_instance_types_are_cut_short():
    nodes = [node(f"n{i}", "p", f"c{i}.large") for i in range(5)]
    head = result(["p"], nodes, [pod(f"a{i}", WEB, f"n{i}") for i in range(5)])
    md = diff.markdown(diff.summary(None, head, "`main`"))
    assert "+2 more" in md


# ---- JUnit ----------------------------------------------------------------------------------
def test_junit_has_one_testcase_per_expectation_and_one_for_settling():
    r = result(["p"], [], [], passed=False, expectations=[
        {"expectation": "pending: 0", "ok": True, "seen": "0", "phase": "scale-out"},
        {"expectation": "nodes: {max: 0}", "ok": False, "seen": "2 nodes", "phase": "scale-in"}])
    suite = ET.fromstring(report.junit(r)).find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["settled", "scale-out: pending: 0",
                                              "scale-in: nodes: {max: 0}"]
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    assert cases[2].find("failure").text == "seen: 2 nodes" and cases[1].find("failure") is None


def test_junit_names_the_oracles_and_the_releases_suspect_differences():
    r = result(["p"], [], [], passed=False, expectations=[])
    r["oracles"] = {"judged": ["daemons-fit"], "findings": [
        {"oracle": "daemons-fit", "what": "1 DaemonSet pod(s) do not fit", "evidence": ["d1"]}]}
    r["compare"] = {"a": {"release": "v1.14.3"}, "b": {"release": "v1.15.0"}, "differences": [
        {"field": "nodeclaims", "key": "", "a": 1, "b": 2, "status": "suspect", "why": ""},
        {"field": "zones", "key": "a", "a": 1, "b": None, "status": "noted", "why": ""}]}
    cases = ET.fromstring(report.junit(r)).find("testsuite").findall("testcase")
    by_name = {c.get("name"): c for c in cases}
    assert "[daemons-fit] 1 DaemonSet pod(s) do not fit: d1" == \
        by_name["oracles"].find("failure").text
    assert by_name["decisions: v1.14.3 -> v1.15.0"].find("failure").text == "nodeclaims: 1 -> 2"


def test_junit_error_is_one_testcase_in_error():
    root = ET.fromstring(report.junit_error("x/", "bad input: x/: no such folder\nmore"))
    case = root.find("testsuite/testcase")
    assert case.find("error").get("message") == "bad input: x/: no such folder"


# ---- the base from a folder or a git ref ----------------------------------------------------
def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository whose first commit has manifests/ (a pool file and expect.yaml in a
    subfolder too) and whose second adds a file; `added/` exists only in the work tree."""
    root = tmp_path / "repo"
    (root / "manifests" / "sub").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "manifests" / "pool.yaml").write_text("first\n")
    (root / "manifests" / "sub" / "app.yaml").write_text("app\n")
    (root / "other.txt").write_text("not in the base folder\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    git(root, "tag", "v1")
    (root / "manifests" / "pool.yaml").write_text("second\n")
    (root / "manifests" / "new.yaml").write_text("new\n")
    (root / "added").mkdir()
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "two")
    return root


def test_a_git_ref_is_that_commits_copy_of_the_same_path(repo):
    with baseline.resolve("v1", repo / "manifests") as base:
        files = {p.relative_to(base.folder).as_posix(): p.read_text()
                 for p in base.folder.rglob("*") if p.is_file()}
        assert files == {"pool.yaml": "first\n", "sub/app.yaml": "app\n"}
        assert base.folder.name == "manifests" and base.described.startswith("`v1` (")
        tmp = base._tmp
        assert tmp is not None and tmp.exists()
    assert not tmp.exists()  # removed on leaving the with


def test_head_tilde_and_a_folder_given_from_inside_the_repository(repo, monkeypatch):
    monkeypatch.chdir(repo / "manifests")
    with baseline.resolve("HEAD~1", Path(".")) as base:
        assert (base.folder / "pool.yaml").read_text() == "first\n"


def test_a_path_missing_at_the_ref_is_added(repo):
    base = baseline.resolve("v1", repo / "added")
    assert base.folder is None and base._tmp is None
    assert "`added`" in base.described


def test_an_unknown_ref_and_no_repository_are_errors(repo, tmp_path):
    with pytest.raises(BaseError, match="no such git ref"):
        baseline.resolve("no-such-branch", repo / "manifests")
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(BaseError, match="not in a git repository"):
        baseline.resolve("main", outside)


def test_a_folder_wins_over_a_ref(tmp_path):
    (tmp_path / "b").mkdir()
    base = baseline.resolve(str(tmp_path / "b"), tmp_path)
    assert base.folder == tmp_path / "b" and base._tmp is None


# ---- the CLI, before any cluster starts -----------------------------------------------------
def test_parser_takes_base_junit_and_summary():
    args = cli.parser().parse_args(["f/", "--base", "origin/main", "--junit", "j.xml",
                                    "--summary", "s.md"])
    assert (args.base, args.junit, args.summary) == ("origin/main", Path("j.xml"), Path("s.md"))
    assert cli.parser().parse_args(["f/"]).base is None


def test_an_unknown_ref_is_bad_input_with_a_junit_error(repo, tmp_path, capsys):
    junit, summary = tmp_path / "out" / "junit.xml", tmp_path / "out" / "summary.md"
    code = cli.main([str(repo / "manifests"), "--base", "nope", "--junit", str(junit),
                     "--summary", str(summary)])
    assert code == cli.EXIT_BAD_INPUT
    assert "no such git ref" in capsys.readouterr().err
    assert ET.parse(junit).find("testsuite/testcase/error") is not None
    assert "**No verdict**, bad input: --base nope: no folder of that name and no such git ref" \
        in summary.read_text()


def test_not_a_repository_is_bad_input(tmp_path, capsys):
    code = cli.main([str(tmp_path), "--base", "main"])
    assert code == cli.EXIT_BAD_INPUT
    assert "not in a git repository" in capsys.readouterr().err


def test_the_base_copy_is_removed_on_ctrl_c(repo, monkeypatch):
    seen = []

    def interrupted(args, base):
        seen.append(base._tmp)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cli.main([str(repo / "manifests"), "--base", "v1"])
    assert seen and seen[0] is not None and not seen[0].exists()


def test_base_plan_for_added_invalid_and_fewer_workloads(tmp_path):
    args = cli.parser().parse_args([str(EXAMPLES / "diff-head"), "--scale",
                                    "inflate=3,workshop/other=2", "--cluster-name", "chk-x"])
    plan_, note = cli._base_plan(baseline.Base("main", None, "`main`"), args)
    assert plan_ is None and "everything on the head is added" in note
    plan_, note = cli._base_plan(baseline.Base("b", EXAMPLES / "diff-base", "folder"), args)
    assert plan_ is not None and plan_.scale == {"inflate": 3}
    assert note == "not scaled on the base, which has no such workload: workshop/other"
    assert plan_.expect.expect  # the base's own expect.yaml
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.yaml").write_text("kind: Provisioner\n")
    plan_, note = cli._base_plan(baseline.Base("b", broken, "folder"), args)
    assert plan_ is None and note.startswith("its manifests are not valid")


def test_the_examples_pair_differs_by_one_pool():
    base = {p.name for p in (EXAMPLES / "diff-base").iterdir()}
    head = {p.name for p in (EXAMPLES / "diff-head").iterdir()}
    assert base == {"expect.yaml", "inflate.yaml", "nodepool.yaml"}
    assert head == {"expect.yaml", "inflate.yaml", "nodepools.yaml"}
    assert (EXAMPLES / "diff-base" / "inflate.yaml").read_text() == \
        (EXAMPLES / "diff-head" / "inflate.yaml").read_text()


# ---- run_pair: the order of things on one cluster, with a stand-in for Check -----------------
class FakeCheck:
    """Records what run_pair asks of each check; ``outcomes`` maps a plan to a result or an
    exception to raise."""

    made: list = []
    outcomes: dict = {}
    downs: list = []

    def __init__(self, plan_, backend, reports_dir, keep_cluster=False, reuse=None):
        self.plan, self.keep, self.reuse = plan_, keep_cluster, reuse
        self.timings, self.emptying_s = {"cluster_up_s": 1.0}, 2.0
        self.picture = self.announce_kept = True
        FakeCheck.made.append(self)

    def run(self):
        outcome = FakeCheck.outcomes[self.plan]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def take_down(self):
        FakeCheck.downs.append(self.plan)


@pytest.fixture
def fake_check(monkeypatch):
    from karpenter_e2e.checks import run
    FakeCheck.made, FakeCheck.outcomes, FakeCheck.downs = [], {}, []
    monkeypatch.setattr(run, "Check", FakeCheck)
    return run


def test_run_pair_checks_the_base_kept_then_the_head_on_it(fake_check, pair):
    FakeCheck.outcomes = {"base": pair[0], "head": pair[1]}
    got = fake_check.run_pair("base", "head", None, Path("r"))
    first, second = FakeCheck.made
    assert (first.plan, first.keep, first.reuse, first.picture) == ("base", True, False, False)
    assert (second.plan, second.keep, second.reuse) == ("head", False, True)
    assert got.base is pair[0] and got.head is pair[1] and not FakeCheck.downs
    assert got.timings["emptying_s"] == 2.0 and set(got.timings) == {
        "cluster_up_s", "base_s", "emptying_s", "head_s"}


def test_run_pair_reports_a_rejected_base_and_still_checks_the_head(fake_check, pair):
    from karpenter_e2e.checks.manifests import ManifestError
    FakeCheck.outcomes = {"base": ManifestError("pool.yaml (document 0): rejected"),
                          "head": pair[1]}
    got = fake_check.run_pair("base", "head", None, Path("r"))
    assert got.base is None and got.head is pair[1]
    assert got.base_note.startswith("the API server rejected the base's manifests")


def test_run_pair_takes_the_cluster_down_when_the_head_breaks(fake_check, pair):
    FakeCheck.outcomes = {"base": pair[0], "head": KeyboardInterrupt()}
    with pytest.raises(KeyboardInterrupt):
        fake_check.run_pair("base", "head", None, Path("r"))
    assert FakeCheck.downs == ["base"]  # the base's check kept it; run_pair takes it down
    FakeCheck.made, FakeCheck.downs = [], []
    with pytest.raises(KeyboardInterrupt):
        fake_check.run_pair("base", "head", None, Path("r"), keep_cluster=True)
    assert FakeCheck.downs == []  # --keep-cluster: left up (the head's check emptied it)


def test_run_pair_without_a_base_is_one_check(fake_check, pair):
    FakeCheck.outcomes = {"head": pair[1]}
    got = fake_check.run_pair(None, "head", None, Path("r"), base_note="added")
    assert [c.plan for c in FakeCheck.made] == ["head"] and FakeCheck.made[0].reuse is False
    assert got.base is None and got.base_note == "added"


def test_each_sides_oracle_verdict_is_in_the_summary(pair):
    from karpenter_e2e.checks import diff
    base, head = pair
    head["oracles"] = {"judged": ["plans-honest"], "not_applicable": {}, "errors": {},
                       "findings": [{"oracle": "plans-honest", "what": "a NodePool's limits "
                                     "were exceeded", "evidence": ["default: c1 ..."]}]}
    base["oracles"] = {"judged": ["plans-honest"], "not_applicable": {}, "errors": {},
                       "findings": []}
    text = diff.markdown(diff.summary(base, head, "folder base"))
    assert "Oracles: head broke `plans-honest`; base all held" in text, text
