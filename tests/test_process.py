"""The one process module: every short command (kubectl, kwokctl, go, git) goes through
``run``, every long-running one through ``spawn``, and ``terminate`` stops it."""

import os
import sys
import time

import pytest

from karpenter_e2e.clusters.errors import ClusterError, CommandTimeout
from karpenter_e2e.clusters.infra import process


def test_run_in_a_directory_with_its_own_environment(tmp_path):
    proc = process.run([sys.executable, "-c", "import os; print(os.getcwd(), os.environ['X'])"],
                       10, env={**os.environ, "X": "given"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(tmp_path), "given"]


def test_run_returns_bytes_when_asked(tmp_path):
    (tmp_path / "blob").write_bytes(b"\x00\xffraw")
    proc = process.run(["cat", "blob"], 10, cwd=tmp_path, text=False)
    assert proc.stdout == b"\x00\xffraw"


@pytest.mark.parametrize("text", [True, False])
def test_a_missing_program_is_exit_127_as_in_a_shell(text):
    proc = process.run(["no-such-program-here"], 10, text=text)
    assert proc.returncode == 127
    assert proc.stderr == ("no-such-program-here: command not found" if text
                           else b"no-such-program-here: command not found")


def test_a_command_past_its_bound_is_killed_and_named():
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match=r"^git apply of m1 did not finish in 1s$") as err:
        process.run([sys.executable, "-c", "import time; time.sleep(60)"], 1, what="git apply of m1")
    assert isinstance(err.value, ClusterError)  # a person-facing error, not a traceback
    assert time.monotonic() - started < 30


def test_spawn_appends_to_its_log_in_a_session_of_its_own(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("before\n")
    proc = process.spawn([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"],
                         log, cwd=tmp_path)
    assert proc.wait(timeout=30) == 0
    assert log.read_text() == "before\nTrue\n"


def test_terminate_kills_what_ignores_sigterm(tmp_path):
    proc = process.spawn([sys.executable, "-c", "import signal, time; "
                          "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('in', flush=True); "
                          "time.sleep(60)"], tmp_path / "log", cwd=tmp_path)
    deadline = time.monotonic() + 30
    while "in" not in (tmp_path / "log").read_text():  # its handler is installed
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.05)
    started = time.monotonic()
    process.terminate(proc.pid, grace=0.5)
    assert not process.alive(proc.pid)
    assert 0.4 < time.monotonic() - started < 10  # the grace was given, then SIGKILL
