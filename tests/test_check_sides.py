"""check --compare-version runs its two sides at once, each on its own cluster: both start
before either ends, the outputs and exit codes are those of the sides one after the other,
and a failure on one side, or Ctrl-C, still takes both clusters down."""

from __future__ import annotations

import signal
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_check_steps import snap
from test_decisions import run as decided

from karpenter_e2e.checks import cli, report, sides as both_sides
from karpenter_e2e.checks.manifests import ManifestError
from karpenter_e2e.clusters.api import waits
from karpenter_e2e.clusters.api.waits import Observation
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.fixtures import isolation

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "workshop-basic"


class Backend:
    """A side's cluster, as check sees it: what was done to it, in order."""

    def __init__(self, options, done: list[str]):
        self.karpenter_version, self.name = options.karpenter_version, options.cluster_name
        self.kubernetes_version = "v1.36.3"
        self.done = done

    def check_options(self):
        pass

    def up(self):
        self.done.append(f"{self.name} up")

    def down(self):
        self.done.append(f"{self.name} down")


def result(out: Path, release: str, itype: str = "m5.large", passed: bool = True) -> dict:
    """A side's result, as Check.run returns it, with its check.md and check.json written."""
    s = snap(900, 1)
    r = {"folder": str(EXAMPLE), "run_id": out.name, "mode": "local", "cluster": "c",
         "karpenter_version": release, "scale": {}, "scale_in": {}, "settled": True,
         "settle_error": "", "scale_out": report.summarise(s), "snapshot": s.to_dict(),
         "scale_in_result": None, "consolidation": None, "steps": [], "expectations": [],
         "timings": {}, "started": 1.0, "finished": 2.0, "passed": passed,
         "decisions": decided(release, itype).to_dict(),
         "files": {"markdown": str(out / "check.md"), "json": str(out / "check.json")}}
    report.write(r, out)
    return r


@pytest.fixture
def sides(monkeypatch, tmp_path):
    """cli.main with each side's Check replaced by ``behave[release](backend, out)``, run
    as Check.run runs: the cluster up, the check, the cluster down whatever happens."""
    done: list[str] = []
    behave: dict = {}

    class FakeCheck:
        def __init__(self, plan_, backend, reports_dir, **kwargs):
            self.backend, self.out = backend, reports_dir / "runs" / backend.karpenter_version

        def run(self):
            self.backend.up()
            try:
                return behave[self.backend.karpenter_version](self.backend, self.out)
            finally:
                self.backend.down()

    monkeypatch.setattr(cli.backends, "create", lambda options: Backend(options, done))
    monkeypatch.setattr(cli, "Check", FakeCheck)

    def main(*more: str) -> int:
        return cli.main([str(EXAMPLE), "--karpenter-version", "v1.14.3", "--compare-version",
                         "v1.15.0", "--cluster-name", "s", "--reports-dir", str(tmp_path),
                         *more])
    main.done, main.behave = done, behave  # type: ignore[attr-defined]
    return main


def test_both_sides_start_before_either_ends_and_the_outputs_are_the_old_ones(
        sides, tmp_path, capsys):
    both_in = threading.Barrier(2, timeout=10)  # passes only with both sides inside at once

    def check(release, itype):
        def run(backend, out):
            both_in.wait()
            return result(out, release, itype)
        return run
    sides.behave.update({"v1.14.3": check("v1.14.3", "m5.large"),
                         "v1.15.0": check("v1.15.0", "m5.xlarge")})
    junit, summary = tmp_path / "j.xml", tmp_path / "summary.md"
    code = sides("--junit", str(junit), "--summary", str(summary))
    assert code == cli.EXIT_FAILED  # the releases decided differently: suspect
    assert sorted(sides.done) == ["s down", "s up", "s-b down", "s-b up"]
    out = capsys.readouterr().out
    # As one after the other: the first side's tables, the second's, the comparison, files.
    a, b = out.index("Karpenter v1.14.3"), out.index("Karpenter v1.15.0")
    compare, files = out.index("v1.14.3 -> v1.15.0"), out.index("files: ")
    assert a < b < compare < files and out.count("files: ") == 1
    second = tmp_path / "runs" / "v1.15.0"
    assert (second / "compare.md").exists() and not (tmp_path / "runs" / "v1.14.3" /
                                                     "compare.md").exists()
    assert f"compare_markdown {second / 'compare.md'}" in out
    # --junit and --summary: the second side's result and the comparison, written once.
    assert ET.parse(junit).getroot().find(".//testcase") is not None
    assert summary.read_text().count("# check ") == 1
    assert "v1.14.3 -> v1.15.0" in summary.read_text()


def test_the_same_decisions_on_both_sides_pass(sides, capsys):
    def check(release):
        return lambda backend, out: result(out, release)
    sides.behave.update({"v1.14.3": check("v1.14.3"), "v1.15.0": check("v1.15.0")})
    assert sides() == cli.EXIT_PASSED


def waiting_for_karpenter(seen: list[str]):
    """A side that waits (as a settle waits) until it is stopped; says it was."""
    def run(backend, out):
        try:
            waits.eventually(lambda: Observation(False, "not settled"), what="settled",
                             timeout=60, poll=0.05)
        except waits.Stopped:
            seen.append(f"{backend.name} stopped")
            raise
        raise AssertionError("never stopped")
    return run


@pytest.mark.parametrize("error, code, said", [
    (ClusterError("kwokctl could not create the control plane"), cli.EXIT_CLUSTER,
     "check: cluster error: kwokctl could not create the control plane"),
    (ManifestError("nodepool.yaml: rejected"), cli.EXIT_BAD_INPUT,
     "the API server rejected the manifests; the cluster was taken down"),
    (RuntimeError("a harness bug"), cli.EXIT_CLUSTER,
     "check: no verdict, the check itself failed (RuntimeError: a harness bug)"),
])
def test_the_first_side_failing_stops_the_second_and_exits_as_before(sides, capsys, error,
                                                                     code, said):
    seen: list[str] = []
    second_waits = threading.Event()

    def fail(backend, out):
        assert second_waits.wait(10)  # the second side is under way: they run at once
        raise error

    def second(backend, out):
        second_waits.set()
        return waiting_for_karpenter(seen)(backend, out)
    sides.behave.update({"v1.14.3": fail, "v1.15.0": second})
    started = time.monotonic()
    assert sides() == code
    assert time.monotonic() - started < 30  # stopped, not left to its 60 s wait
    assert seen == ["s-b stopped"]
    assert sorted(sides.done) == ["s down", "s up", "s-b down", "s-b up"]
    captured = capsys.readouterr()
    assert said in captured.err
    assert "Karpenter v1.14.3" not in captured.out  # no tables: the first side had none


def test_the_second_side_failing_lets_the_first_finish_and_print_as_before(sides, capsys):
    first_may_end = threading.Event()

    def first(backend, out):
        first_may_end.wait(10)
        return result(out, "v1.14.3")

    def second(backend, out):
        try:
            raise ManifestError("nodepool.yaml: v1.15.0 rejects it")
        finally:
            first_may_end.set()
    sides.behave.update({"v1.14.3": first, "v1.15.0": second})
    assert sides() == cli.EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert "Karpenter v1.14.3" in captured.out  # its tables, as when it ran first
    assert "v1.15.0 rejects it" in captured.err
    assert sorted(sides.done) == ["s down", "s up", "s-b down", "s-b up"]


@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
                    reason="SIGINT is handled otherwise here")
def test_ctrl_c_stops_both_sides_and_takes_both_clusters_down(sides, capsys):
    """A real SIGINT, to the main thread (the only one Python gives it to), while both sides
    wait on Karpenter: each is stopped at its wait and takes its cluster down."""
    seen: list[str] = []
    both_waiting = threading.Barrier(3, timeout=10)

    def side(backend, out):
        both_waiting.wait()
        return waiting_for_karpenter(seen)(backend, out)
    sides.behave.update({"v1.14.3": side, "v1.15.0": side})

    def interrupt():
        both_waiting.wait()
        time.sleep(0.2)  # the main thread is waiting for the sides by now
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    threading.Thread(target=interrupt, daemon=True).start()
    assert sides() == cli.EXIT_INTERRUPTED
    assert sorted(seen) == ["s stopped", "s-b stopped"]
    assert sorted(sides.done) == ["s down", "s up", "s-b down", "s-b up"]
    assert "check: interrupted" in capsys.readouterr().err


def test_ctrl_c_again_takes_down_from_the_main_thread_what_a_side_still_runs(monkeypatch):
    """A side that does not reach a wait (a long command, say) after the first Ctrl-C: the
    second, while the main thread waits for it, takes its cluster down from there."""
    done: list[str] = []
    release = threading.Event()

    class Interrupting:  # the queue the main thread waits on: Ctrl-C arrives there
        def get(self):
            raise KeyboardInterrupt

        def put(self, side):
            pass

    def stuck():
        release.wait(10)
        return None, {}
    backend = Backend(type("O", (), {"karpenter_version": "v1.15.0", "cluster_name": "s"})(),
                      done)
    stop = threading.Event()
    side = both_sides.Side("v1.15.0", backend, stuck, stop, Interrupting())
    monkeypatch.setattr(side, "join", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        both_sides.join([side], stop, Interrupting(), keep=False)
    assert stop.is_set() and done == ["s down"]
    release.set()


def test_each_sides_progress_lines_begin_with_its_release(sides, caplog):
    import logging
    log = logging.getLogger("karpenter_e2e.check")

    def check(release):
        def run(backend, out):
            log.warning("cluster %r ready", backend.name)
            return result(out, release)
        return run
    sides.behave.update({"v1.14.3": check("v1.14.3"), "v1.15.0": check("v1.15.0")})
    with caplog.at_level(logging.INFO):
        sides()
    said = [r.getMessage() for r in caplog.records if "ready" in r.getMessage()]
    assert sorted(said) == ["[v1.14.3] cluster 's' ready", "[v1.15.0] cluster 's-b' ready"]
    log.warning("after")  # the labels end with the sides
    assert caplog.records[-1].getMessage() == "after"


def test_the_first_sides_snapshot_goes_aside_and_the_seconds_to_snapshot_out(
        monkeypatch, tmp_path):
    """--snapshot-out DIR: one after the other, the second side's snapshot overwrote the
    first's; at once, the first side's goes to a directory of its own (thrown away)."""
    given: dict[str, Path | None] = {}

    def side(args, base, base_plan, base_note, the_plan, backend, snapshot_out=None):
        given[backend.karpenter_version] = snapshot_out
        return None, {"passed": True}
    monkeypatch.setattr(cli, "_side", side)
    monkeypatch.setattr(cli, "_outputs", lambda *a, **k: None)
    args = cli.parser().parse_args([str(EXAMPLE), "--snapshot-out", str(tmp_path / "snap")])
    backends = [Backend(type("O", (), {"karpenter_version": v, "cluster_name": n})(), [])
                for v, n in (("v1.14.3", "s"), ("v1.15.0", "s-b"))]
    cli._side_by_side(args, None, None, "", None, tuple(backends))
    assert given["v1.15.0"] is None  # Check then writes args.snapshot_out
    aside = given["v1.14.3"]
    assert aside is not None and aside != tmp_path / "snap" and not aside.exists()


def test_run_ids_are_never_issued_twice_in_one_process(monkeypatch):
    """Both sides' Checks are made in the same second: their run directories must differ
    even when the random part repeats."""
    draws = iter([b"\x00\x01", b"\x00\x01", b"\x00\x02"])
    monkeypatch.setattr(isolation.os, "urandom", lambda n: next(draws))
    monkeypatch.setattr(isolation.time, "strftime", lambda fmt: "1206150000")
    monkeypatch.setattr(isolation, "_issued", set())
    assert [isolation.new_run_id(), isolation.new_run_id()] == ["12061500000001",
                                                                "12061500000002"]


def test_the_same_release_twice_is_told_apart_by_its_cluster():
    def backend(v, n):
        return Backend(type("O", (), {"karpenter_version": v, "cluster_name": n})(), [])
    assert both_sides.labels((backend("v1.14.3", "s"), backend("v1.15.0", "s-b"))) == \
        ["v1.14.3", "v1.15.0"]
    assert both_sides.labels((backend("v1.15.0", "s"), backend("v1.15.0", "s-b"))) == \
        ["v1.15.0 s", "v1.15.0 s-b"]
