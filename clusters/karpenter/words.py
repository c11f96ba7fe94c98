"""What Karpenter says when it will not schedule a pod, as regular expressions that match the
wording of every served release (read from sigs.k8s.io/karpenter's module trees)."""

from __future__ import annotations

import re


def untolerated(taint: str) -> str:
    """A pool refused for a taint the pod does not tolerate (``taint``: its start, e.g.
    ``dedicated=batch:NoExecute``). pkg/scheduling/taints.go, v1.0.x-v1.1.x: "did not
    tolerate <taint>"; from v1.5: "did not tolerate taint (taint=<taint>)"."""
    return rf"did not tolerate (taint \(taint=)?{re.escape(taint)}"


def no_type_fits(resource: str, quantity: str) -> str:
    """A pool refused because no instance type has room for a pod asking ``quantity`` of
    ``resource``. provisioning/scheduling/nodeclaim.go, v1.0.x-v1.1.x: "no instance type
    satisfied resources {..."<resource>":"<quantity>"...} and requirements ... (no instance
    type has enough resources)"; from v1.5: "no instance type has enough resources,
    requirements=..., resources={..."<resource>":"<quantity>"...}"."""
    asked = rf"{re.escape(resource)}\W+{re.escape(quantity)}\b"
    enough = "no instance type has enough resources"
    return rf"{enough}.*{asked}|satisfied resources \{{[^}}]*{asked}[^}}]*\}}.*\({enough}\)"
