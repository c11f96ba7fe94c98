"""The processes a runner starts (pytest, a run of `make e2e`): one way to start, watch and
stop them, which every runner uses.

Each child runs in a session of its own, so a terminal's Ctrl-C reaches the runner alone,
which hands SIGINT to each child once: a pytest then takes its cluster down itself. A child
still running after the grace gets SIGKILL for its whole process group, then its ``on_kill``
(taking its cluster down by name, say).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

STOP_GRACE_S = 120  # a pytest's teardown after SIGINT (measured: seconds; bounded here)


def _default_sigint() -> None:
    # A runner started in the background (nohup, `cmd &`) ignores SIGINT, and children
    # inherit that; the SIGINT we send must still make pytest tear its cluster down.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Child:
    """One process, its output in ``log``; with ``tee``, also on our stdout, each line
    prefixed with ``tag`` (and ``on_line`` sees each line)."""

    def __init__(self, tag: str, cmd: list[str], log: Path, *, tee: bool = False,
                 cwd: Path | None = None, on_kill: Callable[[], None] | None = None,
                 on_line: Callable[[str], None] | None = None):
        self.tag, self.cmd, self.log, self.tee, self.cwd = tag, cmd, log, tee, cwd
        self.on_kill, self.on_line = on_kill, on_line
        self.proc: subprocess.Popen | None = None
        self.code: int | None = None
        self._pump: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> Child:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        piped = self.tee or self.on_line is not None
        with contextlib.ExitStack() as stack:
            out = subprocess.PIPE if piped else stack.enter_context(open(self.log, "w"))
            self.proc = subprocess.Popen(
                self.cmd, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True,
                preexec_fn=_default_sigint)
        if piped:
            self._pump = threading.Thread(target=self._copy_output, daemon=True)
            self._pump.start()
        return self

    def _copy_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        terminal = self.tee
        with open(self.log, "w") as keep:
            for line in self.proc.stdout:
                keep.write(line)
                if self.on_line is not None:
                    self.on_line(line)
                if terminal:
                    try:
                        sys.stdout.write(f"{self.tag} {line}")
                        sys.stdout.flush()
                    except (BrokenPipeError, ValueError):
                        # Whoever read our output is gone. Keep draining into the log: a
                        # child blocked on a full pipe would never reach its teardown.
                        terminal = False

    def done(self) -> bool:
        if self.proc is None or self.proc.poll() is None:
            return False
        if self.code is None:
            if self._pump is not None:
                self._pump.join(10)
            self.code = self.proc.returncode
        return True

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code; raises subprocess.TimeoutExpired after ``timeout`` s."""
        assert self.proc is not None
        self.proc.wait(timeout)
        self.done()
        assert self.code is not None
        return self.code

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL for its whole process group, then ``on_kill``."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self.done()
        if self.on_kill is not None:
            self.on_kill()

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGINT, as Ctrl-C would; after ``grace`` s, kill."""
        if self.proc is None or self.proc.poll() is not None:
            self.done()
            return
        self.signal(signal.SIGINT)
        try:
            self.wait(grace)
        except subprocess.TimeoutExpired:
            print(f"{self.tag} did not stop in {grace:.0f}s after SIGINT: SIGKILL",
                  file=sys.stderr, flush=True)
            self.kill()


class Children:
    """The children running now. The first SIGINT or SIGTERM (inside ``stopped_by_signals``)
    stops them all: SIGINT to each at once, then kill what is still running after the grace.
    Once interrupted, no child starts."""

    def __init__(self, grace: float = STOP_GRACE_S) -> None:
        self.grace = grace
        self.lock = threading.Lock()
        self.running: list[Child] = []
        self.interrupted = threading.Event()
        self.stopper: threading.Thread | None = None

    def start(self, child: Child) -> Child | None:
        """``child`` started, or None once interrupted."""
        with self.lock:
            if self.interrupted.is_set():
                return None
            self.running.append(child.start())
            return child

    def finished(self, child: Child) -> None:
        with self.lock:
            if child in self.running:
                self.running.remove(child)

    def run(self, child: Child, timeout: float | None = None) -> int | None:
        """Start ``child`` and wait for it; None if interrupted before it started. After
        ``timeout`` s it is stopped and TimeoutExpired raised."""
        if self.start(child) is None:
            return None
        try:
            return child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.stop(self.grace)
            raise
        finally:
            self.finished(child)

    def interrupt(self, grace: float | None = None) -> None:
        """SIGINT to each; up to ``grace`` s in all for them to end; then kill the rest."""
        grace = self.grace if grace is None else grace
        self.interrupted.set()
        with self.lock:
            procs = list(self.running)
        for c in procs:
            c.signal(signal.SIGINT)
        deadline = time.monotonic() + grace
        for c in procs:
            try:
                c.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                print(f"{c.tag} did not stop in {grace:.0f}s after SIGINT: SIGKILL",
                      file=sys.stderr, flush=True)
                c.kill()

    @contextlib.contextmanager
    def stopped_by_signals(self, prog: str) -> Iterator[None]:
        """While in it, the first SIGINT or SIGTERM runs ``interrupt`` in a thread (later
        ones are ignored); on the way out, waits for that to finish (teardowns done)."""
        def on_signal(signum, _frame) -> None:
            if self.interrupted.is_set():
                return
            self.interrupted.set()
            print(f"{prog}: {signal.Signals(signum).name}: stopping every child (each takes "
                  f"its cluster down)", file=sys.stderr, flush=True)
            self.stopper = threading.Thread(target=self.interrupt, daemon=True)
            self.stopper.start()

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
            if self.stopper is not None:
                self.stopper.join()
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def run_one(child: Child) -> int:
    """``child`` run to its end, its exit code. Ctrl-C or SIGTERM here reaches it as SIGINT
    first (a check or a pytest takes its clusters down), and it is killed only after the
    grace."""
    children = Children()
    try:
        kid = children.start(child)
        assert kid is not None  # a group of its own: nothing has interrupted it yet
        return kid.wait()
    except BaseException:
        children.interrupt()
        raise


def _raise_keyboard_interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def sigterm_as_ctrl_c() -> None:
    """SIGTERM (a CI timeout, kill) ends a runner the way Ctrl-C does: its ``except`` and
    ``finally`` blocks stop its children and take its clusters down. SIGINT too, even when
    the runner was started in the background (``cmd &`` in a script starts it with SIGINT
    ignored, and then `kill -INT` did nothing: a mutant matrix kept building and running)."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
