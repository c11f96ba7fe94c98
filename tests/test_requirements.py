import pytest

from karpenter_e2e.clusters.karpenter.requirements import satisfies, violations


@pytest.mark.parametrize("op,values,label,expected", [
    ("In", ["c", "m"], "c", True), ("In", ["c", "m"], "t", False), ("In", ["c"], None, False),
    ("NotIn", ["t3.nano"], "c5.large", True), ("NotIn", ["c5.large"], "c5.large", False),
    ("NotIn", ["x"], None, True),
    ("Exists", [], "x", True), ("Exists", [], None, False),
    ("DoesNotExist", [], None, True), ("DoesNotExist", [], "x", False),
    ("Gt", ["2"], "5", True), ("Gt", ["2"], "2", False), ("Gt", ["2"], None, False),
    ("Lt", ["10"], "8", True), ("Lt", ["10"], "abc", False),
])
def test_node_selector_operators(op, values, label, expected):
    labels = {} if label is None else {"k": label}
    assert satisfies(labels, {"key": "k", "operator": op, "values": values}) is expected


def test_violations_name_the_requirement_and_what_the_node_has():
    reqs = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    assert violations({"kubernetes.io/arch": "arm64"}, reqs) == [
        "kubernetes.io/arch In ['amd64'] (node has: arm64)"]


def test_unknown_operator_is_an_error():
    with pytest.raises(ValueError):
        satisfies({}, {"key": "k", "operator": "Like", "values": []})
