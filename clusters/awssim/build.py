"""Karpenter's AWS provider for aws-sim mode, built by local mode's build code.

``github.com/aws/karpenter-provider-aws`` ``./cmd/controller`` is built through a wrapper
module per version (``gomod/provider-<version>``): upstream requires a
``timestreamwrite`` version the module proxy refuses, and the wrapper replaces it (see its
go.mod). The binary is cached as ``<cache>/bin/karpenter-aws-<version>`` like every other.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.local import build, versions

MODULE = "github.com/aws/karpenter-provider-aws"
GOMOD_DIR = Path(__file__).parent / "gomod"


def target(version: str = versions.AWS_PROVIDER) -> build.Target:
    if version not in versions.AWS_PROVIDER_VERSIONS:
        raise ClusterError(f"Karpenter's AWS provider {version} is not built by aws-sim mode; "
                           f"choose one of {', '.join(versions.AWS_PROVIDER_VERSIONS)}")
    return build.Target("karpenter-aws", version, f"{MODULE}/cmd/controller",
                        str(GOMOD_DIR / f"provider-{version}"),
                        ldflags=(f"-X sigs.k8s.io/karpenter/pkg/operator.Version={version}",
                                 "-s", "-w"),
                        toolchain=versions.GO_TOOLCHAIN)


def binary(version: str = versions.AWS_PROVIDER) -> Path:
    """The cached binary, built on first use (a cold build takes minutes)."""
    t = target(version)
    if not t.path.exists():
        build.check_go()
    return build.build(t)


def module_dir(version: str = versions.AWS_PROVIDER) -> Path:
    target(version)  # refuse versions that are not pinned
    return build.download_module(MODULE, version, versions.GO_TOOLCHAIN)


def crd_dir(version: str = versions.AWS_PROVIDER) -> Path:
    """The provider's real CRDs: NodePool, NodeClaim, EC2NodeClass (with its CEL rules)."""
    return module_dir(version) / "pkg" / "apis" / "crds"


def pricing_table(version: str = versions.AWS_PROVIDER) -> Path:
    """The provider's static on-demand prices (what it uses with ISOLATED_VPC=true)."""
    return module_dir(version) / "pkg" / "providers" / "pricing" / "zz_generated.pricing_aws.go"


def build_mutant(mutant) -> Path:
    """The provider built with ``mutant``'s patch: the patched copy of its module (the
    provider's own, or core's) replaces the pinned one in a copy of the wrapper module, so
    Go's build cache recompiles only the patched packages and their dependants."""
    from karpenter_e2e.clusters.mutants import MutantError

    try:
        t = target(mutant.version)
    except ClusterError:
        raise MutantError(mutant.name, f"its version {mutant.version} is not one aws-sim mode "
                                       f"builds ({', '.join(versions.AWS_PROVIDER_VERSIONS)}); "
                                       "core and provider versions are paired") from None
    module_dir = build.download_module(mutant.module, mutant.version, versions.GO_TOOLCHAIN)

    def wrapper(src: Path) -> Path:
        work = src.parent / "wrapper"
        shutil.copytree(t.module, work)
        # Directory replacements need no go.sum entry; everything else stays pinned.
        subprocess.run(["go", "mod", "edit", f"-replace={mutant.module}={src}"], cwd=work,
                       check=True, capture_output=True, env={**build._go_env(t), "GOFLAGS": ""})
        return work

    return build.build_patched(mutant, t, module_dir, wrapper)
