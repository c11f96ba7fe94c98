"""The pinned Karpenter AWS provider module, read from the Go module cache (never fetched
from a release site): the CRDs it installs and the sources eks mode is checked against.

The module zip leaves out ``website/`` (it holds its own go.mod, so Go treats it as another
module), so the getting-started CloudFormation template is not in it. Upstream's own e2e
cluster setup is: it deploys that template and attaches the controller policies it
defines, by name (``UPSTREAM_E2E_CLUSTER``).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from karpenter_e2e.clusters.infra import build, versions

MODULE = "github.com/aws/karpenter-provider-aws"
EC2NODECLASS_CRD = "pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"
UPSTREAM_E2E_CLUSTER = ".github/actions/e2e/setup-cluster/action.yaml"
# "arn:aws:iam::<account>:policy/KarpenterControllerNodeLifecyclePolicy-<cluster>"
_POLICY = re.compile(r"policy/(Karpenter[A-Za-z]+Policy)-")


def module_dir(version: str = versions.EKS_PROVIDER) -> Path:
    """The module's directory in GOMODCACHE, downloaded from the module proxy if absent.
    Its go.mod asks for a newer Go than the machine's, hence the pinned toolchain."""
    return build.download_module(MODULE, version, versions.GO_TOOLCHAIN)


def upstream_controller_policies(module: Path) -> set[str]:
    """Names (without the cluster suffix) of the controller policies upstream's e2e
    attaches from the getting-started stack of this release."""
    return set(_POLICY.findall((module / UPSTREAM_E2E_CLUSTER).read_text()))


def upstream_e2e_defaults(module: Path) -> dict[str, str]:
    """The e2e cluster action's input defaults (eksctl_version, k8s_version, ...)."""
    inputs = yaml.safe_load((module / UPSTREAM_E2E_CLUSTER).read_text())["inputs"]
    return {k: str(v["default"]) for k, v in inputs.items() if "default" in v}
