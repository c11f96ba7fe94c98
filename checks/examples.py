"""Which folders of examples/ are check folders: the ones with an expect.yaml. The others are
a pytest project using the plugin (plugin-project) and explore's shrunk cases (findings/, a
folder of check folders, each about the releases its README names, not a workload every
upgrade is judged on). `make check-examples` globs the same rule: examples/*/expect.yaml."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def check_folders(root: Path = EXAMPLES) -> list[Path]:
    """The folders directly under ``root`` that `check` runs, in name order."""
    return sorted(f.parent for f in root.glob("*/expect.yaml"))
