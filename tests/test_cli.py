"""The one command, `karpenter-e2e <subcommand>` (runners/cli.py), run as the Makefile runs it
(the package with -m, from the repository's root): its list, each subcommand's own help, its
refusals, exit codes passed on unchanged, and no other user-facing entry point left."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_e2e.runners.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("clusters", "checks", "runners", "rendering", "fixtures")
# The modules still run with -m: processes the harness or its CI starts, not user commands.
# Each: (the file that starts it, why it is not a subcommand).
INTERNAL = {
    "clusters/awssim/server.py": ("clusters/awssim/cluster.py",
                                  "the aws-sim backend's fake-AWS process"),
    "clusters/karpenter/podlogs.py": ("clusters/karpenter/incluster.py",
                                      "follows an in-cluster Karpenter's log beside the run"),
    "clusters/eks/account.py": (".ci/eks-night",
                                "the EKS night (nightly job and rehearsal) readies the account"),
    "clusters/eks/teardown.py": (".ci/eks-night",
                                 "the EKS night tears its cluster down step by step"),
}


def ke2e(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "karpenter_e2e", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_help_lists_every_subcommand_with_a_line_of_its_own():
    run = ke2e("--help")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: karpenter-e2e <subcommand>")
    listed = dict(re.findall(r"^  (\S+) +(.+)$", run.stdout, re.M))
    assert list(listed) == list(COMMANDS)
    assert all(listed[name] == sub.what for name, sub in COMMANDS.items())


@pytest.mark.parametrize("sub", list(COMMANDS))
def test_each_subcommand_has_its_own_help(sub):
    run = ke2e(sub, "--help")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith(f"usage: karpenter-e2e {sub} "), run.stdout[:200]


def test_an_unknown_or_missing_subcommand_is_refused_with_the_list():
    run = ke2e("chek", "examples/workshop-basic")
    assert run.returncode == 2 and "unknown subcommand 'chek'" in run.stderr
    assert all(name in run.stderr for name in COMMANDS)
    run = ke2e()
    assert run.returncode == 2 and not run.stdout
    assert run.stderr.startswith("usage: karpenter-e2e <subcommand>")
    assert all(f"  {name} " in run.stderr for name in COMMANDS)


def test_exit_codes_reach_the_shell_unchanged(tmp_path):
    # check's 2 (bad input: refused before any cluster), and perf's 1 (a figure over its limit)
    run = ke2e("check", "examples/workshop-basic", "--snapshot-window", "3m")
    assert run.returncode == 2, run.stderr[-2000:]
    for name, scale_out in (("from", 20.0), ("to", 45.0)):
        (tmp_path / f"{name}.json").write_text(json.dumps(
            {"scenario": "scale-perf", "values": {"scale_out_s": scale_out}}))
    run = ke2e("perf", str(tmp_path / "from.json"), str(tmp_path / "to.json"))
    assert run.returncode == 1 and "scale_out_s TO/FROM = 2.25 > 1.5" in run.stdout, run.stderr


def test_no_other_module_is_run_with_dash_m_but_the_internal_ones():
    """Every user command is a subcommand; a layer's module keeps a __main__ block only when
    something starts it as a process of its own (INTERNAL, which names what does)."""
    found = sorted(str(p.relative_to(ROOT))
                   for layer in LAYERS for p in (ROOT / layer).rglob("*.py")
                   if p.name == "__main__.py"
                   or re.search(r"^if __name__ == ['\"]__main__['\"]:", p.read_text(), re.M))
    assert found == sorted(INTERNAL)
    for path, (starter, _why) in INTERNAL.items():
        module = "karpenter_e2e." + path.removesuffix(".py").replace("/", ".")
        assert module in (ROOT / starter).read_text(), f"{starter} no longer starts {module}"



def test_the_architecture_page_has_a_row_per_subcommand():
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## The one command\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \| `([\w/]+\.py)` \|", section, re.M)
    assert rows == [(name, sub.what, sub.module.replace(".", "/") + ".py")
                    for name, sub in COMMANDS.items()]
    assert all(path in section for path in INTERNAL)
