"""``steps:`` in expect.yaml: what happens once the folder has settled and ``expect:`` was
judged, in order, each step's outcome and duration reported.

```yaml
steps:
  - apply: later/extra-pool.yaml          # a file or folder inside the check folder
  - settle: {}                            # {for: disruption (default) or provisioning,
                                          #  timeout: seconds}
  - scale: {workload: web, replicas: 2}
  - patch: {kind: NodePool, name: default, merge: {spec: {template: {metadata: {labels: {x: y}}}}}}
  - wait: {job: batch/report, for: complete, timeout: 300}   # or for: failed
  - expect: [...]                         # expectation items, judged on the state now
```

Everything is checked before any cluster starts (``parse``: each step's shape; ``resolve``:
the files an apply reads, the workloads a scale or wait names, the object a patch merges
into, against what is applied by then): every problem at once, each named by expect.yaml's
line and the step's index, an ExpectError (bad input, exit 2). ``scale_in:`` is shorthand for
a scale step, a settle (disruption) and an expect step of ``after_scale_in:`` (``shorthand``).

``run`` is the engine: it runs the steps against ``Operations`` (the cluster side; run.py's,
or a test's fake). The first step that fails (an expect item that does not hold, a settle or
wait that runs out, a Job that ends the other way, an object the API server refuses) ends
the run; every later step is reported as not run, except that after a settle or wait that
failed the next expect step still judges and shows the state it left (as the scale-in always
did).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from karpenter_e2e.checks import manifests
from karpenter_e2e.checks.expectations import (
    Expectation,
    ExpectError,
    ExpectFile,
    RawStep,
    parse_item,
)
from karpenter_e2e.checks.manifests import Bundle, Manifest, ManifestError
from karpenter_e2e.checks.observe import Snapshot
from karpenter_e2e.checks.variables import Variables
from karpenter_e2e.clusters.api.waits import DEFAULTS, WaitTimeout

KINDS = ("apply", "settle", "scale", "patch", "wait", "expect")
SETTLE_FOR = ("disruption", "provisioning")
WAIT_FOR = ("complete", "failed")
OK, FAILED, REJECTED, NOT_RUN = "ok", "failed", "rejected", "not run"
SCALE_IN = "scale-in"  # the label of the steps ``scale_in:`` stands for
# A patch merges into the object; what names the object is not the patch's to change.
FIXED = (("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"))


@dataclass
class Step:
    kind: str
    label: str  # 'steps[2]' (its index in expect.yaml's steps:), or 'scale-in'
    text: str  # how it reads in a report
    line: int = 0  # its line in expect.yaml; 0 for the scale_in shorthand
    index: int | None = None  # its position in expect.yaml's steps:; None for the shorthand
    spec: dict = field(default_factory=dict)
    expectations: list[Expectation] = field(default_factory=list)  # an expect step's
    phase: str = ""  # an expect step's: its results' phase
    # resolved before any cluster starts, as written (mapped onto the mode when applied):
    changed: list[Manifest] = field(default_factory=list)  # what apply, scale, patch apply
    state: list[Manifest] = field(default_factory=list)  # everything applied once it ran
    job: Manifest | None = None  # a wait's Job

    def where(self, expect_path: Path | None) -> str:
        """'expect.yaml:12: steps[2]' (the shorthand: 'scale-in (scale web to 0)')."""
        if self.index is None:
            return f"{self.label} ({self.text})"
        return f"{expect_path}:{self.line}: {self.label}"

    @property
    def mark(self) -> str:
        """The timeline's label where a step that changes the cluster begins."""
        if self.label == SCALE_IN:
            return f"scale-in {self.spec['replicas']}"
        if self.kind == "patch":  # the merge is in the report; a mark is a short label
            return f"{self.label} patch {self.spec['kind']} {self.spec['name']}"
        return f"{self.label} {self.text}"


# ---- parsing: each step's shape -----------------------------------------------------------
def parse(exp: ExpectFile, problems: list[tuple[int, str]] | None = None) -> list[Step]:
    """The steps of ``exp`` as written, each malformed one named by the file's line and the
    step's index: raised at once (ExpectError), or with ``problems`` kept there as (index,
    message) for ``resolve`` to raise with its own, and left out of the steps returned."""
    out, errors = [], []
    for raw in exp.steps:
        where = f"{exp.path}:{raw.line}: steps[{raw.index}]"
        try:
            out.append(_parse_one(exp.path, raw))
        except ExpectError as exc:  # an expect step's item, named by its own line
            errors.append((raw.index, str(exc)))
        except (TypeError, ValueError) as exc:
            errors.append((raw.index, f"{where}: {exc}"))
    if problems is None and errors:
        raise ExpectError("\n".join(e for _, e in errors))
    if problems is not None:
        problems += errors
    return out


def _parse_one(path: Path | None, raw: RawStep) -> Step:
    item = raw.value
    if not isinstance(item, dict) or len(item) != 1 or next(iter(item)) not in KINDS:
        got = ", ".join(map(str, item)) if isinstance(item, dict) else repr(item)
        raise ValueError(f"expected one of {', '.join(KINDS)} (one a step); got "
                         f"{got or 'nothing'}")
    kind, value = next(iter(item.items()))
    label = f"steps[{raw.index}]"
    if kind == "expect":
        if not isinstance(value, list) or not value:
            raise ValueError("expect: expected a list of expectation items, e.g. "
                             "[{nodes: {min: 1}}]")
        lines = raw.item_lines or [raw.line] * len(value)
        items = [parse_item(f"{path}:{n}", f"{label}.expect", i, x)
                 for i, (x, n) in enumerate(zip(value, lines, strict=True))]
        return Step(kind, label, f"expect {len(items)} item{'s' if len(items) != 1 else ''}",
                    raw.line, raw.index, expectations=items, phase=label)
    spec, text = PARSERS[kind](value)
    return Step(kind, label, text, raw.line, raw.index, spec)


def _keys(kind: str, value, allowed: set[str],
          required: set[str] | frozenset[str] = frozenset()) -> dict:
    if value is None and not required:
        value = {}
    if not isinstance(value, dict):
        raise ValueError(f"{kind}: expected a mapping with {', '.join(sorted(allowed))}, "
                         f"got {value!r}")
    unknown = sorted(map(str, set(value) - allowed))
    if unknown:
        raise ValueError(f"{kind}: unknown key(s) {', '.join(unknown)} ({kind} takes "
                         f"{', '.join(sorted(allowed))})")
    missing = sorted(required - set(value))
    if missing:
        raise ValueError(f"{kind}: {', '.join(missing)} missing")
    return value


def _seconds(kind: str, value, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{kind}: timeout: expected seconds (a positive number), got {value!r}")
    return float(value)


def _choice(kind: str, key: str, value, choices: tuple[str, ...]) -> str:
    if value is None:
        return choices[0]
    if value not in choices:
        raise ValueError(f"{kind}: {key}: expected {' or '.join(choices)}, got {value!r}")
    return str(value)


def _parse_apply(value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError("apply: expected a file or folder inside the check folder, e.g. "
                         "later/extra-pool.yaml")
    return {"path": value.strip()}, f"apply {value.strip()}"


def _parse_settle(value):
    value = _keys("settle", value, {"for", "timeout"})
    until = _choice("settle", "for", value.get("for"), SETTLE_FOR)
    default = DEFAULTS.disruption if until == "disruption" else DEFAULTS.provision
    timeout = _seconds("settle", value.get("timeout"), default)
    return {"for": until, "timeout": timeout}, f"settle ({until}, up to {timeout:g}s)"


def _parse_scale(value):
    value = _keys("scale", value, {"workload", "replicas"}, {"workload", "replicas"})
    n = value["replicas"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"scale: replicas: expected a whole number >= 0, got {n!r}")
    if not isinstance(value["workload"], str) or not value["workload"]:
        raise ValueError("scale: workload: expected a name or namespace/name")
    return {"replicas": {value["workload"]: n}}, f"scale {value['workload']} to {n}"


def _parse_patch(value):
    value = _keys("patch", value, {"kind", "name", "namespace", "merge"},
                  {"kind", "name", "merge"})
    for k in ("kind", "name", "namespace"):
        if k in value and (not isinstance(value[k], str) or not value[k]):
            raise ValueError(f"patch: {k}: expected a name, got {value[k]!r}")
    merge = value["merge"]
    if not isinstance(merge, dict) or not merge:
        raise ValueError("patch: merge: expected a mapping to merge into the object (JSON merge "
                         "patch), e.g. {spec: {limits: {cpu: '20'}}}")
    for keys in FIXED:
        inner = merge
        for k in keys[:-1]:
            inner = inner.get(k) if isinstance(inner, dict) else None
        if isinstance(inner, dict) and keys[-1] in inner:
            raise ValueError(f"patch: merge: {'.'.join(keys)} names the object; a patch "
                             "cannot change it")
    spec = {"kind": value["kind"], "name": value["name"], "namespace": value.get("namespace"),
            "merge": merge}
    short = json.dumps(merge, separators=(",", ":"))
    short = short if len(short) <= 80 else short[:77] + "..."
    return spec, f"patch {value['kind']} {value['name']}: {short}"


def _parse_wait(value):
    value = _keys("wait", value, {"job", "for", "timeout"}, {"job"})
    if not isinstance(value["job"], str) or not value["job"]:
        raise ValueError("wait: job: expected a Job's name or namespace/name")
    outcome = _choice("wait", "for", value.get("for"), WAIT_FOR)
    timeout = _seconds("wait", value.get("timeout"), DEFAULTS.disruption)
    return ({"job": value["job"], "for": outcome, "timeout": timeout},
            f"wait for Job {value['job']} to {'complete' if outcome == 'complete' else 'fail'} "
            f"(up to {timeout:g}s)")


PARSERS: dict[str, Callable] = {"apply": _parse_apply, "settle": _parse_settle,
                                "scale": _parse_scale, "patch": _parse_patch,
                                "wait": _parse_wait}


def shorthand(replicas: dict[str, int], after: list[Expectation]) -> list[Step]:
    """``scale_in:`` (and ``--scale-in``) with ``after_scale_in:``: a scale, a settle until
    consolidation is done, and the expect step of the scale-in phase."""
    timeout = DEFAULTS.disruption
    scale = ", ".join(f"{w} to {n}" for w, n in replicas.items())
    return [Step("scale", SCALE_IN, f"scale {scale}", spec={"replicas": dict(replicas)}),
            Step("settle", SCALE_IN, f"settle (disruption, up to {timeout:g}s)",
                 spec={"for": "disruption", "timeout": timeout}),
            Step("expect", SCALE_IN, f"expect {len(after)} item{'s' if len(after) != 1 else ''}",
                 expectations=list(after), phase=SCALE_IN)]


def applied_paths(folder: Path, steps: list[Step]) -> list[Path]:
    """The files and folders apply steps read: not part of the folder's own manifests."""
    return [Path(folder) / s.spec["path"] for s in steps if s.kind == "apply"]


# ---- resolving: against the folder, before any cluster starts ------------------------------
def resolve(steps: list[Step], bundle: Bundle, scale: dict[str, int], expect_path: Path | None,
            cluster_name: str = "", given: Variables | None = None,
            problems: list[tuple[int, str]] | None = None) -> None:
    """Each step against what is applied by the time it runs (the folder scaled as
    ``scale``, then each earlier step): an apply's documents read and checked, a scale's and a
    wait's workload found, a patch merged into its object. Fills each step's ``changed``,
    ``state`` and ``job``; the variables the applied files use count as used (``bundle``'s
    warnings say so). Raises ExpectError listing every problem, ``parse``'s ``problems`` too,
    in the order of the steps, each named by expect.yaml's line and the step's index."""
    folder = bundle.folder
    state = manifests.scaled(bundle.manifests, bundle, scale)
    errors, used = list(problems or []), set()
    for n, step in enumerate(steps):
        where = step.where(expect_path)
        try:
            if step.kind == "apply":
                more = _load(folder, step.spec["path"], state, cluster_name, given)
                used |= more.used
                bundle.warnings += more.warnings
                step.changed = more.manifests
                state = _replaced(state, more.manifests)
            elif step.kind == "scale":
                view = Bundle(folder, state)
                scaled = manifests.scaled(state, view, step.spec["replicas"])
                step.changed = [m for m, was in zip(scaled, state, strict=True)
                                if m.body != was.body]
                state = scaled
            elif step.kind == "patch":
                target = _target(state, step.spec)
                patched = dataclasses.replace(target, body=merged(target.body,
                                                                  step.spec["merge"]))
                step.changed = [patched]
                state = [patched if m is target else m for m in state]
            elif step.kind == "wait":
                job = Bundle(folder, state).workload(step.spec["job"])
                if job.kind != "Job":
                    raise ManifestError(f"{step.spec['job']} is a {job.kind}, not a Job: wait "
                                        "waits for a Job to complete or fail")
                step.job = job
        except ManifestError as exc:
            index = len(steps) + n if step.index is None else step.index
            errors.append((index, f"{where} ({step.kind}): {exc}"))
        step.state = state
    if used - bundle.used and given is not None:
        stale = set(given.unused(bundle.used, folder))
        bundle.warnings = [w for w in bundle.warnings if w not in stale] + \
            given.unused(bundle.used | used, folder)
    if errors:
        raise ExpectError("\n".join(e for _, e in sorted(errors, key=lambda e: e[0])))


def _load(folder: Path, relative: str, known: list[Manifest], cluster_name: str,
          given: Variables | None) -> Bundle:
    path = Path(folder) / relative
    if not path.resolve().is_relative_to(Path(folder).resolve()):
        raise ManifestError(f"{relative}: outside the check folder {folder} (a step applies "
                            "files of the folder, so that --base finds them at the ref too)")
    if not path.exists():
        raise ManifestError(f"{path}: no such file or folder")
    if path.is_file() and (path.suffix not in (".yaml", ".yml")
                           or path.name in ("expect.yaml", "expect.yml")):
        raise ManifestError(f"{path}: not a manifest file (*.yaml or *.yml, not expect.yaml)")
    return manifests.load_more(path, known, cluster_name, given)


def _replaced(state: list[Manifest], more: list[Manifest]) -> list[Manifest]:
    """``state`` with each of ``more`` in place of the object of the same kind and name (a
    later version of it), or added at the end."""
    new = {m.ref: m for m in more}
    out = [new.pop(m.ref, m) for m in state]
    return out + [m for m in more if m.ref in new]


def _target(state: list[Manifest], spec: dict) -> Manifest:
    """The applied object a patch names: kind and name, and namespace where two share them."""
    kind, name, ns = spec["kind"], spec["name"], spec.get("namespace")
    found = [m for m in state if m.kind == kind and m.name == name
             and (ns is None or m.namespace == ns)]
    if len(found) == 1:
        return found[0]
    if found:
        raise ManifestError(f"more than one {kind} called {name!r} ("
                            f"{', '.join(sorted(m.ref for m in found))}): give namespace")
    same_kind = sorted(m.ref for m in state if m.kind == kind)
    raise ManifestError(f"no {kind} called {name!r}{f' in namespace {ns}' if ns else ''} is "
                        "applied by then (a patch merges into an object the check applied; "
                        + (f"{kind}s: {', '.join(same_kind)})" if same_kind
                           else f"it applies no {kind})"))


def merged(body, patch):
    """``patch`` merged into ``body`` as a JSON merge patch (RFC 7386) merges: a mapping into
    a mapping key by key, null removes a key, anything else (a list too) replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(body) if isinstance(body, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merged(out.get(k), v)
    return out


# ---- the engine ---------------------------------------------------------------------------
class Operations(Protocol):
    """What the steps do to the cluster (run.py's, or a test's fake)."""

    def apply(self, changed: list[Manifest]) -> None:
        """Apply these (as written: mapped onto the mode here); ManifestError when the API
        server refuses one."""

    def settle(self, state: list[Manifest], disruption: bool, timeout: float) -> None:
        """The settle wait over what is applied; WaitTimeout when it runs out."""

    def wait_job(self, job: Manifest, outcome: str, timeout: float) -> str:
        """Until the Job completes (or fails, ``outcome``); returns what was seen; WaitTimeout
        (WaitAborted when it ended the other way) otherwise."""

    def mark(self, t: float, label: str) -> None:
        """A mark on the timeline."""

    def observe(self, step: Step, since: float, before: Snapshot) -> tuple[Snapshot, dict]:
        """The snapshot an expect step judges (with the phase from ``since``: NodeClaims
        deleted, Karpenter's events) and what its report shows (``tables``, ``happened``)."""


@dataclass
class Ran:
    """What the steps did: a record per step in order, the expectations judged (with their
    phase), and why the run ended early, if it did."""

    records: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    failed: str = ""  # the step that ended the run, and why
    settle_error: str = ""  # a settle that ran out: 'after <label>: ...'
    rejected: str = ""  # an object the API server refused mid-run (bad input)

    @property
    def ok(self) -> bool:
        return not self.failed


def _record(step: Step, outcome: str, seconds: float, detail: str) -> dict:
    return {"label": step.label, "kind": step.kind, "text": step.text, "line": step.line,
            "outcome": outcome, "seconds": round(seconds, 1), "detail": detail}


def not_run(steps: list[Step], why: str) -> Ran:
    """Every step reported as not run (the folder itself did not settle)."""
    return Ran([_record(s, NOT_RUN, 0.0, f"not run: {why}") for s in steps])


def run(steps: list[Step], ops: Operations, before: Snapshot,
        clock: Callable[[], float] = time.time) -> Ran:
    """Each step in order against ``ops``; ``before``: the snapshot the folder's own
    ``expect:`` judged. An expect step's phase runs from the first step after the previous
    expect (or the folder's own) to its snapshot."""
    ran = Ran()
    phase_start: float | None = None
    show_state = False  # a settle or wait ran out: the next expect step still judges the state
    for step in steps:
        if ran.failed and not (show_state and step.kind == "expect"):
            ran.records.append(_record(step, NOT_RUN, 0.0, f"not run: {ran.failed}"))
            continue
        show_state = False
        t = clock()
        phase_start = t if phase_start is None else phase_start
        extra: dict = {}
        try:
            if step.kind in ("apply", "scale", "patch"):
                ops.mark(t, step.mark)
                ops.apply(step.changed)
                outcome, detail = OK, (f"applied {', '.join(m.ref for m in step.changed)}"
                                       if step.changed else "nothing to change")
            elif step.kind == "settle":
                ops.settle(step.state, step.spec["for"] == "disruption", step.spec["timeout"])
                outcome, detail = OK, f"settled in {clock() - t:.1f}s"
            elif step.kind == "wait":
                assert step.job is not None, "resolve() finds a wait's Job"
                seen = ops.wait_job(step.job, step.spec["for"], step.spec["timeout"])
                outcome, detail = OK, f"Job {step.job.namespace}/{step.job.name} " \
                    f"{'completed' if step.spec['for'] == 'complete' else 'failed'}: {seen}"
            else:
                snap, extra = ops.observe(step, phase_start, before)
                results = [dict(e.evaluate(snap).to_dict(), phase=step.phase)
                           for e in step.expectations]
                ran.results += results
                held = sum(r["ok"] for r in results)
                outcome = OK if held == len(results) else FAILED
                failed = [r["expectation"] for r in results if not r["ok"]]
                detail = f"{held} of {len(results)} expectations held" + (
                    f"; failed: {'; '.join(failed)}" if failed else "")
                before, phase_start = snap, None
        except ManifestError as exc:
            outcome, detail = REJECTED, str(exc)
            ran.rejected = f"{step.label} ({step.text}): {exc}"
        except WaitTimeout as exc:
            outcome, detail = FAILED, str(exc).splitlines()[0]
            if step.kind == "settle":
                ran.settle_error = f"after {step.label}: {detail}"
        record = _record(step, outcome, clock() - t, detail)
        record.update(extra)
        ran.records.append(record)
        if outcome != OK and not ran.failed:
            ran.failed = f"{step.label} ({step.text}) {outcome}"
            show_state = step.kind in ("settle", "wait")
    return ran
