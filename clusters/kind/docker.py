"""Docker for kind: a daemon that answers, found or brought up on this machine.

    karpenter-e2e docker up|down|status

On a laptop with Docker Desktop, Docker Engine or Podman nothing here runs: a daemon answers
and is used as it is. On a machine without one (Debian, root: the harness's CI machines),
``up`` installs Debian's docker.io where dockerd is missing and starts the daemon. Only where
this machine's capability bounding set lacks a capability that ``--privileged`` asks for (a VM
sandbox here lacks CAP_SYS_RESOURCE, so runc fails "unable to apply caps" and kind's nodes
never start), it first registers capwrap (``capwrap/main.go``) as Docker's default runtime
and says so in one line. ``down`` stops only a daemon ``up`` started, so CI leaves nothing
running and a user's own daemon is never touched.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
from pathlib import Path

from karpenter_e2e.clusters.api.waits import Observation, StopWaiting, WaitAborted, eventually
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process

log = logging.getLogger(__name__)

CAPWRAP_DIR = Path(__file__).parent / "capwrap"
DAEMON_JSON = Path("/etc/docker/daemon.json")
RUNTIME = "capwrap"
# Bounds, not measurements: Debian's docker.io installed in 20 s here and dockerd answered in
# 2 s; a slow mirror or disk gets ten times that.
INSTALL_TIMEOUT_S = 600
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
# The kernel's names for capability bits 0-40 (linux/capability.h), for the one-line notice.
CAP_NAMES = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID",
             "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST",
             "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO",
             "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
             "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE",
             "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
             "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE")


def state_dir() -> Path:
    return build.cache_dir() / "docker"


def missing_capabilities(status: str | None = None, last_cap: int | None = None) -> list[str]:
    """The capabilities the kernel knows that this process's bounding set lacks: what
    ``--privileged`` asks for and runc cannot grant. ``status``: /proc/self/status's text."""
    if status is None:
        status = Path("/proc/self/status").read_text()
    if last_cap is None:
        last_cap = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    bounding = next(int(line.split()[1], 16) for line in status.splitlines()
                    if line.startswith("CapBnd:"))
    return [f"CAP_{CAP_NAMES[i]}" if i < len(CAP_NAMES) else f"capability {i}"
            for i in range(last_cap + 1) if not bounding >> i & 1]


def runtime_command() -> str:
    """The container runtime kind drives (kind's own variable picks podman or nerdctl)."""
    return os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker")


def answers() -> tuple[bool, str]:
    """Whether a daemon answers ``docker info``, and its version or why not."""
    runtime = runtime_command()
    proc = process.run([runtime, "info", "--format", "{{.ServerVersion}}"], timeout=30)
    if proc.returncode == 0:
        return True, proc.stdout.strip()
    why = (proc.stderr or proc.stdout).strip().splitlines()
    return False, why[-1] if why else f"exit code {proc.returncode}"


def default_runtime() -> str:
    proc = process.run([runtime_command(), "info", "--format", "{{.DefaultRuntime}}"], timeout=30)
    return proc.stdout.strip()


def capwrap_binary() -> Path:
    """capwrap built from this repository's source, keyed by the source's digest."""
    digest = build.tree_digest(CAPWRAP_DIR)
    return build.build(build.Target("capwrap", digest, "karpenter-e2e/clusters/kind/capwrap",
                                    str(CAPWRAP_DIR), ldflags=("-s", "-w")))


def daemon_config(current: dict, wrapper: Path) -> dict:
    """``current`` daemon.json with capwrap as the default runtime, the rest kept."""
    runtimes = {**current.get("runtimes", {}), RUNTIME: {"path": str(wrapper)}}
    return {**current, "runtimes": runtimes, "default-runtime": RUNTIME}


def _install() -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ClusterError(
            "no Docker daemon answers and dockerd is not installed: install Docker (Docker "
            "Desktop, Docker Engine: https://docs.docker.com/engine/install/, or Podman with "
            "KIND_EXPERIMENTAL_PROVIDER=podman); as root on Debian `karpenter-e2e docker up` "
            "installs Debian's docker.io itself")
    log.warning("docker: installing Debian's docker.io (dockerd is missing)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "docker.io"]):
        proc = process.run(cmd, INSTALL_TIMEOUT_S, env=env)
        if proc.returncode != 0:
            raise ClusterError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n"
                               + "\n".join(proc.stderr.strip().splitlines()[-10:]))


def _register_capwrap(missing: list[str]) -> None:
    wrapper = capwrap_binary()
    current = json.loads(DAEMON_JSON.read_text()) if DAEMON_JSON.exists() else {}
    wanted = daemon_config(current, wrapper)
    if wanted != current:
        DAEMON_JSON.parent.mkdir(parents=True, exist_ok=True)
        DAEMON_JSON.write_text(json.dumps(wanted, indent=2) + "\n")
    log.warning("docker: this machine's capability bounding set lacks %s, which --privileged "
                "asks for; capwrap (%s) is Docker's default runtime and drops it from each "
                "container's spec (%s)", ", ".join(missing), wrapper, DAEMON_JSON)


def up() -> str:
    """A daemon that answers: the one there, or Debian's started here. Returns a line
    saying which."""
    ok, seen = answers()
    if ok:
        missing = missing_capabilities()
        if missing and runtime_command() == "docker" and default_runtime() != RUNTIME:
            raise ClusterError(
                f"Docker {seen} answers, but this machine's capability bounding set lacks "
                f"{', '.join(missing)}, which kind's privileged nodes ask for, and its default "
                f"runtime is {default_runtime()!r}: stop that daemon and run `karpenter-e2e "
                f"docker up`, which registers capwrap and starts dockerd")
        return f"docker: {runtime_command()} {seen} answers; nothing to start"
    if runtime_command() != "docker":
        raise ClusterError(f"{runtime_command()} does not answer ({seen}); start it yourself: "
                           f"the harness brings up only Docker")
    if not shutil.which("dockerd"):
        _install()
    missing = missing_capabilities()
    if missing:
        _register_capwrap(missing)
    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    log_path = state / "dockerd.log"
    proc = process.spawn(["dockerd"], log_path, state)
    (state / "dockerd.pid").write_text(str(proc.pid))

    def answering() -> Observation:
        if not process.alive(proc.pid):
            raise StopWaiting(f"dockerd exited at start: {_tail(log_path)}")
        ok, seen = answers()
        return Observation(ok, seen, seen)

    try:
        version = eventually(answering, what="dockerd to answer `docker info`",
                             timeout=START_TIMEOUT_S, poll=0.5)
    except WaitAborted as exc:
        raise ClusterError(exc.seen) from None
    return f"docker: started dockerd {version} (pid {proc.pid}, log {log_path})"


def started_pid() -> int | None:
    """The dockerd ``up`` started, while it runs."""
    try:
        pid = int((state_dir() / "dockerd.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if process.alive(pid) and "dockerd" in process.cmdline(pid) else None


def down() -> str:
    """Stop the dockerd ``up`` started (its containers stop with it); any other is left."""
    pid = started_pid()
    if pid is None:
        return "docker: no dockerd of ours is running; nothing stopped"
    process.terminate(pid, grace=STOP_TIMEOUT_S)
    (state_dir() / "dockerd.pid").unlink(missing_ok=True)
    return f"docker: stopped dockerd (pid {pid})"


def container_usage(container_id: str) -> tuple[float, float] | None:
    """A running container's memory in MiB (as `docker stats` counts it: usage less inactive
    file cache) and CPU seconds so far, read from its cgroup (v1, or v2 under either cgroup
    driver); None where neither is found."""
    v1 = Path("/sys/fs/cgroup/memory/docker") / container_id
    if v1.is_dir():
        try:
            usage = int((v1 / "memory.usage_in_bytes").read_text())
            stat = dict(line.split() for line in (v1 / "memory.stat").read_text().splitlines())
            cpu = int((Path("/sys/fs/cgroup/cpuacct/docker") / container_id
                       / "cpuacct.usage").read_text()) / 1e9
            return (usage - int(stat.get("total_inactive_file", 0))) / 2**20, cpu
        except (OSError, ValueError):
            return None
    for v2 in (Path("/sys/fs/cgroup/system.slice") / f"docker-{container_id}.scope",
               Path("/sys/fs/cgroup/docker") / container_id):
        try:
            usage = int((v2 / "memory.current").read_text())
            mem = dict(line.split() for line in (v2 / "memory.stat").read_text().splitlines())
            cpus = dict(line.split() for line in (v2 / "cpu.stat").read_text().splitlines())
            return ((usage - int(mem.get("inactive_file", 0))) / 2**20,
                    int(cpus["usage_usec"]) / 1e6)
        except (OSError, ValueError, KeyError):
            continue
    return None


def container_id(name: str) -> str | None:
    proc = process.run(["docker", "inspect", "--format", "{{.Id}}", name], 30)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e docker", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["up", "down", "status"])
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    try:
        if args.command == "up":
            print(up())
        elif args.command == "down":
            print(down())
        else:
            ok, seen = answers()
            mine = started_pid()
            print(f"docker: {'answers: ' + seen if ok else 'does not answer: ' + seen}"
                  + (f" (started by karpenter-e2e, pid {mine})" if mine else ""))
            return 0 if ok else 1
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
