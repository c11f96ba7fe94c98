""".ci/run's own control flow, run for real with a `make` that only records its targets: a
green job exits 0, a red one exits non-zero, and either way Docker is taken down after."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Records each call's arguments; fails the target named by $FAIL_TARGET.
FAKE_MAKE = """#!/usr/bin/env bash
echo "$*" >> "$MAKE_LOG"
for a in "$@"; do [ "$a" = "$FAIL_TARGET" ] && exit 2; done
exit 0
"""


def target(call: str) -> str:
    """The make target of a recorded call (its options and variables aside)."""
    return next(w for w in call.split() if not w.startswith("-") and "=" not in w)


def run_ci(tmp_path: Path, fail: str = "") -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"
    make.write_text(FAKE_MAKE)
    make.chmod(0o755)
    log = tmp_path / "make.log"
    log.touch()
    ci = tmp_path / "repo" / ".ci"
    ci.mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", ci / "run")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MAKE_LOG": str(log),
           "FAIL_TARGET": fail}
    done = subprocess.run(["bash", str(ci / "run")], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, [target(c) for c in log.read_text().splitlines()]


def test_a_green_job_exits_0_and_takes_docker_down(tmp_path: Path) -> None:
    # The background kind build has finished long before the EXIT trap runs: killing its
    # process group fails, and that must not become the job's verdict (it did: CI exit 1
    # after every step passed).
    rc, calls = run_ci(tmp_path)
    assert rc == 0, calls
    assert calls[0] == "setup"
    assert calls[-1] == "docker-down"
    assert {"test", "e2e", "e2e-aws-sim", "e2e-kind"} <= set(calls)


@pytest.mark.parametrize("fail", ["test", "e2e"])
def test_a_failed_step_fails_the_job_and_still_takes_docker_down(tmp_path: Path,
                                                                fail: str) -> None:
    rc, calls = run_ci(tmp_path, fail)
    assert rc != 0
    assert calls[-1] == "docker-down"
    assert not {"e2e-aws-sim", "e2e-kind"} & set(calls[calls.index(fail) + 1:]), \
        "steps after the failure ran"


@pytest.mark.parametrize("fail", ["e2e-aws-sim", "e2e-kind"])
def test_either_side_by_side_job_fails_ci_after_both_ran(tmp_path: Path, fail: str) -> None:
    # aws-sim and the kind job run at once: one failing neither cuts the other short nor
    # passes the job, and Docker goes down after both.
    rc, calls = run_ci(tmp_path, fail)
    assert rc != 0
    assert {"e2e-aws-sim", "e2e-kind"} <= set(calls)
    assert calls[-1] == "docker-down"
