"""Session-level Allure files: environment.properties, categories.json, global attachments."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

# Failure categories a reader can filter on (Allure matches them in order).
CATEGORIES = [
    {"name": "Karpenter not running", "matchedStatuses": ["failed", "broken"],
     "messageRegex": "(?s).*Karpenter is not running.*"},
    {"name": "Cluster fault (bring-up, API, CRDs)", "matchedStatuses": ["failed", "broken"],
     "messageRegex": "(?s).*(cluster is not usable|ClusterError|cluster API unreachable).*"},
    {"name": "Timed out waiting for Karpenter", "matchedStatuses": ["failed"],
     "messageRegex": "(?s).*(timed out after|gave up after).*"},
    {"name": "Karpenter behaved differently (assertion)", "matchedStatuses": ["failed"]},
    {"name": "Harness error", "matchedStatuses": ["broken"]},
]


def write(results_dir: Path, environment: dict[str, str]) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "environment.properties").write_text(
        "".join(f"{k}={str(v).replace(chr(10), ' ')}\n" for k, v in environment.items()))
    (results_dir / "categories.json").write_text(json.dumps(CATEGORIES, indent=1))


def attach_globally(results_dir: Path, name: str, text: str | bytes,
                    mime: str = "text/markdown", ext: str = "md") -> Path:
    """A run-level attachment (Allure 3 shows it under "Global Attachments"); bytes for a
    picture (e.g. mime="image/png", ext="png")."""
    results_dir.mkdir(parents=True, exist_ok=True)
    key = uuid.uuid4()
    source = f"{key}-attachment.{ext}"
    if isinstance(text, bytes):
        (results_dir / source).write_bytes(text)
    else:
        (results_dir / source).write_text(text)
    globals_file = results_dir / f"{key}-globals.json"
    globals_file.write_text(json.dumps({"attachments": [
        {"name": name, "source": source, "type": mime, "timestamp": int(time.time() * 1000)}]}))
    return globals_file
