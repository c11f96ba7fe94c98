"""runners/children.py: how every runner starts and stops its pytest processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from karpenter_e2e.runners.children import Child, Children

CHILD = """
import signal, sys, time
if sys.argv[1] == "stops":
    signal.signal(signal.SIGINT, lambda *a: sys.exit(3))
else:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


def _ready(*logs, bound=20.0):
    deadline = time.monotonic() + bound
    while not all(log.exists() and "ready" in log.read_text() for log in logs):
        assert time.monotonic() < deadline, "the child never said ready"
        time.sleep(0.05)


def test_interrupt_stops_every_child_then_kills_and_cleans_up_the_rest(tmp_path):
    downs = []
    children = Children()
    kids = {kind: children.start(Child(kind, [sys.executable, "-c", CHILD, kind],
                                       tmp_path / f"{kind}.log",
                                       on_kill=lambda k=kind: downs.append(k)))
            for kind in ("stops", "ignores")}
    _ready(*(tmp_path / f"{k}.log" for k in kids))
    t0 = time.monotonic()
    children.interrupt(grace=2)
    assert time.monotonic() - t0 < 10
    assert kids["stops"].code == 3  # its SIGINT handler ran (pytest's teardown)
    assert kids["ignores"].code == -9  # killed once the grace was over
    assert downs == ["ignores"]
    assert children.start(Child("late", [sys.executable, "-c", "pass"], tmp_path / "l")) is None


def test_the_first_sigint_stops_the_children_and_the_way_out_waits_for_it(tmp_path):
    downs = []
    children = Children(grace=2)
    log = tmp_path / "c.log"
    child = children.start(Child("c", [sys.executable, "-c", CHILD, "ignores"], log,
                                 on_kill=lambda: downs.append("c")))
    _ready(log)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest itself runs in the background
    with children.stopped_by_signals("test"):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C changes nothing
        child.proc.wait(20)
    assert child.code == -9 and downs == ["c"]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_tee_child_keeps_draining_into_its_log_when_our_stdout_is_gone(tmp_path, monkeypatch):
    class Gone:
        def write(self, _text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Gone())
    # 2 MB: far more than a pipe holds, so a pump that stopped reading would hang the child.
    code = "import sys\nfor i in range(20000): print('x' * 100, i)\n"
    child = Child("[t]", [sys.executable, "-c", code], tmp_path / "t.log", tee=True).start()
    assert child.wait(30) == 0
    assert child.done() and len(tmp_path.joinpath("t.log").read_text().splitlines()) == 20000


def test_run_stops_a_child_past_its_timeout(tmp_path):
    children = Children(grace=2)
    child = Child("slow", [sys.executable, "-c", CHILD, "stops"], tmp_path / "s.log")
    with pytest.raises(subprocess.TimeoutExpired):
        children.run(child, timeout=1)
    # SIGINT, not SIGKILL: either its handler ran (3) or, on a machine so loaded that Python
    # had not installed the handler within the second, SIGINT's default action ended it.
    assert child.code in (3, -signal.SIGINT) and not children.running


def test_a_child_started_with_sigint_ignored_still_gets_it(tmp_path):
    # As under nohup or `cmd &`: the child must not inherit SIG_IGN for SIGINT.
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = ("import signal, time\nprint('ready' if signal.getsignal(signal.SIGINT) is "
                "not signal.SIG_IGN else 'ignored', flush=True)\ntime.sleep(30)\n")
        child = Child("c", [sys.executable, "-c", code], tmp_path / "c.log").start()
        deadline = time.monotonic() + 20
        while not tmp_path.joinpath("c.log").read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert tmp_path.joinpath("c.log").read_text().strip() == "ready"
        child.stop(grace=5)
        assert child.code is not None and child.code != 0
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_runner_started_with_sigint_ignored_still_stops_on_it():
    """`cmd &` in a script starts a runner with SIGINT ignored; the runner takes it back."""
    code = ("import signal, time, sys\n"
            "from karpenter_e2e.runners.children import sigterm_as_ctrl_c\n"
            "sigterm_as_ctrl_c()\n"
            "try:\n    print('ready', flush=True)\n    time.sleep(30)\n"
            "except KeyboardInterrupt:\n    sys.exit(130)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 130
