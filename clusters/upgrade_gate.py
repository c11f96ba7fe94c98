"""`python -m clusters.upgrade_gate --from v1.14.3 --to v1.15.0`: the upgrade acceptance gate.

1. Bring up Karpenter FROM, with the workshop pool and a running workload, and upgrade it
   to TO (new CRDs first, then the controller). Nothing may be disrupted for a window
   (suites/test_upgrade.py).
2. Run the scenario suites on TO, against the same cluster.
3. Write a verdict (pass/fail with reasons) to reports/upgrade-gate/verdict.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from clusters import backends
from clusters.errors import ClusterError
from clusters.local import build, versions

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"


def check_versions(mode: str, from_v: str, to_v: str) -> None:
    """Refuse unknown versions, downgrades and versions that do not build, before any run."""
    try:
        older, newer = versions.semver(from_v), versions.semver(to_v)
    except ValueError as exc:
        raise ClusterError(f"unknown version: {exc}") from None
    if newer <= older:
        raise ClusterError(f"{from_v} -> {to_v} is a downgrade or no change; the gate only "
                           "accepts upgrades")
    if mode == "local":
        for v in (from_v, to_v):
            if v not in versions.KARPENTER_VERSIONS:
                raise ClusterError(f"unknown version {v}: local mode builds Karpenter "
                                   f"{', '.join(versions.KARPENTER_VERSIONS)}")
            build.build(build.find("karpenter-kwok", v))  # a version that does not build stops here
    if mode == "aws-sim":
        from clusters.awssim import build as awsbuild
        for v in (from_v, to_v):
            awsbuild.binary(v)  # refuses a version aws-sim does not pin; builds it otherwise


def failures(junit: Path) -> list[str]:
    """'test name: first line of its failure' for each failed or errored test case."""
    if not junit.exists():
        return [f"{junit.name}: no results (the run did not finish)"]
    out = []
    for case in ET.parse(junit).iter("testcase"):
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            message = (bad.get("message") or bad.text or "").strip().splitlines()
            out.append(f"{case.get('name')}: {message[0][:300] if message else bad.tag}")
    return out


def executed(junit: Path) -> tuple[int, int]:
    """(test cases that ran, of which skipped): a skip is not a pass."""
    if not junit.exists():
        return 0, 0
    cases = list(ET.parse(junit).iter("testcase"))
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    return len(cases) - skipped, skipped


def verdict(phases: dict[str, tuple[int, Path]], from_v: str, to_v: str) -> dict:
    reasons, counts = [], {}
    for name, (rc, junit) in phases.items():
        found = failures(junit)
        ran, skipped = executed(junit)
        counts[name] = {"executed": ran, "skipped": skipped, "failed": len(found)}
        reasons += [f"{name}: {r}" for r in found]
        if ran == 0:
            reasons.append(f"{name}: no test executed ({skipped} skipped)")
        if rc != 0 and not found:
            reasons.append(f"{name}: pytest exited {rc}")
    return {"from": from_v, "to": to_v, "verdict": "fail" if reasons else "pass",
            "reasons": reasons, "phases": {n: rc for n, (rc, _) in phases.items()},
            "tests": counts, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def markdown(v: dict) -> str:
    lines = [f"# Upgrade gate {v['from']} -> {v['to']}: {v['verdict'].upper()}", ""]
    lines += [f"- {r}" for r in v["reasons"]] or ["- the upgrade disrupted nothing and every "
                                                  "scenario passed on the new version"]
    lines += ["", "| phase | executed | skipped | failed |", "|---|---|---|---|"]
    lines += [f"| {name} | {c['executed']} | {c['skipped']} | {c['failed']} |"
              for name, c in v.get("tests", {}).items()]
    return "\n".join(lines) + "\n"


def pytest(args: list[str], log: Path) -> int:
    cmd = [sys.executable, "-m", "pytest", *args]
    print("$", " ".join(cmd), flush=True)
    with open(log, "w") as out:
        return subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m clusters.upgrade_gate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="from_v", required=True)
    p.add_argument("--to", dest="to_v", required=True)
    p.add_argument("--cluster", default="local", choices=backends.MODES)
    p.add_argument("--cluster-name", default="upgrade-gate")
    p.add_argument("--window", type=float, default=60.0, help="seconds nothing may be disrupted")
    p.add_argument("-k", dest="select", default="", help="run only these suites (pytest -k)")
    p.add_argument("--workers", type=int, default=2, help="xdist workers for the suites")
    p.add_argument("--disrupt", action="store_true",
                   help="self-test: ship a disruptive NodePool change with the upgrade")
    p.add_argument("--out", type=Path, default=REPORTS / "upgrade-gate")
    args = p.parse_args(argv)
    try:
        check_versions(args.cluster, args.from_v, args.to_v)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    common = ["--cluster", args.cluster, "--cluster-name", args.cluster_name, "--keep-cluster",
              "-p", "no:cacheprovider", "--alluredir", str(args.out / "allure-results")]
    backend = backends.create(argparse.Namespace(
        cluster=args.cluster, cluster_name=args.cluster_name, karpenter_version=args.to_v,
        apiserver_port=None, catalogue_without=None))
    backend.down()  # a fresh cluster: FROM must be what runs when the gate starts
    phases: dict[str, tuple[int, Path]] = {}
    try:
        upgrade = [*common, "suites/test_upgrade.py", "--karpenter-version", args.from_v,
                   "--upgrade-to", args.to_v, "--upgrade-window", str(args.window),
                   "--clean-alluredir", "--junitxml", str(args.out / "upgrade.xml")]
        if args.disrupt:
            upgrade.append("--upgrade-disrupt")
        phases["upgrade"] = (pytest(upgrade, args.out / "upgrade.log"), args.out / "upgrade.xml")
        # The nightly-only scenarios too: a gate is where their minutes are worth spending.
        suites = [*common, "suites", "-m", "not upgrade_gate and not scale", "--run-nightly",
                  "--karpenter-version", args.to_v, "--junitxml", str(args.out / "suites.xml")]
        if args.select:
            suites += ["-k", args.select]
        if args.workers > 1:
            suites += ["-n", str(args.workers)]
        phases[f"suites on {args.to_v}"] = (pytest(suites, args.out / "suites.log"),
                                            args.out / "suites.xml")
    finally:
        backend.down()
    v = verdict(phases, args.from_v, args.to_v)
    (args.out / "verdict.json").write_text(json.dumps(v, indent=1))
    (args.out / "verdict.md").write_text(markdown(v))
    from reports import allure_files
    allure_files.attach_globally(args.out / "allure-results", "Upgrade gate verdict", markdown(v))
    print(markdown(v))
    return 0 if v["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
