"""A change to a replayed snapshot (--patch): read, checked against the snapshot before any
cluster starts, and split into what is applied at once and the budgets the release sets."""

import pytest

from karpenter_e2e.checks import change

SNAP = {"NodePool": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                      "metadata": {"name": "general"},
                      "spec": {"disruption": {"budgets": [{"nodes": "10%"}]}}}],
        "PodDisruptionBudget": [{"metadata": {"name": "app", "namespace": "team-1"}}]}


def edits(tmp_path, text):
    f = tmp_path / "change.yaml"
    f.write_text(text)
    return change.load(f, SNAP)


def test_a_pool_edit_is_applied_at_once_and_its_budgets_at_the_release(tmp_path):
    (e,) = edits(tmp_path, """
kind: NodePool
metadata: {name: general}
spec:
  disruption: {consolidationPolicy: WhenEmpty, budgets: [{nodes: "0"}]}
""")
    assert e.ref == "NodePool general"
    assert change.without_budgets(e) == {"spec": {"disruption": {"consolidationPolicy": "WhenEmpty"}}}
    assert change.budgets([e], SNAP["NodePool"][0]) == [{"nodes": "0"}]
    assert change.budgets([e], {"metadata": {"name": "other"}}) is None
    assert "consolidationPolicy: WhenEmpty" in change.describe([e])


def test_a_namespaced_edit_names_its_namespace(tmp_path):
    (e,) = edits(tmp_path, "kind: PodDisruptionBudget\nmetadata: {name: app, namespace: team-1}\n"
                           "spec: {maxUnavailable: 1}\n")
    assert e.namespace == "team-1" and e.patch == {"spec": {"maxUnavailable": 1}}


@pytest.mark.parametrize("text, said", [
    ("kind: NodeClaim\nmetadata: {name: x}\nspec: {}\n", "cannot be changed in a replay"),
    ("kind: NodePool\nmetadata: {name: gpu}\nspec: {weight: 1}\n",
     "no NodePool 'gpu' (its NodePools: general)"),
    ("kind: PodDisruptionBudget\nmetadata: {name: app}\nspec: {}\n", "give metadata.namespace"),
    ("kind: PodDisruptionBudget\nmetadata: {name: app, namespace: team-2}\nspec: {}\n",
     "no PodDisruptionBudget 'app' in team-2"),
    ("kind: NodePool\nmetadata: {name: general}\n", "names nothing to change"),
    ("- just a list\n", "a mapping with kind and metadata.name"),
    ("", "no document in it"),
    ("kind: [unclosed\n", "--patch"),
])
def test_a_change_that_cannot_apply_is_bad_input(tmp_path, text, said):
    with pytest.raises(change.ChangeError) as err:
        edits(tmp_path, text)
    assert said in str(err.value)


def test_the_command_line_says_bad_input_before_any_cluster(tmp_path, capsys):
    from karpenter_e2e.checks import cli
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "snapshot.yaml").write_text("format: 1\ncounts: {NodePool: 1}\n")
    (snap / "NodePool.yaml").write_text("metadata: {name: general}\nspec: {}\n")
    bad = tmp_path / "change.yaml"
    bad.write_text("kind: NodePool\nmetadata: {name: gpu}\nspec: {weight: 1}\n")
    assert cli.main(["--snapshot", str(snap), "--patch", str(bad)]) == cli.EXIT_BAD_INPUT
    assert "the snapshot has no NodePool 'gpu'" in capsys.readouterr().err
    assert cli.main(["examples/workshop-basic", "--patch", str(bad)]) == cli.EXIT_BAD_INPUT
    assert "it needs --snapshot DIR" in capsys.readouterr().err
    assert cli.main(["examples/workshop-basic", "--snapshot-window", "3m"]) == cli.EXIT_BAD_INPUT
    assert "--snapshot-window needs --snapshot-out" in capsys.readouterr().err
