"""A folder that is a kustomization, rendered as ``kubectl kustomize FOLDER`` renders it: with
the kubectl the harness builds (the pinned Kubernetes release, from the Go module proxy), never
one from PATH, so the kustomize inside it is the same on every machine and in CI.
"""

from __future__ import annotations

from pathlib import Path

from karpenter_e2e.clusters.errors import CommandTimeout
from karpenter_e2e.clusters.infra import build, process

FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
GROUP = "kustomize.config.k8s.io"
# Rendering a local folder takes well under a second; a remote base (a git URL) waits on a
# network this machine may not have.
RENDER_TIMEOUT_S = 120


class KustomizeError(ValueError):
    """kubectl kustomize refused the folder: its own first error line."""


def kustomization(folder: Path) -> Path | None:
    """The folder's own kustomization file, if it has one (kustomize reads only one)."""
    return next((folder / name for name in FILES if (folder / name).is_file()), None)


def label(folder: Path) -> str:
    return f"kustomize({folder})"


def render(folder: Path) -> str:
    """What ``kubectl kustomize folder`` prints: the documents, separated by ``---``. The
    kubectl is built on first use, as a local cluster's binaries are."""
    kubectl = build.build(build.find("kubectl"))
    try:
        proc = process.run([str(kubectl), "kustomize", str(folder)], timeout=RENDER_TIMEOUT_S)
    except CommandTimeout:
        raise KustomizeError(f"{label(folder)}: kubectl kustomize did not finish in "
                             f"{RENDER_TIMEOUT_S} s (a remote base it cannot fetch?)") from None
    if proc.returncode != 0:
        raise KustomizeError(f"{label(folder)}: kubectl kustomize failed: "
                             f"{first_error(proc.stderr)}")
    return proc.stdout


def first_error(stderr: str) -> str:
    """kubectl's own first error line (the rest is usage or a stack of wrapped causes)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("error:")),
                lines[0] if lines else "no message")


def documents(rendered: str) -> list[str]:
    """The rendered documents, one text each. kustomize writes a ``---`` line between them
    and indents every block scalar, so a ``---`` line is always a separator."""
    docs: list[str] = []
    current: list[str] = []
    for line in rendered.splitlines(keepends=True):
        if line.rstrip("\n") == "---":
            docs.append("".join(current))
            current = []
        else:
            current.append(line)
    docs.append("".join(current))
    return [d for d in docs if d.strip()]
