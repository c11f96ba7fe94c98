"""A timeline from a real run: consolidation-empty in a child pytest on its own local cluster."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_real_scenario_gets_a_timeline_with_its_band_and_karpenters_decision(tmp_path):
    reports, alluredir = tmp_path / "reports", tmp_path / "allure"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest",
         "suites/test_consolidation.py::test_empty_node_is_removed_after_consolidate_after",
         "-p", "no:cacheprovider", "-o", "log_cli=false", "--karpenter-cluster-name", f"tl-{os.getpid()}",
         f"--karpenter-reports-dir={reports}", f"--alluredir={alluredir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    (picture,) = reports.glob("runs/*/timelines/*.png")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    snap = json.loads(picture.with_suffix(".json").read_text())
    assert snap["outcome"] == "passed" and not snap["errors"], snap["errors"]
    (band,) = snap["bands"]
    (machine,) = snap["machines"]
    # What the scenario asserted, seen again by the recorder: the node went inside the band.
    assert band["start"] <= machine["deleting"] <= band["end"]
    assert any(e["reason"] == "DisruptionTerminating" and e["message"].endswith("Empty")
               for e in snap["events"])
    assert any(m["label"].endswith("3→0") for m in snap["marks"])
    results = [json.loads(f.read_text()) for f in alluredir.glob("*-result.json")]
    assert [a["name"] for r in results for a in r.get("attachments", [])].count("timeline") == 1
