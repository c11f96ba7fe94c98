"""Which Kubernetes minors each Karpenter release supports: the one table, and the default.

Source: aws/karpenter-provider-aws, hack/docs/compatibilitymatrix_gen/compatibility.yaml at
commit 1d927085dd81 (2026-08-21), the file Karpenter's compatibility page is generated from.
It is the AWS provider's table; its versions are the core releases' (sigs.k8s.io/karpenter
vX.Y.Z ships with the AWS provider vX.Y.Z). Releases v1.15 and later are not in that
snapshot: they inherit v1.14's range, which was not read for them (``Support.inherited``).

A release runs on a control plane inside its own range (clusters/infra/kube_releases.py
refuses any other before a cluster starts); by default on the newest served minor inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_e2e.clusters.infra.versions import semver

SOURCE = ("aws/karpenter-provider-aws hack/docs/compatibilitymatrix_gen/compatibility.yaml "
          "@ 1d927085dd81")

# (first Karpenter release of the row, oldest minor, newest minor), oldest row first. A row
# holds until the next one: "1.0.x 1.25-1.30, 1.0.5 1.25-1.31, 1.1.x 1.25-1.31, ...".
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("v1.0.0", "1.25", "1.30"),
    ("v1.0.5", "1.25", "1.31"),
    ("v1.1.0", "1.25", "1.31"),
    ("v1.2.0", "1.25", "1.32"),  # 1.2.x-1.4.x
    ("v1.5.0", "1.26", "1.33"),
    ("v1.6.0", "1.26", "1.34"),  # 1.6.x-1.8.x
    ("v1.9.0", "1.26", "1.35"),  # 1.9.x-1.12.x
    ("v1.13.0", "1.26", "1.36"),  # 1.13.x-1.14.x
)
NEWEST_ROW = "v1.14"  # the newest minor the table names; later ones inherit its range


def minor(text: str) -> tuple[int, int]:
    """'1.33' or 'v1.33.13' -> (1, 33)."""
    parts = text.lstrip("v").split(".")
    return int(parts[0]), int(parts[1])


def minor_text(key: tuple[int, int]) -> str:
    return f"{key[0]}.{key[1]}"


@dataclass(frozen=True)
class Support:
    """The Kubernetes minors one Karpenter release supports, both ends included."""

    karpenter: str
    oldest: tuple[int, int]
    newest: tuple[int, int]
    inherited: bool = False  # newer than the table: v1.14's range, not read for this release

    def __contains__(self, kube_minor: tuple[int, int]) -> bool:
        return self.oldest <= kube_minor <= self.newest

    @property
    def text(self) -> str:
        span = f"{minor_text(self.oldest)}-{minor_text(self.newest)}"
        where = (f"inherited from {NEWEST_ROW} in {SOURCE}, which does not list this release"
                 if self.inherited else SOURCE)
        return f"Kubernetes {span} ({where})"


def supported(karpenter_version: str) -> Support:
    """The range of ``karpenter_version`` (a release like v1.12.1, from v1.0.0 on)."""
    key = semver(karpenter_version)
    rows = [r for r in _ROWS if semver(r[0]) <= key]
    if not rows:
        raise ValueError(f"Karpenter {karpenter_version} is older than the table "
                         f"({_ROWS[0][0]}, {SOURCE})")
    _, oldest, newest = rows[-1]
    inherited = key[:2] > semver(NEWEST_ROW + ".0")[:2]
    return Support(karpenter_version, minor(oldest), minor(newest), inherited)


def default_minor(karpenter_version: str, served_minors) -> tuple[int, int]:
    """The newest of ``served_minors`` inside the release's range: what it runs on by default."""
    support = supported(karpenter_version)
    inside = sorted(m for m in served_minors if m in support)
    if not inside:
        served = ", ".join(minor_text(m) for m in sorted(served_minors)) or "none"
        raise ValueError(f"Karpenter {karpenter_version} supports {support.text}; the Go module "
                         f"proxy serves no Kubernetes minor inside it (served: {served})")
    return inside[-1]
