"""Pick the backend for a mode; the only place that maps option values to classes."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from karpenter_e2e.clusters.base import Cluster
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import cli_flag
from karpenter_e2e.clusters.infra import versions
from karpenter_e2e.clusters.karpenter import settings as ksettings

MODES = ("local", "aws-sim", "kind", "eks")


# What each mode is, for --cluster's help (a command lists the modes it runs).
MODE_HELP = {"local": "Karpenter's KWOK provider on a control plane of local processes",
             "aws-sim": "Karpenter's AWS provider against a fake AWS",
             "kind": "Karpenter's KWOK provider in a kind cluster",
             "eks": "a real EKS cluster, opted in"}


def add_options(add: Callable[..., Any], flag: Callable[[str], str] = cli_flag, *,
                only: Collection[str] | None = None, modes: tuple[str, ...] = MODES,
                defaults: Mapping[str, Any] | None = None) -> None:
    """The cluster options, declared once for every command that takes them: ``add`` takes
    an option's short name (flags.adder over argparse's add_argument, flags.plugin_adder over
    pytest's addoption); ``flag`` names them in the help (pytest: flags.plugin_flag). A
    command registers ``only`` those it reads, ``modes`` are the --cluster choices it runs,
    and ``defaults`` (by short name) are its own where they differ, each said why there."""
    declared = _declared(flag, modes)
    defaults = defaults or {}
    unknown = (set(only or ()) | set(defaults)) - set(declared)
    if unknown:
        raise ValueError(f"no such cluster option: {', '.join(sorted(unknown))}")
    for name, kwargs in declared.items():
        if only is None or name in only:
            add(name, **{**kwargs, **({"default": defaults[name]} if name in defaults else {})})


def _declared(flag: Callable[[str], str], modes: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Each option's add_argument keywords, by short name, in --help's order."""
    return {
        "cluster": dict(default="local", choices=modes, help="where the cluster runs (default "
                        "local): " + "; ".join(f"{m} ({MODE_HELP[m]})" for m in modes)),
        "cluster-name": dict(
            default="karpenter-e2e",
            help="the cluster's name (local, aws-sim, kind: its run directory, one per concurrent "
                 "run; eks: the EKS cluster's name)"),
        "karpenter-version": dict(
            default=versions.KARPENTER,
            help=f"Karpenter version (default {versions.KARPENTER}; local and kind: any release "
                 f"the Go module proxy serves from v1.0 on, built on first use; aws-sim: a "
                 f"release of Karpenter's AWS provider whose core the proxy serves)"),
        "kubernetes-version": dict(
            default=None,
            help="local, aws-sim and kind: the control plane's Kubernetes, a minor (1.33, v1.33) or a "
                 "release (v1.33.13) the Go module proxy serves, inside the Karpenter release's "
                 "supported range (default: the newest served minor inside it; docs/versions.md)"),
        "apiserver-port": dict(
            type=int, default=None,
            help="local: kube-apiserver port on 127.0.0.1 (default: a free one)"),
        "catalogue": dict(
            default="curated", metavar="SELECTION",
            help="local/kind: the fake catalogue: curated (default, ~84 types the suites name), "
                 "full (every EC2 type moto knows that the pinned AWS provider's price table "
                 "prices) or families=c6g,m5d (the full catalogue's types of those families); "
                 "any may end in :max-vcpu=N. Spot prices are modelled in every selection"),
        "catalogue-without": dict(
            default=None,
            help="local/kind: leave types out of the fake catalogue, e.g. arch=arm64"),
        "karpenter-setting": dict(
            action="append", default=[], metavar="KEY=VALUE",
            help="local, aws-sim, kind: one of Karpenter's own settings for the run, an option's "
                 "environment name (MIN_VALUES_POLICY=BestEffort) or a feature gate "
                 "(CapacityBuffer=true); repeatable. A key the release does not read is "
                 "refused, naming those it does"),
        "karpenter-patch": dict(
            default=None, metavar="FILE",
            help="local/kind/aws-sim: run Karpenter built with this mutant patch "
                 "(mutants/README.md)"),
        "kubeconfig": dict(
            default=None,
            help="eks: kubeconfig of the cluster under test (local and kind write their own)"),
        "kube-context": dict(
            default=None, help="eks: kubeconfig context (default: its current context)"),
        "eks-opt-in": dict(
            default=None,
            help="eks: the cluster's name again, to confirm it may be used (with the "
                 "karpenter-e2e-opt-in ConfigMap in kube-system)"),
        "region": dict(default=os.environ.get("AWS_REGION", "us-west-2"), help="eks: AWS region"),
        "node-role": dict(
            default=None,
            help="eks: IAM role of Karpenter's nodes (default KarpenterNodeRole-<cluster>)"),
        "eks-subnet-tag": dict(
            default=None,
            help="eks: karpenter.sh/discovery value of the subnets (default: cluster name)"),
        "eks-security-group-tag": dict(
            default=None,
            help="eks: karpenter.sh/discovery value of the security groups (default: cluster "
                 "name)"),
        "karpenter-namespace": dict(
            default=None, help="eks: Karpenter's namespace (default: kube-system, then karpenter)"),
        "eks-ami": dict(default="al2023@latest", help="eks: EC2NodeClass AMI alias or ami-... id"),
        "eks-ami-family": dict(
            default="AL2023",
            help=f"eks: amiFamily of an {flag('eks-ami')} ami-... id (AL2023, Bottlerocket, ...)"),
        "interruption-queue": dict(
            default=None,
            help="eks: Karpenter's interruption SQS queue name (default: cluster name)"),
        "chart-repo": dict(
            default=None, metavar="REPO",
            help="eks: where an upgrade's `helm upgrade` finds Karpenter's charts (karpenter-crd, "
                 "karpenter): an OCI repository (default oci://public.ecr.aws/karpenter, the "
                 "nightly's) or a directory of packaged charts, <chart>-<version>.tgz (a "
                 "mirror's `helm pull`)"),
        "kind-image": dict(
            default=None, metavar="IMAGE",
            help="kind: the node image: kindest (kind's published kindest/node for the "
                 "Kubernetes release, pulled), built (made here with no registry, cached; "
                 "clusters/kind/nodeimage.py) or any image; default: kindest where a registry "
                 "answers, else built"),
    }


@dataclass(frozen=True)
class ClusterOptions:
    """What ``create`` reads: the options ``add_options`` registers, by their short names,
    with the same defaults (a test keeps the two lists equal)."""

    cluster: str = "local"
    cluster_name: str = "karpenter-e2e"
    karpenter_version: str = versions.KARPENTER
    kubernetes_version: str | None = None
    apiserver_port: int | None = None
    catalogue: str = "curated"
    catalogue_without: str | None = None
    karpenter_patch: str | None = None
    karpenter_setting: tuple[str, ...] = ()
    kubeconfig: str | None = None
    kube_context: str | None = None
    eks_opt_in: str | None = None
    region: str = field(default_factory=lambda: os.environ.get("AWS_REGION", "us-west-2"))
    node_role: str | None = None
    eks_subnet_tag: str | None = None
    eks_security_group_tag: str | None = None
    karpenter_namespace: str | None = None
    eks_ami: str = "al2023@latest"
    eks_ami_family: str = "AL2023"
    interruption_queue: str | None = None
    chart_repo: str | None = None
    kind_image: str | None = None

    @classmethod
    def of(cls, source: object) -> ClusterOptions:
        """From an argparse namespace or the plugin's settings: every field ``source`` has
        (a command line registering only some of the options leaves the rest at their
        defaults)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            try:
                value = getattr(source, f.name)
            except AttributeError:
                continue
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


def _catalogue_exclude(opts: ClusterOptions):
    from karpenter_e2e.clusters.infra import catalogue
    spec = opts.catalogue_without
    if not spec:
        return None
    try:
        return catalogue.without(spec)
    except ValueError as exc:
        raise ClusterError(str(exc)) from None


def _catalogue_selection(opts: ClusterOptions, flag: Callable[[str], str]) -> str:
    """The catalogue selection, checked for syntax (its types are read when the cluster
    prepares its catalogue: the full one may need the provider module downloaded)."""
    from karpenter_e2e.clusters.infra import catalogue_full
    try:
        return str(catalogue_full.parse_selection(opts.catalogue))
    except ValueError as exc:
        raise ClusterError(f"{flag('catalogue')}: {exc}") from None


def _mutant(opts: ClusterOptions, flag: Callable[[str], str]):
    path = opts.karpenter_patch
    if not path:
        return None
    from karpenter_e2e.clusters.karpenter import mutants
    if not Path(path).is_file():
        raise ClusterError(f"{flag('karpenter-patch')} {path}: no such file")
    mutant = mutants.parse(Path(path))
    if not mutant.runs_in(opts.cluster):
        raise ClusterError(f"{flag('karpenter-patch')} {path} patches {mutant.module}, which "
                           f"{opts.cluster} mode does not build (aws-sim does)")
    return mutant


def release_settings(opts: ClusterOptions) -> ksettings.Known | None:
    """What the Karpenter release ``opts`` run reads (``karpenter.settings.Known``, from the
    release's own options.go; aws-sim: its core's and the provider's), or None where
    Helm's values decide (eks)."""
    if opts.cluster == "aws-sim":
        from karpenter_e2e.clusters.awssim.cluster import AwsSimCluster
        return AwsSimCluster.release_settings(opts.karpenter_version)
    if opts.cluster in ("local", "kind"):  # kind runs the same KWOK build
        from karpenter_e2e.clusters.local.cluster import LocalCluster
        return LocalCluster.release_settings(opts.karpenter_version)
    return None


def files_name(mode: str, name: str) -> str:
    """The name cluster ``name``'s run directory and lock files have in the per-user cache
    (kind's are apart from a local cluster of the same name)."""
    if mode == "kind":
        from karpenter_e2e.clusters.kind.cluster import KindCluster
        return KindCluster.files_name(name)
    return name


def create(opts: ClusterOptions, flag: Callable[[str], str] = cli_flag) -> Cluster:
    """The backend ``opts`` choose; ``flag`` names the options in refusals as the caller's
    command line spells them (the plugin passes flags.plugin_flag)."""
    mode = opts.cluster
    settings = ksettings.parse(opts.karpenter_setting, flag("karpenter-setting"))
    if mode == "local":
        from karpenter_e2e.clusters.local.cluster import LocalCluster
        return LocalCluster(opts.cluster_name, opts.karpenter_version,
                            apiserver_port=opts.apiserver_port,
                            catalogue_exclude=_catalogue_exclude(opts), mutant=_mutant(opts, flag),
                            kubernetes_version=opts.kubernetes_version, settings=settings,
                            catalogue_selection=_catalogue_selection(opts, flag))
    if settings and mode == "eks":
        raise ClusterError(f"{flag('karpenter-setting')} is for local, aws-sim and kind mode "
                           f"(eks: Helm's values set Karpenter's options)")
    if opts.kubernetes_version and mode == "eks":
        raise ClusterError(f"{flag('kubernetes-version')} is for local, aws-sim and kind mode "
                           f"(eks: the EKS cluster's own Kubernetes)")
    if mode == "aws-sim":
        if opts.catalogue_without:
            raise ClusterError(f"{flag('catalogue-without')} is for local and kind mode (aws-sim's "
                               "instance types are EC2's, as the fake AWS serves them)")
        if _catalogue_selection(opts, flag) != "curated":
            raise ClusterError(f"{flag('catalogue')} is for local and kind mode (aws-sim's "
                               "instance types are EC2's, as the fake AWS serves them)")
        from karpenter_e2e.clusters.awssim.cluster import AwsSimCluster
        name = opts.cluster_name
        if name == "karpenter-e2e":  # the default: never share a run directory with local
            # (nor a prefix of it: older harnesses find processes by run-directory substring)
            name = "awssim-e2e"
        return AwsSimCluster(name, opts.karpenter_version,
                             apiserver_port=opts.apiserver_port,
                             ami=opts.eks_ami or "al2023@latest",
                             mutant=_mutant(opts, flag),
                             kubernetes_version=opts.kubernetes_version, settings=settings)
    if mode == "kind":
        from karpenter_e2e.clusters.kind.cluster import KindCluster
        return KindCluster(opts.cluster_name, opts.karpenter_version,
                           node_image=opts.kind_image,
                           catalogue_exclude=_catalogue_exclude(opts), mutant=_mutant(opts, flag),
                           catalogue_selection=_catalogue_selection(opts, flag),
                           kubernetes_version=opts.kubernetes_version, settings=settings)
    if mode == "eks":
        if not opts.kubeconfig:
            raise ClusterError(f"{flag('cluster')}=eks needs {flag('kubeconfig')} (e.g. from aws eks "
                               "update-kubeconfig --name <cluster> --kubeconfig <path>)")
        if opts.karpenter_patch:
            raise ClusterError(f"{flag('karpenter-patch')} needs a Karpenter the harness builds "
                               "(local or kind); eks runs the Helm-installed one")
        from karpenter_e2e.clusters.eks.cluster import EksCluster
        return EksCluster(opts.cluster_name, Path(opts.kubeconfig), context=opts.kube_context,
                          region=opts.region, node_role=opts.node_role,
                          subnet_tag=opts.eks_subnet_tag,
                          security_group_tag=opts.eks_security_group_tag,
                          opt_in_name=opts.eks_opt_in,
                          karpenter_namespace=opts.karpenter_namespace, ami=opts.eks_ami,
                          ami_family=opts.eks_ami_family, chart_repo=opts.chart_repo, flag=flag)
    raise ClusterError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
