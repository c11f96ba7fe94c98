"""Which releases of Karpenter's AWS provider aws-sim mode runs, and the wrapper module that
builds each.

The provider's releases are not written down here: the Go module proxy lists them
(``go list -m -versions github.com/aws/karpenter-provider-aws``, kept a day in
``<cache>/karpenter-provider-aws-versions.json``, as local mode keeps core's,
clusters/infra/releases.py). A provider release is built together with the core version its
go.mod requires (``sigs.k8s.io/karpenter``), and the harness runs only cores the proxy
serves, so a provider release is *runnable* when its core is in core's served list. The
pairing is read from the release's go.mod (``go list -m -json``, which fetches that one
file) and kept in ``<cache>/karpenter-provider-aws-cores.json``: a release's go.mod never
changes. The pinned releases (``versions.AWS_PROVIDER_VERSIONS``) need none of this: their
core is read from their committed wrapper module.

The pinned releases build through the committed wrappers ``gomod/provider-<version>``; any
other through a wrapper generated the same way into ``<cache>/gomod/provider-<version>``
(``write_wrapper``): upstream's go.mod, its module replaces carried over (a dependency's
replaces do not apply to the module that requires it), and each requirement the proxy
refuses (403/404/410) that the controller's build needs replaced with the newest version the
proxy serves. ``go mod tidy`` checks every sum against sum.golang.org, so nothing generated
is committed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process, releases, versions
from karpenter_e2e.clusters.infra.filelock import file_lock, write_whole

log = logging.getLogger(__name__)

MODULE = "github.com/aws/karpenter-provider-aws"
CORE = releases.MODULE
PACKAGE = f"{MODULE}/cmd/controller"
GOMOD_DIR = Path(__file__).parent / "gomod"
GO_TIMEOUT_S = 900  # one `go mod tidy` or `go list`; the cold tidy of v1.12.0 took 11 s here
MAX_ROUNDS = 6  # tidy rounds: each adds the replaces the last one's refusals asked for
UnknownVersion = releases.UnknownVersion


class NotServed(ClusterError):
    """A requirement of the provider the proxy refuses, and no version of it is served."""


# ---- go.mod text (pure) ----------------------------------------------------------------------
def _directives(go_mod: str, verb: str) -> list[str]:
    """The bodies of ``verb`` directives ('require', 'replace'), single-line and in blocks,
    comments stripped."""
    found: list[str] = []
    block = False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if block:
            if line == ")":
                block = False
            elif line:
                found.append(line)
        elif line == f"{verb} (":
            block = True
        elif line.startswith(f"{verb} "):
            found.append(line[len(verb):].strip())
    return found


def _replaces(go_mod: str) -> list[tuple[str, str]]:
    """(left side, right side) of each replace, e.g. ('a/b', 'a/b v1.2.3') or ('a/b', './x')."""
    out = []
    for body in _directives(go_mod, "replace"):
        left, sep, right = body.partition("=>")
        if sep:
            out.append((left.strip(), right.strip()))
    return out


def _is_directory(right: str) -> bool:
    return right.startswith(("./", "../", "/"))


def core_requirement(go_mod: str, version: str = "?") -> str:
    """The core version (``sigs.k8s.io/karpenter``) a provider go.mod builds with: its replace
    of core if it has one, else its require."""
    for left, right in _replaces(go_mod):
        if left.split()[0] != CORE:
            continue
        parts = right.split()
        if _is_directory(right) or len(parts) != 2 or parts[0] != CORE:
            raise ClusterError(f"{MODULE} {version}'s go.mod replaces {CORE} with {right!r}: "
                               f"not a release of {CORE} the harness can pair it with")
        return parts[1]
    for body in _directives(go_mod, "require"):
        parts = body.split()
        if len(parts) >= 2 and parts[0] == CORE:
            return parts[1]
    raise ClusterError(f"{MODULE} {version}'s go.mod does not require {CORE}")


def carried_replaces(go_mod: str, version: str = "?") -> list[str]:
    """Upstream's module replaces as wrapper lines ('replace a => b v1'). A directory replace
    points into a checkout the module zip does not have: refused, never copied blind."""
    lines = []
    for left, right in _replaces(go_mod):
        if _is_directory(right):
            raise ClusterError(f"{MODULE} {version}'s go.mod replaces {left} with the directory "
                               f"{right}, which a wrapper module cannot carry")
        lines.append(f"replace {left} => {right}")
    return lines


_REFUSED = re.compile(r"(\S+)@(v\S+): reading \S+: (?:403|404|410)\b")


def refused_for_build(go_output: str) -> list[tuple[str, str]]:
    """(module, version) for each requirement the proxy refused (403/404/410) that a package
    of the build needs. `go mod tidy` prints one block per package it could not load, from
    the main module down the import chain; a chain that passes through a test ("tested by")
    is not part of the build, so its refusals are left to `tidy -e` (upstream's wrapper for
    v1.15.0 replaces timestreamwrite, not fis, which only a test imports)."""
    blocks: list[list[str]] = []
    for line in go_output.splitlines():
        if line.startswith("go: ") or not blocks:
            blocks.append([line])
        else:
            blocks[-1].append(line)
    found: set[tuple[str, str]] = set()
    for block in blocks:
        text = "\n".join(block)
        if " tested by" in text:
            continue
        found.update((m[1], m[2]) for m in _REFUSED.finditer(text))
    return sorted(found)


def replace_lines(refused: list[tuple[str, str]], newest: Callable[[str], str | None],
                  version: str = "?") -> list[str]:
    """'replace m => m vN' for each refused (module, version): vN is the newest release of m
    the proxy serves (``newest``); a module with none served is NotServed."""
    lines = []
    for module, wanted in refused:
        chosen = newest(module)
        if not chosen:
            raise NotServed(f"{MODULE} {version} cannot be built from this Go module proxy "
                            f"(GOPROXY={releases._goproxy()}): it refuses {module} {wanted}, "
                            f"which the controller needs, and serves no release of {module}")
        lines.append(f"replace {module} => {module} {chosen}")
    return lines


def wrapper_go_mod(version: str, upstream_go_mod: str, replaces: list[str]) -> str:
    """The wrapper's go.mod before `go mod tidy`: upstream's ``go``, ``toolchain`` and
    ``godebug`` lines (a main module's defaults follow them), ``require <provider>
    <version>``, upstream's module replaces, then ``replaces`` (the refused requirements)."""
    go_line = re.search(r"^go\s+(\S+)\s*$", upstream_go_mod, re.M)
    if not go_line:
        raise ClusterError(f"{MODULE} {version}'s go.mod has no go line")
    toolchain = re.findall(r"^toolchain\s+(\S+)\s*$", upstream_go_mod, re.M)
    godebug = re.findall(r"^godebug\s+(\S+)\s*$", upstream_go_mod, re.M)
    lines = [
        "// Wrapper module: builds Karpenter's AWS provider (./cmd/controller) from",
        f"// {MODULE} {version}. Generated by clusters/awssim/provider_releases.py",
        "// from upstream's go.mod: its replaces carried over (a dependency's replaces do not",
        "// apply), and each requirement the module proxy refuses replaced with the newest",
        "// version it serves.",
        f"module karpenter-e2e/clusters/awssim/gomod/provider-{version}",
        "",
        f"go {go_line[1]}",
        *(f"toolchain {t}" for t in toolchain),
        "",
        *(f"godebug {g}" for g in godebug),
        *([""] if godebug else []),
        f"require {MODULE} {version}",
    ]
    extra = carried_replaces(upstream_go_mod, version) + replaces
    if extra:
        lines += ["", *extra]
    return "\n".join(lines) + "\n"


# ---- which releases run ----------------------------------------------------------------------
def served_providers() -> list[str]:
    return releases.served(module=MODULE, who="aws-sim mode",
                           needed_for=f"to run an AWS provider release other than the pinned "
                                      f"{', '.join(versions.AWS_PROVIDER_VERSIONS)}")


def served_cores() -> list[str]:
    return releases.served(needed_for="to know which AWS provider releases have a served core")


def pairing_file() -> Path:
    from karpenter_e2e.clusters.infra.build import cache_dir
    return cache_dir() / "karpenter-provider-aws-cores.json"


def upstream_go_mod(version: str, timeout: float = releases.LIST_TIMEOUT_S) -> str:
    """The provider's go.mod at ``version``, from the proxy (`go list -m -json` fetches only
    that file, into the module cache)."""
    proc = releases.go_list_m(["-json", f"{MODULE}@{version}"], timeout,
                              "the core a provider release builds with is read")
    try:
        info = json.loads(proc.stdout)
        return Path(info["GoMod"]).read_text()
    except (ValueError, KeyError, TypeError, OSError):
        line = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ClusterError(f"`go list -m -json {MODULE}@{version}` failed "
                           f"(GOPROXY={releases._goproxy()}): {line}") from None


def core_of(version: str, fetch: Callable[[str], str] | None = None) -> str:
    """The core version provider ``version`` builds with: a pinned release's from its
    committed wrapper, any other's from its go.mod (cached for good in ``pairing_file``)."""
    if version in versions.AWS_PROVIDER_VERSIONS:
        return core_requirement((GOMOD_DIR / f"provider-{version}" / "go.mod").read_text(),
                                version)
    path = pairing_file()
    try:
        known = json.loads(path.read_text())
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    if isinstance(known.get(version), str):
        return known[version]
    core = core_requirement((fetch or upstream_go_mod)(version), version)
    # xdist workers, and the two sides of check --compare-version, may write at once
    write_whole(path, json.dumps({**known, version: core}, indent=1, sort_keys=True))
    return core


def runnable(providers: list[str], cores: list[str], pair: Callable[[str], str]) -> list[str]:
    """The provider releases (from v1.0 on) whose core is served, oldest first."""
    oldest = versions.semver(releases.OLDEST)
    return [v for v in sorted(providers, key=versions.semver)
            if versions.semver(v) >= oldest and pair(v) in cores]


def _listing(providers: list[str], cores: list[str], pair: Callable[[str], str]) -> str:
    """'v1.10.0, v1.10.1 (core v1.10.0), ...': the runnable releases, each with its core where
    the two differ."""
    return ", ".join(v if pair(v) == v else f"{v} (core {pair(v)})"
                     for v in runnable(providers, cores, pair)) or "none"


def check(version: str, providers=None, cores=None, pair=None) -> str:
    """The core version ``version`` (a provider release) builds with, if aws-sim mode can
    run it; else an UnknownVersion that says why and names the runnable releases. The
    pinned releases are accepted without asking the proxy. ``providers`` and ``cores``
    (callables returning the served lists) and ``pair`` (release -> core) default to the
    proxy's answers, cached."""
    if not re.match(r"^v\d+\.\d+\.\d+$", version or ""):
        raise UnknownVersion(f"Karpenter's AWS provider {version!r} is not a release like "
                             f"{versions.AWS_PROVIDER} (vMAJOR.MINOR.PATCH)")
    if versions.semver(version) < versions.semver(releases.OLDEST):
        raise UnknownVersion(f"Karpenter's AWS provider {version} is older than "
                             f"{releases.OLDEST}: the harness needs Karpenter's v1 APIs")
    pair = pair or core_of
    if version in versions.AWS_PROVIDER_VERSIONS:
        return pair(version)
    served = (providers or served_providers)()
    if version not in served:
        near = releases.nearest(version, served)
        raise UnknownVersion(
            f"Karpenter's AWS provider {version} is not served by the Go module proxy "
            f"({MODULE}, GOPROXY={releases._goproxy()}); nearest served: "
            f"{' and '.join(near) or 'none'}; runnable in aws-sim mode (core served): "
            f"{_listing(served, (cores or served_cores)(), pair)}")
    core = pair(version)
    core_list = (cores or served_cores)()
    if core not in core_list:
        raise UnknownVersion(
            f"Karpenter's AWS provider {version} builds with core {CORE} {core}, which the Go "
            f"module proxy does not serve (GOPROXY={releases._goproxy()}), so aws-sim mode "
            f"cannot build it; runnable in aws-sim mode (core served): "
            f"{_listing(served, core_list, pair)}")
    return core


# ---- the wrapper module ----------------------------------------------------------------------
def wrapper_path(version: str) -> Path:
    """Where the wrapper of ``version`` is (pinned) or will be generated (any other)."""
    if version in versions.AWS_PROVIDER_VERSIONS:
        return GOMOD_DIR / f"provider-{version}"
    from karpenter_e2e.clusters.infra.build import cache_dir
    return cache_dir() / "gomod" / f"provider-{version}"


def wrapper_dir(version: str) -> Path:
    """The wrapper module of ``version``, generated on first use (``write_wrapper``)."""
    out = wrapper_path(version)
    if version in versions.AWS_PROVIDER_VERSIONS or (out / "go.sum").exists():
        return out
    check(version)
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.with_name(f"{out.name}.lock"), f"preparing {out.name}",
                   2 * GO_TIMEOUT_S):
        if not (out / "go.sum").exists():
            tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                write_wrapper(version, upstream_go_mod(version), tmp)
                shutil.rmtree(out, ignore_errors=True)
                tmp.rename(out)  # a half-tidied wrapper is never used
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def newest_served(module: str) -> str | None:
    listed = releases.fetch(module=module)
    return listed[-1] if listed else None


def _go(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess:
    from karpenter_e2e.clusters.infra import build
    env = {**os.environ, "GOTOOLCHAIN": build.toolchain_for(cwd), "GOFLAGS": "", "GOWORK": "off"}
    return process.run(["go", *args], GO_TIMEOUT_S, env=env, cwd=cwd,
                       what=f"`go {' '.join(args)}` of the {what} wrapper ({cwd})")


def write_wrapper(version: str, upstream: str, dest: Path, newest=newest_served) -> Path:
    """Write the wrapper for provider ``version`` into ``dest``: go.mod (``wrapper_go_mod``),
    the committed tools.go, go.sum from `go mod tidy -e`. Each round replaces what the last
    one's refusals named (``refused_for_build``), until `go list -deps` loads the controller
    with the wrapper as written (-mod=readonly: what `go build` will need)."""
    what = f"AWS provider {version}"
    dest.mkdir(parents=True)
    shutil.copy(GOMOD_DIR / f"provider-{versions.AWS_PROVIDER}" / "tools.go", dest / "tools.go")
    replaced: dict[str, str] = {}
    for _ in range(MAX_ROUNDS):
        lines = [f"replace {m} => {m} {v}" for m, v in sorted(replaced.items())]
        (dest / "go.mod").write_text(wrapper_go_mod(version, upstream, lines))
        tidy = _go(["mod", "tidy", "-e"], dest, what)
        refused = refused_for_build(tidy.stderr)
        if tidy.returncode == 0 and not refused:
            listed = _go(["list", "-mod=readonly", "-deps", PACKAGE], dest, what)
            if listed.returncode == 0:
                return dest
            refused = refused_for_build(listed.stderr)
            if not refused:
                raise ClusterError(f"the {what} wrapper does not load {PACKAGE} ({dest}):\n"
                                   + "\n".join(listed.stderr.strip().splitlines()[-15:]))
        elif tidy.returncode != 0 and not refused:
            raise ClusterError(f"`go mod tidy` of the {what} wrapper failed in {dest}:\n"
                               + "\n".join(tidy.stderr.strip().splitlines()[-15:]))
        again = [m for m, _ in refused if m in replaced]
        if again:
            raise NotServed(f"{MODULE} {version} cannot be built from this Go module proxy: it "
                            f"refuses even the newest served {', '.join(again)}")
        for line in replace_lines(refused, newest, version):
            module, _, chosen = line.removeprefix("replace ").partition(" => ")
            replaced[module] = chosen.split()[1]
            log.info("%s wrapper: %s (the proxy refuses %s)", what, line,
                     ", ".join(f"{m} {v}" for m, v in refused if m == module))
    raise ClusterError(f"the {what} wrapper still has refused requirements after {MAX_ROUNDS} "
                       f"rounds of `go mod tidy` ({dest})")
