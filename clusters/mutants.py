"""Mutants: patches against the pinned Karpenter module, each a regression the suites must catch.

A mutant file is ``<name>.patch``: ``# key: value`` header lines (regression, scenarios,
family, version), then a unified diff relative to the module root. This module reads and
checks them and applies one to a writable copy of the module; building and running live
in ``clusters.local.build`` and ``clusters.mutant_matrix``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from clusters.errors import ClusterError

ROOT = Path(__file__).resolve().parent.parent
MUTANTS_DIR = ROOT / "mutants"
FIELDS = ("regression", "scenarios", "family", "version")


class MutantError(ClusterError):
    """A mutant that cannot be used: bad header, does not apply, does not build."""

    def __init__(self, mutant: str, message: str):
        self.mutant = mutant
        super().__init__(f"mutant {mutant}: {message}")


@dataclass(frozen=True)
class Mutant:
    name: str
    path: Path
    regression: str
    scenarios: tuple[str, ...]
    family: str
    version: str
    digest: str  # of the whole file: a changed patch is a different build

    @property
    def key(self) -> str:
        return f"{self.name}-{self.digest[:10]}"


def parse(path: Path) -> Mutant:
    name = path.name.removesuffix(".patch")
    text = path.read_text(errors="replace")
    header: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"#\s*([a-z]+):\s*(.*)", line)
        if m:
            if m[1] in FIELDS and m[1] not in header:
                header[m[1]] = m[2].strip()
            continue
        if line.startswith(("---", "diff ")):
            break
    missing = [f for f in FIELDS if not header.get(f)]
    if missing:
        raise MutantError(name, f"{path} has no {', '.join(missing)} header line "
                                f"(expected '# {missing[0]}: ...' before the diff)")
    if "\n--- " not in text and not text.startswith("--- "):
        raise MutantError(name, f"{path} holds no unified diff")
    scenarios = tuple(s.strip() for s in header["scenarios"].split(",") if s.strip())
    return Mutant(name, path, header["regression"], scenarios, header["family"],
                  header["version"], hashlib.sha256(text.encode()).hexdigest())


def load(directory: Path = MUTANTS_DIR) -> list[Mutant]:
    if not directory.is_dir():
        raise ClusterError(f"no mutant folder {directory}")
    found = [parse(p) for p in sorted(directory.glob("*.patch"))]
    if not found:
        raise ClusterError(f"no *.patch in {directory}")
    return found


def select(mutants: list[Mutant], names: list[str]) -> list[Mutant]:
    """The named mutants (all when ``names`` is empty); unknown names are an error."""
    if not names:
        return mutants
    by_name = {m.name: m for m in mutants}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ClusterError(f"unknown mutant {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(by_name))}")
    return [by_name[n] for n in names]


def apply(mutant: Mutant, module_dir: Path, dest: Path) -> Path:
    """Copy the module to ``dest`` (writable) and apply the patch; name the failing hunk."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(module_dir, dest, symlinks=True)
    for p in [dest, *dest.rglob("*")]:  # the module cache is read-only
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    proc = subprocess.run(["git", "apply", "--verbose", "--whitespace=nowarn", str(mutant.path)],
                          cwd=dest, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(("error", "fatal"))]
        raise MutantError(mutant.name, f"does not apply to {module_dir.name}: "
                                       + ("; ".join(lines[:4]) or proc.stderr.strip()[:400]))
    return dest
