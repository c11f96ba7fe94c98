"""One check, start to end: cluster up, dry-run, apply, settle, observe, scale in, judge,
report, and the cluster down (or emptied, when kept), whatever happens on the way.

Long because one check is one sequence with one cleanup (up, dry-run, apply, settle,
observe, steps, judge, report, down) whose stages share the cluster and the timeline.
"""

from __future__ import annotations

import importlib
import json
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from karpenter_e2e.checks import (
    apply,
    expectations,
    manifests,
    observe,
    report,
    settle,
    snapshot as snapshots,
    steps,
)
from karpenter_e2e.checks.expectations import ExpectFile
from karpenter_e2e.checks.manifests import Bundle, Manifest
from karpenter_e2e.checks.steps import Step
from karpenter_e2e.checks.variables import Variables
from karpenter_e2e.clusters.api.kube import NODEPOOL, Kind, Kube
from karpenter_e2e.clusters.api.waits import WaitTimeout, unstoppable, until_decided
from karpenter_e2e.clusters.awssim import build as awsbuild
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.fixtures import decided, decisions, oracles
from karpenter_e2e.fixtures.isolation import new_run_id
from karpenter_e2e.fixtures.timeline import ALL_NAMESPACES, Timeline, karpenter_events, machines

log = logging.getLogger("karpenter_e2e.check")

EC2NODECLASS_CRD = "karpenter.k8s.aws_ec2nodeclasses.yaml"


@dataclass
class Plan:
    """What to check, all of it validated before any cluster starts."""

    bundle: Bundle
    expect: ExpectFile
    scale: dict[str, int] = field(default_factory=dict)
    scale_in: dict[str, int] = field(default_factory=dict)
    # expect.yaml's steps:, then the steps scale_in: stands for (resolved: see checks.steps)
    steps: list[Step] = field(default_factory=list)


class Folder(NamedTuple):
    """A folder read for a check: its manifests, its expect.yaml (and where that is), the
    steps that parsed, and the problems of those that did not (index, message)."""

    bundle: Bundle
    expect: ExpectFile
    expect_path: Path | None
    steps: list[Step]
    problems: list[tuple[int, str]]


def load_folder(folder: Path, expect_path: Path | None, cluster_name: str,
                given: Variables | None = None) -> Folder:
    """The folder's manifests and its expect.yaml (the folder's own unless given), with its
    steps parsed: the files a step applies are not the folder's own manifests."""
    if expect_path is None and (folder / "expect.yaml").is_file():
        expect_path = folder / "expect.yaml"
    exp = expectations.load(expect_path)
    problems: list[tuple[int, str]] = []
    parsed = steps.parse(exp, problems)
    bundle = manifests.load(folder, cluster_name, given,
                            exclude=steps.applied_paths(folder, parsed))
    return Folder(bundle, exp, expect_path, parsed, problems)


def plan(folder: Path, expect_path: Path | None, scale: str, scale_in: str,
         cluster_name: str, given: Variables | None = None) -> Plan:
    """Load and check everything offline; ManifestError/ExpectError name the file. The
    expect.yaml is the folder's own, a kustomization's too (kustomize does not list it)."""
    bundle, exp, expect_path, parsed, problems = load_folder(folder, expect_path, cluster_name,
                                                             given)
    p = Plan(bundle, exp, {**exp.scale, **manifests.parse_scale(scale)},
             {**exp.scale_in, **manifests.parse_scale(scale_in)})
    manifests.scaled(bundle.manifests, bundle, p.scale)  # unknown workloads fail here
    if not exp.steps:  # after steps, the scale-in may name a workload a step applied
        manifests.scaled(bundle.manifests, bundle, p.scale_in)
    if exp.after_scale_in and not p.scale_in:
        raise expectations.ExpectError(f"{expect_path}: after_scale_in needs scale_in")
    p.steps = parsed + (steps.shorthand(p.scale_in, exp.after_scale_in) if p.scale_in else [])
    steps.resolve(p.steps, bundle, p.scale, expect_path, cluster_name, given, problems)
    return p


class Check:
    """``keep_cluster``: leave the cluster up, emptied of the check's objects, at the end;
    ``reuse`` (default: keep_cluster): take a running healthy cluster of that name as it is
    (the second check of --base runs on the cluster the first one emptied)."""

    def __init__(self, plan_: Plan, backend, reports_dir: Path, keep_cluster: bool = False,
                 reuse: bool | None = None, snapshot_out: Path | None = None,
                 snapshot_window: float = 0.0):
        self.plan, self.backend, self.keep = plan_, backend, keep_cluster
        self.snapshot_out = snapshot_out  # the settled state, as checks.snapshot writes it
        # then left alone this long, what Karpenter did in it recorded beside the snapshot
        self.snapshot_window = snapshot_window
        self.reuse = keep_cluster if reuse is None else reuse
        self.run_id = f"check-{new_run_id()}"
        self.out_dir = reports_dir / "runs" / self.run_id
        self.timings: dict[str, float] = {}
        self.applied: list[Manifest] = []
        self.kube: Kube | None = None
        self.started = time.time()
        self.announce_kept = True
        self.picture = True  # timeline.png (its data, timeline.json, is written either way)
        self.emptying_s = 0.0  # a kept cluster: deleting what was applied, until it is gone

    def _timed(self, name: str, since: float) -> float:
        self.timings[name] = round(time.time() - since, 1)
        return time.time()

    # ---- the cluster ------------------------------------------------------------------------
    def run(self) -> dict:
        """Everything; the cluster goes down (or is emptied) even on failure and Ctrl-C."""
        t = time.time()
        threading.Thread(target=_warm_imports, daemon=True, name="warm imports").start()
        reused = self.reuse and self.backend.status().running
        info = self.backend.up(reuse=self.reuse)
        t = self._timed("cluster_up_s", t)
        try:
            return self._check(info, t)
        finally:
            self._finish(reused)

    def _finish(self, reused: bool) -> None:
        with unstoppable():  # a stopped side (check --compare-version) still empties its cluster
            if self.keep and self.applied and self.kube is not None:
                t = time.time()
                apply.Applier(self.kube, self.run_id).delete_all(self.applied)
                self.emptying_s = round(time.time() - t, 1)
        if not self.keep:
            self.take_down()
        elif not reused and self.announce_kept:
            log.warning("cluster %r kept (--keep-cluster)", self.backend.name)

    def take_down(self) -> None:
        self.backend.down()
        # Nothing of the check stays behind: the cluster's logs (Karpenter's and the control
        # plane's, which down() has just written) move to the run's report directory.
        self._keep_logs()
        shutil.rmtree(self.backend.run_dir, ignore_errors=True)

    def _keep_logs(self) -> None:
        src = getattr(self.backend, "logs_dir", None)
        if not src or not src.is_dir():
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if (src / "karpenter.log").exists():
            shutil.copy2(src / "karpenter.log", self.out_dir / "karpenter.log")
        shutil.copytree(src, self.out_dir / "cluster-logs", dirs_exist_ok=True)
        log.warning("the cluster's logs are in %s (its run directory is removed)",
                    self.out_dir / "cluster-logs")

    def _log_offset(self, info) -> int:
        path = info.karpenter_log
        return path.stat().st_size if path and path.exists() else 0

    def _check(self, info, t: float) -> dict:
        self.kube = Kube(info.kubeconfig)
        nodeclass = (info.nodeclass_group, info.nodeclass_version, info.nodeclass_kind)
        leftovers = [p["metadata"]["name"] for p in self.kube.list(NODEPOOL)]
        if leftovers:
            raise ClusterError(f"cluster {info.name!r} already has NodePools "
                               f"({', '.join(leftovers)}): check needs a cluster of its own; "
                               "use another --cluster-name")
        applier = apply.Applier(self.kube, self.run_id)
        mapped = manifests.for_mode(self.plan.bundle, nodeclass)
        mapped = manifests.scaled(mapped, self.plan.bundle, self.plan.scale)
        later = [(s, self._mapped(s.changed, nodeclass)) for s in self.plan.steps if s.changed]
        # from here on, what a kept cluster must be emptied of
        self.applied = mapped + [m for _, ms in later for m in ms]
        ec2_mapped = info.nodeclass_kind != "EC2NodeClass"  # local mode: to KWOKNodeClass
        rejected = []  # every dry-run's refusals at once: one must not hide another's
        # The folder's documents, then each step's as it would be applied (a patch: the whole
        # object with the patch merged in), each named by its step.
        for dry_run, written, step in [(mapped, self.plan.bundle.manifests, None)] + [
                (ms, s.changed, s) for s, ms in later]:
            originals = [m for m in written if m.kind == "EC2NodeClass" and ec2_mapped]
            for attempt in (lambda ms=dry_run: applier.dry_run(ms),
                            # validated as written against the real EC2NodeClass CRD, then mapped
                            lambda originals=originals: applier.validate_as_written(
                                originals, awsbuild.crd_dir() / EC2NODECLASS_CRD)
                            if originals else None):
                try:
                    attempt()
                except manifests.ManifestError as exc:
                    rejected.append(str(exc) if step is None else
                                    f"{step.where(self.plan.expect.path)} ({step.kind}), as "
                                    f"it would be applied then:\n{exc}")
        if rejected:
            raise manifests.ManifestError("\n".join(rejected))
        t = self._timed("dry_run_s", t)

        offset = self._log_offset(info)
        timeline = Timeline(f"check {self.plan.bundle.folder.name}", str(self.plan.bundle.folder),
                            "")
        timeline.record(self.kube, observe.NODEPOOL_LABEL, namespace=lambda: ALL_NAMESPACES)
        nodeclass_kind = Kind(info.nodeclass_group, info.nodeclass_version,
                              info.nodeclass_kind.lower() + "es")
        catalogue = _catalogue(info.catalogue)  # local and kind: the KWOK provider's file

        def snapshot(applied: list[Manifest], bundle: Bundle = self.plan.bundle):
            return observe.take(self.kube, bundle, nodeclass_kind, self.backend.karpenter_running,
                                lambda: _read_from(info.karpenter_log, offset), catalogue,
                                self.workloads(applied))

        t_apply = time.time()
        applier.apply(mapped)
        t = self._timed("apply_s", t)
        settler = settle.Settler(self.kube, self.plan.bundle)
        settled, settle_error = True, ""
        # A finding of Karpenter's log decides the verdict as soon as it is made: the waits
        # below stop then, not at their timeout (fixtures/decided.py).
        early = decided.Decided(info.karpenter_log, offset, timeline.test_id,
                                info.versions.get("karpenter", ""),
                                self.plan.expect.oracles_not_applicable)
        try:
            with until_decided(early):
                settler.scaled_out(self.workloads(mapped))
        except WaitTimeout as exc:
            settled, settle_error = False, str(exc).splitlines()[0]
        t = self._timed("settle_s", t)
        out_snap = snapshot(mapped)
        if self.snapshot_out is not None:  # what a replay rebuilds (docs/replay.md)
            snapshots.write(snapshots.take(self.kube), {
                "karpenter": {"version": info.versions.get("karpenter", "unknown"),
                              "settings": dict(self.plan.expect.karpenter)},
                "source": f"check {self.plan.bundle.folder}, settled"}, self.snapshot_out)
            if self.snapshot_window:
                self._original_window(info, timeline, offset)
        _phase_history(out_snap, timeline, t_apply)
        results = [dict(r.to_dict(), phase="scale-out")
                   for r in (e.evaluate(out_snap) for e in self.plan.expect.expect)]
        t = self._timed("observe_s", t)

        ran = None
        if self.plan.steps:
            ops = _Cluster(self, applier, timeline, snapshot, nodeclass)
            with until_decided(early):
                ran = steps.run(self.plan.steps, ops, out_snap) if settled else \
                    steps.not_run(self.plan.steps, "the folder's own apply did not settle")
            results += ran.results
            if ran.settle_error:
                settled, settle_error = False, ran.settle_error
            self._step_timings(ran)
        timeline.stop()
        timeline.raise_error()  # a recording the oracles cannot trust is no verdict
        result = self._result(info, out_snap, ran, results, settled, settle_error, timeline)
        # The oracles judge every check as they judge every scenario (fixtures/oracles/):
        # a broken one fails the check, beside its expectations.
        log_text = _read_from(info.karpenter_log, offset)
        record = oracles.gather(self.kube, timeline.recording, observe.NODEPOOL_LABEL, log_text,
                                info.versions.get("karpenter", ""), [ALL_NAMESPACES],
                                pools_selector="")
        result["karpenter_log"] = record.log_scan.summary()  # the oracle's one reading of it
        # stopped early: judged by the final oracles alone (the others would judge a cut run)
        verdict = oracles.judge(record, {**early.cut_short(),
                                         **self.plan.expect.oracles_not_applicable})
        result["oracles"] = verdict.to_dict()
        # What Karpenter decided, as two releases' runs of this folder compare (--compare-version)
        result["decisions"] = decisions.record(record, verdict).to_dict()
        result["passed"] = result["passed"] and not verdict.failed
        result["judged_at"] = time.time()
        if (stopped := early.to_dict()) is not None:  # the report says so, and why
            result["stopped_early"] = dict(stopped, applied_at=t_apply)
        report.write(result, self.out_dir)  # check.json again: with the verdict and the decisions
        return result

    def _original_window(self, info, timeline: Timeline, offset: int) -> None:
        """The cluster the snapshot was taken of, left alone for the snapshot window: what
        Karpenter decided in it (original.json beside the snapshot), which a replay of the
        snapshot over the same window is compared with (docs/replay.md)."""
        from karpenter_e2e.checks import replay
        assert self.kube is not None and self.snapshot_out is not None
        start, before = time.time(), replay.cost_now(self.kube)
        replay.watch(self.snapshot_window, f"the original cluster left alone for the snapshot "
                                           f"window ({self.snapshot_window:.0f}s)")
        assert timeline.recording is not None
        rec = oracles.gather(self.kube, timeline.recording, observe.NODEPOOL_LABEL,
                             _read_from(info.karpenter_log, offset),
                             info.versions.get("karpenter", ""), [ALL_NAMESPACES],
                             pools_selector="")
        rec.start, rec.end = start, time.time()
        original = {"window_s": self.snapshot_window, "from": start,
                    "karpenter": info.versions.get("karpenter"), "cost_before": before,
                    "cost_after": replay.cost_now(self.kube),
                    "decisions": decisions.record(rec, oracles.judge(rec)).to_dict()}
        (self.snapshot_out / replay.ORIGINAL).write_text(json.dumps(original, indent=1))

    def _mapped(self, ms: list[Manifest], nodeclass: tuple[str, str, str]) -> list[Manifest]:
        """Objects as written (a step's) as they are applied in this mode."""
        return manifests.for_mode(Bundle(self.plan.bundle.folder, list(ms)), nodeclass)

    def _step_timings(self, ran: steps.Ran) -> None:
        """The scale-in's settle as before (scale_in_settle_s), and the steps: of expect.yaml
        in all (steps_s)."""
        for r in ran.records:
            if (r["label"], r["kind"]) == (steps.SCALE_IN, "settle") \
                    and r["outcome"] != steps.NOT_RUN:
                self.timings["scale_in_settle_s"] = r["seconds"]
        own = [r["seconds"] for r in ran.records if r["label"] != steps.SCALE_IN]
        if own:
            self.timings["steps_s"] = round(sum(own), 1)

    def workloads(self, ms: list[Manifest]) -> list[Manifest]:
        return [m for m in ms if m.kind in manifests.WORKLOADS]

    # ---- what happened ----------------------------------------------------------------------
    @staticmethod
    def happened(timeline: Timeline, since: float, before: observe.Snapshot,
                 after: observe.Snapshot) -> dict:
        """Karpenter's disruption decisions in a phase (after the scale-in, or from a step
        on), and what became of each NodeClaim, in seconds after ``since`` (from the timeline
        recording)."""
        rec = timeline.recording
        ms = machines(rec)
        found = []
        for m in ms:
            what = f"{m.claim or m.node} ({m.instance_type} {m.capacity_type})"
            for t_c in m.consolidatable:
                if t_c >= since:
                    found.append((t_c, f"{what} Consolidatable"))
            if m.deleting and m.deleting >= since:
                found.append((m.deleting, f"{what} deleting"))
            if m.gone and m.gone >= since:
                found.append((m.gone, f"{what} gone"))
            if m.created and m.created >= since:
                found.append((m.created, f"{what} launched (replacement)"))
        for e in karpenter_events(rec, ms):
            if e["t"] and e["t"] >= since and e["reason"].startswith(("Disruption", "Unconsol")):
                found.append((e["t"], f"event {e['reason']} {e['kind']}/{e['name']}: "
                                      f"{e['message'][:160]}"))
        found.sort(key=lambda s: s[0])
        return {"nodes_before": len(before.nodes), "nodes_after": len(after.nodes),
                "cost_before": observe.cost_per_hour(before),
                "cost_after": observe.cost_per_hour(after),
                "judged_after_s": round(after.at - since, 1),
                "steps": [{"t": round(t - since, 1), "what": w} for t, w in found]}

    def _result(self, info, out_snap, ran: steps.Ran | None, results, settled, settle_error,
                timeline: Timeline) -> dict:
        t = time.time()
        records = ran.records if ran else []
        # The scale-in as before: its tables and what consolidation did, beside its steps.
        scale_in = next((r for r in records if r["label"] == steps.SCALE_IN
                         and r["kind"] == "expect" and "tables" in r), None)
        if scale_in is not None:
            scale_in["happened"]["settled_after_s"] = self.timings.get("scale_in_settle_s", 0.0)
        result = {
            "folder": str(self.plan.bundle.folder), "run_id": self.run_id, "mode": info.mode,
            "cluster": info.name, "karpenter_version": info.versions.get("karpenter", "?"),
            # What really ran, as the cluster recorded it when it started the processes.
            "ran": {"karpenter": info.versions.get("karpenter", "?"),
                    "karpenter_build": info.versions.get("karpenter_build", "release"),
                    "karpenter_sha256": info.versions.get("karpenter_sha256", "unknown"),
                    "kubernetes": info.versions.get("kubernetes", "unknown"),
                    "feature_gates": list(info.feature_gates),
                    "settings": dict(info.karpenter_settings),
                    "catalogue": _catalogue_summary(info.catalogue, info.catalogue_selection)},
            "started": self.started, "finished": time.time(),
            "scale": self.plan.scale, "scale_in": self.plan.scale_in,
            "settled": settled, "settle_error": settle_error,
            "scale_out": report.summarise(out_snap), "snapshot": out_snap.to_dict(),
            "scale_in_result": scale_in["tables"] if scale_in else None,
            "consolidation": scale_in["happened"] if scale_in else None,
            "steps": records, "expectations": results,
            "default_expectations": self.plan.expect.default,
            "timings": self.timings,
            # where the nodes' price labels come from (the packing picture says it per node)
            "price_sources": report.price_sources(info.mode, info.catalogue_selection),
        }
        result["passed"] = settled and all(r["ok"] for r in results) and (ran is None or ran.ok)
        if ran is not None and ran.rejected:  # bad input, found only when the step ran
            result["rejected"] = ran.rejected
        self.out_dir.mkdir(parents=True, exist_ok=True)
        png = self._timeline_picture(timeline, "passed" if result["passed"] else "failed",
                                     next((r["expectation"] for r in results if not r["ok"]),
                                          settle_error or (ran.failed if ran else "")))
        # Drawn on both sides of --base too: it is the scale-out snapshot, not the recording.
        packing = self._packing_picture(result)
        self._timed("report_s", t)  # the pictures are most of it; the files take milliseconds
        self.timings["total_s"] = round(time.time() - self.started, 1)
        result["files"] = {"markdown": str(self.out_dir / "check.md"),
                           "json": str(self.out_dir / "check.json"),
                           **({"timeline": str(png)} if png else {}),
                           **({"packing": str(packing)} if packing else {})}
        report.write(result, self.out_dir)
        report.write_allure(result, self.out_dir / "allure-results", png, packing)
        return result

    def _packing_picture(self, result: dict) -> Path | None:
        """packing.png: which pods sit on which node after the scale-out."""
        from karpenter_e2e.rendering import packing_chart
        try:
            return packing_chart.render_result(result, self.out_dir / "packing.png")
        except Exception as exc:  # noqa: BLE001 - a picture must never hide the verdict
            log.warning("node packing not drawn: %s: %s", type(exc).__name__, exc)
            return None

    def _timeline_picture(self, timeline: Timeline, outcome: str, failure: str) -> Path | None:
        from karpenter_e2e.fixtures.timeline import write_snapshot
        from karpenter_e2e.rendering import timeline_chart
        try:
            timeline.failure = failure
            snap = timeline.snapshot(outcome)
            write_snapshot(snap, self.out_dir / "timeline.json")
            if not self.picture:
                return None
            return timeline_chart.render(snap, self.out_dir / "timeline.png")
        except Exception as exc:  # noqa: BLE001 - a picture must never hide the verdict
            log.warning("timeline not drawn: %s: %s", type(exc).__name__, exc)
            return None


class _Cluster:
    """The steps' operations on the check's cluster (checks.steps.Operations): the check's
    Applier, the one settle wait, the Job wait, the timeline and the snapshot."""

    def __init__(self, check: Check, applier: apply.Applier, timeline: Timeline, snapshot,
                 nodeclass: tuple[str, str, str]):
        self.check, self.applier, self.timeline = check, applier, timeline
        self.snapshot, self.nodeclass = snapshot, nodeclass

    def _bundle(self, state: list[Manifest]) -> Bundle:
        return Bundle(self.check.plan.bundle.folder, list(state))

    def apply(self, changed: list[Manifest]) -> None:
        self.applier.apply(self.check._mapped(changed, self.nodeclass))

    def settle(self, state: list[Manifest], disruption: bool, timeout: float) -> None:
        assert self.check.kube is not None
        settle.Settler(self.check.kube, self._bundle(state)).settled(
            self.check.workloads(state), disruption=disruption, timeout=timeout)

    def wait_job(self, job: Manifest, outcome: str, timeout: float) -> str:
        assert self.check.kube is not None
        return settle.job_finished(self.check.kube, job.namespace or "default", job.name,
                                   outcome, timeout)

    def mark(self, t: float, label: str) -> None:
        self.timeline.mark(t, label)

    def observe(self, step: Step, since: float,
                before: observe.Snapshot) -> tuple[observe.Snapshot, dict]:
        snap = self.snapshot(step.state, self._bundle(step.state))
        _phase_history(snap, self.timeline, since)
        return snap, {"tables": report.summarise(snap),
                      "happened": Check.happened(self.timeline, since, before, snap)}


@dataclass
class Pair:
    """What check --base ran: the base's result (None: nothing of it was checked, the note
    says why) and the head's, on one cluster."""

    base: dict | None
    head: dict
    base_note: str = ""
    timings: dict[str, float] = field(default_factory=dict)


def run_pair(base_plan: Plan | None, head_plan: Plan, backend, reports_dir: Path,
             keep_cluster: bool = False, base_note: str = "") -> Pair:
    """The base's check, then the head's, on one cluster and one Karpenter: the base's
    check empties the cluster (its objects deleted, every NodeClaim, node, NodePool,
    NodeClass and namespace gone) and the head's takes it as it is, then takes it down (or
    empties it, with ``keep_cluster``). A base the API server rejects is reported so, with
    its side empty. The cluster goes down on any failure and on Ctrl-C."""
    timings: dict[str, float] = {}
    base, first = None, None
    t = time.time()
    try:
        if base_plan is not None:
            first = Check(base_plan, backend, reports_dir, keep_cluster=True,
                          reuse=keep_cluster)
            first.announce_kept = False
            # The base's timeline picture took 2-7 s of the comparison's wall time at load
            # 10-16; its data is kept: karpenter-e2e chart timeline
            # timeline.json timeline.png draws it.
            first.picture = False
            try:
                base = first.run()
            except (manifests.ManifestError, expectations.ExpectError) as exc:
                base_note = ("the API server rejected the base's manifests, so its side is "
                             f"empty: {exc}")
            timings["cluster_up_s"] = first.timings.get("cluster_up_s", 0.0)
            timings["base_s"] = round(time.time() - t - timings["cluster_up_s"]
                                      - first.emptying_s, 1)
            timings["emptying_s"] = first.emptying_s
            t = time.time()
        second = Check(head_plan, backend, reports_dir, keep_cluster=keep_cluster,
                       reuse=keep_cluster or base_plan is not None)
        head = second.run()
        timings["head_s"] = round(time.time() - t, 1)  # with the cluster's teardown
    except BaseException:
        if first is not None and not keep_cluster:  # idempotent after the head's own
            first.take_down()
        raise
    return Pair(base, head, base_note, timings)


def _catalogue(path: Path | None) -> set[str] | None:
    """The instance types a KWOK provider was given (the cluster's file), or None where the
    cloud has its own (aws-sim)."""
    if not path or not Path(path).exists():
        return None
    return {t["name"] for t in json.loads(Path(path).read_text())}


def _read_from(path: Path | None, offset: int) -> str:
    if not path or not Path(path).exists():
        return ""
    with open(path, errors="replace") as fh:
        fh.seek(offset)
        return fh.read()


def _warm_imports() -> None:
    """Import the Kubernetes client's API modules and matplotlib while the cluster comes up
    (it mostly waits on processes): they take seconds to import, tens of seconds on a
    loaded machine, and the check needs them only once the cluster is up."""
    import kubernetes.client as k8s
    for api in ("CoreV1Api", "AppsV1Api", "BatchV1Api", "PolicyV1Api", "CustomObjectsApi",
                "ApiextensionsV1Api", "EventsV1Api"):
        getattr(k8s, api)
    importlib.import_module("karpenter_e2e.rendering.packing_chart")  # and timeline_chart


def _catalogue_summary(path: Path | None, selection: str | None = None) -> str:
    """'selection curated, 84 instance types (<path>)', or where the instance types come
    from instead."""
    if path is None:
        return "the cloud's own instance types (EC2's, as the mode's AWS serves them)"
    try:
        count = len(json.loads(Path(path).read_text()))
        text = f"selection {selection or 'curated'}, {count} instance types ({path})"
    except (OSError, ValueError) as exc:
        return f"{path}: unreadable ({type(exc).__name__})"
    from karpenter_e2e.clusters.infra import catalogue_full
    if selection and catalogue_full.parse_selection(selection).needs_full:
        try:  # parsed when the cluster wrote the file: read from the cache
            text += f"; {catalogue_full.load_full().source()}"
        except (ClusterError, OSError, ValueError):
            pass
    return text


def _phase_history(snap: observe.Snapshot, timeline: Timeline, since: float) -> None:
    """What the timeline saw between ``since`` and the snapshot: the NodeClaims Karpenter
    deleted and Karpenter's events, for the no_disruption and event expectations. Both
    timestamps have 1 s resolution: the window opens a second early."""
    rec = timeline.recording
    ms = machines(rec)
    since -= 1.0
    snap.removed = [{"claim": m.claim or m.node, "nodepool": m.nodepool,
                     "instance_type": m.instance_type}
                    for m in ms if m.deleting and since <= m.deleting <= snap.at]
    snap.events = [{"reason": e["reason"], "kind": e["kind"], "name": e["name"],
                    "message": e["message"]}
                   for e in karpenter_events(rec, ms) if e["t"] and since <= e["t"] <= snap.at]
