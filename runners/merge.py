"""Several runs' reports as one: JUnit, Allure results, timings with the summary, timelines.

The runner merges its lanes (one pytest run per cluster) this way, and CI's merge job the
shards' downloaded run directories. A run directory is what ``--karpenter-reports-dir`` gives a
pytest run (``junit.xml``, ``allure-results/``, ``timings/``, ``timelines/``, ``summary.md``).

    karpenter-e2e merge OUT RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.rendering import summary

COUNTS = ("tests", "failures", "errors", "skipped")
# What the summary's header names of what really ran (from the runs' Allure environment).
RAN_KEYS = ("mode", "karpenter", "karpenter_build", "karpenter_sha256", "kubernetes")


@dataclass
class Totals:
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return self.tests - self.failures - self.errors - self.skipped

    def line(self, wall: float | None = None) -> str:
        """pytest's closing line: '36 passed, 12 skipped in 150.20s'."""
        parts = [f"{n} {word}" for n, word in ((self.failures, "failed"), (self.passed, "passed"),
                                               (self.skipped, "skipped"),
                                               (self.errors, "errors")) if n]
        return f"{', '.join(parts) or 'no tests ran'} in {wall if wall is not None else self.seconds:.2f}s"


def merge_junit(files: list[Path], out: Path, wall: float | None = None) -> Totals:
    """One <testsuite> with every lane's test cases; counts added up."""
    totals = Totals()
    merged = ET.Element("testsuite", name="karpenter-e2e")
    for f in files:
        root = ET.parse(f).getroot()
        for suite in ([root] if root.tag == "testsuite" else root.iter("testsuite")):
            for key in COUNTS:
                setattr(totals, key, getattr(totals, key) + int(suite.get(key, "0")))
            totals.seconds += float(suite.get("time", "0"))
            for case in suite.iter("testcase"):
                merged.append(case)
    for key in COUNTS:
        merged.set(key, str(getattr(totals, key)))
    merged.set("time", f"{wall if wall is not None else totals.seconds:.3f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tree = ET.ElementTree(ET.Element("testsuites"))
    tree.getroot().append(merged)
    tree.write(out, encoding="utf-8", xml_declaration=True)
    return totals


def _copy_tree(src: Path, dst: Path) -> None:
    if not src.is_dir():
        return
    for f in src.rglob("*"):
        if f.is_file():
            target = dst / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)


def _merge_environment(files: list[Path], out: Path) -> None:
    """Allure's environment.properties: a key every run agrees on once, else each value."""
    values: dict[str, list[str]] = {}
    for f in files:
        for line in f.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and value not in values.setdefault(key, []):
                values[key].append(value)
    out.write_text("".join(f"{k}={', '.join(v)}\n" for k, v in values.items()))


def merge(runs: list[Path], out: Path, wall: float | None = None,
          title: str = "Run summary") -> Totals:
    """Merge the run directories ``runs`` into ``out``; returns the JUnit totals."""
    missing = [str(r) for r in runs if not r.is_dir()]
    if missing:
        raise FileNotFoundError(f"not a run directory: {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    totals = merge_junit([r / "junit.xml" for r in runs if (r / "junit.xml").is_file()],
                         out / "junit.xml", wall)
    for part in ("allure-results", "timings", "timelines"):
        for r in runs:
            _copy_tree(r / part, out / part)
    envs = [r / "allure-results" / "environment.properties" for r in runs]
    envs = [e for e in envs if e.is_file()]
    ran = ""
    if envs:
        env_file = out / "allure-results" / "environment.properties"
        _merge_environment(envs, env_file)
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        ran = "Ran: " + ", ".join(f"{k} {env[k]}" for k in RAN_KEYS if k in env) + "\n\n"
    text = summary.markdown(summary.load(out / "timings"), title)
    head, sep, rest = text.partition("\n\n")
    why = summary.failures(out / "junit.xml")
    (out / "summary.md").write_text((head + sep + ran + rest if ran else text)
                                    + (f"\n{why}" if why else ""))
    return totals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="karpenter-e2e merge",
                                 description="merge run directories (shards, lanes) into one")
    ap.add_argument("out", type=Path)
    ap.add_argument("runs", type=Path, nargs="+")
    args = ap.parse_args(argv)
    try:
        totals = merge(args.runs, args.out)
    except (FileNotFoundError, ET.ParseError) as exc:
        print(f"merge: {exc}", file=sys.stderr)
        return 2
    print((args.out / "summary.md").read_text())
    print(totals.line())
    return 1 if totals.failures or totals.errors else 0
