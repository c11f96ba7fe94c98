"""Mutants: patches against the pinned Karpenter module, each a regression the suites must catch.

A mutant file is ``<name>.patch``: ``# key: value`` header lines (regression, scenarios,
family, version), then a unified diff relative to the module root. A ``<name>.fault`` has
the header only and breaks the cluster instead of the code (``fault:`` options, e.g. a
catalogue without arm64 types): the harness's negative checks, in the same matrix.
Optional headers: ``oracle:`` the one oracle that must catch it (its scenarios pass with
the oracles off); ``generic:`` an oracle that must catch it by itself with the scenarios'
own asserts set aside (``--karpenter-asserts=off``), whether or not the asserts catch it
too; ``excuse:`` the oracle excuses it proves do not swallow it (ids of
fixtures/oracles/excuses.py, comma separated); ``setup:`` pytest options for the mutant
*and* its control (e.g. an upgrade from the previous version), ``expect:`` how the
scenario must fail (``killed``, an assertion, by default; ``aborted`` for a Karpenter that
is not running), ``module:`` the module the diff applies to (``sigs.k8s.io/karpenter``,
core, by default; or ``github.com/aws/karpenter-provider-aws``, whose mutants run in
aws-sim mode only).

This module reads and checks them and applies one to a writable copy of the module;
building and running live in ``clusters.infra.build`` and ``runners.mutant_matrix``.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process

ROOT = Path(__file__).resolve().parents[2]
MUTANTS_DIR = ROOT / "mutants"
FIELDS = ("regression", "scenarios", "family", "version")
OPTIONAL = ("fault", "setup", "expect", "module", "oracle", "generic", "excuse")
EXPECT = ("killed", "aborted")
CORE = "sigs.k8s.io/karpenter"
AWS_PROVIDER = "github.com/aws/karpenter-provider-aws"
# Which modes build a mutant of each module: core is inside karpenter-kwok (local, kind) and
# inside the AWS provider (aws-sim); the provider's own code only in aws-sim.
MODES = {CORE: ("local", "kind", "aws-sim"), AWS_PROVIDER: ("aws-sim",)}


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
    fault: tuple[str, ...] = ()  # pytest options that break the cluster (a .fault file)
    setup: tuple[str, ...] = ()  # pytest options for this mutant and its control
    expect: str = "killed"
    module: str = CORE  # the Go module the diff applies to
    # An oracle's proof (fixtures/oracles/): only that oracle catches this mutant. Its
    # scenarios must pass with the oracles off and fail, naming it, with them on.
    oracle: str = ""
    # The generic verdict's proof: with the scenarios' own asserts set aside, this oracle
    # still fails each of them (the asserts may catch it too).
    generic: str = ""
    excuses: tuple[str, ...] = ()  # the oracle excuses it proves (fixtures/oracles/excuses.py)

    def runs_in(self, mode: str) -> bool:
        """A fault breaks a cluster of any mode its options allow; a patch needs a build of
        its module that the mode runs."""
        return mode in MODES[self.module]

    @property
    def patched(self) -> bool:
        return not self.fault

    @property
    def key(self) -> str:
        return f"{self.name}-{self.digest[:10]}"


def parse(path: Path) -> Mutant:
    path = path.resolve()  # git apply runs inside the module copy, not where we were called
    name = path.name.removesuffix(".patch").removesuffix(".fault")
    text = path.read_text(errors="replace")
    header: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"#\s*([a-z]+):\s*(.*)", line)
        if m:
            if m[1] in FIELDS + OPTIONAL and m[1] not in header:
                header[m[1]] = m[2].strip()
            continue
        if line.startswith(("---", "diff ")):
            break
    missing = [f for f in FIELDS if not header.get(f)]
    if missing:
        raise MutantError(name, f"{path} has no {', '.join(missing)} header line "
                                f"(expected '# {missing[0]}: ...' before the diff)")
    is_fault = path.suffix == ".fault"
    if is_fault and not header.get("fault"):
        raise MutantError(name, f"{path} is a .fault file without a '# fault: <options>' line")
    if not is_fault and "\n--- " not in text and not text.startswith("--- "):
        raise MutantError(name, f"{path} holds no unified diff")
    _check_version(name, header["version"])
    expect = header.get("expect", "killed")
    if expect not in EXPECT:
        raise MutantError(name, f"expect: {expect!r}; one of {', '.join(EXPECT)}")
    module = header.get("module", CORE)
    if module not in MODES:
        raise MutantError(name, f"module: {module!r}; one of {', '.join(MODES)}")
    scenarios = tuple(s.strip() for s in header["scenarios"].split(",") if s.strip())
    oracle, generic = header.get("oracle", ""), header.get("generic", "")
    for key, value in (("oracle", oracle), ("generic", generic)):
        if value and not re.fullmatch(r"[a-z][a-z-]*", value):
            raise MutantError(name, f"{key}: {value!r} is no oracle name (docs/oracles.md)")
    excuses = tuple(x.strip() for x in header.get("excuse", "").split(",") if x.strip())
    if excuses and not (oracle or generic):
        raise MutantError(name, "excuse: needs the oracle that must fire with the excuse in "
                                "place (an oracle: or generic: line)")
    return Mutant(name, path, header["regression"], scenarios, header["family"],
                  header["version"], hashlib.sha256(text.encode()).hexdigest(),
                  fault=tuple(shlex.split(header.get("fault", ""))),
                  setup=tuple(shlex.split(header.get("setup", ""))), expect=expect, module=module,
                  oracle=oracle, generic=generic, excuses=excuses)


def _check_version(name: str, version: str) -> None:
    """The header's ``version:``: any release from v1.0 on (whether the module proxy serves
    it is checked when it is built, clusters/infra/releases.py)."""
    from karpenter_e2e.clusters.infra import releases, versions
    try:
        key = versions.semver(version)
    except ValueError:
        raise MutantError(name, f"version: {version!r} is not a release like v1.15.0") from None
    if key < versions.semver(releases.OLDEST):
        raise MutantError(name, f"version: {version} is older than {releases.OLDEST}; the "
                                f"harness needs Karpenter's v1 APIs")


def load(directory: Path = MUTANTS_DIR) -> list[Mutant]:
    if not directory.is_dir():
        raise ClusterError(f"no mutant folder {directory}")
    found = [parse(p) for p in sorted([*directory.glob("*.patch"), *directory.glob("*.fault")])]
    if not found:
        raise ClusterError(f"no *.patch or *.fault in {directory}")
    return found


def select(mutants: list[Mutant], names: list[str], mode: str = "local") -> list[Mutant]:
    """The named mutants; unknown names, or a mutant ``mode`` cannot build, are an error.
    Without names: in local and kind mode every core patch and fault; in aws-sim mode the
    AWS provider's patches (core patches run there by name)."""
    if not names:
        if mode == "aws-sim":
            return [m for m in mutants if m.module == AWS_PROVIDER]
        return [m for m in mutants if m.runs_in(mode)]
    by_name = {m.name: m for m in mutants}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ClusterError(f"unknown mutant {', '.join(unknown)}; known: "
                           f"{', '.join(sorted(by_name))}")
    elsewhere = [n for n in names if not by_name[n].runs_in(mode)]
    if elsewhere:
        raise ClusterError(f"mutant {', '.join(elsewhere)} patches {by_name[elsewhere[0]].module}, "
                           f"which {mode} mode does not build: run it with --cluster "
                           f"{MODES[by_name[elsewhere[0]].module][0]}")
    return [by_name[n] for n in names]


def touched(mutant: Mutant) -> list[str]:
    """The module paths the patch changes (its ``+++ b/...`` lines)."""
    if not mutant.patched:
        return []
    return [line[6:].strip() for line in mutant.path.read_text(errors="replace").splitlines()
            if line.startswith("+++ b/")]


def apply_to_dirs(mutant: Mutant, module_dir: Path, rel_dirs: list[str], dest: Path) -> list[Path]:
    """Copies of the module's ``rel_dirs`` under ``dest`` with the patch's hunks for them
    applied: the CRDs a mutant changes, which the cluster installs instead of the module's."""
    if dest.exists():
        shutil.rmtree(dest)
    for rel in rel_dirs:
        shutil.copytree(module_dir / rel, dest / rel)
        for p in (dest / rel).rglob("*"):
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    include = [f"--include={rel}/*" for rel in rel_dirs]
    proc = process.run(["git", "apply", "--whitespace=nowarn", *include, str(mutant.path)],
                       process.LOCAL_TIMEOUT_S, cwd=dest, what=f"git apply of {mutant.name}")
    if proc.returncode != 0:
        raise MutantError(mutant.name, f"its CRD hunks do not apply to {module_dir.name}: "
                                       + proc.stderr.strip()[:400])
    return [dest / rel for rel in rel_dirs]


def writable_copy(module_dir: Path, dest: Path) -> Path:
    """A copy of a module (the module cache is read-only) at ``dest``, writable."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(module_dir, dest, symlinks=True)
    for p in [dest, *dest.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dest


def apply(mutant: Mutant, module_dir: Path, dest: Path) -> Path:
    """Copy the module to ``dest`` (writable) and apply the patch; name the failing hunk."""
    writable_copy(module_dir, dest)
    proc = process.run(["git", "apply", "--verbose", "--whitespace=nowarn", str(mutant.path)],
                       process.LOCAL_TIMEOUT_S, cwd=dest, what=f"git apply of {mutant.name}")
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(("error", "fatal"))]
        raise MutantError(mutant.name, f"does not apply to {module_dir.name}: "
                                       + ("; ".join(lines[:4]) or proc.stderr.strip()[:400]))
    return dest
