"""Which Kubernetes local mode runs, and the wrapper module that builds it.

``--kubernetes-version`` takes a minor (``1.33``, ``v1.33``) or a release (``v1.33.13``). A
minor means its newest patch the Go module proxy serves (``go list -m -versions
k8s.io/kubernetes``, kept a day in ``<cache>/kubernetes-versions.json`` as for Karpenter,
clusters/infra/releases.py), except the pinned minor, which means the pinned
``versions.KUBERNETES``: it needs no network and does not move when upstream ships a patch.
Without the option a Karpenter release gets the newest served minor inside its supported
range (clusters/karpenter/compat.py). A minor outside that range, or not served, is refused here,
before anything is built or started.

The pinned release builds through the committed wrapper ``gomod/kubernetes``; any other is
built through a wrapper generated the same way into ``<cache>/gomod/kubernetes-<version>``
(``write_wrapper``). A generated wrapper is a function of upstream's go.mod at that release,
and ``go mod tidy`` checks every sum against sum.golang.org, so nothing is committed for it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process, releases, versions
from karpenter_e2e.clusters.infra.filelock import file_lock
from karpenter_e2e.clusters.karpenter import compat

log = logging.getLogger(__name__)

MODULE = "k8s.io/kubernetes"
PINNED_MINOR = compat.minor(versions.KUBERNETES)
TIDY_TIMEOUT_S = 900  # measured: see docs/measurements.md (cold module cache, 2 cores)
_REQUEST = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")


class UnsupportedKubernetes(ClusterError):
    """A Kubernetes version the harness will not run: malformed, not served, or outside the
    Karpenter release's supported range."""


def served_patches(served_list=None) -> dict[tuple[int, int], str]:
    """Minor -> the release it means: the newest served patch, the pinned one for the pinned
    minor. ``served_list`` (a callable) defaults to the proxy's list, cached a day."""
    listed = (served_list or _served)()
    newest: dict[tuple[int, int], str] = {}
    for v in sorted(listed, key=versions.semver):
        newest[compat.minor(v)] = v
    newest[PINNED_MINOR] = versions.KUBERNETES
    return newest


def _served() -> list[str]:
    return releases.served(module=MODULE, needed_for=f"to run a Kubernetes other than the "
                                                      f"pinned {versions.KUBERNETES}")


def resolve(request: str | None, karpenter_version: str, served_list=None) -> str:
    """The Kubernetes release (vX.Y.Z) to run under ``karpenter_version``: ``request`` (a
    minor or a release; None for the release's default), checked against the release's
    range first (no network), then against what the proxy serves."""
    support = compat.supported(karpenter_version)
    if not request:
        return default(karpenter_version, served_list)
    m = _REQUEST.match(request.strip())
    if not m:
        raise UnsupportedKubernetes(f"--kubernetes-version {request!r} is not a Kubernetes "
                                    f"minor or release like 1.33, v1.33 or v1.33.13")
    key = (int(m[1]), int(m[2]))
    if key not in support:
        raise UnsupportedKubernetes(f"Kubernetes {compat.minor_text(key)} is outside what "
                                    f"Karpenter {karpenter_version} supports: {support.text}")
    exact = f"v{m[1]}.{m[2]}.{m[3]}" if m[3] is not None else None
    if key == PINNED_MINOR and exact in (None, versions.KUBERNETES):
        return versions.KUBERNETES
    listed = (served_list or _served)()
    patches = served_patches(lambda: listed)
    if key not in patches:
        raise UnsupportedKubernetes(
            f"Kubernetes {compat.minor_text(key)} is not served by the Go module proxy "
            f"(k8s.io/kubernetes); served minors: {_minors(patches)}")
    if exact is None:
        return patches[key]
    if exact not in listed:
        same = [v for v in listed if compat.minor(v) == key]
        raise UnsupportedKubernetes(f"Kubernetes {exact} is not served by the Go module proxy; "
                                    f"served {compat.minor_text(key)} releases: {', '.join(same)}")
    return exact


def default(karpenter_version: str, served_list=None) -> str:
    """The newest served minor inside the release's range, at its patch (``served_patches``).
    Where the range ends at the pinned minor that is the pinned release: no network."""
    support = compat.supported(karpenter_version)
    if support.newest == PINNED_MINOR:
        return versions.KUBERNETES
    patches = served_patches(served_list)
    skipped: list[str] = []
    while True:
        try:
            chosen = patches[compat.default_minor(karpenter_version, patches)]
        except ValueError as exc:
            raise UnsupportedKubernetes(str(exc) + "".join(f"; {s}" for s in skipped)) from None
        if served_list is not None:  # a given list (tests): the proxy is not asked
            return chosen
        # The proxy may serve k8s.io/kubernetes at a release but not every staging module it
        # pins (v1.31.14 here): the default is the newest minor that can be built. Asked from
        # the modules' version lists (cached a day), not by making the wrapper, which would
        # download Kubernetes at collection time.
        missing = unserved_staging(chosen)
        if not missing:
            return chosen
        skipped.append(f"{chosen} skipped: the proxy does not serve {', '.join(missing)}")
        log.warning("Kubernetes %s cannot be built here (the proxy does not serve %s); the "
                    "default for Karpenter %s falls back to an older minor in its range",
                    chosen, ", ".join(missing), karpenter_version)
        del patches[compat.minor(chosen)]


# The staging modules seen missing at a served release (1.31.14: all three); the wrapper's
# `go mod tidy` still names any other (NotServed) when it is made.
PROBED_STAGING = ("k8s.io/kube-scheduler", "k8s.io/kube-controller-manager",
                  "k8s.io/endpointslice")


def unserved_staging(version: str, served=None) -> list[str]:
    """'k8s.io/X v0.Y.Z' for each of PROBED_STAGING the proxy does not list at ``version``'s
    staging version."""
    served = served or (lambda m: releases.served(module=m, needed_for=f"to run Kubernetes "
                                                                         f"{version}"))
    staging = versions.staging_version(version)
    return [f"{m} {staging}" for m in PROBED_STAGING if staging not in served(m)]


def _minors(patches: dict[tuple[int, int], str]) -> str:
    return ", ".join(compat.minor_text(k) for k in sorted(patches))


# ---- the wrapper module ----------------------------------------------------------------------
def wrapper_dir(version: str) -> Path:
    """The module directory `go build` runs in for Kubernetes ``version``: the committed
    wrapper for the pinned release, else one generated on first use (``write_wrapper``)."""
    from karpenter_e2e.clusters.infra import build

    if version == versions.KUBERNETES:
        return build.GOMOD_DIR / "kubernetes"
    out = build.cache_dir() / "gomod" / f"kubernetes-{version}"
    if _current(out):
        return out
    # Why tidy failed: the next try fails at once, with the same reason.
    unbuildable = out.with_name(f"{out.name}.unbuildable")
    if unbuildable.exists():
        raise NotServed(unbuildable.read_text() + f" (remembered in {unbuildable}; delete it "
                                                     f"to try again)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.with_name(f"{out.name}.lock"), f"preparing {out.name}",
                   build.DOWNLOAD_TIMEOUT_S + TIDY_TIMEOUT_S):
        if not _current(out):
            upstream = build.download_module(MODULE, version)
            tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                write_wrapper(version, (upstream / "go.mod").read_text(), tmp)
            except NotServed as exc:
                unbuildable.write_text(str(exc))
                raise
            finally:
                if not (tmp / "go.sum").exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)  # a half-tidied wrapper is never used
    return out


def _current(wrapper: Path) -> bool:
    """Whether a generated wrapper is whole (go.sum written last) and pins today's commands
    (the committed tools.go: a command added since needs its sums, so it is made again)."""
    from karpenter_e2e.clusters.infra import build

    committed = (build.GOMOD_DIR / "kubernetes" / "tools.go").read_text()
    return ((wrapper / "go.sum").exists()
            and (wrapper / "tools.go").read_text() == committed)


class NotServed(ClusterError):
    """The proxy serves k8s.io/kubernetes at a release but not every staging module at its
    v0.Y.Z (seen here: v1.31.14 without k8s.io/kube-scheduler and k8s.io/endpointslice)."""


def missing_modules(tidy_output: str) -> list[str]:
    """'k8s.io/X v0.Y.Z' for each module `go mod tidy` could not fetch (403/404/410)."""
    found = re.findall(r"(\S+)@(v\S+): reading \S+: (?:403|404|410)\b", tidy_output)
    return sorted({f"{m} {v}" for m, v in found})


def write_wrapper(version: str, upstream_go_mod: str, dest: Path) -> Path:
    """Write the wrapper for ``version`` into ``dest``: go.mod from ``upstream_go_mod``
    (``wrapper_go_mod``), the committed tools.go, and go.sum from `go mod tidy`."""
    from karpenter_e2e.clusters.infra import build

    dest.mkdir(parents=True)
    (dest / "go.mod").write_text(wrapper_go_mod(version, upstream_go_mod))
    shutil.copy(build.GOMOD_DIR / "kubernetes" / "tools.go", dest / "tools.go")
    env = {**os.environ, "GOTOOLCHAIN": build.toolchain_for(dest), "GOFLAGS": "",
           "GOWORK": "off"}
    proc = process.run(["go", "mod", "tidy"], TIDY_TIMEOUT_S, env=env, cwd=dest,
                       what=f"`go mod tidy` of the Kubernetes {version} wrapper ({dest})")
    if proc.returncode != 0:
        missing = missing_modules(proc.stderr)
        if missing:
            raise NotServed(f"Kubernetes {version} cannot be built from this Go module proxy "
                            f"(GOPROXY={releases._goproxy()}): it serves k8s.io/kubernetes "
                            f"{version} but not {', '.join(missing)}, which the wrapper pins. "
                            f"Choose another minor inside the release's range with "
                            f"--kubernetes-version")
        raise ClusterError(f"`go mod tidy` of the Kubernetes {version} wrapper failed in {dest}:"
                           f"\n" + "\n".join(proc.stderr.strip().splitlines()[-15:]))
    return dest


def wrapper_go_mod(version: str, upstream_go_mod: str) -> str:
    """The wrapper's go.mod before `go mod tidy`: upstream's ``go`` and ``godebug`` lines (a
    main module's godebug defaults follow them), each ``./staging/src/k8s.io/X`` replace
    pinned to the published ``k8s.io/X v0.Y.Z`` (the module zip has no staging/), and
    ``require k8s.io/kubernetes <version>``."""
    go_line = re.search(r"^go\s+(\S+)\s*$", upstream_go_mod, re.M)
    if not go_line:
        raise ClusterError(f"k8s.io/kubernetes {version}'s go.mod has no go line")
    godebug = re.findall(r"^godebug\s+(\S+)\s*$", upstream_go_mod, re.M)
    staging = re.findall(r"^\s*(k8s\.io/\S+)\s+=>\s+\./staging/src/(\S+)\s*$", upstream_go_mod,
                         re.M)
    if not staging or any(a != b for a, b in staging):
        raise ClusterError(f"k8s.io/kubernetes {version}'s go.mod has no staging replaces "
                           f"of the expected form (k8s.io/X => ./staging/src/k8s.io/X)")
    others = [ln.strip() for ln in upstream_go_mod.splitlines()
              if "=>" in ln and "./staging/src/" not in ln]
    if others:  # never seen up to v1.37; copying them blind could point at a missing path
        raise ClusterError(f"k8s.io/kubernetes {version}'s go.mod has replaces the wrapper does "
                           f"not know how to carry: {others}")
    staging_v = versions.staging_version(version)
    lines = [
        "// Wrapper module: builds the commands tools.go names (the control plane, kubectl, and a "
        "kind node's",
        f"// kubelet, kubeadm and kube-proxy) from k8s.io/kubernetes {version}. Upstream's go.mod "
        f"points every k8s.io/* staging module at",
        "// ./staging/src/..., which the module zip does not contain, so each is pinned here to",
        "// the matching published v0.X.Y. Generated by kube_releases.write_wrapper.",
        "module karpenter-e2e/clusters/infra/gomod/kubernetes",
        "",
        f"go {go_line[1]}",
        "",
        *(f"godebug {g}" for g in godebug),
        *([""] if godebug else []),
        "replace (",
        *(f"\t{mod} => {mod} {staging_v}" for mod, _ in sorted(staging)),
        ")",
        "",
        f"require {MODULE} {version}",
    ]
    return "\n".join(lines) + "\n"
