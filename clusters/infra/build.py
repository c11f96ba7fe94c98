"""Build local mode's binaries from the Go module proxy into a per-user cache.

Each binary lands at ``<cache>/bin/<name>-<version>`` and is never rebuilt once there,
so reruns and CI reuse it. Builds are plain ``go build``: the Kubernetes and etcd
commands through the wrapper modules in ``gomod/``, kwok and Karpenter inside their own
downloaded module (its own go.mod and go.sum, exactly as released).

Long because every binary local mode runs is built here, each a small target (Kubernetes,
etcd, kwok, Karpenter, mutants) over one cache and one lock; one build mechanism, one
module.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
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

from karpenter_e2e.clusters.api.waits import stop_point
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process, versions
from karpenter_e2e.clusters.infra.filelock import file_lock

log = logging.getLogger(__name__)

GOMOD_DIR = Path(__file__).parent / "gomod"
# A bound, not a measurement: a module download (with the toolchain it needs) took at most
# minutes on a cold cache here.
DOWNLOAD_TIMEOUT_S = 1800


# A niceness for go build (0-19; unset or 0: none). The matrix sets 10 for its builds ahead.
BUILD_NICE_ENV = "KARPENTER_E2E_BUILD_NICE"


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
    toolchain: str = "local"  # GOTOOLCHAIN, or FROM_GO_MOD: chosen from the module's go.mod
    env: tuple[tuple[str, str], ...] = field(default=(("CGO_ENABLED", "0"),))

    @property
    def path(self) -> Path:
        return bin_dir() / f"{self.name}-{self.version}"


# Target.toolchain for Karpenter: the machine's go when the release's go.mod accepts it, else
# the oldest pinned toolchain that it accepts (releases.choose_toolchain).
FROM_GO_MOD = "go.mod"
KARPENTER_MODULE = "sigs.k8s.io/karpenter"


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


KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
KUBE_WRAPPER = "gomod/kubernetes"  # the committed one for the pinned release, else generated


# What a kind node runs beside the control plane (clusters/kind/nodeimage.py), built on demand.
KUBE_NODE_BINARIES = ("kubelet", "kubeadm", "kube-proxy")


def kube_targets(version: str = versions.KUBERNETES,
                 names: tuple[str, ...] = KUBE_BINARIES) -> list[Target]:
    """The control plane and kubectl (or ``names``) at Kubernetes ``version`` (any served
    release: its wrapper module comes from kube_releases.wrapper_dir)."""
    return [Target(name, version, f"k8s.io/kubernetes/cmd/{name}", KUBE_WRAPPER,
                   ldflags=_kube_ldflags(version),
                   # hack/lib/golang.sh's default tags for a non-debug build.
                   tags=("selinux", "notest", "grpcnotrace"), toolchain=FROM_GO_MOD)
            for name in names]


ETCD_WRAPPER = "gomod/etcd"


def etcd_target(version: str = versions.ETCD) -> Target:
    """etcd at ``version``: the committed wrapper for the pinned release, else one generated
    into the cache (etcd_wrapper_dir), as for Kubernetes."""
    return Target("etcd", version, "karpenter-e2e/clusters/infra/gomod/etcd", ETCD_WRAPPER,
                  ldflags=("-s", "-w"))


def targets() -> list[Target]:
    kube = kube_targets()  # the pinned release (make build); others: kube_targets(version)
    etcd = etcd_target()
    kwok = [
        Target(name, versions.KWOK, f"sigs.k8s.io/kwok/cmd/{name}", "sigs.k8s.io/kwok",
               ldflags=(f"-X sigs.k8s.io/kwok/pkg/consts.Version={versions.KWOK.lstrip('v')}",
                        "-s", "-w"))
        for name in ("kwok", "kwokctl")
    ]
    # The pinned Karpenter versions (make build); any other served release: karpenter_target.
    karpenter = [karpenter_target(v) for v in versions.KARPENTER_VERSIONS]
    return kube + [etcd] + kwok + karpenter


def karpenter_target(version: str) -> Target:
    # Named karpenter-kwok so it never clashes with kwok's own `kwok` binary.
    return Target("karpenter-kwok", version, "sigs.k8s.io/karpenter/kwok", KARPENTER_MODULE,
                  ldflags=(f"-X sigs.k8s.io/karpenter/pkg/operator.Version={version}", "-s", "-w"),
                  toolchain=FROM_GO_MOD)


def find(name: str, version: str | None = None) -> Target:
    for t in targets():
        if t.name == name and (version is None or t.version == version):
            return t
    if name == "karpenter-kwok" and version:
        from karpenter_e2e.clusters.infra import releases
        return karpenter_target(releases.check(version))  # any release the proxy serves
    if name in KUBE_BINARIES + KUBE_NODE_BINARIES and version:  # kube_releases.resolve's
        return kube_targets(version, (name,))[0]
    if name == "etcd" and version:
        return etcd_target(version)
    known = sorted({f"{t.name}@{t.version}" for t in targets()})
    raise ClusterError(f"no binary {name}@{version or '*'} is pinned; pinned: {', '.join(known)}")


def check_go() -> str:
    """Return the go command's version, or explain what is missing."""
    go = shutil.which("go")
    if not go:
        raise ClusterError("Go is not on PATH: local mode builds its binaries with `go build` "
                           f"(need Go >= {'.'.join(map(str, versions.MIN_GO))}; it fetches "
                           f"{versions.GO_TOOLCHAIN} itself where a module needs it)")
    out = process.run([go, "env", "GOVERSION"], process.LOCAL_TIMEOUT_S,
                      env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m[1]), int(m[2])) < versions.MIN_GO:
        raise ClusterError(f"{go} is {out or 'unknown'}; local mode needs Go >= "
                           f"{'.'.join(map(str, versions.MIN_GO))} (toolchain switching)")
    return out


def _go_env(target: Target, module_dir: Path | None = None) -> dict[str, str]:
    toolchain = target.toolchain
    if toolchain == FROM_GO_MOD:
        toolchain = toolchain_for(module_dir or _module_dir(target))
    env = {**os.environ, "GOTOOLCHAIN": toolchain, "GOFLAGS": "-mod=readonly"}
    env.update(dict(target.env))
    return env


def toolchain_for(module_dir: Path) -> str:
    """GOTOOLCHAIN for building inside ``module_dir``: what its go.mod's go/toolchain lines
    accept, the machine's go first (releases.choose_toolchain)."""
    from karpenter_e2e.clusters.infra import releases
    required = releases.go_requirement((module_dir / "go.mod").read_text())
    try:
        return releases.choose_toolchain(required, check_go())
    except ClusterError as exc:
        raise ClusterError(f"{module_dir.name} {exc}") from None


def _module_dir(target: Target) -> Path:
    if target.module == KUBE_WRAPPER:
        from karpenter_e2e.clusters.infra import kube_releases
        return kube_releases.wrapper_dir(target.version)
    if target.module == ETCD_WRAPPER and target.version != versions.ETCD:
        return etcd_wrapper_dir(target.version)
    if target.module.startswith("gomod/"):
        return GOMOD_DIR / target.module.split("/", 1)[1]
    if os.path.isabs(target.module):
        return Path(target.module)
    return download_module(target.module, target.version, target.toolchain)


def etcd_wrapper_dir(version: str) -> Path:
    """The wrapper module for etcd ``version`` (not the pinned one): the committed main.go
    and a go.mod requiring the server module at ``version``, with go.sum from `go mod tidy`
    (which checks every sum against sum.golang.org), made once into the cache."""
    out = cache_dir() / "gomod" / f"etcd-{version}"
    if (out / "go.sum").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out.with_name(f"{out.name}.lock"), f"preparing {out.name}",
                   DOWNLOAD_TIMEOUT_S):
        if not (out / "go.sum").exists():
            tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            committed = (GOMOD_DIR / "etcd" / "go.mod").read_text()
            go_line = re.search(r"^go\s+\S+$", committed, re.M)
            (tmp / "go.mod").write_text(
                f"// Generated: etcd {version}'s server, as gomod/etcd builds the pinned one.\n"
                f"module karpenter-e2e/clusters/infra/gomod/etcd\n\n"
                f"{go_line[0] if go_line else 'go 1.21'}\n\n"
                f"require go.etcd.io/etcd/server/v3 {version}\n")
            shutil.copy(GOMOD_DIR / "etcd" / "main.go", tmp / "main.go")
            env = {**os.environ, "GOFLAGS": "", "GOWORK": "off", "GOTOOLCHAIN": "local"}
            proc = process.run(["go", "mod", "tidy"], DOWNLOAD_TIMEOUT_S, env=env, cwd=tmp,
                               what=f"`go mod tidy` of the etcd {version} wrapper")
            if proc.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise ClusterError(f"etcd {version} cannot be built from this Go module proxy "
                                   f"(`go mod tidy` failed):\n"
                                   + "\n".join(proc.stderr.strip().splitlines()[-10:]))
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)  # a half-tidied wrapper is never used
    return out


def download_karpenter(version: str) -> Path:
    """The released sigs.k8s.io/karpenter module at ``version`` (its CRDs, its sources)."""
    return download_module(KARPENTER_MODULE, version, FROM_GO_MOD)


def download_module(module: str, version: str, toolchain: str = "local") -> Path:
    """`go mod download` a module and return its directory in the module cache. With
    FROM_GO_MOD the machine's go tries first; a module that requires a newer go is then
    downloaded with the toolchain its requirement chooses."""
    first = "local" if toolchain == FROM_GO_MOD else toolchain
    info = _download(module, version, first)
    needs = re.search(r"requires go >= (\S+)", info.get("Error") or "")
    if toolchain == FROM_GO_MOD and needs:
        from karpenter_e2e.clusters.infra import releases
        chosen = releases.choose_toolchain(releases._go_version(needs[1]), check_go())
        info = _download(module, version, chosen)
    if info.get("Error") or not info.get("Dir"):
        raise ClusterError(f"cannot download {module}@{version} from the Go module proxy: "
                           f"{info.get('Error')}")
    return Path(info["Dir"])


def _download(module: str, version: str, toolchain: str) -> dict:
    proc = process.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                       DOWNLOAD_TIMEOUT_S, cwd=tempfile.gettempdir(),
                       env={**os.environ, "GOTOOLCHAIN": toolchain, "GOFLAGS": ""},
                       what=f"`go mod download {module}@{version}`")
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"Error": (proc.stderr or proc.stdout).strip()}


def _build_lock(doing: str):
    # xdist workers and a parallel `make` may all ask for the same binaries; a waiter waits
    # at most one build's bound, saying what the holder builds.
    return file_lock(bin_dir() / ".build.lock", doing, BUILD_BOUND_S)


def build(target: Target) -> Path:
    """Build one target unless it is already cached; return its path."""
    if target.path.exists():
        return target.path
    with _build_lock(f"building {target.name} {target.version}"):
        if target.path.exists():
            return target.path
        _build_group([target])
    return target.path


def build_all(only: list[Target] | None = None) -> list[Path]:
    """Build every missing target; targets sharing a module build in one `go build`."""
    wanted = only if only is not None else targets()
    if all(t.path.exists() for t in wanted):
        return [t.path for t in wanted]  # cached: never wait on another process's build
    doing = "building " + ", ".join(f"{t.name} {t.version}" for t in wanted if not t.path.exists())
    with _build_lock(doing):
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
                 outputs: dict[str, Path] | None = None, kind: str = "mutant") -> None:
    """One `go build` for targets sharing a module; ``cwd`` and ``outputs`` (name -> path)
    replace the module directory and the cache paths (a mutant's patched copy, or a copy
    with a catalogue built in: ``kind``, which keys the recorded build time)."""
    first = group[0]
    names = ", ".join(f"{t.name} {t.version}" for t in group)
    key = names if outputs is None else f"{kind} of {names}"
    if outputs:  # a mutant: name the binary, which carries the mutant's name and digest
        names = ", ".join(p.name for p in outputs.values())
    last = last_build_time(key)
    estimate = f"last time on this machine: {last:.0f}s" if last else "no earlier build recorded"
    log.info("building %s with go build (%s)", names, estimate)
    cwd = cwd or _module_dir(first)
    env = _go_env(first, cwd)
    log.info("go build in %s with GOTOOLCHAIN=%s", cwd, env["GOTOOLCHAIN"])
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=bin_dir(), prefix=".build-") as tmp:
        cmd = [*_niced(), "go", "build", "-trimpath", "-o", tmp + "/"]
        if first.tags:
            cmd.append("-tags=" + ",".join(first.tags))
        if first.ldflags:
            cmd.append("-ldflags=" + " ".join(first.ldflags))
        cmd += [t.package for t in group]
        with open(Path(tmp) / "go-build.log", "w+") as out:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out,
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
            compiler = compiler_lines(output)
            raise BuildFailed(f"go build of {names} (GOTOOLCHAIN={env['GOTOOLCHAIN']}) failed in "
                              f"{cwd}" + (f": {compiler[0]}" if compiler else "") + ":\n"
                              + "\n".join(output.splitlines()[-30:]), output)
        for t in group:
            built = Path(tmp) / t.package.rsplit("/", 1)[-1]
            os.replace(built, (outputs or {}).get(t.name, t.path))  # a half-written binary is never cached
    took = time.monotonic() - started
    _record_build_time(key, took)
    log.info("built %s in %.0fs", names, took)


def _niced() -> list[str]:
    """``nice -n N`` before go build when BUILD_NICE_ENV asks for it (a build beside running
    clusters then takes only the CPU they leave)."""
    value = os.environ.get(BUILD_NICE_ENV, "").strip()
    if not value or value == "0":
        return []
    if not value.isdigit() or not 0 < int(value) <= 19:
        raise ClusterError(f"{BUILD_NICE_ENV}={value!r}: a niceness from 0 to 19")
    return ["nice", "-n", value]


def _wait_with_progress(proc: subprocess.Popen, names: str, started: float,
                        last: float | None) -> None:
    while True:
        try:
            proc.wait(timeout=PROGRESS_S)
            return
        except subprocess.TimeoutExpired:
            stop_point()  # a stopped check (waits.stop_when): the caller kills the go build
            elapsed = time.monotonic() - started
            if elapsed > BUILD_BOUND_S:
                raise BuildFailed(f"go build of {names} still running after {elapsed:.0f}s; "
                                  f"stopped it", "") from None
            log.info("still building %s: %.0fs so far%s", names, elapsed,
                     f" (last time {last:.0f}s)" if last else "")


def compiler_lines(output: str) -> list[str]:
    """The compiler's own lines in a go build's output ('path/file.go:12:3: undefined: x'),
    or else the go command's (e.g. 'go: ... requires go >= 1.30')."""
    lines = [ln.strip() for ln in output.splitlines()]
    return ([ln for ln in lines if re.search(r"\.go:\d+", ln)]
            or [ln for ln in lines if ln.startswith("go: ") and "downloading" not in ln])


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
    from karpenter_e2e.clusters.karpenter.mutants import MutantError

    try:
        target = find("karpenter-kwok", mutant.version)
    except ClusterError as exc:
        raise MutantError(mutant.name, f"its version: {exc}") from None
    return build_patched(mutant, target, _module_dir(target), lambda src: src)


def build_patched(mutant, target: Target, module_dir: Path, workdir) -> Path:
    """``target`` built with ``mutant``'s patch applied to a copy of ``module_dir``;
    ``workdir(patched copy)`` is where `go build` runs (the copy itself, or a wrapper module
    that replaces the module with it)."""
    from karpenter_e2e.clusters.karpenter.mutants import apply

    return _build_from_copy(target, mutant_path(mutant, target.name),
                            cache_dir() / "mutants" / "src" / f"{target.name}-{mutant.key}",
                            lambda dest: workdir(apply(mutant, module_dir, dest)), mutant=mutant)


def _build_from_copy(target: Target, out: Path, root: Path, make_src, kind: str = "mutant",
                     mutant=None) -> Path:
    """``target`` built into ``out`` (unless cached) where ``make_src(root / "module")``, a
    changed copy of a module, says; the copy is removed afterwards."""
    if out.exists():
        return out
    with _build_lock(f"building {out.name}"):
        if out.exists():
            return out
        check_go()
        try:
            _build_group([target], cwd=make_src(root / "module"), outputs={target.name: out},
                         kind=kind)
        except BuildFailed as exc:
            if mutant is not None:
                raise _mutant_does_not_build(mutant, exc) from None
            raise
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return out


def _mutant_does_not_build(mutant, exc: BuildFailed):
    from karpenter_e2e.clusters.karpenter.mutants import MutantError
    return MutantError(mutant.name, "does not build: "
                       + ("; ".join(compiler_lines(exc.output)[:3]) or str(exc)[-400:]))


# ---- releases whose KWOK provider reads only the catalogue built into it ---------------------
# Up to v1.1.5 the KWOK provider has no --instance-types-file-path (it appears in v1.5.5's
# kwok/options/options.go): it reads kwok/cloudprovider/instance_types.json, embedded with
# go:embed. The harness's catalogue is written into a copy of the module and built in.
CATALOGUE_IN_MODULE = Path("kwok/cloudprovider/instance_types.json")
# The same releases' KWOK provider puts only an offering's zone and capacity type on a node
# (features "kwok-offering-labels"), so a workshop pool's karpenter.k8s.aws/* requirements
# could match no node. This patch gives their fake cloud provider v1.5.5's two lines for it
# (each offering requirement is a well-known label, and a single-valued one goes on the
# node); it touches kwok/cloudprovider only, never Karpenter's own pkg/ (docs/modes-local.md).
OFFERING_LABELS_PATCH = Path(__file__).parent / "assets" / "kwok-offering-labels.patch"


def backport_offering_labels(src: Path) -> Path:
    proc = process.run(["git", "apply", "--whitespace=nowarn", str(OFFERING_LABELS_PATCH)],
                       process.LOCAL_TIMEOUT_S, cwd=src, what=f"git apply of {OFFERING_LABELS_PATCH.name}")
    if proc.returncode != 0:
        raise ClusterError(f"{OFFERING_LABELS_PATCH.name} does not apply to {src}: "
                           f"{proc.stderr.strip()[:400]}")
    return src


@functools.cache
def reads_catalogue_file(module_dir: Path) -> bool:
    """Whether this release's KWOK provider takes --instance-types-file-path."""
    return any("instance-types-file-path" in p.read_text(errors="replace")
               for p in (module_dir / "kwok").rglob("*.go") if not p.name.endswith("_test.go"))


@functools.cache
def serves_webhooks(module_dir: Path) -> bool:
    """Whether this release's KWOK main starts webhooks (v1.0.x, knative's: it then needs
    SYSTEM_NAMESPACE, and DISABLE_WEBHOOK=true to run without a serving certificate)."""
    main = module_dir / "kwok" / "main.go"
    return main.exists() and "WithWebhooks" in main.read_text(errors="replace")


def tree_digest(directory: Path) -> str:
    """A short digest of every file under ``directory`` (names and contents): the version
    of a binary built from this repository's own source, so a changed source is rebuilt."""
    h = hashlib.sha256()
    for p in sorted(q for q in directory.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(directory)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def catalogue_digest(catalogue_json: str) -> str:
    return hashlib.sha256(catalogue_json.encode()).hexdigest()[:10]


def embedded_path(target: Target, catalogue_json: str, mutant=None) -> Path:
    """The cache name of a build with ``catalogue_json`` built in: the release's (or the
    mutant's) name, then ``-embedded-catalogue-<digest of the catalogue and the backport>``."""
    base = mutant_path(mutant, target.name) if mutant else target.path
    digest = catalogue_digest(catalogue_json + OFFERING_LABELS_PATCH.read_text())
    return base.with_name(f"{base.name}-embedded-catalogue-{digest}")


def karpenter_binary(version: str, catalogue_exclude=None, mutant=None,
                     catalogue_selection: str | None = None) -> Path:
    """The karpenter-kwok local mode runs for ``version`` (``mutant``'s build of it, if
    given), built on first use. A release without --instance-types-file-path gets the
    catalogue (``catalogue_selection``'s, less ``catalogue_exclude``) built in."""
    target = find("karpenter-kwok", version)
    if not reads_catalogue_file(download_karpenter(version)):
        from karpenter_e2e.clusters.infra import catalogue
        text = catalogue.render_text(catalogue.select(catalogue_exclude, catalogue_selection))
        return build_embedded(target, text, mutant)
    if mutant:
        return build_mutant(mutant)
    return build(target)


def build_embedded(target: Target, catalogue_json: str, mutant=None) -> Path:
    """``target`` (with ``mutant``'s patch, if given) built from a copy of its module whose
    kwok/cloudprovider/instance_types.json is ``catalogue_json``, its KWOK provider given
    offering labels."""
    from karpenter_e2e.clusters.karpenter import mutants

    out = embedded_path(target, catalogue_json, mutant)
    if out.exists():
        return out
    module_dir = _module_dir(target)

    def make_src(dest: Path) -> Path:
        src = (mutants.apply(mutant, module_dir, dest) if mutant
               else mutants.writable_copy(module_dir, dest))
        (src / CATALOGUE_IN_MODULE).write_text(catalogue_json)
        return backport_offering_labels(src)

    return _build_from_copy(target, out, cache_dir() / "src" / out.name, make_src,
                            kind="catalogue-embedded", mutant=mutant)
