"""Build local mode's binaries from the Go module proxy into a per-user cache.

Each binary lands at ``<cache>/bin/<name>-<version>`` and is never rebuilt once there,
so reruns and CI reuse it. Builds are plain ``go build``: the Kubernetes and etcd
commands through the wrapper modules in ``gomod/``, kwok and Karpenter inside their own
downloaded module (its own go.mod and go.sum, exactly as released).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.filelock import file_lock
from karpenter_e2e.clusters.local import versions

log = logging.getLogger(__name__)

GOMOD_DIR = Path(__file__).parent / "gomod"


def cache_dir() -> Path:
    root = os.environ.get("KARPENTER_E2E_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "karpenter-e2e"
    )
    return Path(root)


def bin_dir() -> Path:
    return cache_dir() / "bin"


@dataclass(frozen=True)
class Target:
    """One binary: where its source comes from and how upstream builds it."""

    name: str  # file name in the cache, before "-<version>"
    version: str
    package: str  # import path of the main package
    # "gomod/<dir>" (a wrapper here), an absolute path (another mode's wrapper module),
    # or "<module path>" (downloaded at `version`)
    module: str
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    toolchain: str = "local"
    env: tuple[tuple[str, str], ...] = field(default=(("CGO_ENABLED", "0"),))

    @property
    def path(self) -> Path:
        return bin_dir() / f"{self.name}-{self.version}"


def _kube_ldflags(version: str) -> tuple[str, ...]:
    # hack/lib/version.sh: the same -X pairs for client-go and component-base, so that
    # `/version` and `kubectl version` report the real release.
    major, minor = version.lstrip("v").split(".")[:2]
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pairs = {"gitVersion": version, "gitMajor": major, "gitMinor": minor,
             "gitTreeState": "clean", "buildDate": date}
    flags = [f"-X k8s.io/{pkg}.{k}={v}" for k, v in pairs.items()
             for pkg in ("client-go/pkg/version", "component-base/version")]
    return tuple(flags) + ("-s", "-w")


def targets() -> list[Target]:
    kube = [
        Target(name, versions.KUBERNETES, f"k8s.io/kubernetes/cmd/{name}", "gomod/kubernetes",
               ldflags=_kube_ldflags(versions.KUBERNETES),
               # hack/lib/golang.sh's default tags for a non-debug build.
               tags=("selinux", "notest", "grpcnotrace"))
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    ]
    etcd = Target("etcd", versions.ETCD, "karpenter-e2e/clusters/local/gomod/etcd", "gomod/etcd",
                  ldflags=("-s", "-w"))
    kwok = [
        Target(name, versions.KWOK, f"sigs.k8s.io/kwok/cmd/{name}", "sigs.k8s.io/kwok",
               ldflags=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.KWOK.lstrip('v')}",
                        "-s", "-w"))
        for name in ("kwok", "kwokctl")
    ]
    karpenter = [
        # Named karpenter-kwok so it never clashes with kwok's own `kwok` binary.
        Target("karpenter-kwok", v, "sigs.k8s.io/karpenter/kwok", "sigs.k8s.io/karpenter",
               ldflags=(f"-X sigs.k8s.io/karpenter/pkg/operator.Version={v}", "-s", "-w"),
               toolchain=versions.GO_TOOLCHAIN)
        for v in versions.KARPENTER_VERSIONS
    ]
    return kube + [etcd] + kwok + karpenter


def find(name: str, version: str | None = None) -> Target:
    for t in targets():
        if t.name == name and (version is None or t.version == version):
            return t
    known = sorted({f"{t.name}@{t.version}" for t in targets()})
    raise ClusterError(f"no binary {name}@{version or '*'} is pinned; pinned: {', '.join(known)}")


def check_go() -> str:
    """Return the go command's version, or explain what is missing."""
    go = shutil.which("go")
    if not go:
        raise ClusterError("Go is not on PATH: local mode builds its binaries with `go build` "
                           f"(need Go >= {'.'.join(map(str, versions.MIN_GO))}; it fetches "
                           f"{versions.GO_TOOLCHAIN} itself where a module needs it)")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                         env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m[1]), int(m[2])) < versions.MIN_GO:
        raise ClusterError(f"{go} is {out or 'unknown'}; local mode needs Go >= "
                           f"{'.'.join(map(str, versions.MIN_GO))} (toolchain switching)")
    return out


def _go_env(target: Target) -> dict[str, str]:
    env = {**os.environ, "GOTOOLCHAIN": target.toolchain, "GOFLAGS": "-mod=readonly"}
    env.update(dict(target.env))
    return env


def _module_dir(target: Target) -> Path:
    if target.module.startswith("gomod/"):
        return GOMOD_DIR / target.module.split("/", 1)[1]
    if os.path.isabs(target.module):
        return Path(target.module)
    return download_module(target.module, target.version, target.toolchain)


def download_module(module: str, version: str, toolchain: str = "local") -> Path:
    """`go mod download` a module and return its directory in the module cache."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                          capture_output=True, text=True, cwd=tempfile.gettempdir(),
                          env={**os.environ, "GOTOOLCHAIN": toolchain, "GOFLAGS": ""})
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {"Error": (proc.stderr or proc.stdout).strip()}
    if info.get("Error") or not info.get("Dir"):
        raise ClusterError(f"cannot download {module}@{version} from the Go module proxy: "
                           f"{info.get('Error')}")
    return Path(info["Dir"])


def _build_lock():
    # xdist workers and a parallel `make` may all ask for the same binaries.
    return file_lock(bin_dir() / ".build.lock")


def build(target: Target) -> Path:
    """Build one target unless it is already cached; return its path."""
    if target.path.exists():
        return target.path
    with _build_lock():
        if target.path.exists():
            return target.path
        _build_group([target])
    return target.path


def build_all(only: list[Target] | None = None) -> list[Path]:
    """Build every missing target; targets sharing a module build in one `go build`."""
    wanted = only if only is not None else targets()
    if all(t.path.exists() for t in wanted):
        return [t.path for t in wanted]  # cached: never wait on another process's build
    with _build_lock():
        missing = [t for t in wanted if not t.path.exists()]
        if missing:
            check_go()
        groups: dict[tuple, list[Target]] = {}
        for t in missing:
            groups.setdefault((t.module, t.version, t.ldflags, t.tags, t.toolchain), []).append(t)
        cold = len(missing) == len(targets())
        if cold:
            last = last_build_time("cold build")
            log.info("cold build of %d binaries in %d go builds; %s", len(missing), len(groups),
                     f"the last one on this machine took {last / 60:.1f} min" if last
                     else "no earlier cold build recorded on this machine")
        started = time.monotonic()
        for group in groups.values():
            _build_group(group)
        if cold:
            _record_build_time("cold build", time.monotonic() - started)
    return [t.path for t in wanted]


BUILD_BOUND_S = 3600  # no go build here has taken more than 20 min; past this it is stuck
PROGRESS_S = 30


def _times_file() -> Path:
    return bin_dir() / ".build-times.json"


def last_build_time(key: str) -> float | None:
    """Seconds the last build of ``key`` took on this machine, if it was recorded."""
    try:
        return float(json.loads(_times_file().read_text())[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _record_build_time(key: str, seconds: float) -> None:
    try:
        times = json.loads(_times_file().read_text())
    except (OSError, ValueError):
        times = {}
    times[key] = round(seconds, 1)
    _times_file().write_text(json.dumps(times, indent=1, sort_keys=True))


def _build_group(group: list[Target], cwd: Path | None = None,
                 outputs: dict[str, Path] | None = None) -> None:
    """One `go build` for targets sharing a module; ``cwd`` and ``outputs`` (name -> path)
    replace the module directory and the cache paths (a mutant's patched copy)."""
    first = group[0]
    names = ", ".join(f"{t.name} {t.version}" for t in group)
    key = names if outputs is None else f"mutant of {names}"
    if outputs:  # a mutant: name the binary, which carries the mutant's name and digest
        names = ", ".join(p.name for p in outputs.values())
    last = last_build_time(key)
    estimate = f"last time on this machine: {last:.0f}s" if last else "no earlier build recorded"
    log.info("building %s with go build (%s)", names, estimate)
    cwd = cwd or _module_dir(first)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=bin_dir(), prefix=".build-") as tmp:
        cmd = ["go", "build", "-trimpath", "-o", tmp + "/"]
        if first.tags:
            cmd.append("-tags=" + ",".join(first.tags))
        if first.ldflags:
            cmd.append("-ldflags=" + " ".join(first.ldflags))
        cmd += [t.package for t in group]
        with open(Path(tmp) / "go-build.log", "w+") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, env=_go_env(first), stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                _wait_with_progress(proc, names, started, last)
            finally:
                if proc.poll() is None:  # Ctrl-C or the bound: never leave a go build behind
                    proc.kill()
                    proc.wait()
            out.seek(0)
            output = out.read()
        if proc.returncode != 0:
            raise BuildFailed(f"go build of {names} failed in {cwd}:\n"
                              + "\n".join(output.splitlines()[-30:]), output)
        for t in group:
            built = Path(tmp) / t.package.rsplit("/", 1)[-1]
            os.replace(built, (outputs or {}).get(t.name, t.path))  # a half-written binary is never cached
    took = time.monotonic() - started
    _record_build_time(key, took)
    log.info("built %s in %.0fs", names, took)


def _wait_with_progress(proc: subprocess.Popen, names: str, started: float,
                        last: float | None) -> None:
    while True:
        try:
            proc.wait(timeout=PROGRESS_S)
            return
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            if elapsed > BUILD_BOUND_S:
                raise BuildFailed(f"go build of {names} still running after {elapsed:.0f}s; "
                                  f"stopped it", "") from None
            log.info("still building %s: %.0fs so far%s", names, elapsed,
                     f" (last time {last:.0f}s)" if last else "")


class BuildFailed(ClusterError):
    def __init__(self, message: str, output: str):
        super().__init__(message)
        self.output = output


# ---- mutants ---------------------------------------------------------------------------------
def mutant_path(mutant, name: str = "karpenter-kwok") -> Path:
    """Where a mutant's binary is cached: keyed by binary, version, name and patch digest."""
    return bin_dir() / f"{name}-{mutant.version}-mutant-{mutant.key}"


def build_mutant(mutant) -> Path:
    """karpenter-kwok built from a copy of the pinned module with ``mutant``'s patch applied.
    Only the patched packages recompile: the rest comes from Go's build cache."""
    from karpenter_e2e.clusters.mutants import MutantError

    try:
        target = find("karpenter-kwok", mutant.version)
    except ClusterError:
        raise MutantError(mutant.name, f"its version {mutant.version} is not one local mode "
                                       f"builds ({', '.join(versions.KARPENTER_VERSIONS)})") from None
    return build_patched(mutant, target, _module_dir(target), lambda src: src)


def build_patched(mutant, target: Target, module_dir: Path, workdir) -> Path:
    """``target`` built with ``mutant``'s patch applied to a copy of ``module_dir``;
    ``workdir(patched copy)`` is where `go build` runs (the copy itself, or a wrapper module
    that replaces the module with it)."""
    from karpenter_e2e.clusters.mutants import MutantError, apply

    out = mutant_path(mutant, target.name)
    if out.exists():
        return out
    with _build_lock():
        if out.exists():
            return out
        check_go()
        root = cache_dir() / "mutants" / "src" / f"{target.name}-{mutant.key}"
        try:
            src = apply(mutant, module_dir, root / "module")
            _build_group([target], cwd=workdir(src), outputs={target.name: out})
        except BuildFailed as exc:
            compiler = [ln.strip() for ln in exc.output.splitlines() if re.search(r"\.go:\d+", ln)]
            raise MutantError(mutant.name, "does not build: "
                              + ("; ".join(compiler[:3]) or str(exc)[-400:])) from None
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out
