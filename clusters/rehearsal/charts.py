"""The AWS provider's Helm charts as its release publishes them, made from the module's source.

The charts in the module (``charts/karpenter``, ``charts/karpenter-crd``) carry the versions of
an earlier release (v1.15.0's say 1.14.1): the release script stamps them when it publishes
(hack/release/common.sh ``build`` and ``publishHelmChart``): the controller image's
repository, tag and digest into ``values.yaml``, the version and appVersion into
``Chart.yaml``, then ``helm package``. This does the same, with the image made here: its
repository is ``IMAGE_REPOSITORY`` and it has no digest (no registry gives it one).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import yaml

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.kind import chart as kindchart

IMAGE_REPOSITORY = "karpenter-e2e.local/aws-controller"
CHARTS = ("karpenter", "karpenter-crd")


def image_repository() -> str:
    return IMAGE_REPOSITORY


def image_ref(version: str) -> str:
    """The controller image the stamped chart of ``version`` names (repository:tag)."""
    return f"{IMAGE_REPOSITORY}:{version.lstrip('v')}"


def packaged(out_dir: Path, chart: str, version: str) -> Path:
    path = out_dir / f"{chart}-{version.lstrip('v')}.tgz"
    if not path.exists():
        raise ClusterError(f"no packaged chart {path}: package the provider's charts first")
    return path


def stamp(chart_dir: Path, chart: str, version: str, repository: str) -> None:
    """What the release script writes into a copy of the module's chart before packaging."""
    version = version.lstrip("v")
    meta_path = chart_dir / "Chart.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    meta["version"] = meta["appVersion"] = version
    meta_path.write_text(yaml.safe_dump(meta, sort_keys=False))
    if chart == "karpenter":
        values_path = chart_dir / "values.yaml"
        values = yaml.safe_load(values_path.read_text())
        values["controller"]["image"].update(repository=repository, tag=version, digest="")
        values_path.write_text(yaml.safe_dump(values, sort_keys=False))


def package(helm: Path, module: Path, version: str, repository: str, out_dir: Path) -> list[Path]:
    """Both charts of provider release ``version`` (``module``: its source), stamped and
    packaged into ``out_dir`` as ``<chart>-<version>.tgz``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for chart in CHARTS:
        source = module / "charts" / chart
        if not (source / "Chart.yaml").exists():
            raise ClusterError(f"the provider module {module.name} has no charts/{chart}")
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / chart
            shutil.copytree(source, copy)
            copy.chmod(0o755)  # the module cache is read-only
            for path in copy.rglob("*"):
                path.chmod(0o755 if path.is_dir() else 0o644)
            stamp(copy, chart, version, repository)
            kindchart.run_helm(helm, ["package", str(copy), "--destination", str(out_dir)],
                               f"helm package {chart} {version}", timeout=120)
        made.append(packaged(out_dir, chart, version))
    return made
