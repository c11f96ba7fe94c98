"""eks mode's opt-in, proven on the rehearsal cluster: the suites refuse a cluster that did
not opt in, one whose ConfigMap names another cluster, and a run that does not name it.

Each case changes only the opt-in (the ConfigMap kube-system/karpenter-e2e-opt-in, or the
run's --karpenter-eks-opt-in), runs one EKS-facing scenario with the night's own options,
and expects pytest to fail with eks mode's refusal and Karpenter to have been given nothing
(no NodePool made by the run; a killed run's may be there, for the sweep). The ConfigMap
the night made is put back afterwards, whatever happened.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process

OPT_IN = ("kube-system", "karpenter-e2e-opt-in")
OTHER = "rh-someone-else"
# One EKS-facing scenario: had the refusal not come, it would make a NodePool at once.
PROBE = "suites/test_provisioning.py::test_each_node_is_an_ec2_instance_karpenter_tagged"
PYTEST_TIMEOUT_S = 300


@dataclass(frozen=True)
class Case:
    what: str
    configmap: str | None  # the cluster the ConfigMap names; None: no ConfigMap
    opt_in: str | None  # --karpenter-eks-opt-in; None: the cluster's own name
    refusal: str  # what eks mode's refusal says (clusters/eks/cluster.py check_opt_in)


def cases(cluster: str) -> list[Case]:
    return [
        Case("no opt-in ConfigMap", None, None, "it has no ConfigMap kube-system/karpenter-e2e-opt-in"),
        Case("the ConfigMap names another cluster", OTHER, None, f"names '{OTHER}', not '{cluster}'"),
        Case("the run names another cluster", cluster, OTHER,
             f"--karpenter-eks-opt-in {OTHER} was passed"),
    ]


def pytest_command(cluster: str, kubeconfig: Path, region: str, opt_in: str,
                   reports: Path) -> list[str]:
    """The night's suites options (.ci/eks-night suites), on the one probe scenario."""
    return [sys.executable, "-m", "pytest", PROBE, "-p", "no:xdist", "-p", "no:cacheprovider",
            "-q", "--karpenter-cluster=eks", "--karpenter-cluster-name", cluster,
            "--karpenter-kubeconfig", str(kubeconfig), "--karpenter-region", region,
            "--karpenter-interruption-queue", cluster, "--karpenter-eks-opt-in", opt_in,
            "--karpenter-reports-dir", str(reports)]


def prove(cluster: str, kubeconfig: Path, region: str, kubectl: Callable[..., str],
          nodepools: Callable[[], list[str]], reports: Path, cwd: Path) -> list[str]:
    """Each case run; one line per case, or a ClusterError naming the cases that were let in.
    ``kubectl(*args, check=...)`` runs the cluster's kubectl; ``nodepools()`` lists them."""
    lines, wrong = [], []
    ns, name = OPT_IN
    try:
        for case in cases(cluster):
            kubectl("-n", ns, "delete", "configmap", name, "--ignore-not-found")
            if case.configmap:
                kubectl("-n", ns, "create", "configmap", name,
                        f"--from-literal=cluster={case.configmap}")
            # A killed run's NodePools may be there already (the sweep's to delete): the
            # probe must add none.
            before = set(nodepools())
            proc = process.run(pytest_command(cluster, kubeconfig, region,
                                              case.opt_in or cluster, reports),
                               PYTEST_TIMEOUT_S, what=f"pytest ({case.what})", cwd=cwd)
            said = proc.stdout + proc.stderr
            made = sorted(set(nodepools()) - before)
            refused = proc.returncode != 0 and case.refusal in said and not made
            lines.append(f"{'refused' if refused else 'LET IN':8} {case.what}: pytest exit "
                         f"{proc.returncode}, NodePools made {made or 'none'}")
            if not refused:
                wrong.append(f"{case.what}: exit {proc.returncode}, NodePools made {made}, "
                             f"refusal {'said' if case.refusal in said else 'not said'}:\n"
                             + "\n".join(said.strip().splitlines()[-10:]))
    finally:
        kubectl("-n", ns, "delete", "configmap", name, "--ignore-not-found")
        kubectl("-n", ns, "create", "configmap", name, f"--from-literal=cluster={cluster}")
    if wrong:
        raise ClusterError("eks mode ran where it must refuse:\n" + "\n".join(wrong))
    return lines
