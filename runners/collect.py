"""The tests a pytest run would run, found without a cluster: one ``--collect-only`` with the
plugin's plan hook (fixtures/ordering.py), which writes each test's nodeid, measured seconds,
scenario id and markers as JSON. Every runner that plans asks here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from karpenter_e2e.clusters.flags import plugin_flag

TIMEOUT_S = 300  # collection takes about 1.5 s here; past this something hangs


class CollectFailed(Exception):
    def __init__(self, code: int, output: str):
        super().__init__(f"collection failed (exit {code})")
        self.code, self.output = code, output

    def error_line(self) -> str:
        """The line that says what was wrong (a usage error, an import error), or the tail."""
        errors = [ln.strip() for ln in self.output.splitlines() if "error" in ln.lower()]
        return (errors[-1] if errors else self.output.strip()[-600:]) or str(self)


def plan(paths: list[str], args: list[str], out: Path, runner=subprocess.run) -> list[dict]:
    cmd = [sys.executable, "-m", "pytest", *paths, "--collect-only", "-q", "-p", "no:xdist",
           plugin_flag("karpenter-e2e-plan"), str(out), *args]
    proc = runner(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if proc.returncode not in (0, 5) or not out.is_file():  # 5: nothing selected
        raise CollectFailed(proc.returncode, (proc.stderr or "") + (proc.stdout or ""))
    return json.loads(out.read_text())
