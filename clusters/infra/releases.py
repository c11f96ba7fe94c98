"""Which Karpenter releases local mode can build: the ones the Go module proxy serves.

The list is not written down here. It comes from the proxy (``go list -m -versions
sigs.k8s.io/karpenter``) and is kept for a day in the per-user cache
(``<cache>/karpenter-versions.json``, with the time it was fetched). The pinned versions
(``versions.KARPENTER_VERSIONS``, what ``make build`` builds and CI runs) never need the
list, so a machine without network still runs them.

Also here: which Go toolchain builds a release (from its own go.mod's ``go`` and
``toolchain`` lines).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError, CommandTimeout
from karpenter_e2e.clusters.infra import process, versions
from karpenter_e2e.clusters.infra.filelock import write_whole

log = logging.getLogger(__name__)

MODULE = "sigs.k8s.io/karpenter"
# The harness speaks karpenter.sh/v1 (NodePool, NodeClaim, their v1 fields): v1.0.0 on.
OLDEST = "v1.0.0"
MAX_AGE_S = 24 * 3600  # refetch the list once it is a day old
LIST_TIMEOUT_S = 60
_RELEASE = re.compile(r"^v\d+\.\d+\.\d+$")  # releases only: no pre-releases (v1.2.0-rc.1)


class UnknownVersion(ClusterError):
    """A version the harness cannot run: malformed, older than v1.0, or not served."""


def _cache_dir() -> Path:
    from karpenter_e2e.clusters.infra.build import cache_dir
    return cache_dir()


def cache_file(module: str = MODULE) -> Path:
    # karpenter-versions.json, kubernetes-versions.json (clusters/infra/kube_releases.py)
    return _cache_dir() / f"{module.rsplit('/', 1)[-1]}-versions.json"


def parse(go_list_output: str, module: str = MODULE) -> list[str]:
    """``go list -m -versions`` output ('sigs.k8s.io/karpenter v1.0.8 v1.1.5 ...') -> the
    releases (vX.Y.Z, no pre-releases), oldest first."""
    words = go_list_output.split()
    if not words or words[0] != module:
        raise ValueError(f"not a version list of {module}: {go_list_output.strip()[:200]!r}")
    return sorted({w for w in words[1:] if _RELEASE.match(w)}, key=versions.semver)


def go_list_m(args: list[str], timeout: float, needed: str) -> subprocess.CompletedProcess:
    """`go list -m <args>` against the module proxy, bounded by ``timeout``; ``needed`` says
    what for when Go is missing."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GOWORK": "off"}
    what = f"`go list -m {' '.join(args)}`"
    try:
        proc = process.run(["go", "list", "-m", *args], timeout, env=env,
                           cwd=tempfile.gettempdir())
    except CommandTimeout:
        raise ClusterError(f"{what} did not answer in {timeout:.0f}s (offline, or the module "
                           f"proxy is slow)") from None
    if proc.returncode == process.NOT_FOUND:
        raise ClusterError(f"Go is not on PATH: {needed} with {what}")
    return proc


def fetch(timeout: float = LIST_TIMEOUT_S, module: str = MODULE) -> list[str]:
    """Ask the Go module proxy (GOPROXY, as the go command is configured) for the list."""
    proc = go_list_m(["-versions", module], timeout,
                     f"the releases of {module} the harness can build are listed")
    if proc.returncode != 0:
        line = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ClusterError(f"cannot list the releases of {module} from the Go module proxy "
                           f"(GOPROXY={_goproxy()}): {line}")
    try:
        return parse(proc.stdout, module)
    except ValueError as exc:
        raise ClusterError(str(exc)) from None


def _goproxy() -> str:
    """GOPROXY as the go command sees it (for error messages)."""
    try:
        out = process.run(["go", "env", "GOPROXY"], 10,
                          env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    except (OSError, CommandTimeout):
        out = ""
    return out or os.environ.get("GOPROXY") or "unknown"


def served(now: float | None = None, fetcher=None, module: str = MODULE,
           needed_for: str = "", who: str = "Local mode") -> list[str]:
    """The releases of ``module`` the module proxy serves, oldest first: from the cache while
    it is less than a day old, else fetched (and cached). Offline with a stale cache: the
    stale list, with a warning; offline with none: a ClusterError that says so, and what the
    list is ``needed_for`` (by ``who``: local mode, aws-sim mode)."""
    now = time.time() if now is None else now
    fetcher = fetcher or (lambda: fetch(module=module))
    needed_for = needed_for or (f"to build a Karpenter other than the pinned "
                                f"{', '.join(versions.KARPENTER_VERSIONS)}")
    cached = _read_cache(module)
    if cached and 0 <= now - cached["fetched"] < MAX_AGE_S:
        return cached["versions"]
    try:
        found = fetcher()
    except ClusterError as exc:
        if cached:
            age_h = (now - cached["fetched"]) / 3600
            log.warning("%s; using the list fetched %.0f h ago (%s)", exc, age_h,
                        cache_file(module))
            return cached["versions"]
        raise ClusterError(f"{exc}. {who} needs that list once {needed_for} "
                           f"(it is then kept a day in {cache_file(module)})") from None
    _write_cache(found, now, module)
    return found


def _read_cache(module: str) -> dict | None:
    try:
        data = json.loads(cache_file(module).read_text())
        if (data.get("module") == module and isinstance(data.get("fetched"), (int, float))
                and isinstance(data.get("versions"), list) and data["versions"]):
            return data
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _write_cache(found: list[str], now: float, module: str) -> None:
    # xdist workers, and the two sides of check --compare-version, may write at once
    write_whole(cache_file(module), json.dumps({
        "module": module, "fetched": now,
        "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        "versions": found}, indent=1))


def nearest(version: str, available: list[str]) -> list[str]:
    """The served releases either side of ``version`` (one below, one above, where they exist)."""
    key = versions.semver(version)
    ordered = sorted(available, key=versions.semver)
    below = [v for v in ordered if versions.semver(v) < key]
    above = [v for v in ordered if versions.semver(v) > key]
    return below[-1:] + above[:1]


def check(version: str, served_list=None) -> str:
    """``version`` if local mode can build and run it, else an UnknownVersion that says why.
    The pinned versions are accepted without asking the proxy; ``served_list`` (a callable
    returning the list) defaults to ``served``."""
    try:
        if not _RELEASE.match(version or ""):
            raise ValueError(version)
        key = versions.semver(version)
    except (ValueError, TypeError):
        raise UnknownVersion(f"Karpenter version {version!r} is not a release like "
                             f"{versions.KARPENTER} (vMAJOR.MINOR.PATCH)") from None
    if key < versions.semver(OLDEST):
        raise UnknownVersion(f"Karpenter {version} is older than {OLDEST}: the harness needs "
                             f"Karpenter's v1 APIs (karpenter.sh/v1 NodePool and NodeClaim), "
                             f"first released in {OLDEST}")
    if version in versions.KARPENTER_VERSIONS:
        return version
    available = (served_list or served)()
    if version in available:
        return version
    near = nearest(version, [v for v in available if versions.semver(v) >= versions.semver(OLDEST)])
    raise UnknownVersion(f"Karpenter {version} is not served by the Go module proxy "
                         f"(GOPROXY={_goproxy()}); nearest served: "
                         f"{' and '.join(near) or 'none'} (all: {', '.join(available)})")


# ---- toolchains ------------------------------------------------------------------------------
def go_requirement(go_mod: str) -> tuple[int, ...]:
    """The oldest Go a go.mod accepts: the higher of its ``go`` and ``toolchain`` lines."""
    found: list[tuple[int, ...]] = [(0,)]
    for m in re.finditer(r"^(?:go\s+(\d+(?:\.\d+)*)|toolchain\s+go(\d+(?:\.\d+)*))\s*$",
                         go_mod, re.M):
        found.append(_go_version(m[1] or m[2]))
    return max(found)


def _go_version(text: str) -> tuple[int, ...]:
    """'1.26' -> (1, 26, 0); 'go1.26.9' -> (1, 26, 9); release candidates count as .0."""
    text = text.removeprefix("go")
    nums = [int(p) for p in re.findall(r"\d+", re.split(r"rc|beta", text)[0])]
    return tuple((nums + [0, 0, 0])[:3])


def choose_toolchain(required: tuple[int, ...], local: str,
                     candidates: tuple[str, ...] = versions.GO_TOOLCHAINS) -> str:
    """GOTOOLCHAIN for a build needing Go >= ``required``: "local" when the machine's go
    (``local``, e.g. 'go1.26.8') is new enough, else the oldest pinned toolchain that is
    (the go command fetches it from the module proxy)."""
    if _go_version(local) >= required:
        return "local"
    for tc in sorted(candidates, key=_go_version):
        if _go_version(tc) >= required:
            return tc
    want = ".".join(map(str, required))
    raise ClusterError(f"needs Go >= {want}; the machine's go is {local} and no pinned toolchain "
                       f"({', '.join(candidates)}) is that new: add one to "
                       f"versions.GO_TOOLCHAINS")
