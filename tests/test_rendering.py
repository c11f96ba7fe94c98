"""Per-test rendering: workshop specs stay intact except names, discovery labels and nodeClassRef."""

from karpenter_e2e.fixtures.isolation import RUN_LABEL, TEST_LABEL, TestScope
from karpenter_e2e.fixtures.nodepools import NodeClassRef, load_spec, render_nodepool
from karpenter_e2e.fixtures.workloads import render_inflate

SCOPE = TestScope.for_test("1129120000ab", "suites/test_x.py::test_y")
KWOK = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "v1alpha1")


def test_scope_is_stable_short_and_distinct_per_test():
    again = TestScope.for_test("1129120000ab", "suites/test_x.py::test_y")
    other = TestScope.for_test("1129120000ab", "suites/test_x.py::test_z")
    assert SCOPE == again and SCOPE.test_id != other.test_id and len(SCOPE.test_id) == 6
    assert SCOPE.name("Weight_NodePool") == f"weight-nodepool-{SCOPE.test_id}"


def test_nodepool_keeps_the_workshop_spec_and_adds_isolation():
    spec = load_spec("default")
    body = render_nodepool(spec, SCOPE, KWOK, "default-abc")
    assert body["metadata"]["name"] == f"default-{SCOPE.test_id}"
    assert body["metadata"]["labels"][TEST_LABEL] == SCOPE.test_id
    tmpl = body["spec"]["template"]
    assert tmpl["metadata"]["labels"] == {"eks-immersion-team": "my-team", **SCOPE.labels}
    assert tmpl["spec"]["nodeClassRef"] == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                            "name": "default-abc"}
    assert tmpl["spec"]["requirements"] == spec["spec"]["template"]["spec"]["requirements"]
    assert body["spec"]["limits"] == {"cpu": "10"}
    assert body["spec"]["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                          "consolidateAfter": "30s"}
    assert spec["metadata"]["name"] == "default"  # the loaded spec itself is not mutated


def test_nodepool_overrides_merge_deeply():
    body = render_nodepool(load_spec("default"), SCOPE, KWOK, "nc",
                           overrides={"spec": {"disruption": {"consolidationPolicy": "WhenEmpty"}}})
    assert body["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty",
                                          "consolidateAfter": "30s"}


def test_nodeclass_plural():
    assert KWOK.resource.plural == "kwoknodeclasses"
    assert NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "v1").resource.plural == "ec2nodeclasses"


def test_inflate_selects_only_its_tests_nodes():
    body = render_inflate(SCOPE, replicas=3, node_selector={"eks-immersion-team": "my-team"},
                          memory="1Gi", tolerations=[{"key": "nvidia.com/gpu",
                                                      "operator": "Exists"}])
    pod = body["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"eks-immersion-team": "my-team",
                                           TEST_LABEL: SCOPE.test_id}
    assert pod["metadata"]["labels"][RUN_LABEL] == SCOPE.run_id
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert pod["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert body["spec"]["replicas"] == 3


def test_require_spells_requirements_as_the_api_takes_them():
    from karpenter_e2e.fixtures.nodepools import narrow, require, requirements
    assert require("zone", "In", "a", "b") == {"key": "zone", "operator": "In", "values": ["a", "b"]}
    assert require("gpu", "Exists") == {"key": "gpu", "operator": "Exists"}
    assert require("family", "In") == {"key": "family", "operator": "In", "values": []}
    assert require("t", "In", "x", min_values=2)["minValues"] == 2
    assert require("gen", "Gt", 6)["values"] == ["6"]
    spec = {"spec": {"template": {"spec": {"requirements": [require("cat", "In", "c"),
                                                            require("arch", "In", "amd64")]}}}}
    narrow(spec, require("cat", "In", "g"), replacing=("cat",))
    assert requirements(spec) == [require("arch", "In", "amd64"), require("cat", "In", "g")]
