"""`karpenter-e2e gate --from v1.14.3 --to v1.15.0`: the upgrade acceptance gate.

0. Performance side by side: the scale case sized by --perf-pods (scenario scale-perf in
   suites/test_scale.py) on FROM and on TO, each on a fresh cluster of that version, both at
   once (--perf-serial: one after the other). Each figure as TO/FROM; one over its limit
   (--perf-max-ratio, --perf-ratios) fails the gate.
1. Bring up Karpenter FROM, with the workshop pool and a running workload, and upgrade it
   to TO (new CRDs first, then the controller). Nothing may be disrupted for a window
   (suites/test_upgrade.py).
2. Run the scenario suites on TO, against the same cluster.
2b. The differential: every example in examples/ (the workshop's manifests among them) and
   each --diff folder (a team's), checked on FROM and on TO, each on a fresh cluster of the
   same Kubernetes release, and what the two decided diffed (docs/differential.md); a
   suspect difference fails the gate, naming the folder, the difference and both records.
3. Write a verdict (pass/fail with reasons) to reports/upgrade-gate/verdict.{json,md}, the
   performance table to perf.md and its picture to perf.png.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from karpenter_e2e.checks import needs
from karpenter_e2e.checks.examples import check_folders
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import adder, plugin_flag
from karpenter_e2e.clusters.infra import build, kube_releases, releases, versions
from karpenter_e2e.clusters.karpenter import compat
from karpenter_e2e.rendering.upgrade_gate import markdown
from karpenter_e2e.runners import cluster_dirs
from karpenter_e2e.runners.children import Child, Children, run_one, sigterm_as_ctrl_c
from karpenter_e2e.runners.cli import child

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
EXAMPLES = ROOT / "examples"
# The performance comparison's defaults, from measured runs (README "Upgrade gate"):
PERF_PODS = 200
PERF_MAX_RATIO = 1.5
PERF_RATIOS = ""


# What an EKS cluster's gate passes on to its pytest runs: the cluster is the team's own, reached
# by kubeconfig and opted in (eks mode); FROM is what Helm installed there.
EKS_OPTIONS = ("kubeconfig", "kube-context", "eks-opt-in", "region", "interruption-queue",
               "chart-repo")


def eks_refusals(args) -> list[str]:
    """What the gate cannot do on one existing EKS cluster, each with how to leave it out."""
    said = []
    if args.perf_pods:
        said.append("the performance case needs a fresh cluster of FROM and one of TO, and an "
                    "EKS cluster is one cluster: pass --perf-pods 0")
    if args.diff or not args.no_diff_examples:
        said.append("the differential checks each folder on fresh clusters (`check` runs in "
                    "local, aws-sim and kind mode): pass --no-diff-examples and no --diff")
    if not args.kubeconfig:
        said.append("--kubeconfig names the EKS cluster (with --eks-opt-in, as eks mode asks)")
    return said


def eks_args(args) -> list[str]:
    """The eks options given to the gate, as its pytest runs spell them."""
    out = []
    for name in EKS_OPTIONS:
        value = getattr(args, name.replace("-", "_"))
        if value:
            out += [plugin_flag(name), str(value)]
    return out


def check_installed(backend, from_v: str) -> str:
    """eks: the cluster must run FROM before the gate upgrades it (its Helm release is the
    team's; the gate installs nothing first)."""
    running = backend.up().versions.get("karpenter", "")
    if running != "v" + from_v.removeprefix("v"):
        raise ClusterError(f"EKS cluster {backend.name!r} runs Karpenter {running}, not "
                           f"{from_v}: install {from_v} with its chart first (the gate upgrades "
                           "what is installed)")
    return running


def check_versions(mode: str, from_v: str, to_v: str) -> None:
    """Refuse unknown versions, downgrades and versions that do not build, before any run."""
    try:
        older, newer = versions.semver(from_v), versions.semver(to_v)
    except ValueError as exc:
        raise ClusterError(f"unknown version: {exc}") from None
    if newer <= older:
        raise ClusterError(f"{from_v} -> {to_v} is a downgrade or no change; the gate only "
                           "accepts upgrades")
    if mode in ("local", "kind"):  # the same KWOK provider build
        for v in (from_v, to_v):  # any release the module proxy serves, from v1.0 on
            releases.check(v)
        for v in (from_v, to_v):
            build.karpenter_binary(v)  # a version that does not build stops here
    if mode == "aws-sim":
        from karpenter_e2e.clusters.awssim import build as awsbuild, provider_releases
        for v in (from_v, to_v):  # provider releases the proxy serves, whose core it serves
            provider_releases.check(v)
        for v in (from_v, to_v):
            awsbuild.binary(v)  # a release that does not build stops here


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


def verdict(phases: dict[str, tuple[int, Path]], from_v: str, to_v: str,
            perf: dict | None = None, not_diffed: dict[str, list[str]] | None = None,
            fixed: dict[str, list[str]] | None = None) -> dict:
    """``perf``: {"reasons": [...], "table": markdown} from perf_comparison, when compared.
    ``not_diffed``: examples left out of the differential, each with why (a feature a
    release lacks): listed, neither a pass nor a failure. ``fixed``: examples FROM fails and
    TO passes, with nothing suspect between them (what FROM failed): what the upgrade fixes,
    listed, not a failure of it."""
    reasons, counts = [], {}
    for name, (rc, junit) in phases.items():
        found = failures(junit)
        ran, skipped = executed(junit)
        counts[name] = {"executed": ran, "skipped": skipped, "failed": len(found)}
        reasons += [f"{name}: {r}" for r in found]
        if ran == 0:
            reasons.append(f"{name}: no test executed ({skipped} skipped)")
        if rc != 0 and not found:
            reasons.append(f"{name}: exited {rc}, no failure in its JUnit")
    if perf is not None:
        reasons += perf["reasons"]
    return {"from": from_v, "to": to_v, "verdict": "fail" if reasons else "pass",
            "reasons": reasons, "phases": {n: rc for n, (rc, _) in phases.items()},
            "tests": counts, "perf": perf, "not_diffed": not_diffed or {},
            "fixed": fixed or {},
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def compare_perf(out: Path, from_v: str, to_v: str, limits: dict[str, float]) -> dict:
    """The two perf phases' measurements, compared: reasons, the table and the picture."""
    from karpenter_e2e.rendering import perf_chart, perf_comparison
    runs, missing = [], []
    for v in (from_v, to_v):
        try:
            runs.append((v, perf_comparison.load(perf_dir(out, v) / "latest")))
        except FileNotFoundError:
            runs.append((v, {"values": {}, "series": {}}))
            missing.append(v)
    rows = perf_comparison.compare(runs[0][1]["values"], runs[1][1]["values"], limits)
    table = perf_comparison.markdown(rows, from_v, to_v)
    (out / "perf.md").write_text(table)
    chart = perf_chart.render(runs, rows, out / "perf.png")
    return {"reasons": perf_comparison.breaches(rows, from_v, to_v), "table": table,
            "chart": str(chart), "missing": missing,
            "figures": {r.metric.key: {"from": r.before, "to": r.after, "ratio": r.ratio,
                                       "limit": r.limit, "ok": r.ok} for r in rows},
            "notes": {v: run.get("notes", {}) for v, run in runs}}


def diff_folders(chosen: list[Path], examples: bool) -> list[Path]:
    """What the differential phase checks on both releases: each --diff folder, then every
    example that is a check folder (checks.examples), as make check-examples does."""
    return list(chosen) + (check_folders(EXAMPLES) if examples else [])


def diff_phase(folder: Path, args, out: Path) -> tuple[int, Path]:
    """``check FOLDER --karpenter-version FROM --compare-version TO``, its junit and log in
    ``out``, its reports in ``out``/diff/NAME; exit 0 when both sides pass and nothing
    differs beyond what is expected."""
    name = folder.name
    junit = out / f"diff-{name}.xml"
    cmd = [*child("check"), str(folder), "--cluster", args.cluster,
           "--cluster-name", f"{args.cluster_name}-diff", "--karpenter-version", args.from_v,
           "--compare-version", args.to_v, "--reports-dir", str(out / "diff" / name),
           "--junit", str(junit), "--summary", str(out / "diff-summary.md")]
    print("$", " ".join(cmd), flush=True)
    return run_one(Child(f"diff-{name}", cmd, out / f"diff-{name}.log", cwd=ROOT)), junit


def failed_on_from(reports: Path, from_v: str) -> list[str]:
    """What FROM's side of a diff phase failed (its check.json in ``reports``): expect.yaml's
    expectations and the oracles. The phase's JUnit is TO's side and the comparison; check
    exits 1 for a failing FROM too (gate v1.14.0 -> v1.14.3, 2026-12-06: v1.14.0 fails
    capacity-buffer's `nodes: 3`, its virtual pods lacking labels, which v1.14.1 fixed)."""
    for path in sorted(reports.glob("runs/check-*/check.json")):
        r = json.loads(path.read_text())
        if r.get("karpenter_version") == from_v and not r.get("passed"):
            return ([f"{e['expectation']}: {e['seen']}" for e in r.get("expectations") or []
                     if not e.get("ok")]
                    + [f"oracle {f['oracle']}: {f['what']}"
                       for f in (r.get("oracles") or {}).get("findings") or []]) or ["failed"]
    return []


def perf_dir(out: Path, version: str) -> Path:
    return out / f"perf-{version}"


def pytest(args: list[str], log: Path) -> int:
    return pytest_together([(args, log)])[0]


def pytest_together(runs: list[tuple[list[str], Path]]) -> list[int]:
    """Start every pytest run at once and wait for all; their exit codes, in order."""
    children = Children()
    kids = []
    try:
        for args, log in runs:
            cmd = [sys.executable, "-m", "pytest", *args]
            print("$", " ".join(cmd), flush=True)
            kid = children.start(Child(log.stem, cmd, log, cwd=ROOT))
            assert kid is not None  # nothing interrupts this group but the except below
            kids.append(kid)
        return [k.wait() for k in kids]
    except BaseException:  # Ctrl-C, SIGTERM: each pytest takes its cluster down first
        children.interrupt()
        raise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="karpenter-e2e gate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--from", dest="from_v", required=True)
    p.add_argument("--to", dest="to_v", required=True)
    backends.add_options(adder(p.add_argument), only=("cluster", "cluster-name", *EKS_OPTIONS),
                         defaults={"cluster-name": "upgrade-gate"})  # never the suites' cluster
    p.add_argument("--window", type=float, default=60.0, help="seconds nothing may be disrupted")
    p.add_argument("-k", dest="select", default="", help="run only these suites (pytest -k)")
    p.add_argument("--workers", type=int, default=2, help="xdist workers for the suites")
    p.add_argument("--perf-pods", type=int, default=PERF_PODS,
                   help="pods of the scale case run on FROM and on TO for the performance "
                        f"comparison (default {PERF_PODS}; 0 skips it)")
    p.add_argument("--perf-max-ratio", type=float, default=PERF_MAX_RATIO,
                   help="largest TO/FROM allowed for each figure (default "
                        f"{PERF_MAX_RATIO}; README 'Upgrade gate' for the measured noise)")
    p.add_argument("--perf-ratios", default=PERF_RATIOS, metavar="METRIC=RATIO,...",
                   help="per-figure limits over --perf-max-ratio (default "
                        f"{PERF_RATIOS!r}); figures: scale_out_s, nodes, cost_per_hour, "
                        "karpenter_cpu_s, karpenter_peak_rss_mib, consolidation_s")
    p.add_argument("--perf-serial", action="store_true",
                   help="measure FROM, then TO, instead of both at once (see README: at once, "
                        "both see the same load from the rest of the machine)")
    p.add_argument("--diff", action="append", default=[], type=Path, metavar="DIR",
                   help="a folder of manifests (as check takes) to check on FROM and on TO and "
                        "diff what each decided (repeatable; the examples are always diffed, "
                        "unless --no-diff-examples)")
    p.add_argument("--no-diff-examples", action="store_true",
                   help="diff only the --diff folders, not every example")
    p.add_argument("--disrupt", action="store_true",
                   help="self-test: ship a disruptive NodePool change with the upgrade")
    p.add_argument("--out", type=Path, default=REPORTS / "upgrade-gate")
    args = p.parse_args(argv)
    from karpenter_e2e.rendering import perf_comparison
    try:
        missing = [str(d) for d in args.diff if not d.is_dir()]
        if missing:
            raise ClusterError(f"--diff: no such folder: {', '.join(missing)}")
        if args.perf_pods < 0:
            raise ClusterError(f"--perf-pods {args.perf_pods}: a number of pods, or 0 to skip")
        limits = perf_comparison.parse_limits(args.perf_max_ratio, args.perf_ratios)
        if args.cluster == "eks" and (refused := eks_refusals(args)):
            raise ClusterError("on an EKS cluster " + "; ".join(refused))
        check_versions(args.cluster, args.from_v, args.to_v)
        # A team's folder FROM cannot run is a question the gate cannot answer: said now.
        unfit = [f"{d}: {why}" for d in args.diff for why in needs.lacking(d, args.from_v, args.to_v)]
        if unfit:
            raise ClusterError("--diff: a folder uses what a release lacks, so its decisions "
                               "cannot be compared: " + "; ".join(unfit))
    except (ClusterError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    sigterm_as_ctrl_c()
    f = plugin_flag  # the pytest runs' options (the gate's own keep their names)
    fresh = [f("cluster"), args.cluster, "-p", "no:cacheprovider",
             "--alluredir", str(args.out / "allure-results")]
    kube = None
    if args.cluster in ("local", "aws-sim", "kind"):
        # One Kubernetes for every phase: the one FROM runs on, as the team's cluster does.
        # Else the suites on TO would come up on TO's own default minor, a fresh cluster
        # instead of the upgraded one, and the perf phases would compare two minors.
        try:
            kube = kube_releases.default(args.from_v)
            support = compat.supported(args.to_v)
            if compat.minor(kube) not in support:
                raise ClusterError(f"{args.to_v} does not support Kubernetes {kube}, which "
                                   f"{args.from_v} runs on: {support.text}")
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        fresh += [f("kubernetes-version"), kube]
    common = [*fresh, f("cluster-name"), args.cluster_name, f("keep-cluster")]
    if args.cluster == "eks":
        common += eks_args(args)
    backend = backends.create(backends.ClusterOptions.of(args) if args.cluster == "eks" else
                              backends.ClusterOptions(
        cluster=args.cluster, cluster_name=args.cluster_name, karpenter_version=args.to_v,
        kubernetes_version=kube))
    if args.cluster == "eks":
        try:
            print(f"upgrade gate: EKS cluster {args.cluster_name} runs Karpenter "
                  f"{check_installed(backend, args.from_v)}", flush=True)
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    # Each perf phase on a fresh cluster of its own: the run must not start on another's etcd
    # history and warm caches (bring-up is seconds).
    perf_names = {args.from_v: f"{args.cluster_name}-from",
                  args.to_v: f"{args.cluster_name}-to"} if args.perf_pods else {}
    perf_backends = {v: backends.create(backends.ClusterOptions(
        cluster=args.cluster, cluster_name=name, karpenter_version=v, kubernetes_version=kube))
        for v, name in perf_names.items()}
    for b in (backend, *perf_backends.values()):
        b.down()  # fresh clusters: FROM must be what runs when the gate starts
    # Cleared here, not by a phase's --clean-alluredir: the perf phases write at once.
    shutil.rmtree(args.out / "allure-results", ignore_errors=True)
    shutil.rmtree(args.out / "perf-barrier", ignore_errors=True)
    phases: dict[str, tuple[int, Path]] = {}
    not_diffed: dict[str, list[str]] = {}
    fixed: dict[str, list[str]] = {}
    try:
        measures = []
        for v, b in perf_backends.items():
            shutil.rmtree(perf_dir(args.out, v), ignore_errors=True)  # no stale "latest"
            # Up before either run starts (creations take turns); the runs then meet at the
            # barrier (a session may still re-create a cluster it finds unhealthy).
            b.up()
            measures.append(([*fresh, f("cluster-name"), perf_names[v], f("keep-cluster"),
                              "suites/test_scale.py",
                              "-m", "perf_gate", f("perf-pods"), str(args.perf_pods),
                              f("karpenter-version"), v,
                              f("perf-barrier"), str(args.out / "perf-barrier"),
                              f("perf-parties"), "1" if args.perf_serial else "2",
                              f("reports-dir"), str(perf_dir(args.out, v)),
                              "--junitxml", str(args.out / f"perf-{v}.xml")],
                             args.out / f"perf-{v}.log"))
        codes = ([pytest(*m) for m in measures] if args.perf_serial
                 else pytest_together(measures))
        for v, rc in zip(perf_backends, codes, strict=True):
            phases[f"perf on {v}"] = (rc, args.out / f"perf-{v}.xml")
        upgrade = [*common, "suites/test_upgrade.py", f("karpenter-version"), args.from_v,
                   f("upgrade-to"), args.to_v, f("upgrade-window"), str(args.window),
                   "--junitxml", str(args.out / "upgrade.xml")]
        if args.disrupt:
            upgrade.append(f("upgrade-disrupt"))
        phases["upgrade"] = (pytest(upgrade, args.out / "upgrade.log"), args.out / "upgrade.xml")
        # The nightly-only scenarios too: a gate is where their minutes are worth spending.
        suites = [*common, "suites", "-m", "not upgrade_gate and not scale and not perf_gate",
                  f("run-nightly"),
                  f("karpenter-version"), args.to_v, "--junitxml", str(args.out / "suites.xml")]
        if args.select:
            suites += ["-k", args.select]
        if args.workers > 1:
            suites += ["-n", str(args.workers)]
        phases[f"suites on {args.to_v}"] = (pytest(suites, args.out / "suites.log"),
                                            args.out / "suites.xml")
        (args.out / "diff-summary.md").unlink(missing_ok=True)
        for folder in diff_folders(args.diff, not args.no_diff_examples):
            if why := needs.lacking(folder, args.from_v, args.to_v):
                not_diffed[folder.name] = why  # an example showing a newer feature
                continue
            rc, junit = diff_phase(folder, args, args.out)
            # FROM failing what TO passes, nothing suspect: the upgrade fixes it
            if rc == 1 and not failures(junit) and \
                    (failed := failed_on_from(args.out / "diff" / folder.name, args.from_v)):
                fixed[folder.name], rc = failed, 0
            phases[f"diff {folder.name}"] = (rc, junit)
    finally:
        for b in (backend, *perf_backends.values()):
            b.down()
    perf = compare_perf(args.out, args.from_v, args.to_v, limits) if args.perf_pods else None
    v = verdict(phases, args.from_v, args.to_v, perf, not_diffed, fixed)
    (args.out / "verdict.json").write_text(json.dumps(v, indent=1))
    (args.out / "verdict.md").write_text(markdown(v))
    from karpenter_e2e.rendering import allure_files
    allure_files.attach_globally(args.out / "allure-results", "Upgrade gate verdict", markdown(v))
    if perf:
        allure_files.attach_globally(args.out / "allure-results", "Upgrade gate performance",
                                     Path(perf["chart"]).read_bytes(), "image/png", "png")
    red = v["verdict"] != "pass"
    for name in (args.cluster_name, *perf_names.values()):
        said = cluster_dirs.retire(name, args.out / name if red else None, args.cluster)
        if said:
            print(f"upgrade gate: {name}: {said}", flush=True)
    print(markdown(v))
    return 0 if v["verdict"] == "pass" else 1
