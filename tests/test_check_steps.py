"""`check`'s steps: (apply, settle, scale, patch, wait, expect): parsed and resolved before any
cluster starts, every mistake named by expect.yaml's line and the step's index; and the step
engine run against faked cluster operations (no cluster): outcomes, durations, phases, the
steps not run after a failure, and how the report, JUnit and --base's summary show them."""

from __future__ import annotations

import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from kubernetes import client

from karpenter_e2e.checks import diff, expectations, report, settle, steps
from karpenter_e2e.checks.expectations import ExpectError
from karpenter_e2e.checks.manifests import ManifestError
from karpenter_e2e.checks.observe import NodeView, PodView, PoolView, Snapshot
from karpenter_e2e.checks.run import plan
from karpenter_e2e.clusters.api.waits import WaitAborted, WaitTimeout

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "steps-drift"
MISTAKES = REPO / "tests" / "data" / "check" / "steps-mistakes"

POOL = (EXAMPLE / "nodepool.yaml").read_text()  # a pool and its EC2NodeClass
WEB = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause}]}
"""
JOB = """apiVersion: batch/v1
kind: Job
metadata: {name: report}
spec:
  template:
    metadata: {labels: {app: report}}
    spec: {restartPolicy: Never, containers: [{name: c, image: pause}]}
"""


def folder(tmp_path: Path, expect: str, **files: str) -> Path:
    for name, text in {"pool.yaml": POOL, "web.yaml": WEB, **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "expect.yaml").write_text(expect)
    return tmp_path


# ---- parsing and resolving, before any cluster starts ----------------------------------------
def test_the_example_plans_each_step_against_what_is_applied_by_then():
    p = plan(EXAMPLE, None, "", "", "test")
    assert [m.ref for m in p.bundle.manifests] == [
        "NodePool/default", "EC2NodeClass/default", "Namespace/shop", "Deployment/shop/web"]
    assert [(s.label, s.kind, s.line) for s in p.steps] == [
        ("steps[0]", "patch", 9), ("steps[1]", "settle", 13), ("steps[2]", "expect", 14),
        ("steps[3]", "apply", 19), ("steps[4]", "wait", 20), ("steps[5]", "expect", 21)]
    patch, settle_, judge, apply_, wait, last = p.steps
    assert patch.changed[0].body["spec"]["template"]["metadata"]["labels"] == {
        "eks-immersion-team": "my-team", "rollout": "v2"}
    assert p.bundle.nodepools[0].body["spec"]["template"]["metadata"]["labels"] == {
        "eks-immersion-team": "my-team"}  # the folder's object is untouched
    assert settle_.spec == {"for": "disruption", "timeout": 300.0}
    assert [e.kind for e in judge.expectations] == ["pods", "event", "running"]
    assert judge.phase == "steps[2]" and judge.state == patch.state
    assert [m.ref for m in apply_.changed] == ["Job/shop/report"]
    assert wait.job is apply_.changed[0] and wait.spec["for"] == "complete"
    assert "Job/shop/report" in [m.ref for m in last.state]


def test_every_mistake_is_named_by_line_and_index_at_once():
    with pytest.raises(ExpectError) as err:
        plan(MISTAKES, None, "", "", "test")
    lines = str(err.value).splitlines()
    at = [line.split(": ", 2)[:2] for line in lines]
    assert [(a.rsplit("/", 1)[1], b) for a, b in at] == [
        ("expect.yaml:6", "steps[2] (apply)"), ("expect.yaml:7", "steps[3]"),
        ("expect.yaml:8", "steps[4] (scale)"), ("expect.yaml:9", "steps[5]"),
        ("expect.yaml:10", "steps[6] (wait)"), ("expect.yaml:11", "steps[7]"),
        ("expect.yaml:14", "steps[8].expect[1]"), ("expect.yaml:15", "steps[9] (patch)"),
        ("expect.yaml:16", "steps[10] (apply)"), ("expect.yaml:17", "steps[11] (apply)")]
    text = str(err.value)
    assert "later/missing.yaml: no such file or folder" in text
    assert "settle: for: expected disruption or provisioning, got 'ever'" in text
    assert "no workload called 'api'" in text and "batch/report" in text  # steps[0]'s Job
    assert "metadata.name names the object; a patch cannot change it" in text
    assert "web is a Deployment, not a Job" in text
    assert "expected one of apply, settle, scale, patch, wait, expect" in text
    assert "no NodePool called 'spot' is applied by then" in text
    assert "namespace 'nowhere', which no file in" in text and "nor what is applied" in text
    assert "outside the check folder" in text
    # what steps[0] applies may refer to the folder's NodeClass and be waited for: no error
    assert "steps[0]" not in text and "steps[1]" not in text


def test_the_mistakes_exit_2_before_anything_starts(tmp_path):
    name = f"check-steps-{int(time.time())}"
    proc = subprocess.run([sys.executable, "-m", "karpenter_e2e", "check", str(MISTAKES),
                           "--cluster-name", name, "--reports-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "bad input, nothing started" in proc.stderr and "expect.yaml:11: steps[7]" in \
        proc.stderr
    assert not (tmp_path / "r").exists()
    from karpenter_e2e.clusters.infra import build
    assert not (build.cache_dir() / "clusters" / name).exists()


@pytest.mark.parametrize("step,message", [
    ("- settle: {timeout: -1}", r"settle: timeout: expected seconds"),
    ("- settle: {for: disruption, within: 3}", r"settle: unknown key\(s\) within"),
    ("- scale: {workload: web}", r"scale: replicas missing"),
    ("- scale: {workload: web, replicas: -1}", r"scale: replicas: expected a whole number"),
    ("- patch: {kind: NodePool, name: default}", r"patch: merge missing"),
    ("- patch: {kind: NodePool, name: default, merge: []}", r"patch: merge: expected a mapping"),
    ("- patch: {kind: NodePool, name: default, merge: {kind: X}}",
     r"patch: merge: kind names the object"),
    ("- wait: {job: report, for: done}", r"wait: for: expected complete or failed"),
    ("- wait: {deployment: web}", r"wait: unknown key\(s\) deployment"),
    ("- expect: []", r"expect: expected a list of expectation items"),
    ("- apply: ''", r"apply: expected a file or folder"),
    ("- {settle: {}, expect: [{nodes: 1}]}", r"expected one of apply, settle, scale, patch, "
                                              r"wait, expect \(one a step\); got settle, expect"),
    ("- apply: web.yaml\n  settle: {}", r"expected one of .*; got apply, settle"),
])
def test_a_malformed_step(tmp_path, step, message):
    d = folder(tmp_path, "steps:\n" + step + "\n")
    with pytest.raises(ExpectError, match=r"expect.yaml:2: steps\[0\]: " + message):
        plan(d, None, "", "", "t")


def test_steps_is_a_list_and_no_second_way_to_scale_in(tmp_path):
    path = tmp_path / "expect.yaml"
    path.write_text("steps: {settle: {}}\n")
    with pytest.raises(ExpectError, match="steps: expected a list of steps"):
        expectations.load(path)
    path.write_text("scale_in: {web: 0}\nsteps: [{settle: {}}]\n")
    with pytest.raises(ExpectError, match="steps and scale_in both given: write the scale-in "
                                          "as steps"):
        expectations.load(path)


def test_a_step_that_comes_too_early_and_one_that_follows_an_apply(tmp_path):
    """A patch of an object a later step applies is a mistake; a scale of a workload an
    earlier step applied is not, and a later apply of the same object replaces it."""
    d = folder(tmp_path, "steps:\n"
                         "  - scale: {workload: report, replicas: 2}\n"
                         "  - apply: later/job.yaml\n"
                         "  - scale: {workload: report, replicas: 4}\n"
                         "  - apply: later/web-v2.yaml\n"
                         "  - expect: [{running: all}]\n",
               **{"later/job.yaml": JOB, "later/web-v2.yaml": WEB.replace("replicas: 3",
                                                                          "replicas: 5")})
    with pytest.raises(ExpectError, match=r"expect.yaml:2: steps\[0\] \(scale\): no workload "
                                          r"called 'report'") as err:
        plan(d, None, "", "", "t")
    assert "steps[2]" not in str(err.value)
    (tmp_path / "expect.yaml").write_text("steps:\n"
                                          "  - apply: later\n"
                                          "  - scale: {workload: report, replicas: 4}\n"
                                          "  - expect: [{running: all}]\n")
    p = plan(d, None, "", "", "t")
    assert [m.ref for m in p.bundle.manifests] == ["NodePool/default", "EC2NodeClass/default",
                                                   "Deployment/default/web"]  # later/ left out
    applied, scaled, judged = p.steps
    assert sorted(m.ref for m in applied.changed) == ["Deployment/default/web",
                                                      "Job/default/report"]
    assert [m.body["spec"]["replicas"] for m in applied.state if m.kind == "Deployment"] == [5]
    assert len(applied.state) == 4  # web replaced by its later version, not added twice
    assert scaled.changed[0].body["spec"]["parallelism"] == 4


def test_scale_in_is_shorthand_for_a_scale_a_settle_and_an_expect(tmp_path):
    d = folder(tmp_path, "scale_in: {web: 0}\nafter_scale_in: [{nodes: {max: 0}}]\n")
    p = plan(d, None, "", "", "t")
    assert [(s.label, s.kind) for s in p.steps] == [("scale-in", "scale"),
                                                   ("scale-in", "settle"),
                                                   ("scale-in", "expect")]
    scale, settle_, judge = p.steps
    assert scale.changed[0].body["spec"]["replicas"] == 0 and scale.mark == "scale-in {'web': 0}"
    assert settle_.spec == {"for": "disruption", "timeout": 300.0}
    assert judge.phase == "scale-in" and [e.kind for e in judge.expectations] == ["nodes"]
    # --scale-in with steps: the shorthand runs after them, on what they applied
    (tmp_path / "expect.yaml").write_text("steps: [{apply: later/job.yaml}]\n")
    (tmp_path / "later").mkdir()
    (tmp_path / "later" / "job.yaml").write_text(JOB)
    p = plan(d, None, "", "report=0", "t")
    assert [(s.label, s.kind) for s in p.steps][0] == ("steps[0]", "apply")
    assert p.steps[1].changed[0].body["spec"]["parallelism"] == 0
    with pytest.raises(ManifestError, match="no workload called 'api'"):
        plan(folder(tmp_path, ""), None, "", "api=0", "t")  # as before steps existed


def test_a_patch_merges_as_a_json_merge_patch():
    body = {"spec": {"limits": {"cpu": "4", "memory": "8Gi"}, "weight": 1,
                     "requirements": [{"key": "a"}, {"key": "b"}]}}
    out = steps.merged(body, {"spec": {"limits": {"memory": None, "cpu": "8"},
                                       "requirements": [{"key": "c"}], "new": {"x": 1}}})
    assert out == {"spec": {"limits": {"cpu": "8"}, "weight": 1,
                            "requirements": [{"key": "c"}], "new": {"x": 1}}}
    assert body["spec"]["limits"] == {"cpu": "4", "memory": "8Gi"}  # not changed in place


def test_a_patch_names_the_namespace_where_two_objects_share_a_name(tmp_path):
    ns = "apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n"
    d = folder(tmp_path, "steps: [{patch: {kind: Deployment, name: web, merge: {spec: "
                         "{replicas: 1}}}}]\n",
               **{"ns.yaml": ns, "web2.yaml": WEB.replace("{name: web}",
                                                          "{name: web, namespace: other}")})
    with pytest.raises(ExpectError, match="more than one Deployment called 'web'.*give namespace"):
        plan(d, None, "", "", "t")
    (tmp_path / "expect.yaml").write_text(
        "steps: [{patch: {kind: Deployment, name: web, namespace: other, merge: {spec: "
        "{replicas: 1}}}}]\n")
    (patched,) = plan(d, None, "", "", "t").steps
    assert patched.changed[0].ref == "Deployment/other/web"


# ---- the engine, against faked cluster operations -------------------------------------------
class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def snap(at: float, nodes: int, pool: str = "default", label: str = "",
         job: bool = False) -> Snapshot:
    ns = [NodeView(f"n{i}", pool, "c6a.large", "on-demand", "us-west-2a", 0.1,
                   {"rollout": label} if label else {}) for i in range(nodes)]
    pods = [PodView("shop", f"web-{i}", "Deployment/shop/web", "Running", f"n{i}", {},
                    {"app": "web"}) for i in range(nodes)]
    if job:  # the report Job's pod, done, on the first node
        pods.append(PodView("shop", "report-x", "Job/shop/report", "Succeeded", "n0", {},
                            {"app": "report"}))
    out = Snapshot(at, pods, ns, [PoolView(pool)])
    if label == "v2":  # the drift's replacement: Karpenter said why
        out.events = [{"reason": "DisruptionTerminating", "kind": "NodeClaim",
                       "name": "default-a", "message": "Disrupting NodeClaim: Drifted"}]
    return out


class Fake:
    """The cluster side, recorded: what each step asked for, and what the test decides."""

    def __init__(self, clock: Clock, snaps: list[Snapshot], settle_error: str = "",
                 job_error: Exception | None = None, reject: str = ""):
        self.clock, self.snaps, self.calls = clock, list(snaps), []
        self.settle_error, self.job_error, self.reject = settle_error, job_error, reject

    def apply(self, changed):
        self.calls.append(("apply", [m.ref for m in changed]))
        if self.reject:
            raise ManifestError(self.reject)

    def settle(self, state, disruption, timeout):
        self.calls.append(("settle", disruption, timeout))
        self.clock.now += 40
        if self.settle_error:
            raise WaitTimeout("Karpenter to settle", self.settle_error, 300)

    def wait_job(self, job, outcome, timeout):
        self.calls.append(("wait", job.ref, outcome, timeout))
        if self.job_error:
            raise self.job_error
        return "succeeded 1, failed 0, active 0"

    def mark(self, t, label):
        self.calls.append(("mark", label))

    def observe(self, step, since, before):
        self.calls.append(("observe", step.label, since, len(before.nodes)))
        s = self.snaps.pop(0)
        return s, {"tables": report.summarise(s),
                   "happened": {"nodes_before": len(before.nodes), "nodes_after": len(s.nodes),
                                "cost_before": 0.1, "cost_after": 0.1,
                                "judged_after_s": round(s.at - since, 1), "steps": []}}


def example_steps():
    return plan(EXAMPLE, None, "", "", "test").steps


def test_the_engine_runs_each_step_in_order_and_records_it():
    clock = Clock()
    fake = Fake(clock, [snap(2000, 1, label="v2"), snap(3000, 1, label="v2", job=True)])
    ran = steps.run(example_steps(), fake, snap(900, 1), clock)
    assert ran.ok and not ran.rejected and not ran.settle_error
    assert [(r["label"], r["kind"], r["outcome"]) for r in ran.records] == [
        ("steps[0]", "patch", "ok"), ("steps[1]", "settle", "ok"), ("steps[2]", "expect", "ok"),
        ("steps[3]", "apply", "ok"), ("steps[4]", "wait", "ok"), ("steps[5]", "expect", "ok")]
    assert [c[0] for c in fake.calls] == ["mark", "apply", "settle", "observe", "mark", "apply",
                                          "wait", "observe"]
    assert [c[1] for c in fake.calls if c[0] == "mark"] == [
        "steps[0] patch NodePool default", "steps[3] apply later/report.yaml"]
    assert fake.calls[1] == ("apply", ["NodePool/default"])
    assert fake.calls[2] == ("settle", True, 300.0)
    assert fake.calls[6] == ("wait", "Job/shop/report", "complete", 180.0)
    assert ran.records[1]["seconds"] == 41.0 and ran.records[1]["detail"] == "settled in 40.5s"
    assert ran.records[0]["detail"] == "applied NodePool/default"
    assert ran.records[4]["detail"].startswith("Job shop/report completed: succeeded 1")
    assert "tables" in ran.records[2] and ran.records[2]["line"] == 14
    # each expect step's phase begins with the first step after the previous expect
    first_patch, first_apply = 1000.5, ran.records[3]
    assert fake.calls[3][1:3] == ("steps[2]", first_patch)
    assert fake.calls[7][2] > fake.calls[3][2] and fake.calls[7][3] == 1  # before: step 2's
    assert [r["phase"] for r in ran.results] == ["steps[2]"] * 3 + ["steps[5]"] * 2
    assert first_apply["text"] == "apply later/report.yaml"


def test_a_failing_expect_ends_the_run_and_the_rest_is_not_run():
    clock = Clock()
    fake = Fake(clock, [snap(2000, 1, label="v1")])  # no node carries the new label
    ran = steps.run(example_steps(), fake, snap(900, 1), clock)
    assert not ran.ok and ran.failed.startswith("steps[2] (expect 3 items) failed")
    assert [r["outcome"] for r in ran.records] == ["ok", "ok", "failed", "not run", "not run",
                                                   "not run"]
    assert ran.records[2]["detail"] == (
        "1 of 3 expectations held; failed: pods of app=web only on nodes with rollout=v2; "
        "Karpenter events with reason 'DisruptionTerminating', message 'Drifted', kind "
        "'NodeClaim' >= 1")
    assert ran.records[3]["detail"] == "not run: steps[2] (expect 3 items) failed"
    assert ran.records[3]["seconds"] == 0.0
    assert not [c for c in fake.calls if c[0] in ("wait",)]


def test_a_settle_that_runs_out_and_a_job_that_fails_are_clear_verdicts():
    clock = Clock()
    ran = steps.run(example_steps(), Fake(clock, [snap(2000, 1, label="v2")],
                                          settle_error="1 NodeClaims, 3s quiet"),
                    snap(900, 1), clock)
    assert ran.records[1]["outcome"] == "failed" and not ran.ok
    assert ran.settle_error == ("after steps[1]: timed out after 300s: expected Karpenter to "
                                "settle; last seen: 1 NodeClaims, 3s quiet")
    # the next expect still judges and shows the state the settle left; then nothing runs
    assert ran.records[2]["outcome"] == "ok" and "tables" in ran.records[2]
    assert [r["outcome"] for r in ran.records[3:]] == ["not run"] * 3
    assert ran.records[3]["detail"] == "not run: steps[1] (settle (disruption, up to 300s)) failed"

    clock = Clock()
    ended = WaitAborted("Job shop/report to complete", "the Job ended Failed "
                        "(BackoffLimitExceeded: Job has reached the specified backoff limit)", 3)
    ran = steps.run(example_steps(), Fake(clock, [snap(2000, 1, label="v2"),
                                                  snap(3000, 1, "default", "v2", True)],
                                          job_error=ended), snap(900, 1), clock)
    assert ran.records[4]["outcome"] == "failed" and "BackoffLimitExceeded" in \
        ran.records[4]["detail"]
    assert ran.records[5]["outcome"] == "ok" and not ran.settle_error and not ran.ok


def test_an_object_the_api_server_refuses_when_its_step_runs_is_bad_input():
    clock = Clock()
    ran = steps.run(example_steps(), Fake(clock, [], reject="nodepool.yaml (document 0): the "
                                          "API server rejected NodePool default: immutable"),
                    snap(900, 1), clock)
    assert ran.records[0]["outcome"] == "rejected"
    assert ran.rejected.startswith("steps[0] (patch NodePool default: ") and "immutable" in \
        ran.rejected
    assert {r["outcome"] for r in ran.records[1:]} == {"not run"}


def test_without_settling_first_no_step_runs():
    ran = steps.not_run(example_steps(), "the folder's own apply did not settle")
    assert {r["outcome"] for r in ran.records} == {"not run"} and not ran.results


def test_a_job_wait_reads_the_jobs_conditions():
    """settle.job_finished on a faked Kube: the wanted ending returns what was seen, the other
    ending gives up at once with the Job's own reason."""
    def job(condition: str | None) -> client.V1Job:
        conds = [client.V1JobCondition(type=condition, status="True", reason="BackoffLimitExceeded",
                                       message="Job has reached the specified backoff limit")] \
            if condition else []
        return client.V1Job(metadata=client.V1ObjectMeta(name="report"),
                            status=client.V1JobStatus(conditions=conds, succeeded=1, failed=0))

    class Kube:
        timeout = 5
        api = client.ApiClient()

        def __init__(self, states):
            self.batch, self.states = self, list(states)

        def read_namespaced_job_status(self, name, namespace, _request_timeout=None):
            return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    seen = settle.job_finished(Kube([job(None), job("Complete")]), "shop", "report", timeout=10)
    assert seen == "succeeded 1, failed 0, active 0"
    started = time.monotonic()
    with pytest.raises(WaitAborted, match="expected Job shop/report to complete; because: the "
                                          "Job ended Failed \\(BackoffLimitExceeded"):
        settle.job_finished(Kube([job("Failed")]), "shop", "report", timeout=30)
    assert time.monotonic() - started < 5
    assert settle.job_finished(Kube([job("Failed")]), "shop", "report", "failed", 10)


# ---- how the report, JUnit and --base show the steps ----------------------------------------
def result_with(ran: steps.Ran) -> dict:
    s = snap(900, 1)
    return {"folder": "examples/steps-drift", "run_id": "check-x", "mode": "local", "cluster": "c",
            "karpenter_version": "v1.15.0", "scale": {}, "scale_in": {}, "settled": True,
            "settle_error": "", "scale_out": report.summarise(s), "snapshot": s.to_dict(),
            "scale_in_result": None, "consolidation": None, "steps": ran.records,
            "expectations": ran.results, "timings": {"steps_s": 42.0}, "started": 1.0,
            "finished": 50.0, "passed": ran.ok, "files": {}}


def test_the_report_lists_each_step_with_its_outcome_and_duration(tmp_path):
    clock = Clock()
    ran = steps.run(example_steps(), Fake(clock, [snap(2000, 1, label="v1")]), snap(900, 1),
                    clock)
    result = result_with(ran)
    md = report.tables(result)
    assert "## Steps" in md
    assert "| steps[1] | 13 | settle: settle (disruption, up to 300s) | ok | 41.0 | settled in " \
        "40.5s |" in md
    assert "| steps[2] | 14 | expect: expect 3 items | FAILED |" in md
    assert "| steps[3] | 19 | apply: apply later/report.yaml | not run | 0.0 | not run: " in md
    assert "## After steps[2]: workloads" in md and "## What Karpenter did before steps[2]" in md
    assert "(steps[2])" in md  # the expectations table names the phase
    report.write(result, tmp_path)
    assert '"outcome": "not run"' in (tmp_path / "check.json").read_text()
    suite = ET.fromstring(report.junit(result)).find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["step steps[2]: expect: expect 3 items"].find("failure") is not None
    assert cases["step steps[4]: wait: wait for Job shop/report to complete (up to 180s)"] \
        .find("skipped") is not None
    assert suite.get("skipped") == "3" and suite.get("failures") == "3"  # 2 items, 1 step


def test_base_says_each_side_ran_its_own_steps():
    clock = Clock()
    head = result_with(steps.run(example_steps(), Fake(clock, [snap(2000, 1, label="v2"),
                                                               snap(3000, 1, "default", "v2",
                                                                    True)]),
                                 snap(900, 1), clock))
    base = result_with(steps.not_run(example_steps(), "x"))
    base["passed"] = False
    md = diff.markdown(diff.summary(base, head, "folder `b`"))
    assert "Steps: head 6 of 6 ok; base 0 of 6 ok. Each side ran its own steps" in md
    assert "the table compares the state before the first step" in md
    plain = diff.markdown(diff.summary(None, {**head, "steps": []}, "folder `b`"))
    assert "Steps:" not in plain


def test_a_step_refused_when_it_ran_exits_2_with_the_report_written(monkeypatch, tmp_path,
                                                                       capsys):
    """cli.main with the cluster side replaced: the result says a step was rejected, so the
    exit code is bad input's, after the report and --junit's file were written."""
    from karpenter_e2e.checks import cli

    clock = Clock()
    ran = steps.run(example_steps(), Fake(clock, [], reject="the API server rejected NodePool "
                                          "default: field is immutable"), snap(900, 1), clock)
    result = {**result_with(ran), "rejected": ran.rejected, "passed": False,
              "files": {"json": str(tmp_path / "check.json")}}

    class Backend:
        def check_options(self):
            pass

    class FakeCheck:
        def __init__(self, plan_, *args, **kwargs):
            assert [s.label for s in plan_.steps][-1] == "steps[5]"

        def run(self):
            return result

    monkeypatch.setattr(cli.backends, "create", lambda options: Backend())
    monkeypatch.setattr(cli, "Check", FakeCheck)
    code = cli.main([str(EXAMPLE), "--junit", str(tmp_path / "j.xml"), "--cluster-name", "x"])
    assert code == 2
    err = capsys.readouterr().err
    assert "bad input: the API server rejected a step" in err and "field is immutable" in err
    assert (tmp_path / "j.xml").exists() and "## Steps" in (tmp_path / "check.md").read_text()


def test_the_base_side_plans_its_own_steps():
    from karpenter_e2e.checks import baseline, cli

    args = cli.parser().parse_args([str(EXAMPLE), "--cluster-name", "chk-x"])
    plan_, note = cli._base_plan(baseline.Base("b", EXAMPLE, "folder"), args)
    assert plan_ is not None and not note
    assert [s.kind for s in plan_.steps] == ["patch", "settle", "expect", "apply", "wait",
                                             "expect"]
    assert "Job/shop/report" not in [m.ref for m in plan_.bundle.manifests]
