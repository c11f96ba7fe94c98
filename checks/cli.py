"""`karpenter-e2e check DIR [--expect FILE] [--scale NAME=N,...] [--scale-in NAME=N,...]`:
what Karpenter does with your own NodePools and workloads, on a fresh local (or aws-sim)
cluster. With `--base REF` (a folder, or a git ref whose copy of DIR is compared), the base
is checked first on the same cluster, then DIR, and the report says what changed, base ->
head, per NodePool and workload; the exit code is the head's. With `--compare-version B`,
DIR (and its base) is checked on --karpenter-version and on B side by side, each on its own
cluster of the same Kubernetes release (their progress lines begin with the release), and
the report diffs what each release decided: every difference expected (a behaviour change
between them, cited) or suspect.

A DIR with a kustomization.yaml is rendered with `kubectl kustomize DIR` (the harness's own
kubectl) and what it renders is checked. ${NAME} and $NAME are filled in, as envsubst does,
from --vars, --var-from-env and --var (later over earlier), after kustomize; CLUSTER_NAME is
the cluster's name. A placeholder left unfilled is warned about, not emptied. expect.yaml's
steps: (apply, settle, scale, patch, wait, expect) run in order once the folder has settled,
each step's outcome and duration in the report; with --base, each side runs its own.
--karpenter-setting and --catalogue go over expect.yaml's karpenter: and catalogue:.

Exit codes:
  0  settled, and every expectation held (with --base: the head's)
  1  an expectation failed, or Karpenter did not settle in time (the report says which); with
     --compare-version: on either release, or the releases decided differently (suspect)
  2  bad input: manifests, expect.yaml or options (named by file and document), a --base
     that is neither a folder nor a git ref; nothing ran, or what had started was taken down
     (or a step's object the API server refused only when the step ran: the report is
     written, the later steps did not run)
  3  the cluster could not be brought up or used (a harness or machine problem), or the
     check itself broke: no verdict on the manifests
  130  interrupted (Ctrl-C); the cluster is taken down

`make check` cannot pass these on: make exits 2 whenever a recipe fails. It prints the
code; a CI job that gates on it calls `karpenter-e2e check` itself.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import sys
import tempfile
from pathlib import Path

from karpenter_e2e.checks import MODES, baseline, diff, manifests, report, sides, variables
from karpenter_e2e.checks.baseline import Base, BaseError
from karpenter_e2e.checks.expectations import ExpectError
from karpenter_e2e.checks.manifests import ManifestError
from karpenter_e2e.checks.run import Check, Plan, load_folder, plan, run_pair
from karpenter_e2e.checks.variables import Variables, VariablesError
from karpenter_e2e.clusters import backends
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.flags import adder

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_CLUSTER, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="karpenter-e2e check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, nargs="?", default=None,
                   help="folder of NodePools, NodeClasses and workloads")
    p.add_argument("--snapshot", type=Path, default=None, metavar="DIR",
                   help="instead of a folder: a snapshot of a live cluster (karpenter-e2e "
                        "snapshot), rebuilt on a fresh cluster, verified, then left to "
                        "Karpenter for --window (docs/replay.md)")
    p.add_argument("--snapshot-out", type=Path, default=None, metavar="DIR",
                   help="write a snapshot of the cluster once the folder settled (what "
                        "--snapshot replays)")
    p.add_argument("--from-scratch", action="store_true",
                   help="with --snapshot: also provision the same pods on an empty cluster "
                        "first (what they would cost from scratch)")
    p.add_argument("--snapshot-window", default=None, metavar="DURATION",
                   help="with --snapshot-out: then leave the cluster alone this long and record "
                        "what Karpenter did (original.json), which a replay is compared with")
    p.add_argument("--window", default="10m", metavar="DURATION",
                   help="with --snapshot: how long Karpenter acts on the replayed state (10m)")
    p.add_argument("--patch", type=Path, default=None, metavar="FILE",
                   help="with --snapshot: a change (YAML merge patches of NodePools, PDBs, "
                        "workloads) applied once the state is rebuilt: what it would do")
    p.add_argument("--expect", type=Path, default=None,
                   help="expectations (default: FOLDER/expect.yaml if there is one)")
    p.add_argument("--scale", default="", metavar="NAME=N,...",
                   help="replicas to set before applying (overrides expect.yaml's scale:)")
    p.add_argument("--scale-in", default="", metavar="NAME=N,...",
                   help="replicas to set once settled, then report what consolidation did")
    p.add_argument("--vars", action="append", default=[], type=Path, metavar="FILE",
                   help="variables for ${NAME}/$NAME: a .yaml/.yml mapping NAME: value, or "
                        "KEY=VALUE lines (.env) for any other name; repeatable, later wins")
    p.add_argument("--var-from-env", action="append", default=[], metavar="NAME,...",
                   help="variables from this environment, by name (never the whole "
                        "environment); repeatable, over --vars")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                   help="one variable (repeatable), over --vars and --var-from-env; one no "
                        "manifest uses is warned about")
    # The cluster options, as the suites and the clusters command declare them. Check's own
    # defaults: a cluster name of its own (never the suites' cluster); None for the version
    # (the mode's pinned release, the AWS provider's in aws-sim) and for the catalogue
    # (expect.yaml's catalogue:, else curated), decided once the mode and the plan are known.
    backends.add_options(adder(p.add_argument), modes=MODES, only=(
        "cluster", "cluster-name", "karpenter-version", "kubernetes-version", "catalogue",
        "karpenter-setting", "karpenter-patch"), defaults={"cluster-name": "karpenter-check",
                                        "karpenter-version": None, "catalogue": None})
    p.add_argument("--compare-version", default=None, metavar="VERSION",
                   help="also check DIR on this Karpenter release, at the same time (a "
                        "second cluster, NAME-b, the same Kubernetes release and catalogue; "
                        "--kubernetes-version must then be inside both releases' ranges) and "
                        "diff what the two decided (docs/differential.md); a suspect "
                        "difference fails the check")
    p.add_argument("--floor-of", type=Path, default=None, metavar="REPORTS",
                   help="with --compare-version: the reports of an earlier comparison of DIR "
                        "(a noise floor, explore's); compare.json's varies lists the fields on "
                        "which two runs of one release differ, among both comparisons' runs")
    p.add_argument("--keep-cluster", action="store_true",
                   help="reuse a running cluster of that name and leave it up (emptied of the "
                        "check's objects) at the end")
    p.add_argument("--reports-dir", type=Path, default=Path("reports"),
                   help="the check's files go to DIR/runs/check-<id>/ (default: reports)")
    p.add_argument("--base", default=None, metavar="REF",
                   help="compare with a base: a folder, or a git ref (origin/main) whose copy of "
                        "FOLDER is checked first on the same cluster; reports base -> head")
    p.add_argument("--junit", type=Path, default=None, metavar="FILE",
                   help="write JUnit XML: a testcase for settling and one per expectation "
                        "(the head's)")
    p.add_argument("--summary", type=Path, default=None, metavar="FILE",
                   help="append the Markdown summary (with --base, the comparison) to FILE, "
                        "e.g. $GITHUB_STEP_SUMMARY")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for name in ("kubernetes", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if args.snapshot is not None or args.folder is None:
        return _replay(args)
    if args.patch is not None:
        return _bad_input(args, "--patch changes a replayed snapshot: it needs --snapshot DIR "
                                "(a folder's changes are steps: docs/check.md)")
    if args.floor_of is not None and (not args.compare_version or not any(
            args.floor_of.glob("runs/check-*/compare.json"))):
        return _bad_input(args, f"--floor-of {args.floor_of}: needs --compare-version and the "
                                "reports of an earlier --compare-version check (a "
                                "runs/check-*/compare.json in it)")
    if args.snapshot_window is not None:
        try:
            if args.snapshot_out is None or not _snapshot_window(args):
                raise ValueError("--snapshot-window needs --snapshot-out DIR and a duration "
                                 "like 90s or 3m")
        except ValueError as exc:
            return _bad_input(args, str(exc))
    base: Base | None = None
    try:
        base = baseline.resolve(args.base, args.folder) if args.base else None
    except BaseError as exc:
        return _bad_input(args, str(exc))
    try:  # the base's temporary copy goes, whatever happens (Ctrl-C too)
        return _main(args, base)
    finally:
        if base is not None:
            base.cleanup()


def _bad_input(args, message: str) -> int:
    print(f"check: bad input, nothing started:\n{message}", file=sys.stderr)
    _write_junit_error(args, f"bad input: {message}")
    return EXIT_BAD_INPUT


def _write_junit_error(args, message: str) -> None:
    """No verdict (exit 2 or 3): --junit's file gets one testcase in error, --summary's the
    reason, so a CI job's test report and summary say why."""
    if args.junit:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        args.junit.write_text(report.junit_error(str(args.folder), message))
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        with open(args.summary, "a") as fh:
            fh.write(f"### Karpenter check: `{args.folder}`\n\n**No verdict**, {message}\n\n")


def _main(args, base: Base | None) -> int:
    try:
        given = variables.load(args.vars, args.var, args.var_from_env)
        the_plan = plan(args.folder, args.expect, args.scale, args.scale_in, args.cluster_name,
                        given)
    except (ManifestError, ExpectError, VariablesError) as exc:
        return _bad_input(args, str(exc))
    except ClusterError as exc:  # the kubectl that renders a kustomization could not be built
        return _cluster_error(args, exc)
    try:
        settings = [f"{k}={v}" for k, v in the_plan.expect.karpenter.items()]
        opts = argparse.Namespace(**{**vars(args), "karpenter_version": args.karpenter_version
                                     or _default_version(args.cluster),
                                     "karpenter_setting": settings + args.karpenter_setting,
                                     "catalogue": args.catalogue or the_plan.expect.catalogue
                                     or "curated"})
        backend = backends.create(backends.ClusterOptions.of(opts))
        backend.check_options()  # a setting the release does not read is bad input
    except ClusterError as exc:
        return _bad_input(args, str(exc))
    other = None
    if args.compare_version:
        try:
            other = _compared_backend(opts, backend, args.compare_version)
        except ClusterError as exc:
            return _bad_input(args, str(exc))
    _announce(the_plan.bundle, given)
    base_plan, base_note = _base_plan(base, args, given) if base is not None else (None, "")
    kept = "emptied" if args.keep_cluster else "taken down"
    first = None
    try:
        if other is not None:  # both releases at once; the first side's outputs as usual
            first, (pair, result) = _side_by_side(args, base, base_plan, base_note, the_plan,
                                                  (backend, other))
        else:
            pair, result = _side(args, base, base_plan, base_note, the_plan, backend)
    except (ManifestError, ExpectError) as exc:
        print(f"check: the API server rejected the manifests; the cluster was {kept}:\n{exc}",
              file=sys.stderr)
        _write_junit_error(args, f"bad input: {exc}")
        return EXIT_BAD_INPUT
    except ClusterError as exc:
        return _cluster_error(args, exc)
    except KeyboardInterrupt:
        print("check: interrupted; cluster taken down", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - Python's own exit 1 would read "expectation failed"
        logging.getLogger("karpenter_e2e.check").exception("check broke")
        print(f"check: no verdict, the check itself failed ({type(exc).__name__}: {exc}); "
              f"the cluster was {kept}", file=sys.stderr)
        _write_junit_error(args, f"no verdict: {type(exc).__name__}: {exc}")
        return EXIT_CLUSTER
    try:
        if first is not None:
            report.write_comparison(first[1], result, "What the two releases decided",
                                    floor_of=args.floor_of)
        _outputs(args, base, pair, result)
    except Exception as exc:  # noqa: BLE001 - as above: exit 1 would read "expectation failed"
        logging.getLogger("karpenter_e2e.check").exception("writing the outputs broke")
        print(f"check: the check ran ({'PASSED' if result['passed'] else 'FAILED'}) but its "
              f"outputs could not be written ({type(exc).__name__}: {exc})", file=sys.stderr)
        return EXIT_CLUSTER
    if result.get("rejected"):  # a step's object the API server refused when it ran
        print(f"check: bad input: the API server rejected a step; the later steps did not run "
              f"and the cluster was {kept}:\n{result['rejected']}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if first is not None:
        return EXIT_PASSED if result["passed"] and first[1]["passed"] \
            and not result["compare"]["suspect"] else EXIT_FAILED
    return EXIT_PASSED if result["passed"] else EXIT_FAILED


def _replay(args) -> int:
    """check --snapshot DIR: the snapshot rebuilt, verified and left to Karpenter."""
    from karpenter_e2e.checks import change, replay, snapshot
    from karpenter_e2e.clusters.karpenter.clock import go_duration
    if args.folder is not None or args.snapshot is None:
        return _bad_input(args, "give one of: a folder of manifests, or --snapshot DIR")
    if not (args.snapshot / "snapshot.yaml").is_file():
        return _bad_input(args, f"--snapshot {args.snapshot}: no snapshot.yaml there")
    edits = None
    try:
        if args.patch is not None:
            edits = change.load(args.patch, snapshot.load(args.snapshot)[1])
        window = go_duration(args.window)
        if not window:
            raise ValueError(f"--window {args.window}: a duration like 90s or 10m")
        opts = argparse.Namespace(**{**vars(args), "karpenter_version": args.karpenter_version
                                     or _default_version(args.cluster),
                                     # the snapshot's nodes are of any EC2 type
                                     "catalogue": args.catalogue or "full"})
        backend = backends.create(backends.ClusterOptions.of(opts))
        backend.check_options()
        other = _compared_backend(opts, backend, args.compare_version) \
            if args.compare_version else None
    except (ClusterError, ValueError) as exc:  # a ChangeError is a ValueError
        return _bad_input(args, str(exc))
    try:
        return replay.run(args.snapshot, backend, args.reports_dir, window, args.keep_cluster,
                          edits, other, args.from_scratch)
    except KeyboardInterrupt:
        print("check: interrupted; cluster taken down", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ClusterError as exc:
        return _cluster_error(args, exc)
    except Exception as exc:  # noqa: BLE001 - exit 1 would read "not reproduced"
        logging.getLogger("karpenter_e2e.check").exception("replay broke")
        print(f"check: no verdict, the replay itself failed ({type(exc).__name__}: {exc}); the "
              f"cluster was taken down", file=sys.stderr)
        return EXIT_CLUSTER


def _snapshot_window(args) -> float:
    from karpenter_e2e.clusters.karpenter.clock import go_duration
    return (go_duration(args.snapshot_window) or 0.0) if args.snapshot_window else 0.0


def _side(args, base: Base | None, base_plan: Plan | None, base_note: str, the_plan: Plan,
          backend, snapshot_out: Path | None = None) -> tuple:
    """One release's check: (the --base pair or None, the head's result). ``snapshot_out``:
    where its snapshot goes, if not --snapshot-out's DIR."""
    if base is not None:
        pair = run_pair(base_plan, the_plan, backend, args.reports_dir,
                        keep_cluster=args.keep_cluster, base_note=base_note)
        return pair, pair.head
    return None, Check(the_plan, backend, args.reports_dir, keep_cluster=args.keep_cluster,
                       snapshot_out=snapshot_out or args.snapshot_out,
                       snapshot_window=_snapshot_window(args)).run()


def _side_by_side(args, base: Base | None, base_plan: Plan | None, base_note: str,
                  the_plan: Plan, pair_of: tuple) -> tuple[tuple, tuple]:
    """check --compare-version: the two releases' checks at once, each on its own cluster
    (checks.sides); returns (the --karpenter-version side's, the other's) as ``_side`` does,
    once the first side's outputs are printed (and with --base written), as when the sides
    ran one after the other. An error is the one that was raised then: the first side's if it
    failed (the second is stopped), else the second's, after the first's outputs."""
    with contextlib.ExitStack() as stack:
        # The first side's snapshot (--snapshot-out): the second side's overwrote it when
        # they ran one after the other, so it goes to a directory of its own, thrown away;
        # the first side still takes it and leaves its cluster alone for the window.
        first_snapshot = Path(stack.enter_context(tempfile.TemporaryDirectory(
            prefix="check-snapshot-"))) if args.snapshot_out is not None else None
        first, second = sides.both([
            (label, backend, functools.partial(_side, args, base, base_plan, base_note,
                                               the_plan, backend, snapshot))
            for label, backend, snapshot in zip(sides.labels(pair_of), pair_of,
                                                (first_snapshot, None), strict=True)],
            keep=args.keep_cluster)
    if first.error is not None:
        raise first.error
    assert first.result is not None
    _outputs(args, base, first.result[0], first.result[1], summary_file=False)
    if second.error is not None:
        raise second.error
    assert second.result is not None
    return first.result, second.result


def _compared_backend(opts: argparse.Namespace, backend, version: str):
    """The --compare-version side: its own cluster, on the first side's Kubernetes release
    (a difference must be the releases', not the control plane's) and catalogue. The same
    release on both sides is allowed: it measures what differs between two runs of one."""
    kube = getattr(backend, "kubernetes_version", None)
    other = backends.create(backends.ClusterOptions.of(argparse.Namespace(**{
        **vars(opts), "karpenter_version": version, "cluster_name": f"{opts.cluster_name}-b",
        "kubernetes_version": kube, "karpenter_patch": None})))  # a mutant: the first side's
    other.check_options()
    return other


def _cluster_error(args, exc: ClusterError) -> int:
    print(f"check: cluster error: {exc}", file=sys.stderr)
    _write_junit_error(args, f"cluster error: {exc}")
    return EXIT_CLUSTER


def _announce(bundle: manifests.Bundle, given: Variables) -> None:
    """What was rendered, and the warnings: placeholders unfilled, variables unused."""
    if bundle.kustomization is not None:
        print(f"check: {bundle.folder} is a kustomization: checking the {len(bundle.manifests)} "
              f"documents `kubectl kustomize` renders from {bundle.kustomization.name} (a file "
              "it does not list is not applied)", file=sys.stderr)
    for warning in given.warnings + bundle.warnings:
        print(f"check: warning: {warning}", file=sys.stderr)


def _outputs(args, base: Base | None, pair, result: dict, summary_file: bool = True) -> None:
    """Print the tables (and the comparisons), write --junit's and --summary's files."""
    summary = report.tables(result)
    print(summary)
    if base is not None:
        summary = _write_diff(pair, base, result)
        print(summary)
    if "compare" in result:
        text = Path(result["files"]["compare_markdown"]).read_text()
        print(text)
        summary += "\n" + text
    if not summary_file:
        return
    if args.junit:
        args.junit.parent.mkdir(parents=True, exist_ok=True)
        args.junit.write_text(report.junit(result))
        result["files"]["junit"] = str(args.junit)
    if args.summary:
        args.summary.parent.mkdir(parents=True, exist_ok=True)
        with open(args.summary, "a") as fh:
            fh.write(summary + "\n")
    if base is not None or args.junit:  # check.json lists the files written after it
        report.write(result, Path(result["files"]["json"]).parent)
    print(f"files: {', '.join(f'{k} {v}' for k, v in result['files'].items())}")


def _base_plan(base: Base, args, given: Variables | None = None) -> tuple[Plan | None, str]:
    """The base's plan, or None and why there is nothing of it to check. The base uses its
    own expect.yaml (unless --expect names one for both); --scale and --scale-in apply to
    the workloads the base has; the variables are the head's, so that only the manifests
    differ."""
    if base.folder is None:
        return None, (f"`{args.folder}` does not exist at {base.described}: everything on the "
                      "head is added")
    given = given.for_base(args.folder, base.folder) if given else None
    try:
        bundle = load_folder(base.folder, args.expect, args.cluster_name, given)[0]
        scale, dropped = _known(bundle, args.scale)
        scale_in, dropped_in = _known(bundle, args.scale_in)
        p = plan(base.folder, args.expect, scale, scale_in, args.cluster_name, given)
    except (ManifestError, ExpectError, ClusterError) as exc:
        print(f"check: warning: the base cannot be checked: {exc}", file=sys.stderr)
        return None, f"its manifests are not valid, so its side is empty: {exc}"
    note = ""
    if dropped or dropped_in:
        note = ("not scaled on the base, which has no such workload: "
                + ", ".join(sorted(set(dropped + dropped_in))))
    return p, note


def _known(bundle: manifests.Bundle, spec: str) -> tuple[str, list[str]]:
    """``--scale``'s items for the workloads ``bundle`` has, and the names it lacks."""
    keep, dropped = [], []
    for ref, n in manifests.parse_scale(spec).items():
        try:
            bundle.workload(ref)
            keep.append(f"{ref}={n}")
        except ManifestError:
            dropped.append(ref)
    return ",".join(keep), dropped


def _write_diff(pair, base: Base, head: dict) -> str:
    """diff.md and diff.json beside the head's check.md; returns the Markdown."""
    s = diff.summary(pair.base, head, base.described, pair.base_note, pair.timings)
    s["base_files"] = pair.base["files"] if pair.base else None
    out = Path(head["files"]["json"]).parent
    text = diff.markdown(s)
    (out / "diff.md").write_text(text)
    (out / "diff.json").write_text(json.dumps(s, indent=1, default=str))
    head["files"].update({"diff_markdown": str(out / "diff.md"),
                          "diff_json": str(out / "diff.json")})
    return text


def _default_version(mode: str) -> str:
    from karpenter_e2e.clusters.infra import versions
    return versions.AWS_PROVIDER if mode == "aws-sim" else versions.KARPENTER
