"""A verdict decided while the run waits: the waits of the thread end at once with the finding
(waits.until_decided), teardowns run to their end, and the source (fixtures/decided.py)
decides only what the final verdict would say: a panic, a refused create, an error loop in
the lines about the run's own objects, an oracle declared not applicable aside."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from karpenter_e2e.clusters.api import waits
from karpenter_e2e.clusters.api.waits import (
    ConsistencyViolated,
    Observation,
    Timeouts,
    WaitAborted,
    consistently,
    eventually,
)
from karpenter_e2e.fixtures import decided, oracles
from karpenter_e2e.fixtures.decided import Decided
from karpenter_e2e.fixtures.watch import watch_until

FAST = Timeouts(poll=0.01, progress=0.05)


def _line(level: str, message: str, error: str = "", at: float | None = None, **extra) -> str:
    stamp = datetime.fromtimestamp(at if at is not None else time.time(), UTC)
    return json.dumps({"level": level, "time": stamp.isoformat().replace("+00:00", "Z"),
                       "message": message, "error": error, **extra}) + "\n"


REFUSED = ("creating node claim, NodeClaim.karpenter.sh \"default-x7k2p\" is invalid: "
           "spec.requirements[3].key: Invalid value: \"karpenter.sh/registered\": label domain "
           "\"karpenter.sh\" is restricted")


# ---- the wait side: one mechanism for eventually, consistently and watches ----------------------
def test_a_decided_verdict_ends_an_eventually_at_once_naming_the_finding():
    looks = []

    def source() -> str | None:
        return "the verdict is decided: a panic" if len(looks) >= 3 else None

    def never() -> Observation:
        looks.append(1)
        return Observation(False, "2 Pending")

    started = time.monotonic()
    with waits.until_decided(source), pytest.raises(WaitAborted) as exc:
        eventually(never, what="3 Running pods", timeout=60, poll=0.01)
    assert time.monotonic() - started < 5 and len(looks) == 3
    assert "expected 3 Running pods; because: the verdict is decided: a panic" in str(exc.value)


def test_consistently_ends_as_aborted_not_as_a_violation():
    with waits.until_decided(lambda: "decided"), pytest.raises(WaitAborted) as exc:
        consistently(lambda: Observation(True, "fine"), what="x", duration=30, poll=0.01)
    assert not isinstance(exc.value, ConsistencyViolated)


def test_a_watch_ends_too_and_re_checks_often_though_no_event_comes(monkeypatch):
    class Quiet:  # lists nothing, streams nothing
        def stream(self, *_a, **_k):
            time.sleep(0.05)
            yield from ()

        def stop(self):
            pass

    from karpenter_e2e.clusters.api import informer
    monkeypatch.setattr(informer.watch, "Watch", Quiet)
    calls = []

    def source() -> str | None:
        calls.append(1)
        return "decided" if len(calls) > 2 else None

    started = time.monotonic()
    with waits.until_decided(source), pytest.raises(WaitAborted, match="because: decided"):
        watch_until(lambda **_: {"items": [], "metadata": {"resourceVersion": "1"}},
                    lambda objs: (False, "none"), what="n1", timeout=60, timeouts=FAST)
    # without a guard a quiet watch would wait its progress window (15 s by default)
    assert time.monotonic() - started < 10


def test_teardowns_and_other_threads_are_not_cut_short():
    with waits.until_decided(lambda: "decided"):
        with waits.unstoppable():  # taking the cluster down must finish
            assert eventually(lambda: Observation(True, "gone", "gone"), what="d") == "gone"
        seen = []
        t = threading.Thread(target=lambda: seen.append(
            eventually(lambda: Observation(True, "ok", "ran"), what="z", timeout=1)))
        t.start()
        t.join()
        assert seen == ["ran"]
        with pytest.raises(waits.StopWaiting):
            waits.decided_point()
    waits.decided_point()  # outside it nothing is decided
    assert not waits.deciding()


# ---- the source: the final oracles' own judgment of the log so far ----------------------------
def test_only_the_log_oracle_is_final():
    assert [o.name for o in oracles.ORACLES if o.final] == ["karpenter-log-clean"]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _source(tmp_path: Path, text: str = "", **kw) -> tuple[Decided, Path, Clock]:
    path = tmp_path / "karpenter.log"
    path.write_text("an earlier run's panic: Observed a panic\n" + text)
    clock = Clock()
    src = Decided(path, len("an earlier run's panic: Observed a panic\n"), clock=clock, **kw)
    return src, path, clock


def test_a_refused_create_decides_it_with_when_karpenter_logged_it(tmp_path):
    src, path, clock = _source(tmp_path, _line("INFO", "found provisionable pod(s)"))
    assert src() is None
    logged = time.time() - 7
    with open(path, "a") as fh:
        fh.write(_line("ERROR", "Reconciler error", REFUSED, at=logged,
                       controller="provisioner"))
    assert src() is None  # judged at most every `every` seconds
    clock.now += decided.EVERY_S
    reason = src()
    assert reason and "[karpenter-log-clean] the API server refused 1 NodeClaim create" in reason
    assert src.evidence_at == pytest.approx(logged, abs=0.01)
    stop = src.to_dict()
    assert stop and stop["oracle"] == "karpenter-log-clean" and stop["decided_at"] >= logged
    # decided once, decided for good: every later wait of the run ends at once
    path.write_text("")
    assert src() == reason


def test_a_healthy_log_decides_nothing_and_what_came_before_the_run_is_not_read(tmp_path):
    src, path, clock = _source(tmp_path, "".join(
        _line("INFO", "created nodeclaim", NodeClaim={"name": f"default-{i}"}) for i in range(50)))
    for _ in range(3):
        assert src() is None
        clock.now += 10
    assert src.to_dict() is None


def test_an_error_loop_decides_it_only_past_its_threshold_and_a_half_line_waits(tmp_path):
    src, path, clock = _source(tmp_path)
    error = [_line("ERROR", "Reconciler error", f"ec2 throttled after {n}ms",
                   controller="nodeclaim.lifecycle", reconcileID=f"r{n}") for n in range(5)]
    with open(path, "a") as fh:
        fh.write("".join(error[:oracles.REPEATED_ERROR - 1]) + error[2][:40])  # mid-write
    assert src() is None
    with open(path, "a") as fh:
        fh.write(error[2][40:])
    clock.now += 10
    assert "logged the same error 3 times" in (src() or "")


def test_another_tests_lines_and_an_oracle_not_applicable_decide_nothing(tmp_path):
    other = _line("ERROR", "Reconciler error", REFUSED, NodePool={"name": "default-othertest"})
    src, _, _ = _source(tmp_path, other, test_id="mytest")
    assert src() is None
    mine = _line("ERROR", "Reconciler error", REFUSED, NodePool={"name": "default-mytest"})
    src, _, _ = _source(tmp_path, mine, test_id="mytest",
                        not_applicable={"karpenter-log-clean": "logs errors by design"})
    assert src() is None
    src, _, _ = _source(tmp_path, mine, test_id="mytest")
    assert src()


def test_a_slow_judgment_is_asked_less_often(tmp_path, monkeypatch):
    src, path, clock = _source(tmp_path, _line("ERROR", "Reconciler error", "once"))
    ticks = iter([0.0, 1.0])  # the judgment took 1 s of the machine's time
    monkeypatch.setattr(decided.time, "monotonic", lambda: next(ticks))
    assert src() is None  # one error is no loop
    assert src._next == pytest.approx(10.0)


def test_lines_that_cannot_make_a_finding_are_not_judged(tmp_path, monkeypatch):
    """A healthy run logs INFO and DEBUG lines: the oracle is not run over them again and
    again; an error-level line or a panic's words are judged."""
    src, path, clock = _source(tmp_path, "".join(_line("INFO", f"computed {i}") for i in range(9)))
    judged = []
    monkeypatch.setattr(src, "_judge", lambda: judged.append(1))
    for line in (_line("DEBUG", "waiting on cluster sync"), _line("INFO", "launched nodeclaim"),
                 _line("error", "Reconciler error", "x"), "goroutine 1 [running]:\n"):
        with open(path, "a") as fh:
            fh.write(line)
        clock.now += 10
        src()
    assert len(judged) == 2


def test_the_check_report_says_it_stopped_early_and_why():
    from karpenter_e2e.checks import report
    result = {"started": 100.0, "stopped_early": {
        "oracle": "karpenter-log-clean", "what": "the API server refused 3 NodeClaim create(s)",
        "evidence": [], "decided_at": 118.0, "evidence_logged_at": 111.0, "applied_at": 109.0}}
    line = report.stopped_early(result)[0]
    assert line.startswith("**Stopped early**, 9s after the apply, 7s after Karpenter logged it")
    assert "[karpenter-log-clean] the API server refused 3" in line
    assert report.stopped_early({"started": 1.0}) == []


def test_a_scenario_stopped_early_fails_as_the_oracle_fails_it(monkeypatch):
    """The body's wait gave up because of the verdict: the test fails with the oracles'
    OraclesFailed naming the oracle (what the mutant matrix reads as a kill by it), not as an
    abort of its own."""
    from karpenter_e2e.fixtures import judging
    finding = oracles.Finding("karpenter-log-clean", "Karpenter panicked (1 line(s))", ("x",))
    verdict = oracles.Verdict(findings=[finding], judged=["karpenter-log-clean"])
    monkeypatch.setattr(judging.oracles, "gather", lambda *a, **k: SimpleNamespace(end=0))
    monkeypatch.setattr(judging.oracles, "judge", lambda *a, **k: verdict)
    monkeypatch.setattr(judging.allure, "attach", lambda *a, **k: None)
    cluster = SimpleNamespace(kube=None, karpenter_log_since=lambda *a, **k: "",
                              info=SimpleNamespace(versions={}, mode="local", karpenter_settings={},
                                                   catalogue=None))
    diagnose = SimpleNamespace(holder={})
    item = SimpleNamespace(
        config=SimpleNamespace(getoption=lambda _: "on"), user_properties=[],
        stash={judging.TIMELINE: SimpleNamespace(recording=object())}, nodeid="t",
        funcargs={"cluster": cluster, "scope": SimpleNamespace(test_id="abc"),
                  "diagnose": diagnose}, iter_markers=lambda _: [])
    asked = []
    monkeypatch.setattr(judging.oracles, "judge", lambda rec, na: asked.append(na) or verdict)
    early = Decided(None, 0)
    early.finding = finding
    cause = WaitAborted("3 Running pods", "the verdict is decided: panic", 12)
    with pytest.raises(judging.OraclesFailed) as exc:
        judging._judge(item, body_failed=True, early=early, cause=cause)
    assert str(exc.value).startswith("Karpenter broke karpenter-log-clean (oracles")
    assert "stopped early: gave up after 12s: expected 3 Running pods" in str(exc.value)
    assert ("stopped_early", early.reason) in item.user_properties
    # judged by the final oracle alone: the others would judge a run cut short
    assert set(asked[-1]) == set(oracles.NAMES) - {"karpenter-log-clean"}
    # a body that failed for its own reason keeps its failure
    judging._judge(item, body_failed=True)
    assert asked[-1] == {}


def test_a_run_stopped_early_is_judged_by_the_final_oracles_alone():
    """A NodeClaim stopped mid-launch read as a broken plan (plans-honest, on the
    pod-metrics-panic mutant's scenario stopped 2 s after the first panic): the oracles that
    need a finished run are not judged, and say why."""
    early = Decided(None, 0)
    assert early.cut_short() == {}
    early.finding = oracles.Finding("karpenter-log-clean", "Karpenter panicked (1 line(s))")
    cut = early.cut_short()
    assert set(cut) == {o.name for o in oracles.ORACLES if not o.final} and "plans-honest" in cut
    assert all(why.startswith("not judged: the run stopped early") for why in cut.values())


def test_a_pool_not_yet_ready_does_not_decide_it_where_the_run_s_recording_says_so(tmp_path):
    """The early stop reads the run's live recording as the verdict does: Karpenter's "ignoring
    nodepool, not ready", round after round while the pool is not Ready, decides nothing (seen:
    capacity-split stopped early on it at load 28); the same lines once the watch saw the pool
    Ready decide it."""
    from karpenter_e2e.fixtures.timeline import Recording

    t0 = time.time() - 60
    rec = Recording("abc", t0)
    pool = {"name": "spot-abc", "created": int(t0), "deleting": None, "budgets": []}
    rec.log.append([t0, "nodepools", "ADDED", {**pool, "ready": None}])
    lines = "".join(_line("ERROR", "ignoring nodepool, not ready", at=t0 + 1 + i,
                          controller="provisioner", reconcileID=f"r{i}",
                          NodePool={"name": "spot-abc"}) for i in range(8))
    src, path, clock = _source(tmp_path, lines, test_id="abc", recording=rec)
    assert src() is None
    rec.log.append([t0 + 20, "nodepools", "MODIFIED", {**pool, "ready": t0 + 19}])
    with open(path, "a") as fh:
        fh.write("".join(_line("ERROR", "ignoring nodepool, not ready", at=t0 + 30 + i,
                               controller="provisioner", reconcileID=f"s{i}",
                               NodePool={"name": "spot-abc"}) for i in range(3)))
    clock.now += decided.EVERY_S
    reason = src()
    assert reason and "Karpenter logged the same error 3 times" in reason


def _aws_line(pool: str, at: float, reconcile: str) -> str:
    """The line as v1.15.0's AWS provider writes it and eks mode's follower copies it from the
    pod (clusters/karpenter/podlogs.py): zap's logger and caller, empty top-level name and
    namespace, no error field (a nil error), the pool as {"name": ...}; copied from aws-sim's
    karpenter.log of 2026-12-07."""
    stamp = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    return json.dumps({"level": "ERROR", "time": stamp.replace("+00:00", "Z"),
                       "logger": "controller", "caller": "provisioning/provisioner.go:287",
                       "message": "ignoring nodepool, not ready", "controller": "provisioner",
                       "namespace": "", "name": "", "reconcileID": reconcile,
                       "NodePool": {"name": pool}}) + "\n"


def test_the_aws_provider_s_not_ready_line_is_excused_in_eks_mode_only_while_the_pool_was_not_ready(
        tmp_path):
    """EKS night 3 (records/eks-rehearsal-runs.md): the CPU-limit scenario was stopped on 3 of
    these lines while its EC2NodeClass warmed up; that night ran the rehearsal branch, which
    had no nodepool-not-ready noise yet. With it, the AWS provider's own line layout, as eks
    mode follows it and names its release ("v1.15.0" from the image tag), is excused while
    the watch had not seen the pool Ready, by the early stop and by the verdict alike; the
    same lines after the pool was Ready (a provisioner ignoring a Ready pool) still decide."""
    from karpenter_e2e.fixtures.timeline import Recording

    t0 = time.time() - 120
    rec = Recording("c0ffee", t0, namespace="ns")
    pool = {"name": "default-c0ffee", "created": int(t0), "deleting": None, "budgets": []}
    rec.log.append([t0, "nodepools", "ADDED", {**pool, "ready": None}])
    # 6 rounds while the EC2NodeClass resolves (loaded machine: about one round a second)
    warming = "".join(_aws_line("default-c0ffee", t0 + 1 + i, f"w{i}") for i in range(6))
    src, path, clock = _source(tmp_path, warming, test_id="c0ffee", release="v1.15.0",
                               recording=rec)
    assert src() is None
    rec.log.append([t0 + 8, "nodepools", "MODIFIED", {**pool, "ready": t0 + 7}])
    rec.stopped = t0 + 60
    verdict = oracles.judge(oracles.Record(rec, log_text=warming, karpenter_version="v1.15.0"))
    assert "karpenter-log-clean" not in {f.oracle for f in verdict.findings}

    ignored = "".join(_aws_line("default-c0ffee", t0 + 20 + i, f"i{i}") for i in range(3))
    with open(path, "a") as fh:
        fh.write(ignored)
    clock.now += decided.EVERY_S
    reason = src()
    assert reason and "Karpenter logged the same error 3 times" in reason
    assert "provisioner: ignoring nodepool, not ready" in reason
    verdict = oracles.judge(oracles.Record(rec, log_text=warming + ignored,
                                           karpenter_version="v1.15.0"))
    assert [f.oracle for f in verdict.findings if f.oracle == "karpenter-log-clean"] == [
        "karpenter-log-clean"]


def _aws_metrics_line(pools: list[str], at: float, reconcile: str) -> str:
    """v1.15.0's AWS provider's metrics controller, as the EKS rehearsal's night logged it
    (2026-12-07 23:21:11, ~/.cache/karpenter-e2e/clusters/eks-rh-night/logs/karpenter.log):
    the pools as a "NodePools" list, the errors joined by "; "."""
    stamp = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    error = "; ".join(f"getting instance types, getting cloud provider instance types, no "
                      f"subnets found (NodePool={p}) (NodePool={p})" for p in pools)
    return json.dumps({"level": "ERROR", "time": stamp.replace("+00:00", "Z"),
                       "logger": "controller", "caller": "controller/controller.go:494",
                       "message": "Reconciler error", "controller": "cloudprovider.metrics",
                       "namespace": "", "name": "", "reconcileID": reconcile,
                       "NodePools": [{"name": p} for p in pools], "error": error}) + "\n"


def test_the_aws_metrics_no_subnets_burst_is_excused_only_while_its_pools_were_not_ready():
    """EKS night 4: the on-demand:spot split was stopped on 8 of these lines in 0.64 s, logged
    while its two pools' EC2NodeClass resolved its subnets (discovered 0.25 s after the first
    line). Excused while the watch had not seen the pools Ready; the same lines once they were
    Ready (a controller that cannot read a resolved NodeClass) decide."""
    from karpenter_e2e.fixtures.timeline import Recording

    t0 = time.time() - 120
    pools = ["on-demand-fa7d63", "spot-fa7d63"]
    rec = Recording("fa7d63", t0, namespace="ns")
    for name in pools:
        rec.log.append([t0, "nodepools", "ADDED", {"name": name, "created": int(t0),
                                                   "deleting": None, "budgets": [],
                                                   "ready": None}])
    burst = "".join(_aws_metrics_line(pools, t0 + 1 + 0.005 * 2 ** i, f"b{i}")
                    for i in range(8))
    for name in pools:
        rec.log.append([t0 + 3, "nodepools", "MODIFIED", {"name": name, "created": int(t0),
                                                          "deleting": None, "budgets": [],
                                                          "ready": t0 + 2.5}])
    rec.stopped = t0 + 60
    verdict = oracles.judge(oracles.Record(rec, log_text=burst, karpenter_version="v1.15.0"))
    assert "karpenter-log-clean" not in {f.oracle for f in verdict.findings}

    later = "".join(_aws_metrics_line(pools, t0 + 30 + i, f"l{i}") for i in range(3))
    verdict = oracles.judge(oracles.Record(rec, log_text=burst + later,
                                           karpenter_version="v1.15.0"))
    assert [f.oracle for f in verdict.findings if f.oracle == "karpenter-log-clean"] == [
        "karpenter-log-clean"]
    # v1.14.3's bare form names no pool: it counts, as the gate's finding says
    bare = "".join(
        line.split(', "NodePools"')[0] + ', "error": "no subnets found"}\n'
        for line in burst.splitlines())
    assert '"NodePools"' not in bare and bare.count("no subnets found") == 8
    verdict = oracles.judge(oracles.Record(rec, log_text=bare, karpenter_version="v1.14.3"))
    assert "karpenter-log-clean" in {f.oracle for f in verdict.findings}
