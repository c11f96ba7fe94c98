"""Container images with no registry: a binary made into an image by `docker import`, an
image derived from another by `docker commit`, and images moved between Docker, a tarball
in the cache and a kind node's containerd.

An image made here has what a distroless static base gives a Go binary: ``/etc/passwd`` and
``/etc/group`` with root and nonroot (65532), a world-writable ``/tmp``, CA certificates
(the machine's), and ``PATH``. Nothing else: no shell, no libc.
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import process

log = logging.getLogger(__name__)

# Bounds, not measurements: an import or a commit of a few hundred MB took seconds here; a
# save or load of the ~1 GB node image under a minute.
DOCKER_TIMEOUT_S = 120
MOVE_TIMEOUT_S = 900
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def docker(*args: str, timeout: float = DOCKER_TIMEOUT_S, stdin: Path | None = None,
           what: str | None = None) -> str:
    """`docker ARGS` to its end; its stdout, or a ClusterError with what it said."""
    cmd = ["docker", *args]
    what = what or "docker " + " ".join(args[:3])
    if stdin is None:
        proc = process.run(cmd, timeout, what=what)
    else:
        with open(stdin, "rb") as fh:
            try:
                done = subprocess.run(cmd, stdin=fh, capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise ClusterError(f"{what} did not finish in {timeout:.0f}s") from None
        proc = subprocess.CompletedProcess(cmd, done.returncode, done.stdout.decode(),
                                           done.stderr.decode(errors="replace"))
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ClusterError(f"{what} failed (exit {proc.returncode}): " + "\n".join(said))
    return proc.stdout


def exists(ref: str) -> bool:
    return process.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                       DOCKER_TIMEOUT_S).returncode == 0


def changes(entrypoint: list[str] | None, env: Mapping[str, str] | None = None,
            extra: tuple[str, ...] = ()) -> list[str]:
    """`--change` arguments for docker import/commit: the entrypoint, ENV and more."""
    out: list[str] = []
    for key, value in {"PATH": PATH_ENV, **(env or {})}.items():
        out += ["--change", f"ENV {key}={value}"]
    if entrypoint is not None:
        out += ["--change", f"ENTRYPOINT {json.dumps(entrypoint)}"]
    for change in extra:
        out += ["--change", change]
    return out


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def from_files(ref: str, files: Mapping[str, Path], entrypoint: list[str] | None,
               env: Mapping[str, str] | None = None) -> str:
    """An image ``ref`` holding ``files`` (path in the image -> file here, executables kept
    executable) on a distroless-like skeleton, made with `docker import`."""
    with tempfile.NamedTemporaryFile(suffix=".tar") as fh:
        with tarfile.open(fileobj=fh, mode="w") as tar:
            for d in ("etc", "tmp", "home", "home/nonroot", "etc/ssl", "etc/ssl/certs"):
                _add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
            _add(tar, "etc/passwd", PASSWD.encode(), 0o644)
            _add(tar, "etc/group", GROUP.encode(), 0o644)
            if CA_BUNDLE.exists():
                _add(tar, "etc/ssl/certs/ca-certificates.crt", CA_BUNDLE.read_bytes(), 0o644)
            made = {"etc", "tmp", "home", "etc/ssl", "etc/ssl/certs"}
            for dest, src in sorted(files.items()):
                parts = dest.strip("/").split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in made:
                        _add_dir(tar, d)
                        made.add(d)
                mode = 0o755 if src.stat().st_mode & 0o111 else 0o644
                info = tar.gettarinfo(str(src), arcname="/".join(parts))
                with open(src, "rb") as data:
                    tar.addfile(_owned(info, mode), data)
        fh.flush()
        docker("import", *changes(entrypoint, env), "-", ref, stdin=Path(fh.name),
               what=f"docker import of {ref}")
    return ref


def _owned(info: tarfile.TarInfo, mode: int) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = mode
    return info


def derived(ref: str, base: str, files: Mapping[str, Path], entrypoint: list[str] | None,
            env: Mapping[str, str] | None = None) -> str:
    """An image ``ref``: ``base`` with ``files`` (path in the image -> file here) added, by
    `docker create`, `docker cp` and `docker commit`; it shares ``base``'s layers."""
    container = docker("create", base, "/bin/true").strip()
    try:
        for dest, src in files.items():
            docker("cp", str(src), f"{container}:{dest}")
        docker("commit", *changes(entrypoint, env), container, ref)
    finally:
        process.run(["docker", "rm", "-f", container], DOCKER_TIMEOUT_S)
    return ref


def save(refs: list[str], path: Path) -> Path:
    """The images as one `docker save` tarball (shared layers once), written whole."""
    tmp = path.with_name(f".{path.name}.tmp")
    docker("save", "-o", str(tmp), *refs, timeout=MOVE_TIMEOUT_S, what=f"docker save to {path}")
    tmp.rename(path)
    return path


def load(path: Path) -> None:
    docker("load", "-i", str(path), timeout=MOVE_TIMEOUT_S, what=f"docker load of {path}")


def tag(src: str, dest: str) -> None:
    docker("tag", src, dest)
