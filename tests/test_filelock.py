"""The file lock: a waiter says who holds it and for what, and gives up at its bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra.filelock import file_lock

HOLDER = """
import sys, time
from pathlib import Path
from karpenter_e2e.clusters.infra.filelock import file_lock
with file_lock(Path(sys.argv[1]), "building kube-apiserver v1.30.14", 5):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold(path, seconds):
    """Another process holding the lock for ``seconds`` (here, a sleep is the workload)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_free_lock_is_taken_and_says_who_holds_it(tmp_path):
    path = tmp_path / "x.lock"
    with file_lock(path, "building etcd v3.6.16", 1):
        assert path.read_text().startswith("pid ")
        assert path.read_text().strip().endswith(": building etcd v3.6.16")


def test_a_waiter_names_the_holder_and_gives_up_at_its_bound(tmp_path):
    path = tmp_path / "x.lock"
    holder = hold(path, 30)
    try:
        started = time.monotonic()
        with pytest.raises(ClusterError) as failed, file_lock(path, "building etcd", 1.5):
            pytest.fail("the lock was taken while another process held it")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert 1.5 <= waited < 10
    message = str(failed.value)
    assert f"held by pid {holder.pid}: building kube-apiserver v1.30.14" in message
    assert "for building etcd" in message


def test_a_waiter_takes_the_lock_once_the_holder_is_done(tmp_path):
    path = tmp_path / "x.lock"
    holder = hold(path, 2)
    started = time.monotonic()
    try:
        with file_lock(path, "building etcd", 30):
            waited = time.monotonic() - started
            assert path.read_text().strip() == f"pid {os.getpid()}: building etcd"
    finally:
        holder.kill()
        holder.wait()
    assert 1.0 <= waited < 10  # the holder's 2 s, less its start-up


def test_a_dead_holder_frees_the_lock(tmp_path):
    path = tmp_path / "x.lock"
    holder = hold(path, 30)
    holder.kill()
    holder.wait()
    with file_lock(path, "building etcd", 2):
        assert path.read_text().strip().endswith(": building etcd")
