"""What eks mode renders, dry-run against the real EC2NodeClass CRD (from the pinned AWS
provider module) on a real kube-apiserver: its schema and CEL rules decide, not a copy."""

from __future__ import annotations

import copy
import json

import pytest

from karpenter_e2e.clusters.eks import provider
from karpenter_e2e.clusters.eks.cluster import EksCluster
from karpenter_e2e.fixtures.isolation import TestScope
from karpenter_e2e.fixtures.nodepools import NodeClassRef, NodePoolFactory, _merge

SCOPE = TestScope.for_test("1130120000ab", "suites/test_drift.py::test_new_ami")
OLD_AMI, NEW_AMI = "ami-0123456789abcdef0", "ami-0fedcba9876543210"


@pytest.fixture(scope="module")
def kubectl(bare_apiserver, provider_module):
    crd = provider_module / provider.EC2NODECLASS_CRD
    for args in (("apply", "--server-side", "-f", str(crd)),
                 ("wait", "--for=condition=Established", "--timeout=30s",
                  "crd/ec2nodeclasses.karpenter.k8s.aws")):
        proc = bare_apiserver(*args)
        assert proc.returncode == 0, proc.stderr
    return bare_apiserver


def dry_run(kubectl, body: dict) -> str:
    """'' if the API server would accept ``body``; its refusal otherwise."""
    proc = kubectl("apply", "--dry-run=server", "-f", "-", stdin=json.dumps(body))
    return "" if proc.returncode == 0 else proc.stderr.strip()


def cluster(**kwargs) -> EksCluster:
    return EksCluster("karpenter-e2e-nightly", "/dev/null", **kwargs)


class Recorder:
    """The factory's kube: keeps what it would create."""

    def __init__(self):
        self.created: list[dict] = []

    def create(self, kind, body):
        self.created.append(copy.deepcopy(body))
        return body


@pytest.mark.parametrize("ami", ["al2023@latest", "bottlerocket@latest", OLD_AMI])
def test_rendered_nodeclass_is_accepted(kubectl, ami):
    body = cluster(ami=ami).render_nodeclass(SCOPE.name("default"), SCOPE.labels)
    assert dry_run(kubectl, body) == ""


def test_ami_drift_scenarios_nodeclasses_are_accepted(kubectl):
    # What suites/test_drift.py's AMI scenario creates through the factory, then patches.
    eks = cluster()
    kube = Recorder()
    factory = NodePoolFactory(kube, SCOPE, NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "v1"),
                              eks.render_nodeclass)
    factory.nodeclass("ami", spec=eks.ami_spec(OLD_AMI))
    [created] = kube.created
    assert dry_run(kubectl, created) == ""
    patched = copy.deepcopy(created)
    _merge(patched["spec"], eks.ami_spec(NEW_AMI))  # a merge patch, as patch_nodeclass sends
    assert patched["spec"]["amiSelectorTerms"] == [{"id": NEW_AMI}]
    assert dry_run(kubectl, patched) == ""


def test_the_crd_refuses_an_ami_id_without_amifamily(kubectl):
    # The rule the fix answers; passing above means something only if this is refused.
    body = cluster(ami=OLD_AMI).render_nodeclass("no-family", {})
    body["spec"].pop("amiFamily", None)
    assert "must specify amiFamily if amiSelectorTerms does not contain an alias" \
        in dry_run(kubectl, body)
