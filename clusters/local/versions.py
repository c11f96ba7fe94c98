"""Every version local mode builds, pinned in one place.

Kubernetes 1.36 is inside Karpenter's tested range (1.30-1.36) and matches the k8s
libraries Karpenter v1.15 and kwok v0.8 are built with. Karpenter ships two versions:
the newest release and the previous minor, which the upgrade gate moves between.
"""

KUBERNETES = "v1.36.3"
ETCD = "v3.6.16"
KWOK = "v0.8.0"
KARPENTER_VERSIONS = ("v1.15.0", "v1.14.3")  # newest release, previous minor
KARPENTER = KARPENTER_VERSIONS[0]
# eks mode: the AWS provider the nightly installs (its chart version, with a "v"). Its CRDs
# and sources are read from the Go module cache by the harness's own tests. (aws-sim builds
# AWS_PROVIDER below instead: v1.15.2 needs a core version the module proxy refuses.)
EKS_PROVIDER = "v1.15.2"

# Karpenter v1.15.0 / v1.14.3 declare go >= 1.26.9 / 1.26.10; machines here have 1.26.8.
# The go command fetches this toolchain from the module proxy (one ~76 MB download).
GO_TOOLCHAIN = "go1.27.3"
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

# aws-sim mode: Karpenter's AWS provider at the releases whose core versions local mode
# builds (v1.15.0 and v1.14.3 require sigs.k8s.io/karpenter at the same version).
# v1.15.1 and v1.15.2 need core v1.15.1, which the module proxy refuses.
AWS_PROVIDER_VERSIONS = ("v1.15.0", "v1.14.3")  # newest, previous minor (upgrade gate)
AWS_PROVIDER = AWS_PROVIDER_VERSIONS[0]
