"""A kind node image built with no registry, for any Kubernetes release the harness builds.

kind's own `kind build node-image` pulls etcd, CoreDNS, pause, kindnetd and the storage
images from registries inside its build container; here none is reachable. This builds the
same image kind's builder makes (pkg/build/nodeimage and images/base of the pinned kind),
every part from a package registry:

    rootfs  debootstrap of Debian with kind's base packages, plus Debian's containerd, runc
            and CNI plugins (kind builds those three from source)          -> a cached tar
    base    the rootfs + kind's base files (images/base/files: the entrypoint, /kind/bin,
            the systemd units, containerd's config) + the Dockerfile's RUN steps (setup.sh)
            + crictl built from sigs.k8s.io/cri-tools (+ capwrap, only where this machine
            lacks a capability, as containerd's runc)
    node    base + kubeadm, kubelet and kubectl in /usr/bin, /kind/version, /kind/manifests,
            and in its containerd every image kubeadm and kind ask for, by the names they ask:
            kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy (the
            Kubernetes release), etcd and CoreDNS (the versions `kubeadm config images list`
            names), pause (kind's sandbox image, built from Kubernetes' pause.c), and kind's
            local-path-provisioner and -helper

Differences from kind's published image, each because the proxy does not serve a part:
kindnetd (github.com/aojea/kindnet) is replaced by node/default-cni.yaml, which writes the
same CNI config; local-path-provisioner is v0.0.33 where kind builds v0.0.34; containerd and
runc are Debian's (1.6, 1.1) where kind builds 2.x and 1.4. kube-proxy and the storage helper
run on the Debian rootfs (iptables, sh), where upstream's are distroless.

The image is cached by its inputs' pins (``key``) as an image in Docker and a `docker save`
tarball in the per-user cache, so a new Docker daemon loads it in seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.api.waits import Observation, WaitTimeout, eventually
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process, versions
from karpenter_e2e.clusters.kind import docker, images

log = logging.getLogger(__name__)

NODE_DIR = Path(__file__).parent / "node"
REPO = "karpenter-e2e.local"
KIND_MODULE = "sigs.k8s.io/kind"
DEBIAN_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# kind's base image's packages (images/base/Dockerfile at the pinned kind), then what kind
# builds from source there, taken from Debian instead.
KIND_PACKAGES = ("systemd", "systemd-sysv", "dbus", "conntrack", "iptables", "nftables",
                 "iproute2", "ethtool", "util-linux", "mount", "kmod", "libseccomp2", "pigz",
                 "fuse-overlayfs", "nfs-common", "open-iscsi", "e2fsprogs", "bash",
                 "ca-certificates", "curl", "jq", "procps")
FROM_SOURCE_IN_KIND = ("containerd", "runc", "containernetworking-plugins")
# Bounds, not measurements: debootstrap took 72 s here on an idle machine (the issue's
# trial), 6 min with four builds beside it.
DEBOOTSTRAP_TIMEOUT_S = 1800
CONTAINERD_READY_S = 30
# The image names kubeadm asks for, by the part of the harness that builds each.
_KUBE_IMAGE = re.compile(r"^registry\.k8s\.io/(kube-apiserver|kube-controller-manager|"
                         r"kube-scheduler|kube-proxy):(v[\d.]+)$")
_ETCD_IMAGE = re.compile(r"^registry\.k8s\.io/etcd:([\d.]+)-\d+$")
_COREDNS_IMAGE = re.compile(r"^registry\.k8s\.io/coredns/coredns:(v[\d.]+)$")
_PAUSE_IMAGE = re.compile(r"^registry\.k8s\.io/pause:[\d.]+$")


def kind_module() -> Path:
    return build.download_module(KIND_MODULE, versions.KIND)


def kind_target() -> build.Target:
    return build.Target("kind", versions.KIND, KIND_MODULE, KIND_MODULE,
                        ldflags=("-s", "-w"), toolchain=build.FROM_GO_MOD)


def go_strings(source: str) -> dict[str, str]:
    """The string constants of a Go file (``const x = "..."``, raw strings, and sums of
    them and of constants defined before): kind keeps its image names and manifests so."""
    consts: dict[str, str] = {}
    token = re.compile(r'\s*(?:`([^`]*)`|"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*))\s*')
    for m in re.finditer(r"^const\s+(\w+)\s*=", source, re.M):
        pos, parts = m.end(), []
        while True:
            t = token.match(source, pos)
            if not t:
                break
            if t[1] is not None:
                parts.append(t[1])
            elif t[2] is not None:
                parts.append(json.loads(f'"{t[2]}"'))
            elif t[3] in consts:
                parts.append(consts[t[3]])
            else:
                break
            pos = t.end()
            if not source.startswith("+", pos):
                break
            pos += 1
        if parts:
            consts[m[1]] = "".join(parts)
    return consts


@dataclass(frozen=True)
class KindParts:
    """What the pinned kind's sources say the node carries."""

    storage_manifest: str
    storage_provisioner: str  # image names, as kind's manifest asks for them
    storage_helper: str
    sandbox_image: str  # containerd's sandbox_image in kind's config.toml


def kind_parts(module: Path | None = None) -> KindParts:
    module = module or kind_module()
    consts = go_strings((module / "pkg/build/nodeimage/const_storage.go").read_text())
    config = (module / "images/base/files/etc/containerd/config.toml").read_text()
    sandbox = re.search(r'^\s*sandbox_image\s*=\s*"([^"]+)"', config, re.M)
    try:
        return KindParts(consts["defaultStorageManifest"], consts["storageProvisionerImage"],
                         consts["storageHelperImage"], sandbox[1] if sandbox else "")
    except KeyError as exc:
        raise ClusterError(f"kind {versions.KIND}'s sources no longer define {exc} where the "
                           f"node image builder reads it (pkg/build/nodeimage)") from None


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (its sources), else deb.debian.org."""
    for f in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = f.read_text()
        except OSError:
            continue
        m = re.search(r"^(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(https?://\S+/debian)/?\s", text, re.M)
        if m:
            return m[1]
    return DEFAULT_MIRROR


def missing_capabilities() -> list[str]:
    return docker.missing_capabilities()


@dataclass(frozen=True)
class Pins:
    """Everything the node image is made of, by version: its cache key."""

    kubernetes: str
    kind: str = versions.KIND
    suite: str = DEBIAN_SUITE
    packages: tuple[str, ...] = KIND_PACKAGES + FROM_SOURCE_IN_KIND
    crictl: str = versions.CRI_TOOLS
    local_path_provisioner: str = versions.LOCAL_PATH_PROVISIONER
    capwrap: str = ""  # capwrap's source digest where this machine needs it, else ""
    recipe: str = ""  # this module and node/ (a changed recipe is a new image)

    @classmethod
    def of(cls, kubernetes: str) -> Pins:
        recipe = hashlib.sha256(Path(__file__).read_bytes()
                                + build.tree_digest(NODE_DIR).encode()).hexdigest()[:12]
        return cls(kubernetes, capwrap=build.tree_digest(docker.CAPWRAP_DIR)
                   if missing_capabilities() else "", recipe=recipe)

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.__dict__, sort_keys=True).encode()).hexdigest()[:12]

    def rootfs_key(self) -> str:
        return hashlib.sha256(json.dumps([self.suite, self.packages]).encode()).hexdigest()[:12]


def image_dir() -> Path:
    return build.cache_dir() / "kind"


def node_image(kubernetes: str) -> str:
    """The node image's name for Kubernetes ``kubernetes`` on this machine."""
    pins = Pins.of(kubernetes)
    return f"{REPO}/kind-node:{kubernetes}-{pins.key()}"


def ensure(kubernetes: str) -> str:
    """The node image for Kubernetes ``kubernetes`` in Docker: there already, loaded from
    the cache's tarball, or built (and saved there). Returns its name."""
    pins = Pins.of(kubernetes)
    ref = f"{REPO}/kind-node:{kubernetes}-{pins.key()}"
    tarball = image_dir() / f"kind-node-{kubernetes}-{pins.key()}.tar"
    if images.exists(ref):
        return ref
    if tarball.exists():
        started = time.monotonic()
        images.load(tarball)
        log.warning("kind node image %s loaded from %s in %.0fs", ref, tarball,
                    time.monotonic() - started)
        return ref
    started = time.monotonic()
    log.warning("building kind node image %s (no registry: every part from a package "
                "registry; last time on this machine: %s)", ref,
                _last(f"kind node image {kubernetes}"))
    _build(pins, ref)
    images.save([ref], tarball)
    seconds = time.monotonic() - started
    build._record_build_time(f"kind node image {kubernetes}", seconds)
    log.warning("kind node image %s built in %.0fs, saved to %s", ref, seconds, tarball)
    return ref


def _last(key: str) -> str:
    last = build.last_build_time(key)
    return f"{last:.0f}s" if last else "no earlier build recorded"


# ---- the rootfs ----------------------------------------------------------------------------
def rootfs_tar(pins: Pins) -> Path:
    """The Debian rootfs as a tar in the cache, made by debootstrap on first use."""
    out = image_dir() / f"rootfs-{pins.suite}-{pins.rootfs_key()}.tar"
    if out.exists():
        return out
    if os.geteuid() != 0:
        raise ClusterError("building a kind node image with no registry needs root "
                           "(debootstrap and its chroot); run as root, or give --kind-image "
                           "an image from a registry (kindest/node)")
    if not shutil.which("debootstrap"):
        _apt_install("debootstrap")
    out.parent.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    log.warning("debootstrap %s from %s (%d packages)", pins.suite, mirror, len(pins.packages))
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".rootfs-") as tmp:
        root = Path(tmp) / "root"
        proc = process.run(["debootstrap", "--variant=minbase",
                            "--include=" + ",".join(pins.packages), pins.suite, str(root),
                            mirror], DEBOOTSTRAP_TIMEOUT_S, what="debootstrap")
        if proc.returncode != 0:
            raise ClusterError(f"debootstrap {pins.suite} failed (exit {proc.returncode}):\n"
                               + "\n".join((proc.stdout + proc.stderr).splitlines()[-10:]))
        # what kind's clean-install removes after its apt-get install
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc",
                     "usr/share/man", "var/log"):
            for child in (root / junk).glob("*"):
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        part = out.with_name(f".{out.name}.tmp")
        proc = process.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(part), "."],
                           DEBOOTSTRAP_TIMEOUT_S, what="tar of the rootfs")
        if proc.returncode != 0:
            raise ClusterError(f"tar of the rootfs failed: {proc.stderr.strip()}")
        part.rename(out)
    return out


def _apt_install(package: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", package]):
        proc = process.run(cmd, docker.INSTALL_TIMEOUT_S, env=env)
        if proc.returncode != 0:
            raise ClusterError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()[-500:]}")


def rootfs_image(pins: Pins) -> str:
    """The rootfs as an image: the node's first layer, and the base of the images that need
    a userland (kube-proxy's iptables, the storage helper's sh, the CNI agent)."""
    ref = f"{REPO}/debian:{pins.suite}-{pins.rootfs_key()}"
    if not images.exists(ref):
        images.docker("import", *images.changes(None), "-", ref, stdin=rootfs_tar(pins),
                      timeout=images.MOVE_TIMEOUT_S, what=f"docker import of {ref}")
    return ref


# ---- the images kubeadm and kind ask for -------------------------------------------------------
def kubeadm_images(kubeadm: Path, kubernetes: str) -> list[str]:
    proc = process.run([str(kubeadm), "config", "images", "list", "--kubernetes-version",
                        kubernetes], 60)
    if proc.returncode != 0:
        raise ClusterError(f"kubeadm config images list failed: {proc.stderr.strip()}")
    return proc.stdout.split()


def pause_binary(kubernetes: str) -> Path:
    """pause from Kubernetes' own build/pause/linux/pause.c, static, as upstream builds it."""
    out = build.bin_dir() / f"pause-{kubernetes}"
    if out.exists():
        return out
    src = build.download_module("k8s.io/kubernetes", kubernetes) / "build/pause/linux/pause.c"
    version = re.search(r'#define VERSION "?([^"\s]+)', src.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    proc = process.run(["gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=" +
                        (version[1] if version else "unknown"), "-o", str(tmp), str(src)],
                       120, what="gcc of pause.c")
    if proc.returncode != 0:
        raise ClusterError(f"gcc -static pause.c failed: {proc.stderr.strip()[-500:]}")
    tmp.rename(out)
    return out


def component_images(pins: Pins, kube_bins: dict[str, Path], base: str,
                     parts: KindParts) -> list[str]:
    """Every image the node's containerd holds, made here under the names asked for."""
    asked = [i for i in kubeadm_images(kube_bins["kubeadm"], pins.kubernetes)
             if not _PAUSE_IMAGE.match(i)]  # kind swaps kubeadm's pause for its sandbox's
    made: list[str] = []
    for ref in asked:
        if m := _KUBE_IMAGE.match(ref):
            name = m[1]
            binary = {f"usr/local/bin/{name}": kube_bins[name]}
            made.append(images.derived(ref, base, {f"/usr/local/bin/{name}": kube_bins[name]},
                                       [f"/usr/local/bin/{name}"]) if name == "kube-proxy"
                        else images.from_files(ref, binary, [f"/usr/local/bin/{name}"]))
        elif m := _ETCD_IMAGE.match(ref):
            etcd = build.build(build.etcd_target("v" + m[1]))
            made.append(images.from_files(ref, {"usr/local/bin/etcd": etcd},
                                          ["/usr/local/bin/etcd"]))
        elif m := _COREDNS_IMAGE.match(ref):
            coredns = build.build(coredns_target(m[1]))
            made.append(images.from_files(ref, {"coredns": coredns}, ["/coredns"]))
        else:
            raise ClusterError(f"kubeadm {pins.kubernetes} asks for an image the node image "
                               f"builder cannot make: {ref}")
    pause = parts.sandbox_image or "registry.k8s.io/pause:3.10"
    made.append(images.from_files(pause, {"pause": pause_binary(pins.kubernetes)}, ["/pause"]))
    provisioner = build.build(local_path_target(pins.local_path_provisioner))
    made.append(images.from_files(parts.storage_provisioner,
                                  {"usr/local/bin/local-path-provisioner": provisioner},
                                  ["/usr/local/bin/local-path-provisioner"]))
    images.tag(base, parts.storage_helper)  # sh, mkdir and rm: the rootfs has them
    made.append(parts.storage_helper)
    made.append(base)  # the CNI agent's image (node/default-cni.yaml)
    return made


def coredns_target(version: str) -> build.Target:
    return build.Target("coredns", version, "github.com/coredns/coredns",
                        "github.com/coredns/coredns", ldflags=("-s", "-w"),
                        toolchain=build.FROM_GO_MOD)


def local_path_target(version: str) -> build.Target:
    return build.Target("local-path-provisioner", version,
                        "github.com/rancher/local-path-provisioner",
                        "github.com/rancher/local-path-provisioner",
                        ldflags=(f"-X main.VERSION={version}", "-s", "-w"),
                        toolchain=build.FROM_GO_MOD)


def crictl_target(version: str) -> build.Target:
    return build.Target("crictl", version, "sigs.k8s.io/cri-tools/cmd/crictl",
                        "sigs.k8s.io/cri-tools",
                        ldflags=(f"-X sigs.k8s.io/cri-tools/pkg/version.Version={version}",
                                 "-s", "-w"), toolchain=build.FROM_GO_MOD)


# ---- the node ----------------------------------------------------------------------------------
def _stage_kind_files(module: Path, dest: Path) -> None:
    """kind's images/base/files with the modes its Dockerfile's COPY --chmod gives them."""
    files = module / "images/base/files"
    shutil.copytree(files, dest, dirs_exist_ok=True)
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    for p in [*(dest / "usr/local/bin").glob("*"), *(dest / "kind/bin").glob("*")]:
        p.chmod(0o755)
    dest.chmod(0o755)


def _exec(container: str, *cmd: str, timeout: float = images.DOCKER_TIMEOUT_S) -> str:
    return images.docker("exec", container, *cmd, timeout=timeout,
                         what=f"in the build container: {' '.join(cmd)[:60]}")


def _build(pins: Pins, ref: str) -> None:
    module = kind_module()
    parts = kind_parts(module)
    kube = {t.name: t for t in build.kube_targets(
        pins.kubernetes, build.KUBE_BINARIES + build.KUBE_NODE_BINARIES)}
    build.build_all(list(kube.values()))
    kube_bins = {name: t.path for name, t in kube.items()}
    crictl = build.build(crictl_target(pins.crictl))
    base = rootfs_image(pins)
    made = component_images(pins, kube_bins, base, parts)

    container = images.docker("run", "-d", "--entrypoint=sleep", "--security-opt",
                              "seccomp=unconfined", f"--name=karpenter-e2e-node-build-"
                              f"{os.getpid()}", base, "infinity").strip()
    try:
        with tempfile.TemporaryDirectory(prefix="kind-node-") as tmp:
            stage = Path(tmp) / "stage"
            _stage_kind_files(module, stage)
            (stage / "usr/local/bin/crictl").write_bytes(crictl.read_bytes())
            (stage / "usr/local/bin/crictl").chmod(0o755)
            if pins.capwrap:
                shutil.copy(docker.capwrap_binary(), stage / "usr/local/bin/capwrap")
            (stage / "kind/version").write_text(pins.kubernetes)
            (stage / "kind/version").chmod(0o644)
            manifests = stage / "kind/manifests"
            manifests.mkdir(mode=0o755)
            (manifests / "default-storage.yaml").write_text(parts.storage_manifest)
            (manifests / "default-cni.yaml").write_text(
                (NODE_DIR / "default-cni.yaml").read_text().replace("NODE_TOOLS_IMAGE", base))
            for name in ("kubeadm", "kubelet", "kubectl"):
                (stage / "usr/bin").mkdir(exist_ok=True)
                shutil.copy(kube_bins[name], stage / "usr/bin" / name)
                (stage / "usr/bin" / name).chmod(0o755)
            shutil.copy(NODE_DIR / "setup.sh", stage / "tmp-setup.sh")
            images.docker("cp", f"{stage}/.", f"{container}:/")
            out = _exec(container, "bash", "/tmp-setup.sh", timeout=300)
            log.info("kind node setup: %s", " | ".join(out.strip().splitlines()[-3:]))
            _exec(container, "rm", "/tmp-setup.sh")
            archive = Path(tmp) / "images.tar"
            images.save(made, archive)
            _import_images(container, archive)
        # kind's base image also sets STOPSIGNAL SIGRTMIN+3 (systemd's); Docker 20.10's
        # commit cannot, and kind removes its nodes with `docker rm -f`, which it does not
        # change.
        images.docker("commit", *images.changes(
            ["/usr/local/bin/entrypoint", "/sbin/init"], {"container": "docker"}),
            container, ref, timeout=images.MOVE_TIMEOUT_S)
    finally:
        process.run(["docker", "rm", "-f", container], images.DOCKER_TIMEOUT_S)


def _import_images(container: str, archive: Path) -> None:
    """The images into the build container's containerd, as kind's importer does it: start
    containerd, `ctr images import --no-unpack` (no mounts: the container is not
    privileged), stop it."""
    images.docker("cp", str(archive), f"{container}:/images.tar", timeout=images.MOVE_TIMEOUT_S)
    _exec(container, "bash", "-c", "nohup containerd > /var/log/containerd-build.log 2>&1 &")

    def answers() -> Observation:
        proc = process.run(["docker", "exec", container, "ctr", "version"], 30)
        return Observation(proc.returncode == 0, (proc.stderr or proc.stdout).strip()[-200:])

    try:
        eventually(answers, what="containerd in the build container to answer",
                   timeout=CONTAINERD_READY_S, poll=0.5)
    except WaitTimeout as exc:
        log_tail = process.run(["docker", "exec", container, "tail", "-5",
                                "/var/log/containerd-build.log"], 30).stdout
        raise ClusterError(f"{exc}\n{log_tail}") from None
    _exec(container, "ctr", "--namespace=k8s.io", "images", "import", "--all-platforms",
          "--no-unpack", "--digests", "/images.tar", timeout=images.MOVE_TIMEOUT_S)
    listed = _exec(container, "ctr", "--namespace=k8s.io", "images", "list", "-q")
    log.info("kind node image holds %d images", len(listed.split()))
    # The build container's PID 1 is sleep, which reaps no one: a stopped containerd stays
    # a zombie, so "gone" is "no containerd but zombies".
    _exec(container, "timeout", "30", "bash", "-c",
          "pkill -x containerd; rm -f /images.tar /var/log/containerd-build.log; "
          "while ps -C containerd -o stat= | grep -qv '^Z'; do sleep 0.2; done")
