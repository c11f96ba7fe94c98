"""Local processes and ports: run a short command, start a long-running one, who is
listening, is a pid ours and alive, stop it for good."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from karpenter_e2e.clusters.errors import CommandTimeout

NOT_FOUND = 127  # run's exit code for a program that is not on PATH, as in a shell
# The bound for a command that only reads and writes local files (git, go env, go mod edit):
# they answer in well under a second; this is a bound, not a measurement.
LOCAL_TIMEOUT_S = 60


def run(cmd: list[str], timeout: float, env: dict[str, str] | None = None,
        what: str | None = None, cwd: Path | str | None = None,
        text: bool = True) -> subprocess.CompletedProcess:
    """A short command to its end in ``cwd``, its output captured (bytes unless ``text``); a
    missing program is exit code 127, as in a shell, and one still running after ``timeout``
    seconds is killed (CommandTimeout, naming it as ``what``, else by its first words)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=text, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    except FileNotFoundError:
        missing = f"{cmd[0]}: command not found"
        return subprocess.CompletedProcess(cmd, NOT_FOUND, "" if text else b"",
                                           missing if text else missing.encode())
    except subprocess.TimeoutExpired:
        raise CommandTimeout(f"{what or ' '.join(cmd[:4])} did not finish in {timeout:.0f}s") \
            from None


def spawn(cmd: list[str], log_path: Path, cwd: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a long-running process (a cluster's Karpenter, fake AWS, ...) in a session of its
    own, so a terminal's Ctrl-C reaches only us and the cluster's ``down()`` stops it
    (``terminate``); its output is appended to ``log_path``."""
    with open(log_path, "a") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def listening_ports() -> dict[int, int]:
    """Listening TCP port -> socket inode, read from /proc/net/tcp{,6}."""
    ports: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A":  # TCP_LISTEN
                ports[int(cols[1].rsplit(":", 1)[1], 16)] = int(cols[9])
    return ports


def port_owner(port: int) -> str:
    """'pid 123 (kube-apiserver)' for a listening port, or '' when it cannot be told."""
    inode = listening_ports().get(port)
    if inode is None:
        return ""
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return f"pid {pid} ({Path(f'/proc/{pid}/comm').read_text().strip()})"
        except OSError:
            continue
    return ""


def ports_of(pids: list[int]) -> set[int]:
    """The TCP ports these processes listen on."""
    by_inode = {inode: port for port, inode in listening_ports().items()}
    ports = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                port = by_inode.get(int(link[8:-1]))
                if port:
                    ports.add(port)
    return ports


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def pids_using(marker: str) -> list[int]:
    """Live processes whose command line mentions ``marker`` (a run directory) as a whole
    path: ``.../clusters/karpenter-e2e`` never matches ``.../clusters/karpenter-e2e-awssim``."""
    me = os.getpid()
    whole = re.compile(re.escape(marker.rstrip("/")) + r"(?=/|\s|$)")
    return [int(p) for p in filter(str.isdigit, os.listdir("/proc"))
            if int(p) != me and alive(int(p)) and whole.search(cmdline(int(p)))]


def terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; returns once the pid is gone."""
    if not alive(pid):
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:  # reap it if it is our child, so it does not linger as a zombie
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            if not alive(pid):
                return
            time.sleep(0.1)
    raise RuntimeError(f"pid {pid} ({cmdline(pid)[:80]}) survived SIGKILL")
