"""`karpenter-e2e <subcommand> [options]`: the harness's one command (the Makefile's targets
call it). Each subcommand is one module's ``main(argv)``, imported only when it runs, so
``karpenter-e2e --help`` stays fast; its exit code is the command's (check's 0/1/2/3).

The modules are named here as strings, not imported: the dispatcher reaches every layer
(``durations`` is the pytest glue's), while the layers' contracts (pyproject.toml) keep the
runners' own code off fixtures. The runners start a subcommand in a child process with
``child``.
"""

from __future__ import annotations

import importlib
import sys
from typing import NamedTuple

PROG = "karpenter-e2e"


class Subcommand(NamedTuple):
    module: str  # under karpenter_e2e, with a main(argv) -> int
    what: str  # the one line --help shows


COMMANDS = {name: Subcommand(module, what) for name, module, what in [
    ("e2e", "runners.e2e", "the suites on several local clusters at once, one report"),
    ("check", "checks.cli", "what Karpenter does with your manifests, on a fresh cluster"),
    ("snapshot", "checks.snapshot", "a live cluster's state, read-only, for check --snapshot"),
    ("synthetic", "checks.synthetic", "a generated snapshot of N nodes and M pods"),
    ("cluster", "clusters.cli", "a cluster by hand: up, down, status, logs, build"),
    ("docker", "clusters.kind.docker", "Docker for kind: found, or installed and started here"),
    ("rehearsal", "clusters.rehearsal.cli",
     "an EKS-like cluster here (kind, the AWS provider's chart, a fake AWS) for the EKS night"),
    ("matrix", "runners.matrix", "the suites on several Karpenter releases: scenario x release"),
    ("matrix-join", "runners.matrix_join", "several matrix directories as one table"),
    ("bisect", "runners.bisect", "the first release where a scenario fails, or passes again"),
    ("gate", "runners.upgrade_gate", "the upgrade gate: FROM vs TO, the upgrade, the suites on TO"),
    ("mutants", "runners.mutant_matrix", "the kill matrix: each mutant must fail its scenarios"),
    ("killrate", "runners.killrate",
     "the oracles' own kill rate: each mutant judged by the generic verdict alone"),
    ("explore", "runners.explore", "generated workloads on FROM (and TO), shrunk when found"),
    ("release-diffs", "runners.release_diffs", "each release diffed against the one before it"),
    ("soak", "runners.soak", "one run N times back to back, each one reported"),
    ("merge", "runners.merge", "several runs' reports as one"),
    ("durations", "fixtures.ordering", "this machine's durations kept as suites/durations.json"),
    ("sweep", "clusters.eks.sweep", "delete what earlier runs left in EKS, aws-sim or kind"),
    ("perf", "rendering.perf_comparison",
     "two scale-perf runs compared, TO/FROM against the limits"),
    ("chart", "rendering.charts", "a timeline or packing picture drawn again from its data"),
    ("pages", "rendering.pages", "the generated docs pages written (or --check'ed)"),
]}


def usage() -> str:
    width = max(map(len, COMMANDS))
    return "\n".join([
        f"usage: {PROG} <subcommand> [options]", "",
        "The Karpenter end-to-end harness. `karpenter-e2e <subcommand> --help` for one's "
        "options.", "", "subcommands:",
        *(f"  {name:<{width}}  {sub.what}" for name, sub in COMMANDS.items())])


def child(subcommand: str) -> list[str]:
    """A subcommand's command line for a child process: this Python, this package."""
    if subcommand not in COMMANDS:
        raise ValueError(f"no subcommand {subcommand!r}")
    return [sys.executable, "-m", "karpenter_e2e", subcommand]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(usage(), file=sys.stderr)
        return 2
    name, rest = args[0], args[1:]
    if name in ("-h", "--help"):
        print(usage())
        return 0
    if name not in COMMANDS:
        print(f"{PROG}: unknown subcommand {name!r}; the subcommands: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(f"karpenter_e2e.{COMMANDS[name].module}")
    code: int = module.main(rest)
    return code
