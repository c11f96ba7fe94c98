"""Pick the backend for a mode; the only place that maps option values to classes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusters.errors import ClusterError
from clusters.local import versions

MODES = ("local", "kind", "eks")


def add_options(add: Callable[..., Any], prefix: str = "--") -> None:
    """Options shared by the CLI and pytest: ``add`` is argparse's add_argument or
    pytest's addoption (same signature)."""
    add(f"{prefix}cluster", dest="cluster", default="local", choices=MODES,
                   help="where the suites run: local (default), kind or eks")
    add(f"{prefix}cluster-name", dest="cluster_name", default="karpenter-e2e",
                   help="name of the local/kind cluster (its run directory)")
    add(f"{prefix}karpenter-version", dest="karpenter_version",
                   default=versions.KARPENTER,
                   help=f"Karpenter version (local: one of {', '.join(versions.KARPENTER_VERSIONS)})")
    add(f"{prefix}apiserver-port", dest="apiserver_port", type=int, default=None,
                   help="local: kube-apiserver port on 127.0.0.1 (default: a free one)")
    add(f"{prefix}catalogue-without", dest="catalogue_without", default=None,
                   help="local: leave types out of the fake catalogue, e.g. arch=arm64")


def create(opts: Any):
    mode = opts.cluster
    if mode == "local":
        from clusters.local import catalogue
        from clusters.local.cluster import LocalCluster
        exclude = None
        if opts.catalogue_without:
            try:
                exclude = catalogue.without(opts.catalogue_without)
            except ValueError as exc:
                raise ClusterError(str(exc)) from None
        return LocalCluster(opts.cluster_name, opts.karpenter_version,
                            apiserver_port=opts.apiserver_port, catalogue_exclude=exclude)
    raise ClusterError(f"--cluster={mode} is not implemented yet (see issue 5); use --cluster=local")
