"""Local mode's kwok stages: kwokctl's defaults, with the launch latency a node asks for."""

import shutil
from pathlib import Path

import pytest
import yaml

from karpenter_e2e.clusters.api.labels import LAUNCH_LATENCY
from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.infra import versions
from karpenter_e2e.clusters.local import stages
from karpenter_e2e.fixtures.isolation import TestScope
from karpenter_e2e.fixtures.nodepools import NodeClassRef, load_spec, render_nodepool


@pytest.fixture
def module(go_module) -> Path:
    return go_module("sigs.k8s.io/kwok", versions.KWOK)


def test_the_stages_are_kwokctls_defaults_with_a_boot_stage_and_a_delayed_ready(module):
    docs = stages.render(module)
    names = [d["metadata"]["name"] for d in docs]
    assert names == ["node-boot", "node-initialize", "node-heartbeat-with-lease", "pod-ready",
                     "pod-complete", "pod-delete"]
    # every stage but node-initialize and pod-delete is the module's file as it is
    for rel, doc in zip(stages.MODULE_STAGES[1:-1], docs[2:-1], strict=True):
        assert doc == yaml.safe_load((module / rel).read_text())
    # a pod goes a kubelet's second after it is asked to, not at once (Karpenter's podevents
    # controller must find it still there to record the node's emptying)
    delete = docs[-1]
    assert delete["spec"]["delay"] == {"durationMilliseconds": 1000}
    assert {**delete, "spec": {k: v for k, v in delete["spec"].items() if k != "delay"}} == \
        yaml.safe_load((module / stages.MODULE_STAGES[-1]).read_text())
    boot, init = docs[0], docs[1]
    assert boot["spec"]["weight"] == 1 and "weight" not in init["spec"]
    keys = [e["key"] for e in boot["spec"]["selector"]["matchExpressions"]]
    assert keys[0] == f'.metadata.annotations["{LAUNCH_LATENCY}"]'
    assert '"False"' in boot["spec"]["next"]["statusTemplate"]
    assert init["spec"]["delay"] == {"durationFrom": {"jq": {"expression": stages.READY_AT}}}
    template = init["spec"]["next"]["statusTemplate"]
    assert "{{ $lastTransitionTime := $now }}" in template
    assert ".metadata.creationTimestamp $now" not in template
    assert stages.digest(docs) == stages.digest(stages.render(module))


def test_a_changed_module_stage_is_refused_not_half_patched(module, tmp_path):
    copy = tmp_path / "kwok"
    shutil.copytree(module / "kustomize", copy / "kustomize")
    init = copy / stages.MODULE_STAGES[0]
    init.chmod(0o644)
    init.write_text(init.read_text().replace("$lastTransitionTime := or", "$ltt := or"))
    with pytest.raises(ClusterError, match="node-initialize stage .* is not the one"):
        stages.render(copy)


def test_a_pool_asks_its_nodes_for_the_latency_through_its_template():
    scope = TestScope.for_test("1129120000ab", "suites/test_x.py::test_y")
    ref = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "v1alpha1")
    slow = render_nodepool(load_spec("default"), scope, ref, "nc", launch_latency=45)
    assert slow["spec"]["template"]["metadata"]["annotations"] == {LAUNCH_LATENCY: "45"}
    plain = render_nodepool(load_spec("default"), scope, ref, "nc")
    assert "annotations" not in plain["spec"]["template"]["metadata"]
