"""The harness as an installable pytest plugin: the wheel holds everything the plugin needs
under the karpenter_e2e namespace, registers the pytest11 entry point, and no module imports
the top-level names (which would collide with a project's own `fixtures` or `clusters`)."""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE_IMPORT = re.compile(r"^\s*(from|import) (clusters|fixtures|rendering|checks|runners)[. ]", re.M)


def test_no_module_imports_the_bare_top_level_names():
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
                 for d in ("clusters", "fixtures", "rendering", "checks", "runners", "suites", "tests",
                           "examples")
                 for p in (ROOT / d).rglob("*.py") if ".venv" not in p.parts
                 for m in BARE_IMPORT.finditer(p.read_text())]
    assert not offenders, "import through karpenter_e2e.*: " + "; ".join(offenders)


def test_the_wheel_holds_the_plugin_its_data_and_the_entry_point(tmp_path):
    # setuptools builds in the tree and reuses build/lib: a module moved or deleted since the
    # last build would ride along into this wheel (reports/ did, after the package moved)
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, timeout=300)
    wheel, = tmp_path.glob("karpenter_e2e-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for must in ("karpenter_e2e/fixtures/pytest_plugin.py", "karpenter_e2e/fixtures/plugin.py",
                 "karpenter_e2e/fixtures/defaults/nodepool-default.yaml",
                 "karpenter_e2e/fixtures/defaults/inflate.yaml",
                 "karpenter_e2e/clusters/local/assets/default-nodeclass.yaml",
                 "karpenter_e2e/clusters/infra/gomod/kubernetes/go.mod",
                 "karpenter_e2e/clusters/infra/assets/ec2-instance-types.txt",
                 "karpenter_e2e/rendering/timeline_chart.py", "karpenter_e2e/__main__.py"):
        assert must in names, f"{must} missing from {wheel.name}"
    assert not [n for n in names if n.split("/")[0] in ("fixtures", "clusters", "rendering",
                                                         "checks", "runners")], \
        "top-level packages in the wheel would collide with a project's own"
    assert not [n for n in names if "reports/" in n], "run output (reports/) in the wheel"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]" in text and "karpenter_e2e = karpenter_e2e.fixtures.pytest_plugin" in text
    assert "[console_scripts]" in text and "karpenter-e2e = karpenter_e2e.runners.cli:main" in text

