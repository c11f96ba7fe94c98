"""Karpenter's AWS provider for aws-sim mode, built by local mode's build code.

``github.com/aws/karpenter-provider-aws`` ``./cmd/controller`` is built through a wrapper
module per release: the committed ``gomod/provider-<version>`` for the pinned releases, one
generated into the per-user cache for any other runnable release (provider_releases.py).
Upstream requires modules the module proxy refuses (``timestreamwrite`` at the versions
v1.13 on pin), and the wrapper replaces them. The binary is cached as
``<cache>/bin/karpenter-aws-<version>`` like every other, built with the toolchain the
wrapper's go.mod asks for (build.toolchain_for).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from karpenter_e2e.clusters.awssim import provider_releases
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process, versions

MODULE = provider_releases.MODULE
GOMOD_DIR = provider_releases.GOMOD_DIR


def target(version: str = versions.AWS_PROVIDER) -> build.Target:
    """The build of provider release ``version``; refuses, in seconds, a release aws-sim
    cannot run (not served, or its core not served: provider_releases.check says which)."""
    provider_releases.check(version)
    return build.Target("karpenter-aws", version, f"{MODULE}/cmd/controller",
                        str(provider_releases.wrapper_path(version)),
                        ldflags=(f"-X sigs.k8s.io/karpenter/pkg/operator.Version={version}",
                                 "-s", "-w"),
                        toolchain=build.FROM_GO_MOD)


def binary(version: str = versions.AWS_PROVIDER) -> Path:
    """The cached binary, built on first use (a cold build takes minutes)."""
    t = target(version)
    if not t.path.exists():
        build.check_go()
        provider_releases.wrapper_dir(version)
    return build.build(t)


def module_dir(version: str = versions.AWS_PROVIDER) -> Path:
    provider_releases.check(version)  # refuse releases aws-sim cannot run
    return build.download_module(MODULE, version, build.FROM_GO_MOD)


def crd_dir(version: str = versions.AWS_PROVIDER) -> Path:
    """The provider's real CRDs: NodePool, NodeClaim, EC2NodeClass (with its CEL rules)."""
    return module_dir(version) / "pkg" / "apis" / "crds"


def pricing_table(version: str = versions.AWS_PROVIDER) -> Path:
    """The provider's static on-demand prices (what it uses with ISOLATED_VPC=true)."""
    return module_dir(version) / "pkg" / "providers" / "pricing" / "zz_generated.pricing_aws.go"


def build_mutant(mutant) -> Path:
    """The provider built with ``mutant``'s patch: the patched copy of its module (the
    provider's own, or core's at the version the provider release builds with) replaces the
    pinned one in a copy of the wrapper module, so Go's build cache recompiles only the
    patched packages and their dependants."""
    from karpenter_e2e.clusters.karpenter.mutants import MutantError

    try:
        t = target(mutant.version)
        core = provider_releases.check(mutant.version)
    except ClusterError as exc:
        raise MutantError(mutant.name, f"its version {mutant.version} is not one aws-sim mode "
                                       f"runs: {exc}") from None
    module_version = mutant.version if mutant.module == MODULE else core
    module_dir = build.download_module(mutant.module, module_version, build.FROM_GO_MOD)
    wrapper_src = provider_releases.wrapper_dir(mutant.version)

    def wrapper(src: Path) -> Path:
        work = src.parent / "wrapper"
        shutil.copytree(wrapper_src, work)
        # Directory replacements need no go.sum entry; everything else stays pinned.
        proc = process.run(["go", "mod", "edit", f"-replace={mutant.module}={src}"],
                           process.LOCAL_TIMEOUT_S, cwd=work,
                           env={**build._go_env(t, wrapper_src), "GOFLAGS": ""})
        if proc.returncode != 0:
            raise MutantError(mutant.name, f"`go mod edit -replace` of the wrapper failed: "
                                           f"{proc.stderr.strip()[:400]}")
        return work

    return build.build_patched(mutant, t, module_dir, wrapper)
