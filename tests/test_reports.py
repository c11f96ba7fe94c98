"""Report pieces: redaction, the run summary table, Allure session files."""

import json

from karpenter_e2e.rendering import allure_files, summary
from karpenter_e2e.rendering.redact import redact


def test_redaction_removes_tokens_keys_and_kubeconfig_secrets():
    text = ("Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6Ij\n"
            "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=\n"
            "token: abcdef0123456789\n"
            "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY key AKIAIOSFODNN7EXAMPLE\n"
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"
            "NodePool default-abc launched c6a.large")
    out = redact(text)
    for secret in ("eyJhbGciOi", "LS0tLS1CRUdJ", "abcdef0123456789", "wJalrXUtnFEMI",
                   "AKIAIOSFODNN7EXAMPLE", "MIIE"):
        assert secret not in out
    assert "NodePool default-abc launched c6a.large" in out


def summary_of(directory, *rows: dict) -> str:
    """The run summary of these per-scenario timings files, as the run writes and reads them."""
    for i, row in enumerate(rows):
        (directory / f"{i}.json").write_text(json.dumps(row))
    return summary.markdown(summary.load(directory))


def test_summary_table_has_latencies_cost_and_total(tmp_path):
    text = summary_of(
        tmp_path,
        {"scenario": "provisioning", "outcome": "passed",
         "values": {"slowest_pending_to_running_s": 2.0, "nodes_used": 1, "node_hours": 0.004,
                    "cost_usd": 0.00123, "pending_to_nodeclaim_created_s": 1.0}},
        {"scenario": "limits", "outcome": "failed", "values": {"cost_usd": 0.002}})
    assert "| limits | failed |" in text
    assert "| provisioning | passed | 2 | 1 | 0.004 | 0.00123 | pending_to_nodeclaim_created_s=1.0 |" in text
    assert "Total node cost: $0.0032 (price × node lifetime" in text
    assert "pending→running: of the pods that waited for Karpenter" in text


def test_summary_total_is_a_dash_when_a_scenario_had_a_node_of_unknown_price(tmp_path):
    """The ledger records no cost_usd when a node's price is unknown (eks mode without
    Karpenter's /metrics): the total says so, never the priced scenarios' sum as the run's."""
    text = summary_of(
        tmp_path,
        {"scenario": "priced", "outcome": "passed",
         "values": {"nodes_used": 1, "node_hours": 0.004, "cost_usd": 0.00123}},
        {"scenario": "unpriced", "outcome": "passed", "values": {"nodes_used": 2, "node_hours": 0.01}},
        {"scenario": "no-nodes", "outcome": "passed", "values": {"nodes_used": 0}})
    assert "| unpriced | passed | – | 2 | 0.01 | – |" in text
    assert "Total node cost: – (" in text
    assert "; 1 scenario(s) had a node of unknown price)." in text
    assert "$0.0012" not in text


def test_allure_session_files(tmp_path):
    allure_files.write(tmp_path, {"mode": "local", "karpenter": "v1.15.0"})
    assert (tmp_path / "environment.properties").read_text() == "mode=local\nkarpenter=v1.15.0\n"
    names = [c["name"] for c in json.loads((tmp_path / "categories.json").read_text())]
    assert names[0] == "Karpenter not running"


def test_run_summary_is_a_global_attachment(tmp_path):
    globals_file = allure_files.attach_globally(tmp_path, "Run summary", "| a | b |")
    entry = json.loads(globals_file.read_text())["attachments"][0]
    assert entry["name"] == "Run summary" and entry["type"] == "text/markdown"
    assert (tmp_path / entry["source"]).read_text() == "| a | b |"


def test_a_failure_lists_every_pod_bound_to_the_tests_nodes_with_its_requests():
    """kube-scheduler's "Insufficient cpu" beside a node that looks half empty: the evidence
    shows what is bound there, in any namespace, as kube-scheduler counts it."""
    from kubernetes import client

    from karpenter_e2e.fixtures.reporting import pods_on_nodes

    def pod(ns, name, cpu, deleting=None):
        return client.V1Pod(
            metadata=client.V1ObjectMeta(namespace=ns, name=name, deletion_timestamp=deleting),
            spec=client.V1PodSpec(containers=[client.V1Container(
                name="c", resources=client.V1ResourceRequirements(requests={"cpu": cpu}))]),
            status=client.V1PodStatus(phase="Running"))

    bound = {"n1": [pod("workshop-a", "inflate-1", "1"), pod("other-b", "hog", "500m")],
             "n2": []}
    asked = []

    class Core:
        def list_pod_for_all_namespaces(self, field_selector, **kwargs):
            asked.append(field_selector)
            return client.V1PodList(items=bound[field_selector.split("=", 1)[1]])

    class Kube:
        core, api, timeout = Core(), client.ApiClient(), 10

    nodes = [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1930m"}}},
             {"metadata": {"name": "n2"}, "status": {"allocatable": {"cpu": "1930m"}}}]
    text = pods_on_nodes(Kube(), nodes)
    assert asked == ["spec.nodeName=n1", "spec.nodeName=n2"]
    assert text.splitlines() == [
        "n1 (allocatable cpu 1930m, memory ?):",
        "  workshop-a/inflate-1 Running: cpu 1",
        "  other-b/hog Running: cpu 0.5",
        "n2 (allocatable cpu 1930m, memory ?):",
        "  (no pod)"]
