"""`check --base REF`: the folder to compare against. REF is a folder (if one exists at that
path), else a git ref of the repository the checked folder lives in; its copy of the same
path is written into a temporary directory, removed again when the check ends (also on
Ctrl-C: the caller's ``with``).

A git ref's files are read with `git ls-tree` and `git cat-file`, not `git archive`: an
archive applies the repository's export-ignore and export-subst attributes, and the base
must be the files as committed. A path that is a kustomization at the ref gets the ref's whole
tree around it: its bases and components are commonly ``../base``, outside the path.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.checks import kustomize
from karpenter_e2e.clusters.infra import process


class BaseError(ValueError):
    """--base cannot be resolved: not a git repository, an unknown ref (bad input, exit 2)."""


@dataclass
class Base:
    ref: str  # as given
    folder: Path | None  # None: the path does not exist at the ref ("added")
    described: str  # 'folder examples/x', 'origin/main (3f2a1c9d0e1b) examples/x'
    _tmp: Path | None = None

    def cleanup(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Base:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def _git(cwd: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess:
    return process.run(["git", *args], process.LOCAL_TIMEOUT_S, cwd=cwd, text=not binary)


def resolve(ref: str, head_folder: Path) -> Base:
    """The base for ``head_folder``: the folder ``ref``, or ``ref``'s copy of the same path
    in a temporary directory. Raises BaseError when neither can be had."""
    if Path(ref).is_dir():
        return Base(ref, Path(ref), f"folder `{ref}`")
    head_folder = Path(head_folder)
    if not head_folder.is_dir():
        raise BaseError(f"{head_folder}: no such folder")
    if shutil.which("git") is None:
        raise BaseError(f"--base {ref}: no folder of that name, and git is not on PATH to read "
                        "it as a ref")
    top = _git(head_folder, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise BaseError(f"--base {ref}: no folder of that name, and {head_folder} is not in a "
                        f"git repository to read it as a ref ({top.stderr.strip()})")
    root = Path(top.stdout.strip())
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        raise BaseError(f"--base {ref}: no folder of that name and no such git ref in {root} "
                        "(a shallow clone or a branch not fetched? in CI, check out with "
                        "fetch-depth: 0)")
    sha = commit.stdout.strip()
    rel = head_folder.resolve().relative_to(root.resolve()).as_posix()  # '.' at the top
    described = f"`{ref}` ({sha[:12]}) `{rel}`"
    listing = _git(root, "ls-tree", "-r", "-z", sha, "--", rel)
    if listing.returncode != 0:
        raise BaseError(f"--base {ref}: git ls-tree failed: {listing.stderr.strip()}")
    entries = [e for e in listing.stdout.split("\0") if e]
    if not entries:
        return Base(ref, None, described)
    whole = _is_kustomization(entries, rel)
    if whole:
        entries = _git(root, "ls-tree", "-r", "-z", sha).stdout.split("\0")
    tmp = Path(tempfile.mkdtemp(prefix="karpenter-check-base-"))
    try:
        out = tmp / (root.name if whole else Path(rel).name or root.name)
        out.mkdir()
        for entry in filter(None, entries):
            meta, _, path = entry.partition("\t")
            mode, kind, blob = meta.split()
            if kind != "blob" or mode == "120000":  # submodules and symlinks: not manifests
                continue
            data = _git(root, "cat-file", "blob", blob, binary=True)
            if data.returncode != 0:
                raise BaseError(f"--base {ref}: cannot read {path}: {data.stderr!r}")
            inside = whole or rel == "."
            target = out / (Path(path) if inside else Path(path).relative_to(rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data.stdout)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Base(ref, out / rel if whole else out, described, tmp)


def _is_kustomization(entries: list[str], rel: str) -> bool:
    """Whether ``ls-tree``'s entries of ``rel`` hold a kustomization at its top."""
    top = {f"{rel}/{name}" if rel != "." else name for name in kustomize.FILES}
    return any(entry.partition("\t")[2] in top for entry in entries)
