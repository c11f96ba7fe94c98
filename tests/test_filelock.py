"""The file lock: a waiter says who holds it and for what, and gives up at its bound."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra.filelock import file_lock, write_whole

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


def test_threads_of_one_process_take_turns_too(tmp_path):
    """check --compare-version's two sides are threads of one process: each open of the
    lock file is a lock of its own (flock), so they take turns as processes do (the build
    lock, the control plane's creation turn)."""
    path, inside, overlaps = tmp_path / "x.lock", [], []

    def work(name):
        for _ in range(5):
            with file_lock(path, f"building {name}", 10):
                inside.append(name)
                if len(inside) > 1:
                    overlaps.append(list(inside))
                time.sleep(0.01)
                inside.remove(name)
    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []


def test_whole_files_from_two_threads_at_once(tmp_path):
    """The caches two sides may write at the same moment (the proxy's release list, the full
    catalogue): each write is whole, neither fails on the other's temporary file."""
    path, errors = tmp_path / "cache.json", []

    def write(text):
        try:
            for _ in range(200):
                write_whole(path, text)
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)
    threads = [threading.Thread(target=write, args=(c * 5000,)) for c in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and path.read_text() in ("a" * 5000, "b" * 5000)
    assert [p.name for p in tmp_path.iterdir()] == ["cache.json"]  # no temporary file left
