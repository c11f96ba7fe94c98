"""A folder of a platform team's manifests: load, check what can be checked offline, and map
them onto the mode's cloud (EC2NodeClass -> KWOKNodeClass in local mode).

Everything here runs before any cluster starts, so bad input costs no time: each error
names the file and the document's index in it (0-based, as ``kubectl`` counts ``---``). A
folder with a kustomization is rendered first (``kubectl kustomize``), and its documents are
named by their index in that output. Variables are filled in last, in what is applied (the
files as written, or kustomize's output): ``kustomize build | envsubst``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from karpenter_e2e.checks import kustomize, variables
from karpenter_e2e.checks.variables import Variables

NODEPOOL = ("karpenter.sh", "NodePool")
NODECLASSES = {("karpenter.k8s.aws", "EC2NodeClass"), ("karpenter.kwok.sh", "KWOKNodeClass")}
# What `check` reports on: the pods of these are the workload.
WORKLOADS = {"Deployment", "StatefulSet", "Job", "Pod", "DaemonSet"}
# Applied as they are and not reported on: what workloads commonly come with.
SUPPORTING = {"Namespace", "ConfigMap", "Secret", "Service", "ServiceAccount",
              "PodDisruptionBudget", "PriorityClass", "ResourceQuota", "LimitRange",
              # what Karpenter's scheduling reads beside the pods: volume topology, pod
              # overhead, a buffer's chunks, an overlay's prices and capacity
              "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "RuntimeClass",
              "PodTemplate", "CapacityBuffer", "NodeOverlay"}
# Kinds without a namespace (NodeClasses too, below).
CLUSTER_SCOPED = {"Namespace", "PriorityClass", "NodePool", "StorageClass", "PersistentVolume",
                  "RuntimeClass", "NodeOverlay"}
# Karpenter's pre-v1 kinds: named, so the error can say what replaced them.
RETIRED = {"Provisioner": "NodePool (karpenter.sh/v1)",
           "AWSNodeTemplate": "EC2NodeClass (karpenter.k8s.aws/v1)",
           "Machine": "NodeClaim (karpenter.sh/v1), which Karpenter creates itself"}
# Namespaces a fresh cluster already has.
BUILTIN_NAMESPACES = {"default"}
# Applied first to last: what others refer to goes first, and a namespace's admission rules
# (LimitRange, ResourceQuota) before anything they judge.
APPLY_ORDER = ["Namespace", "LimitRange", "ResourceQuota", "PriorityClass", "RuntimeClass",
               "ServiceAccount", "ConfigMap", "Secret", "StorageClass", "PersistentVolume",
               "EC2NodeClass", "KWOKNodeClass", "NodePool", "NodeOverlay",
               "PersistentVolumeClaim", "PodTemplate", "CapacityBuffer", "PodDisruptionBudget",
               "Service"]


class ManifestError(ValueError):
    """One or more manifests cannot be checked; the message names each file and document."""


@dataclass
class Manifest:
    file: Path  # a rendered document's: the kustomization's folder
    index: int  # the document's position in its file (in kustomize's output), from 0
    body: dict
    rendered: bool = False  # by kustomize

    @property
    def kind(self) -> str:
        return self.body.get("kind", "")

    @property
    def group(self) -> str:
        api = self.body.get("apiVersion", "")
        return api.rpartition("/")[0] if "/" in api else ""

    @property
    def name(self) -> str:
        return (self.body.get("metadata") or {}).get("name", "")

    @property
    def namespace(self) -> str | None:
        """The namespace of a namespaced kind ('default' when unset); None if cluster-scoped."""
        if self.kind in CLUSTER_SCOPED or (self.group, self.kind) in NODECLASSES:
            return None
        return (self.body.get("metadata") or {}).get("namespace") or "default"

    @property
    def where(self) -> str:
        if self.rendered:
            return f"{kustomize.label(self.file)}#doc {self.index} ({self.kind}/{self.name})"
        return f"{self.file} (document {self.index})"

    @property
    def ref(self) -> str:
        ns = self.namespace
        return f"{self.kind}/{ns + '/' if ns else ''}{self.name}"


@dataclass
class Bundle:
    """The folder's manifests, valid as far as can be told without an API server."""

    folder: Path
    manifests: list[Manifest] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. placeholders never filled in
    kustomization: Path | None = None  # the folder's own, which rendered the manifests
    used: set[str] = field(default_factory=set)  # the variables its documents use

    def of_kind(self, *kinds: str) -> list[Manifest]:
        return [m for m in self.manifests if m.kind in kinds]

    @property
    def nodepools(self) -> list[Manifest]:
        return self.of_kind("NodePool")

    @property
    def workloads(self) -> list[Manifest]:
        return [m for m in self.manifests if m.kind in WORKLOADS]

    @property
    def namespaces(self) -> set[str]:
        return {m.namespace for m in self.manifests if m.namespace} | \
            {m.name for m in self.of_kind("Namespace")}

    def ordered(self) -> list[Manifest]:
        rank = {k: i for i, k in enumerate(APPLY_ORDER)}
        return sorted(self.manifests, key=lambda m: rank.get(m.kind, len(APPLY_ORDER)))

    def workload(self, ref: str) -> Manifest:
        """The workload called ``ref`` ('name' or 'namespace/name')."""
        ns, _, name = ref.rpartition("/")
        found = [w for w in self.workloads if w.name == name and (not ns or w.namespace == ns)]
        if len(found) != 1:
            known = ", ".join(sorted(f"{w.namespace}/{w.name}" for w in self.workloads))
            why = "no workload" if not found else "more than one workload"
            raise ManifestError(f"{why} called {ref!r} in {self.folder} (workloads: {known}); "
                                "use namespace/name")
        return found[0]


@dataclass
class _Source:
    """A text documents are read from: a file, or one document of kustomize's output."""

    file: Path  # a rendered document's: the kustomization's folder
    text: str
    doc: int | None = None  # a rendered document's index in kustomize's output

    @property
    def name(self) -> str:
        if self.doc is None:
            return str(self.file)
        return f"{kustomize.label(self.file)}#doc {self.doc}"

    def manifest(self, i: int, body) -> Manifest:
        if self.doc is None:
            return Manifest(self.file, i, body)
        return Manifest(self.file, self.doc, body, rendered=True)


def load(folder: Path, cluster_name: str = "", given: Variables | None = None,
         exclude: Iterable[Path] = ()) -> Bundle:
    """Every ``*.yaml``/``*.yml`` under ``folder`` (not expect.yaml, nor what ``exclude`` names:
    the files and folders a step applies later), or what the folder's own kustomization
    renders, with the variables filled in (``cluster_name`` for CLUSTER_NAME, and ``given``),
    checked; raises ManifestError listing every problem found."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ManifestError(f"{folder}: no such folder")
    given = given or Variables()
    bundle = Bundle(folder, kustomization=kustomize.kustomization(folder))
    sources = _rendered(folder) if bundle.kustomization else \
        _files(bundle, [*given.files, *exclude])
    errors, rejected = _read(bundle, sources, given.with_builtin(cluster_name))
    bundle.warnings += given.unused(bundle.used, folder)
    # Every error at once: a document with a problem must not hide the next one's.
    errors += _reference_problems(bundle, rejected)
    if errors:
        raise ManifestError("\n".join(errors))
    return bundle


def load_more(path: Path, known: list[Manifest], cluster_name: str = "",
              given: Variables | None = None) -> Bundle:
    """What a later step applies: a file, or a folder (its ``*.yaml``, or what its own
    kustomization renders), read and checked as ``load`` reads a folder, its references
    (namespaces, NodeClasses) judged against ``known`` and itself. It need hold no NodePool
    and no workload. Raises ManifestError listing every problem found."""
    path = Path(path)
    given = given or Variables()
    if path.is_dir():
        bundle = Bundle(path, kustomization=kustomize.kustomization(path))
        sources = _rendered(path) if bundle.kustomization else _files(bundle, given.files)
    elif path.is_file():
        bundle, sources = Bundle(path), [_Source(path, path.read_text())]
    else:
        raise ManifestError(f"{path}: no such file or folder")
    errors, rejected = _read(bundle, sources, given.with_builtin(cluster_name))
    errors += _reference_problems(bundle, rejected, known)
    if errors:
        raise ManifestError("\n".join(errors))
    return bundle


def _read(bundle: Bundle, sources: list[_Source],
          values: dict[str, str]) -> tuple[list[str], list[Manifest]]:
    """The sources' documents into ``bundle`` (the names they use into ``bundle.used``): the
    errors, and the documents with a problem (still named, for the references)."""
    errors: list[str] = []
    rejected: list[Manifest] = []
    for source in sources:
        filled = variables.fill(source.text, values)
        bundle.used |= filled.used
        try:
            docs = list(yaml.safe_load_all(filled.text))
        except yaml.YAMLError as exc:
            bundle.warnings += _unfilled(source, filled)
            errors.append(f"{source.name}:{_yaml_problem(exc)}"
                          + (" (with the variables filled in)" if filled.used else ""))
            continue
        found = [source.manifest(i, doc) for i, doc in enumerate(docs) if doc is not None]
        bundle.warnings += _unfilled(source, filled, found)
        for m in found:
            if isinstance(m.body, dict) and str(m.body.get("apiVersion", "")).startswith(
                    kustomize.GROUP + "/"):
                bundle.warnings.append(f"{m.where}: {m.kind} not applied: kustomize runs only "
                                       "on the kustomization at the top of the folder checked")
                continue
            problem = _shape_problem(m)
            if problem:
                errors.append(f"{m.where}: {problem}")
                if isinstance(m.body, dict):
                    rejected.append(m)
            else:
                bundle.manifests.append(m)
    return errors, rejected


def _files(bundle: Bundle, not_manifests: list[Path]) -> list[_Source]:
    """The folder's manifests as written (not a --vars file kept beside them, nor a file or
    folder a step applies later). A kustomization below it is not rendered: the folder is not
    one, and which of its sub-folders' would be is not check's to guess."""
    left_out = [f.resolve() for f in not_manifests]
    files = sorted(p for p in bundle.folder.rglob("*") if p.suffix in (".yaml", ".yml")
                   and p.is_file() and p.name not in ("expect.yaml", "expect.yml")
                   and not any(p.resolve().is_relative_to(f) for f in left_out))
    for path in [p for p in files if p.name in kustomize.FILES]:
        bundle.warnings.append(f"{path}: not rendered: check renders only the kustomization at "
                               f"the top of the folder it is given (check {path.parent} to "
                               "render this one); the folder's other files are applied as "
                               "written")
    files = [p for p in files if p.name not in kustomize.FILES]
    if not files:
        raise ManifestError(f"{bundle.folder}: no *.yaml manifests in it")
    return [_Source(p, p.read_text()) for p in files]


def _rendered(folder: Path) -> list[_Source]:
    """What the folder's kustomization renders, a source a document: only what it lists is
    applied, whatever else the folder holds."""
    try:
        docs = kustomize.documents(kustomize.render(folder))
    except kustomize.KustomizeError as exc:
        raise ManifestError(str(exc)) from None
    if not docs:
        raise ManifestError(f"{kustomize.label(folder)}: renders no documents")
    return [_Source(folder, text, i) for i, text in enumerate(docs)]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    at = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"{at}: invalid YAML: {problem}"


def _unfilled(source: _Source, filled: variables.Filled,
              found: list[Manifest] | None = None) -> list[str]:
    """'where: placeholder <<X>> was never filled in' for each one left in a source, by its
    file and line, or a rendered document and its line."""
    if source.doc is None:
        return [f"{source.file}:{n}: placeholder {p} was never filled in"
                for n, p in filled.unfilled]
    where = found[0].where if found and isinstance(found[0].body, dict) else source.name
    return [f"{where}, line {n}: placeholder {p} was never filled in"
            for n, p in filled.unfilled]


def _shape_problem(m: Manifest) -> str | None:
    if not isinstance(m.body, dict):
        return f"expected a Kubernetes object (a mapping), got {type(m.body).__name__}"
    for key in ("apiVersion", "kind"):
        if not m.body.get(key):
            return f"no {key}"
    problem = _kind_problem(m)
    if problem:
        return problem
    if not m.name:
        return f"{m.kind} has no metadata.name"
    return None


def _kind_problem(m: Manifest) -> str | None:
    if m.kind in RETIRED:
        return (f"{m.kind} ({m.body['apiVersion']}) is from before Karpenter v1; it was "
                f"replaced by {RETIRED[m.kind]} (see examples/provisioner-era)")
    known = WORKLOADS | SUPPORTING | {"NodePool"} | {k for _, k in NODECLASSES}
    if m.kind not in known:
        return (f"unknown kind {m.kind!r} ({m.body['apiVersion']}); check knows NodePool, "
                f"EC2NodeClass, KWOKNodeClass, {', '.join(sorted(WORKLOADS))} and "
                f"{', '.join(sorted(SUPPORTING))}")
    return None


def _reference_problems(bundle: Bundle, rejected: list[Manifest] = (),
                        known: list[Manifest] | None = None) -> list[str]:
    """What the documents refer to that no file defines. Documents rejected for their shape
    still count as defining what they name, so that one error does not cause others.
    ``known``: a later step's documents, judged beside what is applied before them (then
    they need no NodePool or workload of their own)."""
    errors = []
    if known is None and not bundle.nodepools and not any(m.kind == "NodePool" for m in rejected):
        errors.append(f"{bundle.folder}: no NodePool in any file: nothing for Karpenter to "
                      "launch from")
    if known is None and not bundle.workloads and not any(m.kind in WORKLOADS for m in rejected) \
            and not bundle.of_kind("CapacityBuffer"):
        errors.append(f"{bundle.folder}: no workload (Deployment, StatefulSet, Job, Pod or "
                      "DaemonSet) and no CapacityBuffer: nothing to schedule")
    source = f"{bundle.folder}" + (" nor what is applied before it" if known is not None else "")
    known = known or []
    classes = {m.name for m in [*known, *bundle.manifests, *rejected]
               if (m.group, m.kind) in NODECLASSES and m.name}
    for pool in bundle.nodepools:
        ref = ((pool.body.get("spec") or {}).get("template") or {}).get("spec", {}) \
            .get("nodeClassRef")
        if not ref or not ref.get("name"):
            errors.append(f"{pool.where}: NodePool {pool.name} has no "
                          "spec.template.spec.nodeClassRef")
        elif ref["name"] not in classes:
            errors.append(f"{pool.where}: NodePool {pool.name} refers to "
                          f"{ref.get('kind', 'NodeClass')} {ref['name']!r}, which no file in "
                          f"{source} defines"
                          + (f" (defined: {', '.join(sorted(classes))})" if classes else ""))
    created = {m.name for m in [*known, *bundle.manifests, *rejected]
               if m.kind == "Namespace"} | BUILTIN_NAMESPACES
    for m in bundle.manifests:
        if m.namespace and m.namespace not in created:
            errors.append(f"{m.where}: {m.kind} {m.name} is in namespace {m.namespace!r}, "
                          f"which no file in {source} creates (add a Namespace)")
    dupes = [ref for ref, n in Counter(m.ref for m in bundle.manifests).items() if n > 1]
    errors += [f"{bundle.folder}: {ref} is defined more than once" for ref in dupes]
    return errors


# ---- onto a mode --------------------------------------------------------------------------------
def for_mode(bundle: Bundle, nodeclass: tuple[str, str, str]) -> list[Manifest]:
    """The manifests as they are applied in a mode whose NodeClass is ``(group, version,
    kind)``: NodeClasses of another provider become that kind (name and labels kept: the KWOK
    provider has no settings) and NodePools refer to it. The originals are untouched."""
    group, version, kind = nodeclass
    out = []
    for m in bundle.ordered():
        body = copy.deepcopy(m.body)
        if (m.group, m.kind) in NODECLASSES and m.kind != kind:
            meta = body.get("metadata") or {}
            body = {"apiVersion": f"{group}/{version}", "kind": kind,
                    "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})}}
        elif m.kind == "NodePool":
            ref = body["spec"]["template"]["spec"]["nodeClassRef"]
            ref.update(group=group, kind=kind)
        out.append(dataclasses.replace(m, body=body))
    return out


def scaled(manifests: list[Manifest], bundle: Bundle, replicas: dict[str, int]) -> list[Manifest]:
    """The manifests with the workloads' replicas set (``--scale name=N``); a Job's
    parallelism and completions. Unknown names and unscalable kinds are errors."""
    wanted = {}
    for ref, n in replicas.items():
        w = bundle.workload(ref)
        if w.kind not in ("Deployment", "StatefulSet", "Job"):
            raise ManifestError(f"--scale {ref}={n}: a {w.kind} has no replicas to set")
        wanted[(w.file, w.index)] = n
    out = []
    for m in manifests:
        n = wanted.get((m.file, m.index))
        if n is not None:
            m = dataclasses.replace(m, body=copy.deepcopy(m.body))
            spec = m.body.setdefault("spec", {})
            if m.kind == "Job":
                spec["parallelism"] = spec["completions"] = n
            else:
                spec["replicas"] = n
        out.append(m)
    return out


def desired_pods(m: Manifest) -> int | None:
    """The pods a workload asks its controller for; None for a DaemonSet (one per node,
    whatever the nodes are) and for what is not a workload."""
    spec = m.body.get("spec") or {}
    if m.kind in ("Deployment", "StatefulSet"):
        return spec.get("replicas", 1)
    if m.kind == "Job":
        return spec.get("parallelism", 1)
    if m.kind == "Pod":
        return 1
    return None


def parse_scale(spec: str) -> dict[str, int]:
    """'inflate=10,team/web=3' -> {'inflate': 10, 'team/web': 3}."""
    out = {}
    for item in filter(None, (s.strip() for s in (spec or "").split(","))):
        name, _, n = item.partition("=")
        if not name or not n.isdigit():
            raise ManifestError(f"--scale {item!r}: expected NAME=REPLICAS, e.g. inflate=10")
        out[name] = int(n)
    return out
