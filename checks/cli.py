"""`python -m karpenter_e2e.checks DIR [--expect FILE] [--scale NAME=N,...] [--scale-in NAME=N,...]`:
what Karpenter does with your own NodePools and workloads, on a fresh local (or aws-sim)
cluster.

Exit codes:
  0  settled, and every expectation held
  1  an expectation failed, or Karpenter did not settle in time (the report says which)
  2  bad input: manifests, expect.yaml or options (named by file and document); nothing ran,
     or what had started was taken down
  3  the cluster could not be brought up or used (a harness or machine problem), or the
     check itself broke: no verdict on the manifests
  130  interrupted (Ctrl-C); the cluster is taken down

`make check` cannot pass these on: make exits 2 whenever a recipe fails. It prints the
code; a CI job that gates on it calls karpenter-e2e-check (or python -m
karpenter_e2e.checks) itself.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from karpenter_e2e.checks import report
from karpenter_e2e.checks.expectations import ExpectError
from karpenter_e2e.checks.manifests import ManifestError
from karpenter_e2e.checks.run import Check, plan
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError

MODES = ("local", "aws-sim")
EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m karpenter_e2e.checks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="folder of NodePools, NodeClasses and workloads")
    p.add_argument("--expect", type=Path, default=None,
                   help="expectations (default: FOLDER/expect.yaml if there is one)")
    p.add_argument("--scale", default="", metavar="NAME=N,...",
                   help="replicas to set before applying (overrides expect.yaml's scale:)")
    p.add_argument("--scale-in", default="", metavar="NAME=N,...",
                   help="replicas to set once settled, then report what consolidation did")
    p.add_argument("--cluster", default="local", choices=MODES,
                   help="local (KWOK provider, EC2NodeClass mapped to KWOKNodeClass) or aws-sim "
                        "(the real AWS provider against a fake AWS; EC2NodeClass as written)")
    p.add_argument("--cluster-name", default="karpenter-check",
                   help="the cluster's name (its run directory); distinct per concurrent check")
    p.add_argument("--karpenter-version", default=None,
                   help="Karpenter version (default: the mode's pinned one)")
    p.add_argument("--keep-cluster", action="store_true",
                   help="reuse a running cluster of that name and leave it up (emptied of the "
                        "check's objects) at the end")
    p.add_argument("--reports-dir", type=Path, default=Path("reports"),
                   help="the check's files go to DIR/runs/check-<id>/ (default: reports)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for name in ("kubernetes", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        the_plan = plan(args.folder, args.expect, args.scale, args.scale_in, args.cluster_name)
        opts = argparse.Namespace(**{**vars(args), "karpenter_version": args.karpenter_version
                                     or _default_version(args.cluster)})
        backend = backends.create(backends.ClusterOptions.of(opts))
    except (ManifestError, ExpectError, ClusterError) as exc:
        print(f"check: bad input, nothing started:\n{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for warning in the_plan.bundle.warnings:
        print(f"check: warning: {warning}", file=sys.stderr)
    check = Check(the_plan, backend, args.reports_dir, keep_cluster=args.keep_cluster)
    try:
        result = check.run()
    except (ManifestError, ExpectError) as exc:
        print(f"check: the API server rejected the manifests; the cluster was "
              f"{'emptied' if args.keep_cluster else 'taken down'}:\n{exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ClusterError as exc:
        print(f"check: cluster error: {exc}", file=sys.stderr)
        return EXIT_CLUSTER
    except KeyboardInterrupt:
        print("check: interrupted; cluster taken down", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - Python's own exit 1 would read "expectation failed"
        logging.getLogger("karpenter_e2e.check").exception("check broke")
        print(f"check: no verdict, the check itself failed ({type(exc).__name__}: {exc}); "
              f"the cluster was {'emptied' if args.keep_cluster else 'taken down'}",
              file=sys.stderr)
        return EXIT_CLUSTER
    print(report.tables(result))
    print(f"files: {', '.join(f'{k} {v}' for k, v in result['files'].items())}")
    return EXIT_PASSED if result["passed"] else EXIT_FAILED


def _default_version(mode: str) -> str:
    from karpenter_e2e.clusters.local import versions
    return versions.AWS_PROVIDER if mode == "aws-sim" else versions.KARPENTER
