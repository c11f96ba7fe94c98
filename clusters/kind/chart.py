"""Karpenter into a kind cluster the way users and upstream's kind e2e install it: the
release's image loaded with `kind load`, its CRDs applied, then its own Helm chart
(``kwok/charts`` of the module at that release) with `helm upgrade --install --skip-crds`
(sigs.k8s.io/karpenter Makefile, apply-with-kind).

The harness's settings reach Karpenter through the chart's values and nothing else: a
setting the chart has a value for goes there (``settings.batchMaxDuration``, ``logLevel``,
...), any other as an entry of ``controller.env``; the catalogue is a file mounted
through ``extraVolumes`` from the node (a hostPath: the curated catalogue is 1.16 MB, the full
one 11.5 MB compact, over a ConfigMap's 1 MiB; Karpenter runs on the one real node, the
control plane, which the chart's affinity keeps it to).

FEATURE_GATES is one entry, the chart's own: its template names a fixed set of gates
(``Gate={{ .Values.settings.featureGates.gate }}``, NodeOverlay not among them in v1.15.0), so
the harness sets those values and writes the gates the template lacks after the last one's
value (``false,NodeOverlay=true``), which the template puts unquoted into the same string. A
second FEATURE_GATES entry in ``controller.env`` (as this once was) is taken last by
Kubernetes, but a later `helm upgrade` cannot patch a list with two entries of one name
("The order in patch list ... doesn't match $setElementOrder list": a settings lane's fourth
group, seen on kind), and server-side apply refuses it. A chart whose template has no such
gate list gets the env entry. Helm applies client-side (``--server-side false``: Helm 3's way).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import build, process, versions

NAMESPACE = "kube-system"
RELEASE = "karpenter"
CATALOGUE_ON_NODE = "/var/lib/karpenter-e2e/instance-types.json"  # on the kind node
CATALOGUE_IN_POD = "/etc/karpenter-e2e/instance-types.json"
IMAGE_REPO = "karpenter-e2e.local/karpenter-kwok"
HELM_TIMEOUT_S = 600  # helm's own --wait is bounded below this
HELM_WAIT = "5m"
# Environment names the chart sets from a value of its own (kwok/charts/templates/deployment.yaml)
CHART_VALUES = {"LOG_LEVEL": ("logLevel",),
                "BATCH_MAX_DURATION": ("settings", "batchMaxDuration"),
                "BATCH_IDLE_DURATION": ("settings", "batchIdleDuration"),
                "PREFERENCE_POLICY": ("settings", "preferencePolicy"),
                "MIN_VALUES_POLICY": ("settings", "minValuesPolicy")}


def helm_target() -> build.Target:
    return build.Target("helm", versions.HELM, "helm.sh/helm/v4/cmd/helm", "helm.sh/helm/v4",
                        ldflags=(f"-X helm.sh/helm/v4/internal/version.version={versions.HELM}",
                                 "-s", "-w"), toolchain=build.FROM_GO_MOD)


def chart_dir(version: str) -> Path:
    chart = build.download_karpenter(version) / "kwok" / "charts"
    if not (chart / "Chart.yaml").exists():
        raise ClusterError(f"Karpenter {version}'s module has no KWOK chart (kwok/charts): "
                           f"kind mode installs Karpenter with it")
    return chart


def image_ref(version: str, build_name: str, binary: Path) -> str:
    """The image's name: the release, or the mutant's (its own image), and the binary's
    digest so that a rebuilt binary is a new image."""
    suffix = "" if build_name == "release" else "-" + build_name.split()[-1]
    return f"{IMAGE_REPO}:{version}{suffix}-{_file_digest(binary)}"


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def _has_value(chart_values: dict, path: tuple[str, ...]) -> bool:
    node: Any = chart_values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _set(values: dict, path: tuple[str, ...], value: str) -> None:
    node = values
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


# One gate of the chart's FEATURE_GATES value: Gate={{ .Values.settings.featureGates.key }}
_CHART_GATE = re.compile(r"(\w+)=\{\{ \.Values\.settings\.featureGates\.(\w+) \}\}")


def chart_gates(version: str) -> list[tuple[str, str]]:
    """(gate, value key) for each gate the chart's FEATURE_GATES entry names, in its order;
    empty where its template has none of that form."""
    template = (chart_dir(version) / "templates" / "deployment.yaml").read_text()
    line = re.search(r"name: FEATURE_GATES\s*\n\s*value: \"([^\"\n]*)\"", template)
    return _CHART_GATE.findall(line.group(1)) if line else []


def _feature_gates(out: dict, gates: str, known: list[tuple[str, str]]) -> bool:
    """FEATURE_GATES ``gates`` through the chart's own entry (module docstring): its gates'
    values, the others after the last; False where the chart names no gate."""
    if not known:
        return False
    asked = dict(g.split("=", 1) for g in gates.split(",") if "=" in g)
    keys = dict(known)
    for gate, value in asked.items():
        if gate in keys:
            _set(out, ("settings", "featureGates", keys[gate]), value)
    rest = [f"{g}={v}" for g, v in asked.items() if g not in keys]
    if rest:
        last = known[-1]
        mine = asked.get(last[0])
        if mine is None:
            raise ClusterError(f"FEATURE_GATES={gates}: the chart's last gate {last[0]} must be "
                               "given too, to carry the gates its template does not name")
        _set(out, ("settings", "featureGates", last[1]), ",".join([mine, *rest]))
    return True


def values(version: str, image: str, env: dict[str, str], catalogue: bool) -> dict:
    """The chart's values for this run: the image, the harness's settings (``env``: what local
    mode puts in Karpenter's environment), and the catalogue's file where it is read."""
    chart_values = yaml.safe_load((chart_dir(version) / "values.yaml").read_text()) or {}
    repo, tag = image.rsplit(":", 1)
    out: dict[str, Any] = {"controller": {"image": {"repository": repo, "tag": tag,
                                                    "digest": ""}},
                           "imagePullPolicy": "IfNotPresent"}
    extra: list[dict] = []
    for key, value in sorted(env.items()):
        if key == "FEATURE_GATES" and _feature_gates(out, value, chart_gates(version)):
            continue
        path = CHART_VALUES.get(key)
        if path and _has_value(chart_values, path):
            _set(out, path, value)
        else:
            extra.append({"name": key, "value": value})
    if catalogue:
        extra.append({"name": "INSTANCE_TYPES_FILE_PATH", "value": CATALOGUE_IN_POD})
        out["extraVolumes"] = [{"name": "karpenter-e2e-catalogue",
                                "hostPath": {"path": CATALOGUE_ON_NODE, "type": "File"}}]
        out["controller"]["extraVolumeMounts"] = [{"name": "karpenter-e2e-catalogue",
                                                   "mountPath": CATALOGUE_IN_POD,
                                                   "readOnly": True}]
    out["controller"]["env"] = extra
    return out


def run_helm(helm: Path, args: list[str], what: str, timeout: float = HELM_TIMEOUT_S) -> str:
    """`helm ARGS` to its end (any chart: the KWOK one here, the AWS provider's in
    clusters/rehearsal); its stdout, or a ClusterError with the last lines it said."""
    proc = process.run([str(helm), *args], timeout, what=what)
    if proc.returncode != 0:
        raise ClusterError(f"{what} failed:\n"
                           + "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:]))
    return proc.stdout


def upgrade_install(helm: Path, kubeconfig: Path, version: str, chart_values: dict,
                    values_file: Path) -> str:
    """`helm upgrade --install` of the release's chart with ``chart_values``; helm's output."""
    values_file.write_text(json.dumps(chart_values, indent=1))
    return run_helm(helm, ["upgrade", "--install", RELEASE, str(chart_dir(version)),
                           "--namespace", NAMESPACE, "--kubeconfig", str(kubeconfig),
                           "--skip-crds", "--values", str(values_file), "--server-side", "false",
                           "--wait", "--timeout", HELM_WAIT],
                    f"helm upgrade --install of Karpenter {version}'s chart")


def uninstall(helm: Path, kubeconfig: Path) -> None:
    process.run([str(helm), "uninstall", RELEASE, "--namespace", NAMESPACE, "--kubeconfig",
                 str(kubeconfig), "--wait", "--timeout", HELM_WAIT], HELM_TIMEOUT_S)
