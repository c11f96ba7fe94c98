"""Karpenter's own settings for a run: its options (environment variables such as
MIN_VALUES_POLICY) and feature gates, checked against what the release under test reads.

A setting is ``KEY=VALUE``: an option's environment name (``MIN_VALUES_POLICY=BestEffort``,
``BATCH_MAX_DURATION=5s``) or a feature gate's name (``CapacityBuffer=true``). What a release
knows comes from its own module: the ``env.WithDefault*("NAME", default)`` calls of its
pkg/operator/options/options.go (and the KWOK provider's kwok/options), and its gates from
clusters/karpenter/features.py. The harness sets some options itself (ports, the kubeconfig, leader
election, the catalogue); those cannot be set here.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.errors import ClusterError
from karpenter_e2e.clusters.karpenter import features

# Set by the cluster for every run: a setting of one of these would break the harness.
RESERVED = frozenset({"KUBECONFIG", "DISABLE_LEADER_ELECTION", "METRICS_PORT",
                      "HEALTH_PROBE_PORT", "FEATURE_GATES", "INSTANCE_TYPES_FILE_PATH",
                      "KARPENTER_SERVICE", "SYSTEM_NAMESPACE", "DISABLE_WEBHOOK",
                      "CLUSTER_NAME", "CLUSTER_ENDPOINT", "INTERRUPTION_QUEUE",
                      "CLUSTER_CA_BUNDLE"})

OPTION_FILES = ("pkg/operator/options/options.go", "kwok/options/options.go")
_ENV = re.compile(r'env\.WithDefault\w*\(\s*"([A-Z][A-Z0-9_]*)"\s*,\s*')
_CONST = re.compile(r'\b([A-Z]\w*)\s+\w+\s*=\s*"([^"]*)"')


@dataclass(frozen=True)
class Known:
    """What one Karpenter release reads: option names with their defaults (None where the
    default is not a plain literal), and its feature gates with theirs."""

    version: str
    options: Mapping[str, str | None]
    gates: Mapping[str, bool]

    def keys(self) -> list[str]:
        return sorted(k for k in self.options if k not in RESERVED) + sorted(self.gates)

    def default(self, key: str) -> str | None:
        if key in self.gates:
            return str(self.gates[key]).lower()
        return self.options.get(key)


def _literal(expr: str, consts: Mapping[str, str]) -> str | None:
    expr = expr.strip()
    if m := re.fullmatch(r'"([^"]*)"', expr):
        return m[1]
    if m := re.fullmatch(r"string\((\w+)\)|(\w+)", expr):
        name = m[1] or m[2]
        if name in consts:
            return consts[name]
        if re.fullmatch(r"-?\d+", name) or name in ("true", "false"):
            return name
    if m := re.fullmatch(r"(\d+)\s*\*\s*time\.(Second|Minute|Millisecond)", expr):
        return f"{m[1]}{ {'Second': 's', 'Minute': 'm', 'Millisecond': 'ms'}[m[2]] }"
    if m := re.fullmatch(r"time\.(Second|Minute)", expr):
        return {"Second": "1s", "Minute": "1m"}[m[1]]
    return None


def _argument(text: str, start: int) -> str:
    """The call argument starting at ``start``: up to the comma or parenthesis that closes
    it at its own depth (``string(MinValuesPolicyStrict)`` whole)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return text[start:i]
            depth -= 1
        elif c in ",\n" and depth == 0:
            return text[start:i]
    return text[start:]


def read_options(module: Path) -> dict[str, str | None]:
    """The environment options a Karpenter module's options files read, with defaults."""
    found: dict[str, str | None] = {}
    for rel in OPTION_FILES:
        path = module / rel
        if not path.is_file():
            continue
        text = path.read_text()
        consts = dict(_CONST.findall(text))
        for m in _ENV.finditer(text):
            found.setdefault(m[1], _literal(_argument(text, m.end()), consts))
    return found


def known(version: str, module: Path) -> Known:
    return Known(version, read_options(module),
                 {g: features.gate_default(version, g) for g in features.gates_known(version)})


def parse(items: Iterable[str], flag: str = "--karpenter-setting") -> dict[str, str]:
    """``KEY=VALUE`` strings into a mapping; a malformed one is a ClusterError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ClusterError(f"{flag} {item!r}: expected KEY=VALUE, e.g. "
                               f"MIN_VALUES_POLICY=BestEffort or CapacityBuffer=true")
        out[key] = value.strip()
    return out


def check(settings: Mapping[str, str], release: Known, flag: str = "--karpenter-setting") -> None:
    """Refuse a key the release does not read (naming those it does), one the harness sets
    itself, and a gate value other than true/false."""
    for key, value in settings.items():
        if key in RESERVED:
            raise ClusterError(f"{flag} {key}: the harness sets {key} itself for every run")
        if key in release.gates:
            if value.lower() not in ("true", "false"):
                raise ClusterError(f"{flag} {key}={value}: a feature gate is true or false")
            continue
        if key not in release.options:
            raise ClusterError(f"{flag} {key}: Karpenter {release.version} has no such option "
                               f"or feature gate; it reads {', '.join(release.keys())}")


def split(settings: Mapping[str, str],
          gates: Collection[str]) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """The settings as Karpenter's environment (its options), and of the feature ``gates``
    the release knows, those the settings turn on and those they turn off."""
    env = {k: v for k, v in settings.items() if k not in gates}
    wanted = {k: v.lower() == "true" for k, v in settings.items() if k in gates}
    return env, tuple(k for k, on in wanted.items() if on), tuple(k for k, on in wanted.items() if not on)


def mismatches(wanted: Mapping[str, str], running: Mapping[str, str], release: Known) -> list[str]:
    """Each wanted setting the running Karpenter does not have (its explicit settings, else
    the release's default), as "KEY=wanted (running: value)"."""
    out = []
    for key, value in wanted.items():
        have = running.get(key, release.default(key))
        if have is None or have.lower() != value.lower():
            out.append(f"{key}={value} (this Karpenter: {have if have is not None else 'unset'})")
    return out


def render(settings: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "the release's defaults"
