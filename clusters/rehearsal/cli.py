"""`karpenter-e2e rehearsal <step> --name rh-...`: the EKS-like cluster's steps by hand
(`make eks-rehearsal` runs them around the night's sequence).

    up-aws        kind cluster + fake AWS; prints the environment file the night runs in
    cluster-up    eksctl's part, then Karpenter by its charts (the night's EKS_CLUSTER_UP)
    cluster-down  the control plane and eksctl's part (the night's EKS_CLUSTER_DELETE)
    down          everything, the fake AWS too
    seed-sweep    a killed run's leftovers and foreign objects in the fake AWS (foreign.py)
    check-sweep   --after sweep|teardown: the leftovers gone, the foreign objects kept
    check-opt-in  eks mode refuses the cluster without its opt-in, or opted in for another
    check-leaks   PATH...: the run's made-up credentials in no file written since up-aws
    env           the environment file's path (`set -a; . "$(... env)"; set +a`); with
                  --template, the getting-started template's (stack.py); with --charts,
                  the packaged charts' directory
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e rehearsal", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=("up-aws", "cluster-up", "cluster-down", "down", "env",
                                      "seed-sweep", "check-sweep", "check-leaks",
                                      "check-opt-in"))
    p.add_argument("--name", required=True, help="the cluster's name, rh-...")
    p.add_argument("--karpenter-version", default=versions.AWS_PROVIDER,
                   help=f"the AWS provider release installed (default {versions.AWS_PROVIDER}); "
                        f"images and charts are made for {', '.join(versions.AWS_PROVIDER_VERSIONS)} "
                        "too, as a registry would serve them (the upgrade gate's)")
    p.add_argument("--template", action="store_true", help="env: the template's path instead")
    p.add_argument("--charts", action="store_true",
                   help="env: the directory of the packaged charts instead (the gate's "
                        "--chart-repo)")
    p.add_argument("--after", choices=("sweep", "teardown"), default="sweep",
                   help="check-sweep: which step the objects were left to")
    p.add_argument("paths", nargs="*", type=Path, help="check-leaks: files and directories")
    args = p.parse_intermixed_args(argv)  # check-leaks --name N PATH...
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    from karpenter_e2e.clusters.rehearsal.cluster import Rehearsal
    try:
        r = Rehearsal(args.name, args.karpenter_version)
        if args.step == "up-aws":
            r.up_aws()
            print(r.env_file)
        elif args.step == "cluster-up":
            r.cluster_up()
        elif args.step == "cluster-down":
            r.cluster_down()
        elif args.step == "down":
            r.down()
        elif args.step == "seed-sweep":
            r.seed_sweep()
        elif args.step == "check-opt-in":
            print("\n".join(r.check_opt_in()))
        elif args.step == "check-leaks":
            print(r.check_leaks(args.paths))
        elif args.step == "check-sweep":
            print("\n".join(r.check_sweep(args.after)))
        else:
            r.environment()  # refuses when not up
            print(r.template_file if args.template else r.charts_dir if args.charts
                  else r.env_file)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
