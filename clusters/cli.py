"""`karpenter-e2e cluster up|down|status|logs|build`: the cluster lifecycle by hand."""

from __future__ import annotations

import argparse
import logging
import sys

from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import adder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e cluster", description=__doc__)
    p.add_argument("command", choices=["up", "down", "status", "logs", "build"])
    backends.add_options(adder(p.add_argument))
    p.add_argument("--reuse", action="store_true", help="up: reuse a healthy running cluster")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    try:
        if args.command == "build":
            from karpenter_e2e.clusters.infra import build, kube_releases
            paths = build.build_all()
            # Also the release and Kubernetes asked for, so a machine can be readied for them.
            kube = kube_releases.resolve(args.kubernetes_version, args.karpenter_version)
            paths += build.build_all(build.kube_targets(kube))
            paths.append(build.karpenter_binary(args.karpenter_version))
            paths = sorted(set(paths))
            if args.cluster == "aws-sim":  # plus Karpenter's AWS provider
                from karpenter_e2e.clusters.awssim import build as awsbuild
                paths.append(awsbuild.binary(args.karpenter_version))
            if args.cluster == "kind":  # plus kind, Helm and the node image, into Docker
                from karpenter_e2e.clusters.kind import chart, nodeimage
                from karpenter_e2e.clusters.kind.cluster import KindCluster
                paths += [build.build(nodeimage.kind_target()), build.build(chart.helm_target())]
                kind = backends.create(backends.ClusterOptions.of(args))
                assert isinstance(kind, KindCluster)
                print(f"kind node image {kind.resolve_node_image()} ready")
            print(f"{len(paths)} binaries ready in {build.bin_dir()}")
            return 0
        cluster = backends.create(backends.ClusterOptions.of(args))
        if args.command == "up":
            info = cluster.up(reuse=args.reuse)
            print(f"export KUBECONFIG={info.kubeconfig}")
        elif args.command == "down":
            cluster.down()
        elif args.command == "status":
            st = cluster.status()
            print(st.detail)
            return 0 if st.running else 1
        elif args.command == "logs":
            for name, path in sorted(cluster.logs().items()):
                print(f"{name:24} {path}")
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
