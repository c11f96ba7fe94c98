"""`check` on bad input: every mistake named by file (and document), before any cluster
starts, exit 2, nothing left behind. And expect.yaml judged on recorded snapshots."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from karpenter_e2e.checks import expectations, manifests, observe
from karpenter_e2e.checks.examples import check_folders
from karpenter_e2e.checks.expectations import ExpectError
from karpenter_e2e.checks.manifests import Manifest, ManifestError
from karpenter_e2e.checks.observe import NodeView, NotCreated, PodView, PoolView, Snapshot
from karpenter_e2e.checks.run import plan

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FINDINGS = EXAMPLES / "findings"  # explore's shrunk cases: a check folder each


def check_examples():
    return check_folders() + check_folders(FINDINGS)


def test_every_example_is_a_check_folder_a_pytest_project_or_a_folder_of_check_folders():
    """check-examples and the gate run the folders with an expect.yaml: an example added
    without one must be one of the other two kinds, not skipped by mistake."""
    for d in (p for p in EXAMPLES.iterdir() if p.is_dir() and p not in check_folders()):
        subs = [s for s in d.iterdir() if s.is_dir()]
        assert (d / "pytest.ini").is_file() or (subs and all(
            s in check_folders(d) for s in subs)), f"{d}: no expect.yaml"
    make = (REPO / "Makefile").read_text()
    assert "for f in examples/*/expect.yaml" in make  # check-examples: the same rule

POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""
NODECLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec: {role: r, amiSelectorTerms: [{alias: al2023@latest}]}
"""
DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause}]}
"""


def folder(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def good(tmp_path: Path, ns: str = "default") -> dict[str, str]:
    return {"pool.yaml": POOL + "---\n" + NODECLASS, "app.yaml": DEPLOY.replace("NS", ns)}


def test_every_example_loads_and_plans():
    for example in check_examples():
        p = plan(example, None, "", "", "test")
        scheduled = p.bundle.workloads or p.bundle.of_kind("CapacityBuffer")
        assert p.bundle.nodepools and scheduled and p.expect.expect, example


def test_a_folder_without_workload_or_buffer_has_nothing_to_schedule(tmp_path):
    d = folder(tmp_path, **{"pool.yaml": POOL})
    with pytest.raises(ManifestError, match="no workload .* and no CapacityBuffer"):
        plan(d, None, "", "", "test")


def test_invalid_yaml_names_the_file_and_line(tmp_path):
    d = folder(tmp_path, **good(tmp_path), **{"broken.yaml": "kind: Deployment\n  bad: [\n"})
    with pytest.raises(ManifestError, match=r"broken.yaml: line \d+, column \d+: invalid YAML"):
        manifests.load(d)


def test_unknown_kind_names_the_document(tmp_path):
    d = folder(tmp_path, **good(tmp_path),
               **{"x.yaml": "---\n# first\n---\napiVersion: v1\nkind: Gizmo\n"
                            "metadata: {name: g}\n"})
    with pytest.raises(ManifestError, match=r"x.yaml \(document 1\): unknown kind 'Gizmo'"):
        manifests.load(d)


def test_a_provisioner_says_what_replaced_it(tmp_path):
    old = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n"
    d = folder(tmp_path, **good(tmp_path), **{"old.yaml": old})
    with pytest.raises(ManifestError, match=r"old.yaml \(document 0\): Provisioner .* replaced "
                                            r"by NodePool"):
        manifests.load(d)


def test_nodepool_without_its_nodeclass(tmp_path):
    d = folder(tmp_path, **{"pool.yaml": POOL, "app.yaml": DEPLOY.replace("NS", "default")})
    with pytest.raises(ManifestError, match=r"pool.yaml \(document 0\): NodePool default refers "
                                            r"to EC2NodeClass 'default', which no file"):
        manifests.load(d)
    no_ref = POOL.replace("      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, "
                          "name: default}\n", "")
    (tmp_path / "pool.yaml").write_text(no_ref + "---\n" + NODECLASS)
    with pytest.raises(ManifestError, match=r"NodePool default has no spec.template.spec"
                                            r".nodeClassRef"):
        manifests.load(d)


def test_workload_in_a_namespace_nobody_creates(tmp_path):
    d = folder(tmp_path, **good(tmp_path, ns="team-a"))
    with pytest.raises(ManifestError, match=r"app.yaml \(document 0\): Deployment web is in "
                                            r"namespace 'team-a', which no file"):
        manifests.load(d)


def test_several_mistakes_are_listed_together(tmp_path):
    d = folder(tmp_path, **{"pool.yaml": POOL, "app.yaml": DEPLOY.replace("NS", "team-a")})
    with pytest.raises(ManifestError) as err:
        manifests.load(d)
    assert "refers to EC2NodeClass" in str(err.value) and "namespace 'team-a'" in str(err.value)


def test_scale_of_an_unknown_workload(tmp_path):
    d = folder(tmp_path, **good(tmp_path))
    with pytest.raises(ManifestError, match=r"no workload called 'api'"):
        plan(d, None, "api=3", "", "x")
    with pytest.raises(ManifestError, match=r"expected NAME=REPLICAS"):
        plan(d, None, "web=three", "", "x")


def test_ec2nodeclass_maps_to_the_modes_nodeclass(tmp_path):
    bundle = manifests.load(folder(tmp_path, **good(tmp_path)))
    out = manifests.for_mode(bundle, ("karpenter.kwok.sh", "v1alpha1", "KWOKNodeClass"))
    kinds = {m.kind: m.body for m in out}
    assert kinds["KWOKNodeClass"] == {"apiVersion": "karpenter.kwok.sh/v1alpha1",
                                      "kind": "KWOKNodeClass",
                                      "metadata": {"name": "default", "labels": {}}}
    ref = kinds["NodePool"]["spec"]["template"]["spec"]["nodeClassRef"]
    assert ref == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
    assert bundle.nodepools[0].body["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == \
        "EC2NodeClass"  # the folder's objects are untouched
    same = manifests.for_mode(bundle, ("karpenter.k8s.aws", "v1", "EC2NodeClass"))
    assert [m.body for m in same] == [m.body for m in bundle.ordered()]


@pytest.mark.parametrize("text,message", [
    ("expect: [{pending: 0, nodes: 1}]", r"expect\[0\]: expected exactly one of"),
    ("expect: [{pods: app=web, on: {a: b}}]", r"expected only_on"),
    ("expect: [{spot_share: {least: 1}}]", r"spot_share: expected a number or"),
    ("after_scale_in: [{nodes: 0}]", r"after_scale_in needs scale_in"),
    ("expect: {pending: 0}", r"expect: expected a list"),
    ("scale: {web: many}", r"scale: expected workload: replicas"),
    ("expectations: []", r"unknown top-level key"),
    ("karpenter: [MIN_VALUES_POLICY]", r"karpenter: expected KEY: VALUE settings"),
    ("expect: [{zones: {skew: 1}}]", r"zones: expected a number of zones or"),
    ("expect: [{zones: {min: 1.5}}]", r"zones: min must be a whole number"),
    ("expect: [\n  - pending: [", r"invalid YAML"),
])
def test_bad_expect_file(tmp_path, text, message):
    path = tmp_path / "expect.yaml"
    path.write_text(text)
    with pytest.raises(ExpectError, match=message):
        expectations.load(path)


def test_bad_input_exits_2_before_anything_starts(tmp_path):
    """The real command: exit 2 with the file named, in about a second, and no run directory
    and no process of the cluster it would have started."""
    name = f"check-badinput-{int(time.time())}"
    d = folder(tmp_path, **{"pool.yaml": POOL, "app.yaml": DEPLOY.replace("NS", "default")})
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "karpenter_e2e", "check", str(d),
                           "--cluster-name", name, "--reports-dir", str(tmp_path / "reports")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "bad input, nothing started" in proc.stderr and "pool.yaml (document 0)" in proc.stderr
    from karpenter_e2e.clusters.infra import cluster_files, process
    run_dir = cluster_files.directory(name)
    assert not run_dir.exists()
    assert not process.pids_using(str(run_dir))
    assert not (tmp_path / "reports").exists()
    assert time.monotonic() - started < 60


def test_karpenter_settings_come_from_expect_yaml(tmp_path):
    path = tmp_path / "expect.yaml"
    path.write_text("karpenter: {MIN_VALUES_POLICY: BestEffort, CapacityBuffer: true}\n")
    assert expectations.load(path).karpenter == {"MIN_VALUES_POLICY": "BestEffort",
                                                 "CapacityBuffer": "true"}


def test_a_setting_the_release_does_not_read_is_bad_input_before_anything_starts(tmp_path):
    name = f"check-badsetting-{int(time.time())}"
    proc = subprocess.run([sys.executable, "-m", "karpenter_e2e", "check",
                           "examples/workshop-basic", "--cluster-name", name,
                           "--karpenter-setting", "MIN_VALUE_POLICY=x",
                           "--reports-dir", str(tmp_path / "reports")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "MIN_VALUE_POLICY: Karpenter v1.15.0 has no such option or feature gate; it reads" \
        in proc.stderr and "MIN_VALUES_POLICY" in proc.stderr
    from karpenter_e2e.clusters.infra import cluster_files
    assert not cluster_files.directory(name).exists()


# ---- expectations judged on snapshots ---------------------------------------------------------
def snap(pods, nodes, diagnoses=None) -> Snapshot:
    return Snapshot(0.0, pods, nodes, [PoolView("gpu"), PoolView("default")], 0, 0,
                    diagnoses or {})


def node(name, pool, ct="on-demand", itype="c6i.large", price=0.1, **labels) -> NodeView:
    return NodeView(name, pool, itype, ct, "us-west-2a", price,
                    {"karpenter.sh/capacity-type": ct, "karpenter.sh/nodepool": pool,
                     "karpenter.k8s.aws/instance-category": itype[0], **labels})


def pod(name, node_name="", workload="Deployment/ml/web", phase="Running", **requests):
    return PodView("ml", name, workload, phase, node_name, requests,
                   {"app": workload.rsplit("/", 1)[1]})


def judge(text: str, s: Snapshot) -> list[expectations.Result]:
    items = __import__("yaml").safe_load(text)
    return [expectations.parse_item(Path("e.yaml"), "expect", i, item).evaluate(s)
            for i, item in enumerate(items)]


def test_gpu_pods_alone_on_gpu_nodes():
    gpu = node("n1", "gpu", itype="g5.xlarge",
               **{"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia"})
    rule = "- pods: {requests: nvidia.com/gpu}\n  only_on: " \
           "{karpenter.k8s.aws/instance-gpu-manufacturer: nvidia}\n  alone: true\n"
    ok = snap([pod("g", "n1", "Deployment/ml/gpu", **{"nvidia.com/gpu": "1"}),
               pod("w", "n2")], [gpu, node("n2", "default")])
    assert judge(rule, ok)[0].ok
    crowded = snap(ok.pods + [pod("w2", "n1")], ok.nodes)
    r = judge(rule, crowded)[0]
    assert not r.ok and "other pods there: w2 (Deployment/ml/web) on n1" in r.seen
    none = snap([pod("w", "n2")], [node("n2", "default")])
    assert judge(rule, none)[0].seen.startswith("no pod matches (nothing to judge")


def test_pods_only_on_spot_names_the_pod_elsewhere():
    s = snap([pod("t1", "a", "Job/ml/trainer"), pod("t2", "b", "Job/ml/trainer")],
             [node("a", "default", "spot"), node("b", "default", "on-demand")])
    r = judge("- pods: app=trainer\n  only_on: {karpenter.sh/capacity-type: spot}\n", s)[0]
    assert not r.ok and "t2 on b (karpenter.sh/capacity-type=on-demand)" in r.seen


def test_pending_share_categories_cost_and_nodes():
    s = snap([pod("a", "n1"), pod("b", phase="Pending")],
             [node("n1", "default", "spot", price=0.2), node("n2", "default", "spot", price=0.3),
              node("n3", "default", itype="t3.large", price=0.5)],
             {"Deployment/ml/web": "NodePool limit reached: ..."})
    results = judge("""
- pending: 0
- spot_share: {nodepool: default, min: 0.8}
- instance_categories: [c, m, r]
- cost_per_hour: {max: 1.0}
- nodes: {nodepool: gpu, max: 0}
""", s)
    assert [r.ok for r in results] == [False, False, False, True, True]
    assert "Deployment/ml/web ×1 (NodePool limit reached" in results[0].seen
    assert results[1].seen.startswith("0.67: 2 of 3 nodes on spot")
    assert results[2].seen == "outside: t3.large (t)"
    assert results[3].seen.startswith("$1.0000/h")


def test_cost_unknown_when_a_node_has_no_price():
    s = snap([], [node("n1", "default", price=None)])
    r = judge("- cost_per_hour: {max: 10}\n", s)[0]
    assert not r.ok and "no price" in r.seen


def test_examples_folder_has_no_stray_files():
    """Every example is manifests plus expect.yaml (and an optional README); a kustomize
    example's base is in a sub-folder."""
    for example in check_examples():
        assert (example / "expect.yaml").is_file(), example
        stray = [str(f.relative_to(example)) for f in example.rglob("*")
                 if f.is_file() and f.suffix not in (".yaml", ".yml", ".md")]
        assert not stray, (example, stray)
        for f in example.rglob("*.yaml"):  # valid YAML before ${CLUSTER_NAME} is substituted
            list(__import__("yaml").safe_load_all(f.read_text()))


# Karpenter's event for an A10G pod (tolerating nvidia.com/gpu) when the GPU pool excludes g5,
# with two other tainted pools, as captured from a local run of v1.15.0.
MULTI_POOL = ("gpu-inference-86b8d779f8-pgvxr FailedScheduling (karpenter): Failed to schedule "
              "pod, did not tolerate taint (taint=workload=training:NoSchedule); no instance "
              "type had enough resources or had a required offering, requirements="
              "karpenter.k8s.aws/instance-family In [g4dn]; did not tolerate taint "
              "(taint=workload=api:NoSchedule)")


def test_the_clause_of_the_pool_the_pod_was_meant_for():
    from karpenter_e2e.checks.observe import _closest_clause
    from karpenter_e2e.fixtures.diagnosis import Evidence, verdict
    asks = {"karpenter.k8s.aws/instance-gpu-name", "cpu", "memory", "nvidia.com/gpu"}
    assert verdict(Evidence(messages=[_closest_clause(MULTI_POOL, asks)])).startswith(
        "no instance type fits")
    # a pod selecting `workload` that does not tolerate that pool's taint: the taint explains it
    assert verdict(Evidence(messages=[_closest_clause(MULTI_POOL, {"workload"})])).startswith(
        "untolerated taint: gpu-inference-86b8d779f8-pgvxr FailedScheduling (karpenter): "
        "Failed to schedule pod, did not tolerate taint (taint=workload=")
    gpu_taint = MULTI_POOL.replace("workload=training", "nvidia.com/gpu=true")
    assert "nvidia.com/gpu=true" in _closest_clause(gpu_taint, asks)


def test_a_vacuous_limit_clause_does_not_hide_the_missing_type():
    """Captured: the GPU pool without g5 and, for the same pod, a limit clause about the
    api pool, whose types the pod's A10G requirement filtered out."""
    from karpenter_e2e.checks.observe import _closest_clause
    message = MULTI_POOL.replace("did not tolerate taint (taint=workload=api:NoSchedule)",
                                 "all available instance types exceed limits for nodepool "
                                 "(NodePool=api)")
    clause = _closest_clause(message, {"nvidia.com/gpu", "karpenter.k8s.aws/instance-gpu-name"})
    assert "no instance type had enough resources" in clause and "NodePool=api" not in clause


def test_placeholders_left_in_are_named_by_file_and_line(tmp_path):
    (tmp_path / "pool.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: p\n"
        "spec:\n  template:\n    metadata:\n      labels:\n        team: <<TEAM>>\n"
        "        env: ${ENVIRONMENT}  # ${IN_A_COMMENT} is not one\n"
        "        cluster: ${CLUSTER_NAME}\n"
        "    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, "
        "name: d}\n      requirements: []\n")
    (tmp_path / "w.yaml").write_text(EXAMPLE_POD + "---\n" + EXAMPLE_POOL.split("---\n")[1])
    warnings = manifests.load(tmp_path, "c1").warnings
    assert warnings == [f"{tmp_path / 'pool.yaml'}:9: placeholder <<TEAM>> was never filled in",
                        f"{tmp_path / 'pool.yaml'}:10: placeholder ${{ENVIRONMENT}} was never "
                        f"filled in"], warnings


# ---- what the checks must not pass vacuously ---------------------------------------------------
def test_only_on_counts_pending_matching_pods_as_not_on_the_pool():
    s = snap([pod(f"w{i}", "n1") for i in range(4)] + [pod("w4", phase="Pending")],
             [node("n1", "default")], {"Deployment/ml/web": "no NodePool matches the pod: ..."})
    r = judge("- pods: app=web\n  only_on: {karpenter.sh/nodepool: default}\n", s)[0]
    assert not r.ok
    assert "4 of 5 matching pods" in r.seen and "w4 on no node (Pending)" in r.seen
    assert "no NodePool matches the pod" in r.seen


@pytest.mark.parametrize("rule", [
    "- nodes: {max: 3}", "- instance_categories: [c, m, r]", "- instance_families: [c6i]",
    "- cost_per_hour: {max: 2}", "- spot_share: {min: 0.5}", "- pending: 0",
    "- pods: app=api\n  only_on: {karpenter.sh/nodepool: default}",
])
def test_nothing_to_judge_fails_unless_allowed(rule):
    empty = snap([pod("w", phase="Pending")] if "pending" not in rule else [], [])
    r = judge(rule + "\n", empty)[0]
    assert not r.ok and "nothing to judge" in r.seen, r
    allowed = judge(rule + "\n  allow_empty: true\n", empty)[0]
    assert allowed.ok, allowed
    assert "(or nothing to judge)" in allowed.expectation


def test_allow_empty_inside_the_bounds_and_max_zero_needs_none():
    empty = snap([], [])
    assert judge("- nodes: {max: 3, allow_empty: true}\n", empty)[0].ok
    assert judge("- nodes: {max: 0}\n", empty)[0].ok  # none is the point
    assert judge("- cost_per_hour: {max: 0}\n", empty)[0].ok
    assert not judge("- nodes: {min: 1}\n", empty)[0].ok
    with pytest.raises(ExpectError, match="allow_empty: expected true or false"):
        judge("- nodes: {max: 3}\n  allow_empty: yes please\n", empty)
    with pytest.raises(ExpectError, match=r"unknown key\(s\) alowed"):
        judge("- nodes: {max: 3}\n  alowed: true\n", empty)


def test_without_expect_items_every_workloads_pods_must_run(tmp_path):
    default = expectations.load(None)
    assert default.default and [e.kind for e in default.expect] == ["running"]
    (tmp_path / "expect.yaml").write_text("scale: {web: 2}\n")
    only_scale = expectations.load(tmp_path / "expect.yaml")
    assert only_scale.default and only_scale.scale == {"web": 2}
    running = default.expect[0]
    s = snap([pod("a", "n1"), pod("j", "n1", "Job/ml/batch", phase="Succeeded"),
              pod("b", phase="Pending")], [node("n1", "default")],
             {"Deployment/ml/web": "no NodePool matches the pod: incompatible requirements"})
    r = running.evaluate(s)
    assert not r.ok and r.seen.startswith("2 of 3 pods running; Pending: Deployment/ml/web ×1 "
                                          "(no NodePool matches the pod")
    assert running.evaluate(snap(s.pods[:2], s.nodes)).ok
    assert not running.evaluate(snap([], [])).ok


def test_a_nested_kustomization_is_skipped_with_a_warning_and_hides_no_error(tmp_path):
    """One in a sub-folder: the folder checked is not a kustomization (one at its top is
    rendered, tests/test_check_vars_kustomize.py)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n")
    (tmp_path / "a.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n"
        "    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, "
        "name: missing}\n      requirements: []\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {namespace: web}\nspec: {}\n")
    with pytest.raises(ManifestError) as err:
        manifests.load(tmp_path)
    text = str(err.value)
    assert "Kustomization" not in text, text
    # both errors at once: the nameless Deployment and the NodePool's missing NodeClass
    assert f"{tmp_path / 'a.yaml'} (document 1): Deployment has no metadata.name" in text
    assert "refers to EC2NodeClass 'missing', which no file" in text
    (tmp_path / "a.yaml").write_text(EXAMPLE_POOL)
    (tmp_path / "w.yaml").write_text(EXAMPLE_POD)
    bundle = manifests.load(tmp_path)
    assert [w for w in bundle.warnings if "kustomization.yaml: not rendered" in w], bundle.warnings


EXAMPLE_POOL = (
    "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec:\n  template:\n"
    "    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n"
    "      requirements: []\n---\napiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\n"
    "metadata: {name: d}\nspec: {}\n")
EXAMPLE_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: w}\nspec: {containers: []}\n"


def test_a_family_or_type_the_catalogue_lacks_is_named():
    from karpenter_e2e.clusters.infra import catalogue
    local = {t.name for t in catalogue.TYPES}
    reqs = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
             "values": ["c6gd", "c6i", "c9zz"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In",
             "values": ["r6gd.large"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["x1"]}]
    assert "c6gd.large" not in local and "c6i.large" in local
    assert catalogue.missing(reqs, local) == [
        "instance-family c6gd: the local catalogue has no such family; EKS would offer it",
        "instance-family c9zz: the local catalogue has no such family; EC2 has no such family "
        "either",
        "instance-type r6gd.large: the local catalogue has no such type; EKS would offer it"]


def test_zones_count_distinct_zones_and_bound_the_skew():
    def at(name, zone, pool="web"):
        n = node(name, pool)
        n.zone = zone
        return n

    spread = snap([], [at("a1", "us-west-2a"), at("b1", "us-west-2b"), at("c1", "us-west-2c"),
                       at("a2", "us-west-2a"), at("x", "us-west-2d", pool="other")])
    r = judge("- zones: {nodepool: web, min: 3, max_skew: 1}\n", spread)[0]
    assert r.ok and r.seen == "3 zones: us-west-2a×2, us-west-2b×1, us-west-2c×1 (skew 1)"
    r = judge("- zones: {nodepool: web, max_skew: 0}\n", spread)[0]
    assert not r.ok and "(skew 1)" in r.seen
    assert not judge("- zones: {min: 5}\n", spread)[0].ok  # 4 zones over every pool
    r = judge("- zones: {nodepool: none, min: 1}\n", spread)[0]
    assert not r.ok and r.seen.startswith("no nodes of NodePool none (nothing to judge")


def test_pod_share_counts_pods_on_spot_nodes_and_pending_ones_against():
    s = snap([pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("d", "", phase="Pending"),
              pod("x", "n2", workload="Deployment/ml/other")],
             [node("n1", "default", ct="spot"), node("n2", "default")])
    r = judge("- pod_share: {pods: app=web, min: 0.5}\n", s)[0]
    assert r.ok and r.seen == "0.50: 2 of 4 pods on spot nodes"
    assert not judge("- pod_share: {pods: app=web, min: 0.8}\n", s)[0].ok
    assert judge("- pod_share: {max: 0.4}\n", s)[0].ok  # 2 of 5 over every pod
    assert not judge("- pod_share: {pods: app=none, min: 0.1}\n", s)[0].ok


def test_pods_a_controller_was_refused_fail_the_default_and_are_bounded_by_not_created():
    refused = snap([pod("a", "n1")], [node("n1", "default")])
    refused.not_created = {"Deployment/ml/web": NotCreated(
        2, 3, 'ReplicaSet web-5d4f8: pods "web-5d4f8-x" is forbidden: exceeded quota: pods')}
    running = expectations.default_expectations()[0].evaluate(refused)
    assert not running.ok and "Deployment/ml/web: 2 of 3 pods not created: ReplicaSet " \
                              "web-5d4f8: pods \"web-5d4f8-x\" is forbidden: exceeded quota" \
        in running.seen
    assert [r.ok for r in judge("- not_created: 2\n- not_created: {min: 2, max: 2}\n"
                                "- not_created: 1\n", refused)] == [True, True, False]
    assert judge("- not_created: 0\n", snap([pod("a", "n1")], [node("n1", "default")]))[0].ok
    again = Snapshot.from_dict(refused.to_dict())
    assert again.not_created == refused.not_created and again.workloads() == ["Deployment/ml/web"]


def test_requests_are_counted_as_karpenter_counts_them():
    from kubernetes import client as k
    def c(name, cpu, memory=None, restart=None):
        req = {"cpu": cpu, **({"memory": memory} if memory else {})}
        return k.V1Container(name=name, resources=k.V1ResourceRequirements(requests=req),
                             restart_policy=restart)
    spec = k.V1PodSpec(containers=[c("app", "1", "1Gi"), c("log", "250m")],
                       init_containers=[c("migrate", "3", "256Mi"),
                                        c("proxy", "500m", "128Mi", restart="Always")],
                       overhead={"cpu": "1", "memory": "512Mi"})
    # containers 1.25 + sidecar 0.5 = 1.75 vs init 3 (before the sidecar) -> 3, +1 overhead;
    # memory 1Gi + 128Mi vs 256Mi -> 1.125Gi, + 512Mi overhead
    assert observe._requests(k.V1Pod(spec=spec)) == {"cpu": "4", "memory": "1.625Gi"}
    assert observe._amount(2 ** 30 * 1.5) == "1.5Gi" and observe._amount(0.25) == "0.25"


def test_a_refusal_belongs_to_the_workload_whose_pods_it_refused():
    from kubernetes import client as k
    def rs(kind, name):
        return k.V1ObjectReference(kind=kind, name=name)
    web = Manifest(Path("w.yaml"), 0, {"apiVersion": "apps/v1", "kind": "Deployment",
                                       "metadata": {"name": "web", "namespace": "ml"}})
    assert observe._made_by(rs("ReplicaSet", "web-5d4f8"), web)
    assert not observe._made_by(rs("ReplicaSet", "web-api-5d4f8"), web)
    assert not observe._made_by(rs("StatefulSet", "web"), web)


def test_pending_of_one_workload_with_its_reason():
    s = snap([pod("a", phase="Pending"), pod("b", "n1", "Deployment/ml/api")],
             [node("n1", "default")], {"Deployment/ml/web": "untolerated taint: dedicated=batch"})
    ok, wrong_reason, other, typo = "- pending: {workload: web, reason: untolerated taint}\n", \
        "- pending: {workload: ml/web, reason: NodePool limit reached}\n", \
        "- pending: {workload: api, reason: untolerated taint}\n", \
        "- pending: {workload: web, reson: x}\n"
    assert judge(ok, s)[0].ok
    r = judge(wrong_reason, s)[0]
    assert not r.ok and "not for 'NodePool limit reached': Deployment/ml/web" in r.seen
    assert not judge(other, s)[0].ok  # api has no Pending pod: min 1 unless given
    assert judge("- pending: {workload: api, max: 0}\n", s)[0].ok
    with pytest.raises(ExpectError, match="unknown key"):
        judge(typo, s)


def test_no_disruption_and_events_judge_what_the_phase_saw():
    s = snap([pod("a", "n1")], [node("n1", "default")])
    s.removed = [{"claim": "critical-x1", "nodepool": "critical", "instance_type": "m5.large"}]
    s.events = [{"reason": "DisruptionBlocked", "kind": "NodeClaim", "name": "default-a",
                 "message": "Node is nominated for a pending pod"}]
    assert judge("- no_disruption: {nodepool: default}\n", s)[0].ok
    r = judge("- no_disruption: true\n", s)[0]
    assert not r.ok and "critical-x1 (m5.large, pool critical)" in r.seen
    assert judge("- event: {reason: DisruptionBlocked, message: nominated}\n", s)[0].ok
    assert not judge("- event: {reason: DisruptionBlocked, message: nominated, max: 0}\n", s)[0].ok
    assert not judge("- event: {reason: Unconsolidatable}\n", s)[0].ok
    with pytest.raises(ExpectError, match="regular expression"):
        judge("- event: {message: '('}\n", s)
    again = Snapshot.from_dict(s.to_dict())
    assert again.removed == s.removed and again.events == s.events
