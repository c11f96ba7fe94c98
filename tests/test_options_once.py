"""The cluster options are declared once, in clusters/backends.py (add_options): check and
the runners take theirs from it, with its help, and re-declare none. (The EKS sweep and
teardown, the snapshot command and the fake AWS's server have flags of the same names that
mean their own things: a live cluster's kubeconfig, the fake's seeded cluster.) No cluster."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from karpenter_e2e import checks
from karpenter_e2e.checks import cli as check_cli
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.flags import adder, cli_flag
from karpenter_e2e.runners import explore, mutant_matrix, release_diffs, upgrade_gate

ROOT = Path(__file__).resolve().parent.parent
DECLARED = backends._declared(cli_flag, backends.MODES)


def declared_flags(tree: ast.AST) -> set[str]:
    """The option strings a module passes to an add_argument / addoption / add call."""
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "add_argument", "addoption", "add")}


def test_neither_check_nor_a_runner_declares_a_cluster_option_again():
    ours = {cli_flag(name) for name in DECLARED} | set(DECLARED)
    again = {}
    for path in [ROOT / "checks" / "cli.py", *sorted((ROOT / "runners").glob("*.py"))]:
        found = declared_flags(ast.parse(path.read_text())) & ours
        if found:
            again[str(path.relative_to(ROOT))] = sorted(found)
    assert not again, f"cluster options declared outside clusters/backends.py: {again}"


def help_by_dest(p: argparse.ArgumentParser) -> dict[str, str | None]:
    return {a.dest: a.help for a in p._actions}


@pytest.mark.parametrize("main", [explore.main, release_diffs.main, mutant_matrix.main,
                                  upgrade_gate.main], ids=lambda m: m.__module__)
def test_the_runners_take_cluster_from_backends(main, monkeypatch):
    parsers = []
    original = argparse.ArgumentParser.parse_args

    def caught(self, *args, **kwargs):
        parsers.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    with pytest.raises(SystemExit):
        main([])
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", original)
    (action,) = [a for a in parsers[0]._actions if a.dest == "cluster"]
    assert action.default == "local" and set(action.choices) <= set(backends.MODES)
    assert action.help.startswith("where the cluster runs (default local): local (")


def test_check_takes_its_cluster_options_from_backends_with_its_own_defaults():
    p = check_cli.parser()
    shared = argparse.ArgumentParser()
    backends.add_options(adder(shared.add_argument), modes=checks.MODES)
    theirs, ours = help_by_dest(shared), help_by_dest(p)
    names = ("cluster", "cluster_name", "karpenter_version", "kubernetes_version", "catalogue",
             "karpenter_setting")
    assert {n: ours[n] for n in names} == {n: theirs[n] for n in names}
    args = p.parse_args(["dir"])
    assert (args.cluster, args.cluster_name, args.karpenter_version, args.catalogue) == (
        "local", "karpenter-check", None, None)  # None: the mode's release, expect.yaml's
    with pytest.raises(SystemExit):
        p.parse_args(["dir", "--cluster", "eks"])  # check runs local, aws-sim and kind only


def test_an_option_backends_does_not_declare_is_refused():
    with pytest.raises(ValueError, match="no such cluster option: clusters"):
        backends.add_options(adder(argparse.ArgumentParser().add_argument), only=("clusters",))
