"""What a kind cluster that failed to come up says about why."""

from __future__ import annotations

import re

# What says why in kind's output: its own ERROR line, kubeadm's failed phase and its reasons
# (the Go stack kubeadm prints after them says nothing a user can act on).
_WHY = re.compile(r"^ERROR: |error execution phase|timed out|deadline exceeded|"
                  r"connection refused|unhealthy|failed", re.I)


def create_failure(output: str) -> str:
    lines = output.strip().splitlines()
    why = [ln[:400] for ln in lines if _WHY.search(ln) and not ln.startswith("\t")]
    return "\n".join(why[:12] or lines[-20:])
