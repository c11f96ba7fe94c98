"""Karpenter's getting-started CloudFormation stack, as far as the provider module says it.

The nightly downloads the release's ``cloudformation.yaml`` from the provider repository's
``website/`` (.github/workflows/nightly.yml). The module zip has no ``website/``: it is a Go
module of its own, which the module proxy does not serve, so the template cannot be read
here. This writes the nearest template the module itself gives, resource by resource:

- ``KarpenterNodeRole`` (role ``KarpenterNodeRole-<cluster>``, assumed by EC2): the logical id
  and the name upstream's e2e action patches and passes (``.github/actions/e2e/setup-cluster``);
- the controller's managed policies, by the names that action attaches
  (``provider.upstream_controller_policies``). Their statements are not in the module: each
  holds one placeholder statement (the fake AWS checks no permission anyway);
- ``KarpenterInterruptionQueue``: the SQS queue named after the cluster, as the chart's README
  installs it (``settings.interruptionQueue=${CLUSTER_NAME}``), with its queue policy;
- one EventBridge rule per message the interruption controller parses
  (``pkg/controllers/interruption/messages/*/parser.go``: each parser's Source and
  DetailType), targeting the queue.

docs/modes-eks-kind.md lists what the real template holds beyond this, and how it differs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from karpenter_e2e.clusters.eks import provider

PARSERS = "pkg/controllers/interruption/messages"
_RETURNS = re.compile(r'func \(p Parser\) (Source|DetailType)\(\) string \{\s*return "([^"]+)"')
NODE_ROLE = "KarpenterNodeRole"
QUEUE = "KarpenterInterruptionQueue"
# Neither a permission nor a denial: the real statements are in website/, not in the module.
PLACEHOLDER_STATEMENT = {"Sid": "NotInTheModule", "Effect": "Allow",
                         "Action": "ec2:DescribeAvailabilityZones", "Resource": "*"}


@dataclass(frozen=True)
class Rule:
    name: str  # the parser's directory, CamelCased: the rule's logical id
    source: str
    detail_type: str


def interruption_rules(module: Path) -> list[Rule]:
    """One rule per interruption message the release parses, from its parsers' sources."""
    rules = []
    for parser in sorted((module / PARSERS).glob("*/parser.go")):
        found = dict(_RETURNS.findall(parser.read_text()))
        if {"Source", "DetailType"} <= found.keys():
            name = "".join(w.capitalize() for w in re.split(r"[^a-z]+", parser.parent.name) if w)
            rules.append(Rule(f"{name}Rule", found["Source"], found["DetailType"]))
    if not rules:
        raise ValueError(f"no interruption message parser under {module / PARSERS}")
    return rules


class _Tagged(str):
    """A scalar written with a CloudFormation short tag (``!Sub ...``, ``!GetAtt ...``)."""

    tag: str

    def __new__(cls, tag: str, value: str) -> _Tagged:
        obj = super().__new__(cls, value)
        obj.tag = tag
        return obj


def _tagged(dumper: yaml.SafeDumper, data: _Tagged) -> yaml.ScalarNode:
    return dumper.represent_scalar(data.tag, str(data))


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True  # each policy spelled out, as a template is


_Dumper.add_representer(_Tagged, _tagged)


def template(module: Path) -> str:
    """The stack's template (YAML with CloudFormation's short tags), parameter ClusterName."""
    policies = sorted(provider.upstream_controller_policies(module))
    if not policies:
        raise ValueError(f"no controller policy named in {module / provider.UPSTREAM_E2E_CLUSTER}")
    queue_arn = _Tagged("!GetAtt", f"{QUEUE}.Arn")
    resources: dict = {
        NODE_ROLE: {"Type": "AWS::IAM::Role", "Properties": {
            "RoleName": _Tagged("!Sub", "KarpenterNodeRole-${ClusterName}"), "Path": "/",
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": _Tagged("!Sub", "ec2.${AWS::URLSuffix}")},
                "Action": ["sts:AssumeRole"]}]}}},
    }
    for name in policies:
        resources[name] = {"Type": "AWS::IAM::ManagedPolicy", "Properties": {
            "ManagedPolicyName": _Tagged("!Sub", f"{name}-${{ClusterName}}"),
            "PolicyDocument": {"Version": "2012-10-17", "Statement": [PLACEHOLDER_STATEMENT]}}}
    resources[QUEUE] = {"Type": "AWS::SQS::Queue", "Properties": {
        "QueueName": _Tagged("!Sub", "${ClusterName}"), "MessageRetentionPeriod": 300,
        "SqsManagedSseEnabled": True}}
    resources[f"{QUEUE}Policy"] = {"Type": "AWS::SQS::QueuePolicy", "Properties": {
        "Queues": [_Tagged("!Ref", QUEUE)],
        "PolicyDocument": {"Id": "EC2InterruptionPolicy", "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
            "Action": "sqs:SendMessage", "Resource": queue_arn}]}}}
    for rule in interruption_rules(module):
        resources[rule.name] = {"Type": "AWS::Events::Rule", "Properties": {
            "EventPattern": {"source": [rule.source], "detail-type": [rule.detail_type]},
            "Targets": [{"Id": f"{QUEUE}Target", "Arn": queue_arn}]}}
    body = {"AWSTemplateFormatVersion": "2010-09-09",
            "Description": "Karpenter's getting-started stack as far as the provider module "
                           "gives it (karpenter-e2e clusters/rehearsal/stack.py)",
            "Parameters": {"ClusterName": {"Type": "String", "Description": "EKS cluster name"}},
            "Resources": resources}
    return yaml.dump(body, Dumper=_Dumper, sort_keys=False, width=100)
