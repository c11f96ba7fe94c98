"""Diagnosis rules over Karpenter's real texts (captured from local runs of v1.15.0)."""

import pytest

from fixtures.diagnosis import Evidence, collect, own_clauses, verdict

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
