"""Every version local mode builds, pinned in one place.

Kubernetes 1.36 is inside Karpenter's tested range (1.30-1.36) and matches the k8s
libraries Karpenter v1.15 and kwok v0.8 are built with. Karpenter ships two versions:
the newest release and the previous minor, which the upgrade gate moves between.
"""

KUBERNETES = "v1.36.3"
ETCD = "v3.6.16"
KWOK = "v0.8.0"
# kind mode (clusters/kind/): kind itself, Helm (Karpenter's chart goes in with it), and the
# node image's parts that kind's base image builds from source (crictl at kind's own pin; the
# proxy serves local-path-provisioner up to v0.0.33, kind v0.33.0 builds v0.0.34).
KIND = "v0.33.0"
HELM = "v4.3.2"
CRI_TOOLS = "v1.36.0"
LOCAL_PATH_PROVISIONER = "v0.0.33"
# The Karpenter versions `make build` builds and CI runs (newest release, previous minor), and
# the default. Any other release the Go module proxy serves, from v1.0 on, is built on first
# use (clusters/infra/releases.py finds them). The default stays pinned rather than "newest
# served": a new upstream release must not change what an unchanged CI job tests.
KARPENTER_VERSIONS = ("v1.15.0", "v1.14.3")
KARPENTER = KARPENTER_VERSIONS[0]
# eks mode: the AWS provider the nightly installs (its chart version, with a "v"). Its CRDs
# and sources are read from the Go module cache by the harness's own tests. (aws-sim builds
# AWS_PROVIDER below instead: v1.15.2 needs a core version the module proxy refuses.)
EKS_PROVIDER = "v1.15.2"

# Karpenter v1.15.0 / v1.14.3 declare go >= 1.26.9 / 1.26.10; machines here have 1.26.8.
# The go command fetches this toolchain from the module proxy (one ~76 MB download).
GO_TOOLCHAIN = "go1.27.3"
# The toolchains a Karpenter build may switch to, when the machine's go is older than the
# release's go.mod asks (releases.choose_toolchain): the oldest that is new enough. One
# toolchain keeps it to one download; go1.27.3 built every served release from v1.0.8 on.
GO_TOOLCHAINS = (GO_TOOLCHAIN,)
# Oldest go command that can switch toolchains by itself (GOTOOLCHAIN, Go 1.21).
MIN_GO = (1, 21)


def staging_version(kube_version: str = KUBERNETES) -> str:
    """k8s.io/kubernetes v1.X.Y pairs with the staging modules at v0.X.Y."""
    return "v0" + kube_version[2:]


def semver(version: str) -> tuple[int, ...]:
    """'v1.14.3' -> (1, 14, 3); raises ValueError on anything else."""
    parts = version.lstrip("v").split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{version!r} is not a version like v1.15.0")
    return tuple(int(p) for p in parts)

def is_release(version) -> bool:
    """Whether ``version`` is a release like 'v1.14.3' (eks may report anything)."""
    try:
        semver(version)
        return True
    except (ValueError, TypeError, AttributeError):
        return False

# aws-sim mode: the AWS provider releases it builds without asking the proxy, through the
# committed wrappers clusters/awssim/gomod/provider-<version> (v1.15.0 and v1.14.3 require
# sigs.k8s.io/karpenter at the same version). Any other provider release whose core the proxy
# serves is built on first use (clusters/awssim/provider_releases.py finds them); v1.15.1 and
# v1.15.2 need core v1.15.1, which the module proxy refuses.
AWS_PROVIDER_VERSIONS = ("v1.15.0", "v1.14.3")  # newest, previous minor (upgrade gate)
AWS_PROVIDER = AWS_PROVIDER_VERSIONS[0]
