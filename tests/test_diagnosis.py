"""Diagnosis rules over Karpenter's real texts (captured from local runs of v1.15.0)."""

import pytest

from karpenter_e2e.fixtures.diagnosis import Evidence, collect, own_clauses, verdict

# Karpenter event messages (reason FailedScheduling, source karpenter) seen in local runs.
LIMIT = ("inflate-5f7d787bf5-vdlpn FailedScheduling (karpenter): Failed to schedule pod, all "
         "available instance types exceed limits for nodepool (NodePool=default-eca4fe)")
TAINT = ("gpu-app-775856f85d-5zxrn FailedScheduling (karpenter): Failed to schedule pod, did not "
         "tolerate taint (taint=nvidia.com/gpu=true:NoSchedule)")
SCHEDULER_TAINT = ("inflate-x FailedScheduling (default-scheduler): 0/3 nodes are available: 1 "
                   "node(s) had untolerated taint(s), 2 Insufficient cpu.")


@pytest.mark.parametrize("messages,expected", [
    ([LIMIT], "NodePool limit reached"),
    ([TAINT], "untolerated taint"),
    ([SCHEDULER_TAINT, LIMIT], "NodePool limit reached"),  # the scheduler's words are context
])
def test_verdict_from_karpenter_events(messages, expected):
    assert verdict(Evidence(messages=messages)).startswith(expected)


def test_karpenter_not_running_wins():
    v = verdict(Evidence(karpenter_running=False, karpenter_detail="its process is gone",
                         messages=[LIMIT]))
    assert v == "Karpenter is not running: its process is gone"


def test_log_is_the_fallback():
    log = ('{"level":"ERROR","message":"could not schedule pod","error":"no instance type met the '
           'scheduling requirements or had enough resources"}')
    assert verdict(Evidence(log_excerpt=log)).startswith("no instance type fits (Karpenter log)")


def test_nothing_to_go_on_says_so():
    assert verdict(Evidence()) == "no Karpenter event or log line explains it"


def test_clauses_about_other_tests_pools_are_dropped():
    msg = ("all available instance types exceed limits for nodepool (NodePool=spot-3cd749); "
           "did not tolerate taint (taint=nvidia.com/gpu=true:NoSchedule); incompatible "
           "requirements, key karpenter-e2e/test, karpenter-e2e/test In [89044a] not in "
           "karpenter-e2e/test In [adb2fa]")
    assert own_clauses(msg, "89044a") == "did not tolerate taint (taint=nvidia.com/gpu=true:NoSchedule)"
    assert own_clauses(msg, "3cd749").startswith("all available instance types exceed limits")


class _NodeClasses:
    """A Kube stand-in holding one EC2NodeClass whose AMI Karpenter cannot resolve."""

    def list(self, kind, selector=""):
        assert kind == "ec2nodeclasses" and selector == "karpenter-e2e/test=abc123"
        return [{"metadata": {"name": "ami-abc123"}, "status": {"conditions": [
            {"type": "AMIsReady", "status": "False", "reason": "AMINotFound",
             "message": "AMISelector did not match any AMIs"},
            {"type": "SubnetsReady", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "UnhealthyDependents",
             "message": "AMIsReady=False"}]}}]


def test_a_nodeclass_not_ready_is_named_with_its_condition_message():
    ev = collect(_NodeClasses(), lambda: True, lambda: "", None, "abc123", "ec2nodeclasses")
    assert verdict(ev) == ("NodeClass not ready: NodeClass ami-abc123 (karpenter) not ready: "
                           "AMIsReady: AMISelector did not match any AMIs")


def test_the_cloud_not_answering_comes_before_everything_but_karpenter():
    ev = Evidence(cloud_problem="the fake AWS on 127.0.0.1:4566 is not running",
                  messages=["p1 FailedScheduling (karpenter): untolerated taint x"])
    assert verdict(ev) == "AWS not answering: the fake AWS on 127.0.0.1:4566 is not running"
    assert verdict(Evidence(karpenter_running=False, cloud_problem="x")).startswith(
        "Karpenter is not running")


# Karpenter v1.15.0's AWS provider, captured in aws-sim mode (trimmed).
REFUSED = ('{"level":"ERROR","message":"Reconciler error","controller":"instance.garbagecollection",'
           '"error":"listing instances, operation error EC2: DescribeInstances, exceeded maximum '
           'number of attempts, 3, https response error StatusCode: 0, RequestID: , request send '
           'failed, Post \\"http://127.0.0.1:60957/\\": dial tcp 127.0.0.1:60957: connect: '
           'connection refused"}')
NO_QUEUE = ('{"level":"ERROR","message":"Reconciler error","controller":"interruption",'
            '"error":"getting messages from queue, receiving sqs messages, operation error SQS: '
            'ReceiveMessage, https response error StatusCode: 400, '
            'AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."}')
NO_ALIAS = ('{"level":"ERROR","message":"Reconciler error","controller":"nodeclass",'
            '"name":"ssm-aaaaaa","alias":"al2023@v20990101","error":"getting amis, getting AMI '
            'queries, failed to discover any AMIs for alias (alias=al2023@v20990101)"}')


@pytest.mark.parametrize("log, expected", [
    (REFUSED, "AWS not answering (Karpenter log)"),
    (NO_QUEUE, "interruption queue missing (Karpenter log)"),
])
def test_cloud_faults_in_karpenters_log_are_named(log, expected):
    assert verdict(Evidence(log_excerpt=f"{NO_ALIAS}\n{log}\n")).startswith(expected)


UNCONSOLIDATABLE = ('spot-training-26d690-drmvh Unconsolidatable (karpenter): NodePool '
                    '"spot-training-26d690" has consolidation policy WhenEmpty, but node is not empty')


def test_a_missing_queue_comes_before_the_events_that_follow_from_it():
    """With the queue gone no interruption comes, and Karpenter goes on saying why it keeps
    the waiting node: the queue is the verdict, in this test's log or from before it."""
    now = verdict(Evidence(messages=[UNCONSOLIDATABLE], log_excerpt=f"{NO_QUEUE}\n"))
    assert now.startswith("interruption queue missing (Karpenter log)"), now
    earlier = verdict(Evidence(messages=[UNCONSOLIDATABLE], log_tail=f"{NO_QUEUE}\n"))
    assert earlier.startswith("interruption queue missing (Karpenter log)"), earlier
    assert earlier.endswith("[logged before this test began]"), earlier


class NodeClasses:
    def __init__(self, *items):
        self.items = list(items)

    def list(self, kind, selector):
        return self.items


def nodeclass(name: str, ready: str, ami_status: str, ami_message: str) -> dict:
    return {"metadata": {"name": name}, "status": {"conditions": [
        {"type": "AMIsReady", "status": ami_status, "message": ami_message},
        {"type": "SubnetsReady", "status": "True", "message": ""},
        {"type": "Ready", "status": ready, "message": "AMIsReady=" + ami_status}]}}


def test_nodeclass_unknown_counts_only_beside_karpenters_reconcile_error():
    from karpenter_e2e.fixtures.diagnosis import nodeclass_messages
    stuck = NodeClasses(nodeclass("ssm-aaaaaa", "Unknown", "Unknown", "object is awaiting reconciliation"))
    assert nodeclass_messages(stuck, None, "aaaaaa", "") == []  # just created: not yet a verdict
    said = nodeclass_messages(stuck, None, "aaaaaa", NO_ALIAS)
    assert said == ["NodeClass ssm-aaaaaa (karpenter) not ready: AMIsReady: object is awaiting "
                    "reconciliation; Karpenter: getting amis, getting AMI queries, failed to "
                    "discover any AMIs for alias (alias=al2023@v20990101)"]
    assert verdict(Evidence(messages=said)).startswith("NodeClass not ready: NodeClass ssm-aaaaaa")
    ready = NodeClasses(nodeclass("ssm-aaaaaa", "True", "True", ""))
    assert nodeclass_messages(ready, None, "aaaaaa", NO_ALIAS) == []
    other = NodeClasses(nodeclass("ssm-bbbbbb", "Unknown", "Unknown", "awaiting"))
    assert nodeclass_messages(other, None, "bbbbbb", NO_ALIAS) == []  # the error names another


def test_an_ec2nodeclass_the_api_server_rejects_is_named_with_its_reason(bare_apiserver, provider_module,
                                                                          tmp_path):
    """The real CRD (CEL rules) on a real API server: the harness's create says which object
    was refused and the API server's words, not a bare 422."""
    from karpenter_e2e.clusters.api.kube import Kind, Kube, Rejected
    from karpenter_e2e.clusters.eks.cluster import EksCluster
    assert bare_apiserver("apply", "--server-side", "--force-conflicts",
                          "-f", str(provider_module / "pkg" / "apis" / "crds")).returncode == 0
    assert bare_apiserver("wait", "--for=condition=Established", "--timeout=60s",
                          "crd/ec2nodeclasses.karpenter.k8s.aws").returncode == 0
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(bare_apiserver("config", "view", "--raw").stdout)
    body = EksCluster("e2e", kubeconfig, region="us-west-2").render_nodeclass("bad-abc123", {})
    body["spec"]["amiSelectorTerms"] = [{"id": "ami-0123456789abcdef0"}]  # and no amiFamily
    body["spec"].pop("amiFamily", None)
    with pytest.raises(Rejected) as err:
        Kube(kubeconfig).create(Kind("karpenter.k8s.aws", "v1", "ec2nodeclasses"), body)
    assert str(err.value).startswith("the API server rejected EC2NodeClass bad-abc123: ")
    assert "must specify amiFamily if amiSelectorTerms does not contain an alias" in str(err.value)


UNCONSOLIDATABLE = ("default-7501cf-5jrp7 Unconsolidatable (karpenter): Can't remove without "
                    "creating 2 candidates")


def test_a_node_karpenter_will_not_disrupt_is_named_with_its_reason():
    assert verdict(Evidence(messages=[UNCONSOLIDATABLE])) == \
        f"Karpenter will not disrupt the node: {UNCONSOLIDATABLE}"


def test_a_pending_pods_reason_comes_before_a_disruption_one():
    # collect() puts the NodeClaims' events first: newer, pod-level reasons decide.
    assert verdict(Evidence(messages=[UNCONSOLIDATABLE, LIMIT])).startswith("NodePool limit reached")


class _Event:
    def __init__(self, kind, name, reason, message, at):
        from types import SimpleNamespace as NS
        self.involved_object = NS(kind=kind, name=name)
        self.reason, self.message, self.last_timestamp, self.event_time = reason, message, at, None
        self.metadata = NS(creation_timestamp=at)


class _Claims:
    """A Kube stand-in: one NodeClaim of the test, Karpenter's events on it and on another
    test's node, and pending pods in two namespaces."""
    timeout = 5

    def __init__(self):
        from types import SimpleNamespace as NS
        events = [_Event("NodeClaim", "default-abc123-x", "Unconsolidatable",
                         "Can't remove without creating 2 candidates", 2),
                  _Event("Node", "other-node", "DisruptionBlocked", "not mine", 3),
                  _Event("Node", "node-x", "DisruptionBlocked",
                         'Pod "ns/p" has "karpenter.sh/do-not-disrupt" annotation', 1)]
        pods = [NS(metadata=NS(namespace=ns)) for ns in ("workshop-abc123", "workshop-def", "workshop-def")]
        self.karpenter_events = lambda namespace=None: events
        self.core = NS(list_pod_for_all_namespaces=lambda **kw: NS(items=pods))

    def list(self, kind, selector=""):
        if kind.plural == "nodeclaims":
            assert selector == "karpenter-e2e/test=abc123"
            return [{"metadata": {"name": "default-abc123-x"}, "status": {"nodeName": "node-x"}}]
        return []

    def pods(self, namespace):
        return []


def test_the_tests_nodeclaim_events_are_read_and_pending_pods_elsewhere_named():
    ev = collect(_Claims(), lambda: True, lambda: "", "workshop-abc123", "abc123")
    assert [m.split(" (karpenter)")[0] for m in ev.messages] == [
        "node-x DisruptionBlocked", "default-abc123-x Unconsolidatable"]
    assert ev.messages[-1].endswith("pending elsewhere now: 2 in workshop-def]")
    assert verdict(ev).startswith("Karpenter will not disrupt the node: default-abc123-x")


def test_a_panic_or_a_repeated_error_in_karpenters_log_joins_the_verdict():
    from karpenter_e2e.fixtures.diagnosis import Evidence, log_problems, verdict
    err = '{"level":"ERROR","time":"t%d","message":"failed listing instance types"}'
    log = "\n".join(['{"level":"INFO","message":"ok"}', err % 1, err % 2, err % 3,
                     "E1201 10:00:00 panic: runtime error: index out of range [recovered]"])
    problems = log_problems(log)
    assert problems.startswith("panicked 1x: E1201 10:00:00 panic: runtime error"), problems
    assert "logged 3x: failed listing instance types" in problems, problems
    v = verdict(Evidence(messages=[], log_excerpt=log))
    assert v.endswith(f"[Karpenter's log: {problems}]"), v
    assert log_problems('{"level":"ERROR","message":"once"}') == ""


# Each rule over Karpenter's scheduling texts in the wording of each release, built as its
# source builds them (sigs.k8s.io/karpenter pkg/scheduling, pkg/controllers/provisioning/
# scheduling); v1.15.0's no-match texts as a local run recorded them. v1.0.x-v1.1.x prefix
# each NodePool's clause, v1.5 on name the pool after it.
V1_0 = 'Failed to schedule pod, incompatible with nodepool "default", daemonset overhead={"pods":"0"}, '
V1_5 = "Failed to schedule pod, "
RELEASE_TEXTS = [
    # v1.0.8, v1.1.5
    (V1_0 + "did not tolerate dedicated=gpu:NoSchedule", "untolerated taint"),
    (V1_0 + 'all available instance types exceed limits for nodepool: "default"',
     "NodePool limit reached"),
    (V1_0 + 'no instance type satisfied resources {"cpu":"30","pods":"1"} and requirements '
     "karpenter.sh/nodepool In [default] (no instance type has enough resources)",
     "no instance type fits"),
    (V1_0 + 'incompatible requirements, label "intent" does not have known values',
     "no NodePool matches the pod"),
    (V1_0 + "incompatible requirements, key team, team In [data] not in team In [platform]",
     "no NodePool matches the pod"),
    (V1_0 + "configured to not run on a Karpenter provisioned node via the "
     "karpenter.sh/nodepool DoesNotExist requirement", "no NodePool matches the pod"),
    # v1.5.5 to v1.15.0
    (V1_5 + "did not tolerate taint (taint=dedicated=gpu:NoSchedule)", "untolerated taint"),
    (V1_5 + "all available instance types exceed limits for nodepool (NodePool=default)",
     "NodePool limit reached"),
    (V1_5 + "node limits have been exhausted for nodepool (NodePool=default)",  # v1.11 on
     "NodePool limit reached"),
    (V1_5 + "no instance type has enough resources, requirements=karpenter.sh/nodepool In "
     '[default], resources={"cpu":"30","pods":"1"} (NodePool=default)', "no instance type fits"),
    (V1_5 + "no instance type has the required offering, requirements=..., resources=...",
     "no instance type fits"),
    (V1_5 + "no instance type had enough resources or had a required offering, "
     "requirements=karpenter.k8s.aws/instance-family In [c6gd], resources=... (NodePool=p)",
     "no instance type fits"),
    (V1_5 + "no instance type which met the scheduling requirements and had enough resources, "
     "had a required offering, requirements=..., resources=...", "no instance type fits"),
    (V1_5 + "nodepool requirements filtered out all available instance types",  # v1.9 on
     "no instance type fits"),
    (V1_5 + 'incompatible requirements, label "intent" does not have known values '
     "(NodePool=default)", "no NodePool matches the pod"),
    (V1_5 + "incompatible requirements, key team, team In [data] not in team In [platform] "
     "(NodePool=default)", "no NodePool matches the pod"),
    (V1_5 + "configured to not run on a Karpenter provisioned node", "no NodePool matches the pod"),
    (V1_5 + "no nodepools found", "no NodePool matches the pod"),
]


@pytest.mark.parametrize("message,expected", RELEASE_TEXTS)
def test_each_release_wording_reaches_its_verdict(message, expected):
    event = f"web-5f8ddd6475-kjlts FailedScheduling (karpenter): {message}"
    scheduler = "web-5f8ddd6475-kjlts FailedScheduling (default-scheduler): no nodes available"
    assert verdict(Evidence(messages=[event, scheduler])).startswith(expected + ":")
