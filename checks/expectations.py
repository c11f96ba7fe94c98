"""expect.yaml: what a platform team expects Karpenter to do with its manifests, declared.

```yaml
scale: {inflate: 10}            # optional: replicas to set before applying (as --scale)
scale_in: {inflate: 0}          # optional: replicas to set once settled (as --scale-in)
expect:                         # judged once the cluster has settled after scale-out
  - pending: 0                                   # at most this many Pending pods
  - not_created: {min: 2, max: 2}                # pods workloads ask for that their
                                                 # controller was refused (a ResourceQuota)
  - pods: app=trainer                            # pods by label selector ...
    only_on: {karpenter.sh/capacity-type: spot}       # ... only on nodes with these labels
  - pods: {requests: nvidia.com/gpu}             # pods requesting a resource ...
    only_on: {karpenter.k8s.aws/instance-gpu-manufacturer: nvidia}
    alone: true                                  # ... and no other pod on their nodes
  - spot_share: {nodepool: spot, min: 0.8}       # share of the pool's nodes on spot
  - pod_share: {pods: app=trainer, min: 0.8}     # share of those pods on spot nodes
  - instance_categories: {in: [c, m, r]}         # every node's category (nodepool: optional)
  - instance_families: {in: [c6i, m6i]}
  - cost_per_hour: {max: 2.5}                    # USD, catalogue prices (nodepool: optional)
  - nodes: {nodepool: gpu, min: 1, max: 2}
  - zones: {nodepool: web, min: 3, max_skew: 1}   # distinct zones of the nodes, and how
                                                 # unevenly the nodes spread over them
  - pending: {workload: web, reason: untolerated taint}  # that workload's Pending pods, each
                                                 # with this diagnosis (min 1 unless given)
  - event: {reason: DisruptionBlocked, message: "nominated", min: 1}  # Karpenter's events in
                                                 # the phase (regex on message; kind, name)
after_scale_in:                 # judged once consolidation has settled after scale_in
  - nodes: {max: 1}
  - no_disruption: {nodepool: critical}          # Karpenter deleted no NodeClaim (of the
                                                 # pool) during the phase
steps: [...]                    # then apply, settle, scale, patch, wait, expect in order
                                # (checks.steps; not beside scale_in, its shorthand)
karpenter: {MIN_VALUES_POLICY: BestEffort}   # Karpenter's own settings (as --karpenter-setting)
catalogue: full                 # local mode's instance types (as --catalogue, which wins):
                                # curated (default), full, families=c6gd,m5 [:max-vcpu=N]
```

Each expectation passes or fails with what was seen. An expectation that finds nothing to
judge (no matching pod, no node) fails unless it says ``allow_empty: true``; a bound of
``max: 0`` on nodes or cost is about there being none and needs no allow_empty. With no
``expect:`` items the default holds: every workload's pods run (Running, or Succeeded for a
Job), so a Pending pod fails the check with its diagnosis, and so does a pod its controller
was refused (named with the refusal). A malformed file is an
ExpectError naming the file and the item, raised before any cluster starts.

Long because it is expect.yaml's schema: one parser with its error message per key, and the
evaluation of each expectation beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from karpenter_e2e.checks.observe import PodView, Snapshot, cost_per_hour, pool_summary

KINDS = ("pending", "not_created", "no_disruption", "event", "pods", "spot_share",
         "instance_categories", "instance_families",
         "cost_per_hour", "nodes", "running", "zones", "pod_share")
OPTIONS = {"only_on", "alone", "allow_empty"}  # keys beside an item's kind


class ExpectError(ValueError):
    """expect.yaml cannot be read; the message names the file and the item."""


@dataclass
class Result:
    expectation: str
    ok: bool
    seen: str

    def to_dict(self) -> dict:
        return {"expectation": self.expectation, "ok": self.ok, "seen": self.seen}


@dataclass
class Expectation:
    kind: str
    spec: dict
    text: str  # how the expectation reads in a report

    def evaluate(self, snap: Snapshot) -> Result:
        ok, seen = JUDGES[self.kind](self.spec, snap)
        return Result(self.text, ok, seen)


@dataclass
class ExpectFile:
    path: Path | None = None
    scale: dict[str, int] = field(default_factory=dict)
    scale_in: dict[str, int] = field(default_factory=dict)
    expect: list[Expectation] = field(default_factory=list)
    after_scale_in: list[Expectation] = field(default_factory=list)
    default: bool = False  # the default expectation stands in for missing `expect:` items
    # `karpenter:` Karpenter's own settings for the check (KEY: VALUE; see karpenter_settings)
    karpenter: dict[str, str] = field(default_factory=dict)
    # `catalogue:` local mode's catalogue selection (catalogue_full's syntax); None: the default
    catalogue: str | None = None
    # `steps:` as written, each with its line; checks.steps parses and resolves them
    steps: list[RawStep] = field(default_factory=list)
    # `oracles_not_applicable:` {oracle: why}: oracles this folder cannot meet by design
    oracles_not_applicable: dict[str, str] = field(default_factory=dict)


@dataclass
class RawStep:
    """One item of ``steps:`` as written and where it stands in the file."""

    index: int  # its position in steps:, from 0 (as expect[0] counts)
    line: int  # its line in the file, from 1
    value: object
    item_lines: list[int] = field(default_factory=list)  # an expect step's items' lines


def default_expectations() -> list[Expectation]:
    """What a check without `expect:` items judges: a check must be able to fail."""
    spec = {"allow_empty": False}
    return [Expectation("running", spec, "every workload's pods run (the default: no "
                                         "`expect:` items)")]


def load(path: Path | None) -> ExpectFile:
    if path is None:
        return ExpectFile(expect=default_expectations(), default=True)
    path = Path(path)
    try:
        text = path.read_text()
        data = yaml.safe_load(text) or {}
    except OSError as exc:
        raise ExpectError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ExpectError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ExpectError(f"{path}: expected a mapping with 'expect:' (and optionally 'scale:', "
                          "'scale_in:', 'after_scale_in:', 'steps:', 'karpenter:', "
                          "'catalogue:')")
    unknown = set(data) - {"scale", "scale_in", "expect", "after_scale_in", "steps", "karpenter",
                           "catalogue", "oracles_not_applicable"}
    if unknown:
        raise ExpectError(f"{path}: unknown top-level key(s) {', '.join(sorted(unknown))}")
    out = ExpectFile(path, _replicas(path, "scale", data.get("scale")),
                     _replicas(path, "scale_in", data.get("scale_in")))
    out.expect = [parse_item(path, "expect", i, item) for i, item in
                  enumerate(_list(path, "expect", data.get("expect")))]
    out.after_scale_in = [parse_item(path, "after_scale_in", i, item) for i, item in
                          enumerate(_list(path, "after_scale_in", data.get("after_scale_in")))]
    if out.after_scale_in and not out.scale_in:
        raise ExpectError(f"{path}: after_scale_in needs scale_in (what to scale in)")
    out.karpenter = _settings(path, data.get("karpenter"))
    out.catalogue = _catalogue(path, data.get("catalogue"))
    out.steps = _raw_steps(path, text, data.get("steps"))
    out.oracles_not_applicable = _not_applicable(path, data.get("oracles_not_applicable"))
    if out.steps and out.scale_in:
        raise ExpectError(f"{path}: steps and scale_in both given: write the scale-in as steps "
                          "(- scale: {workload: W, replicas: N}, - settle: {}, - expect: [...])")
    if not out.expect:
        out.expect, out.default = default_expectations(), True
    return out


def _settings(path: Path, value) -> dict[str, str]:
    """`karpenter:`: Karpenter's settings, checked against the release when the cluster is made."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, bool, float))
                                              for v in value.values()):
        raise ExpectError(f"{path}: karpenter: expected KEY: VALUE settings, e.g. "
                          "{MIN_VALUES_POLICY: BestEffort, CapacityBuffer: true}")
    return {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in value.items()}


def _not_applicable(path: Path, value) -> dict[str, str]:
    """`oracles_not_applicable:`: {oracle: why} (fixtures/oracles/ names them)."""
    from karpenter_e2e.fixtures.oracles import NAMES
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) and v.strip()
                                              for v in value.values()):
        raise ExpectError(f"{path}: oracles_not_applicable: expected ORACLE: why, e.g. "
                          "{no-pod-ignored: the folder stops Karpenter on purpose}")
    unknown = sorted(set(value) - set(NAMES))
    if unknown:
        raise ExpectError(f"{path}: oracles_not_applicable: no oracle {', '.join(unknown)}; "
                          f"known: {', '.join(NAMES)}")
    return {str(k): str(v) for k, v in value.items()}


def _catalogue(path: Path, value) -> str | None:
    """`catalogue:`: a catalogue selection (curated, full, families=F,... [:max-vcpu=N])."""
    if value is None:
        return None
    from karpenter_e2e.clusters.infra.catalogue_full import parse_selection
    try:
        return str(parse_selection(str(value)))
    except ValueError as exc:
        raise ExpectError(f"{path}: catalogue: {exc}") from None


def _raw_steps(path: Path, text: str, value) -> list[RawStep]:
    """``steps:``'s items with their lines (and an expect step's items' lines), read from the
    file's YAML nodes: a step is named by its line and index in every error."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExpectError(f"{path}: steps: expected a list of steps (- apply: FILE, - settle: "
                          "{}, - scale: ..., - patch: ..., - wait: ..., - expect: [...])")
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    assert isinstance(root, yaml.MappingNode), "safe_load read a mapping"
    node = next(v for k, v in root.value if k.value == "steps")
    out = []
    for i, (item, raw) in enumerate(zip(node.value, value, strict=True)):
        pairs = item.value if isinstance(item, yaml.MappingNode) else []
        inner = [v for k, v in pairs if k.value == "expect" and isinstance(v, yaml.SequenceNode)]
        lines = [n.start_mark.line + 1 for n in inner[0].value] if inner else []
        out.append(RawStep(i, item.start_mark.line + 1, raw, lines))
    return out


def _list(path: Path, key: str, value) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExpectError(f"{path}: {key}: expected a list of expectations")
    return value


def _replicas(path: Path, key: str, value) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, int) and v >= 0
                                              for v in value.values()):
        raise ExpectError(f"{path}: {key}: expected workload: replicas, e.g. {{inflate: 10}}")
    return {str(k): v for k, v in value.items()}


def parse_item(path: Path | str, section: str, index: int, item) -> Expectation:
    where = f"{path}: {section}[{index}]"
    if not isinstance(item, dict):
        raise ExpectError(f"{where}: expected a mapping, e.g. {{pending: 0}}")
    kinds = [k for k in item if k in KINDS]
    if len(kinds) != 1:
        raise ExpectError(f"{where}: expected exactly one of {', '.join(KINDS)}; got "
                          f"{', '.join(map(str, item)) or 'nothing'}")
    kind = kinds[0]
    if True in item:
        raise ExpectError(f"{where}: {kind}: expected only_on: YAML reads a key `on` as true")
    unknown = sorted(map(str, set(item) - {kind} - OPTIONS))
    if unknown:
        raise ExpectError(f"{where}: {kind}: unknown key(s) {', '.join(unknown)} (beside the "
                          f"kind: {', '.join(sorted(OPTIONS))})")
    if isinstance(item[kind], dict) and "allow_empty" in item[kind]:  # {max: 2, allow_empty: ..}
        inner = dict(item[kind])
        item = {**item, kind: inner, "allow_empty": inner.pop("allow_empty")}
    allow_empty = item.get("allow_empty", False)
    if not isinstance(allow_empty, bool):
        raise ExpectError(f"{where}: allow_empty: expected true or false, got {allow_empty!r}")
    try:
        spec, text = PARSERS[kind](item)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ExpectError(f"{where}: {kind}: {exc}") from None
    spec["allow_empty"] = allow_empty
    return Expectation(kind, spec, text + (" (or nothing to judge)" if allow_empty else ""))


# ---- parsing, one function per kind: (spec, how it reads) --------------------------------------
def _bounds(value, default_key: str) -> dict:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {default_key: value}
    if not isinstance(value, dict) or not {"min", "max"} & set(value):
        raise ValueError(f"expected a number or {{min: ..., max: ...}}, got {value!r}")
    for k in ("min", "max"):
        if k in value and not isinstance(value[k], (int, float)):
            raise ValueError(f"{k} must be a number, got {value[k]!r}")
    return dict(value)


def _pool_text(spec: dict) -> str:
    return f" of NodePool {spec['nodepool']}" if spec.get("nodepool") else ""


def _range_text(spec: dict) -> str:
    parts = [f">= {spec['min']}" if "min" in spec else "", f"<= {spec['max']}" if "max" in spec
             else ""]
    return " and ".join(p for p in parts if p)


def _parse_pending(item: dict):
    value = item["pending"]
    if isinstance(value, dict) and ({"workload", "reason"} & set(value)):
        rest = {k: v for k, v in value.items() if k not in ("workload", "reason")}
        if set(rest) - {"min", "max"}:
            raise ValueError(f"unknown key(s) {', '.join(sorted(set(rest) - {'min', 'max'}))} "
                             "(pending takes workload, reason, min, max)")
        spec = _bounds(rest, "max") if rest else {"min": 1}
        spec.update(workload=str(value.get("workload", "")), reason=str(value.get("reason", "")))
        who = f" of {spec['workload']}" if spec["workload"] else ""
        why = f" with the diagnosis {spec['reason']!r}" if spec["reason"] else ""
        return spec, f"Pending pods{who}{why} {_range_text(spec)}"
    spec = _bounds(value, "max")
    return spec, f"Pending pods {_range_text(spec)}"


def _parse_no_disruption(item: dict):
    value = item["no_disruption"]
    if value is True or value is None:
        value = {}
    if not isinstance(value, dict) or set(value) - {"nodepool"}:
        raise ValueError("expected no_disruption: true or {nodepool: NAME}")
    return dict(value), f"no NodeClaim{_pool_text(value)} deleted by Karpenter"


def _parse_event(item: dict):
    value = item["event"]
    if not isinstance(value, dict) or not ({"reason", "message"} & set(value)):
        raise ValueError("expected event: {reason: R, message: REGEX, kind: K, name: N, "
                         "min:, max:}")
    match = {k: str(value[k]) for k in ("reason", "message", "kind", "name") if k in value}
    if "message" in match:
        try:
            re.compile(match["message"])
        except re.error as exc:
            raise ValueError(f"event message is not a regular expression: {exc}") from None
    bounds = {k: v for k, v in value.items() if k in ("min", "max")}
    spec = {**(_bounds(bounds, "min") if bounds else {"min": 1}), "match": match}
    what = ", ".join(f"{k} {v!r}" for k, v in match.items())
    return spec, f"Karpenter events with {what} {_range_text(spec)}"


def _parse_not_created(item: dict):
    spec = _bounds(item["not_created"], "max")
    return spec, f"pods not created {_range_text(spec)}"


def _parse_pods(item: dict):
    sel = item["pods"]
    if isinstance(sel, str):
        spec = {"selector": _selector(sel)}
        who = f"pods of {sel}"
    elif isinstance(sel, dict) and set(sel) == {"requests"}:
        spec = {"requests": str(sel["requests"])}
        who = f"pods requesting {sel['requests']}"
    else:
        raise ValueError("expected a label selector (app=web) or {requests: RESOURCE}")
    on = item.get("only_on")  # not `on`: YAML 1.1 reads that key as true
    if not isinstance(on, dict) or not on:
        raise ValueError("expected only_on: {node-label: value or [values]}")
    spec["on"] = {k: [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in on.items()}
    spec["alone"] = bool(item.get("alone", False))
    text = f"{who} only on nodes with " + ", ".join(
        f"{k}={'|'.join(v)}" for k, v in spec["on"].items())
    return spec, text + (", and no other pod on those nodes" if spec["alone"] else "")


def _parse_spot_share(item: dict):
    spec = _bounds(item["spot_share"], "min")
    return spec, f"spot share of nodes{_pool_text(spec)} {_range_text(spec)}"


def _parse_pod_share(item: dict):
    value = dict(item["pod_share"]) if isinstance(item["pod_share"], dict) else item["pod_share"]
    sel = value.pop("pods", None) if isinstance(value, dict) else None
    spec = _bounds(value, "min")
    spec["selector"] = _selector(sel) if sel else []
    return spec, f"share of {f'pods of {sel}' if sel else 'pods'} on spot nodes {_range_text(spec)}"


def _parse_allowed(key: str, label: str):
    def parse(item: dict):
        value = item[key]
        spec = {"in": value} if isinstance(value, list) else dict(value)
        if not isinstance(spec.get("in"), list) or not spec["in"]:
            raise ValueError("expected a list, or {in: [...], nodepool: ...}")
        spec["in"] = [str(v) for v in spec["in"]]
        return spec, f"no instance {label} outside [{', '.join(spec['in'])}]{_pool_text(spec)}"
    return parse


def _parse_cost(item: dict):
    spec = _bounds(item["cost_per_hour"], "max")
    return spec, f"cost per hour{_pool_text(spec)} {_range_text(spec).replace('= ', '= $')}"


def _parse_nodes(item: dict):
    spec = _bounds(item["nodes"], "max")
    return spec, f"nodes{_pool_text(spec)} {_range_text(spec)}"


def _parse_zones(item: dict):
    value = item["zones"]
    spec = {"min": value} if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(spec, dict) or not {"min", "max", "max_skew"} & set(spec):
        raise ValueError("expected a number of zones or {min: N, max: N, max_skew: N, "
                         f"nodepool: ...}}, got {value!r}")
    for k in ("min", "max", "max_skew"):
        if k in spec and (not isinstance(spec[k], int) or isinstance(spec[k], bool)):
            raise ValueError(f"{k} must be a whole number, got {spec[k]!r}")
    spec = dict(spec)
    parts = [f"zones {_range_text(spec)}"] if {"min", "max"} & set(spec) else []
    if "max_skew" in spec:
        parts.append(f"nodes per zone within {spec['max_skew']} of each other")
    return spec, " and ".join(parts) + _pool_text(spec)


def _parse_running(item: dict):
    if item["running"] != "all":
        raise ValueError(f"expected running: all, got {item['running']!r}")
    return {}, "every workload's pods run"


PARSERS = {"pending": _parse_pending, "not_created": _parse_not_created,
           "no_disruption": _parse_no_disruption, "event": _parse_event,
           "pods": _parse_pods, "spot_share": _parse_spot_share,
           "instance_categories": _parse_allowed("instance_categories", "category"),
           "instance_families": _parse_allowed("instance_families", "family"),
           "cost_per_hour": _parse_cost, "nodes": _parse_nodes, "running": _parse_running,
           "zones": _parse_zones, "pod_share": _parse_pod_share}


def _selector(text: str) -> list[tuple[str, str, str | None]]:
    """'app=web,tier!=db,gpu' -> [(key, op, value)] with op '=', '!=' or 'exists'."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), "=", v.strip().lstrip("=")))
        else:
            out.append((part, "exists", None))
    if not out:
        raise ValueError("empty label selector")
    return out


def _matches(pod: PodView, spec: dict) -> bool:
    if "requests" in spec:
        return spec["requests"] in pod.requests
    for key, op, value in spec["selector"]:
        have = pod.labels.get(key)
        if (op == "=" and have != value) or (op == "!=" and have == value) or \
                (op == "exists" and have is None):
            return False
    return True


# ---- judging, one function per kind: (ok, what was seen) ---------------------------------------
def _within(value: float | None, spec: dict) -> bool:
    return value is not None and spec.get("min", value) <= value <= spec.get("max", value)


EMPTY = " (nothing to judge: add allow_empty: true if none is right)"


def _empty(spec: dict, what: str):
    """An expectation with nothing to judge: failed, unless it allows that."""
    return spec.get("allow_empty", False), what + ("" if spec.get("allow_empty") else EMPTY)


def _by_workload(pods: list[PodView], snap: Snapshot) -> str:
    by: dict[str, int] = {}
    for p in pods:
        by[p.workload] = by.get(p.workload, 0) + 1
    return "; ".join(f"{w} ×{n} ({snap.diagnoses.get(w) or 'no diagnosis'})"
                     for w, n in by.items())


def _judge_running(spec: dict, snap: Snapshot):
    pods = [p for p in snap.pods if p.phase != "Terminating"]
    if not pods and not snap.not_created:
        return _empty(spec, "no pods")
    not_running = [p for p in pods if p.phase not in ("Running", "Succeeded")]
    pending = [p for p in not_running if p.phase == "Pending"]
    others = [f"{p.name} {p.phase}" for p in not_running if p.phase != "Pending"]
    seen = f"{len(pods) - len(not_running)} of {len(pods)} pods running" + (
        f"; Pending: {_by_workload(pending, snap)}" if pending else "") + (
        f"; {', '.join(others[:5])}" if others else "") + "".join(
        f"; {w}: {n.text()}" for w, n in sorted(snap.not_created.items()))
    return not not_running and not snap.not_created, seen


def _judge_not_created(spec: dict, snap: Snapshot):
    n = sum(x.missing for x in snap.not_created.values())
    seen = f"{n} not created" + "".join(f"; {w}: {x.text()}"
                                        for w, x in sorted(snap.not_created.items()))
    return _within(n, spec), seen


def _judge_pending(spec: dict, snap: Snapshot):
    if not snap.pods:
        return _empty(spec, "no pods at all")
    if "workload" in spec or "reason" in spec:
        return _judge_pending_of(spec, snap)
    pending = [p for p in snap.pods if p.phase == "Pending"]
    seen = f"{len(pending)} Pending" + (": " + _by_workload(pending, snap) if pending else "")
    return _within(len(pending), spec), seen


def _workload_matches(workload: str, ref: str) -> bool:
    """'Deployment/shop/web' matches 'web', 'shop/web' and itself."""
    return not ref or workload == ref or workload.endswith(f"/{ref}")


def _judge_pending_of(spec: dict, snap: Snapshot):
    pending = [p for p in snap.pods if p.phase == "Pending"
               and _workload_matches(p.workload, spec["workload"])]
    reason = spec["reason"]
    wrong = sorted({p.workload for p in pending
                    if reason and reason not in (snap.diagnoses.get(p.workload) or "")})
    seen = f"{len(pending)} Pending" + (": " + _by_workload(pending, snap) if pending else "")
    if wrong:
        seen += f"; not for {reason!r}: {', '.join(wrong)}"
    return _within(len(pending), spec) and not wrong, seen


def _judge_no_disruption(spec: dict, snap: Snapshot):
    pool = spec.get("nodepool")
    gone = [r for r in snap.removed if not pool or r["nodepool"] == pool]
    return not gone, ("none deleted" if not gone else "deleted: " + ", ".join(
        f"{r['claim']} ({r['instance_type'] or '?'}, pool {r['nodepool'] or '?'})"
        for r in gone[:8]))


def _judge_event(spec: dict, snap: Snapshot):
    match = spec["match"]
    hits = [e for e in snap.events
            if all(re.search(v, e.get(k) or "") if k == "message" else e.get(k) == v
                   for k, v in match.items())]
    seen = f"{len(hits)} matching of {len(snap.events)} Karpenter events in the phase"
    if hits:
        e = hits[-1]
        seen += f"; last: {e['reason']} {e['kind']}/{e['name']}: {e['message'][:200]}"
    return _within(len(hits), spec), seen


def _judge_pods(spec: dict, snap: Snapshot):
    pods = [p for p in snap.pods if _matches(p, spec) and p.phase != "Terminating"]
    if not pods:
        return _empty(spec, "no pod matches")
    placed = [(p, snap.node(p.node)) for p in pods if p.node]
    # A matching pod on no node is not on the nodes it should be on: "only on" holds for
    # every matching pod, not for those that happened to run.
    unplaced = [p for p in pods if not p.node]
    if not placed:
        return False, (f"none of {len(pods)} matching pods is on a node (all Pending: "
                       f"{_by_workload(unplaced, snap)})")
    wrong = [f"{p.name} on {n.name if n else p.node} ({_node_words(n, spec['on'])})"
             for p, n in placed
             if n is None or any(n.labels.get(k) not in v for k, v in spec["on"].items())]
    wrong += [f"{p.name} on no node ({p.phase})" for p in unplaced]
    nodes = {n.name for _, n in placed if n}
    others = [f"{p.name} ({p.workload}) on {p.node}" for p in snap.pods
              if spec["alone"] and p.node in nodes and not _matches(p, spec)
              and not p.workload.startswith("DaemonSet/")]
    seen = (f"{len(placed)} of {len(pods)} matching pods on {len(nodes)} nodes"
            + (f"; not on such nodes: {', '.join(wrong[:5])}" if wrong else "")
            + (f" (Pending: {_by_workload(unplaced, snap)})" if unplaced else "")
            + (f"; other pods there: {', '.join(others[:5])}" if others else ""))
    return not wrong and not others, seen


def _node_words(node, on: dict) -> str:
    if node is None:
        return "not a Karpenter node"
    return ", ".join(f"{k}={node.labels.get(k, '<unset>')}" for k in on)


def _nodes_of(spec: dict, snap: Snapshot):
    pool = spec.get("nodepool")
    return [n for n in snap.nodes if not pool or n.nodepool == pool]


def _judge_spot_share(spec: dict, snap: Snapshot):
    nodes = _nodes_of(spec, snap)
    if not nodes:
        return _empty(spec, "no nodes" + _pool_text(spec))
    spot = sum(n.capacity_type == "spot" for n in nodes)
    share = spot / len(nodes)
    return _within(round(share, 3), spec), f"{share:.2f}: {spot} of {len(nodes)} nodes on spot"


def _judge_allowed(attr: str):
    def judge(spec: dict, snap: Snapshot):
        nodes = _nodes_of(spec, snap)
        if not nodes:
            return _empty(spec, "no nodes" + _pool_text(spec))
        outside = sorted({f"{n.instance_type} ({getattr(n, attr)})" for n in nodes
                          if getattr(n, attr) not in spec["in"]})
        types = ", ".join(sorted({n.instance_type for n in nodes})) or "none"
        seen = f"outside: {', '.join(outside)}" if outside else f"{len(nodes)} nodes, types {types}"
        return not outside, seen
    return judge


def _judge_cost(spec: dict, snap: Snapshot):
    pool = spec.get("nodepool")
    cost = pool_summary(snap, pool)["cost_per_hour"] if pool else cost_per_hour(snap)
    if cost is None:
        return False, "unknown: a node has no price label"
    if not _nodes_of(spec, snap) and not _about_none(spec):
        return _empty(spec, "$0/h: no nodes" + _pool_text(spec))
    return _within(cost, spec), f"${cost:.4f}/h over {len(_nodes_of(spec, snap))} nodes"


def _about_none(spec: dict) -> bool:
    """`max: 0`: the expectation is that there are none, so none is a result, not emptiness."""
    return spec.get("max") == 0


def _judge_nodes(spec: dict, snap: Snapshot):
    nodes = _nodes_of(spec, snap)
    if not nodes and not _about_none(spec) and "min" not in spec:
        return _empty(spec, "0 nodes" + _pool_text(spec))
    return _within(len(nodes), spec), f"{len(nodes)} nodes" + (
        f": {', '.join(sorted(n.instance_type for n in nodes))}" if nodes else "")


def _judge_pod_share(spec: dict, snap: Snapshot):
    """Pods, not nodes: a Pending pod counts as a pod not on spot."""
    pods = [p for p in snap.pods if _matches(p, spec) and p.phase != "Terminating"]
    if not pods:
        return _empty(spec, "no pod matches")
    on_spot = [p for p in pods if p.node and (n := snap.node(p.node)) is not None
               and n.capacity_type == "spot"]
    share = len(on_spot) / len(pods)
    return _within(round(share, 3), spec), (f"{share:.2f}: {len(on_spot)} of {len(pods)} pods "
                                            f"on spot nodes")


def _judge_zones(spec: dict, snap: Snapshot):
    nodes = _nodes_of(spec, snap)
    if not nodes:
        return _empty(spec, "no nodes" + _pool_text(spec))
    per: dict[str, int] = {}
    for n in nodes:
        per[n.zone] = per.get(n.zone, 0) + 1
    skew = max(per.values()) - min(per.values())
    ok = _within(len(per), spec) and skew <= spec.get("max_skew", skew)
    return ok, (f"{len(per)} zones: " + ", ".join(f"{z}×{c}" for z, c in sorted(per.items()))
                + f" (skew {skew})")


JUDGES = {"pending": _judge_pending, "not_created": _judge_not_created,
          "no_disruption": _judge_no_disruption, "event": _judge_event, "pods": _judge_pods,
          "spot_share": _judge_spot_share,
          "instance_categories": _judge_allowed("category"),
          "instance_families": _judge_allowed("family"),
          "cost_per_hour": _judge_cost, "nodes": _judge_nodes, "running": _judge_running,
          "zones": _judge_zones, "pod_share": _judge_pod_share}
