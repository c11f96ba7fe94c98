"""Karpenter's /metrics page in Prometheus' text format: its samples, and a series' labels.

One parser for what the harness reads there: the process figures the upgrade gate compares
(fixtures/karpenter_metrics.py) and the offering prices (prices.py).
"""

from __future__ import annotations

import re


class MetricsFormatError(ValueError):
    """A /metrics line that is not Prometheus' text format."""


def parse(text: str) -> dict[str, float]:
    """Samples of the Prometheus text format by series, e.g. ``{'up': 1.0,
    'x{a="b"}': 2.0}``; comments skipped, an optional timestamp ignored."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # Label values may hold spaces: the series ends at the last '}' when there are labels.
        cut = line.rfind("}") + 1 if "{" in line else line.find(" ")
        series, rest = line[:cut].strip(), line[cut:].split()
        if not series or not rest:
            raise MetricsFormatError(f"/metrics line {number}: {line[:120]!r}")
        try:
            out[series] = float(rest[0])  # float() reads NaN, +Inf, 1.2e+08
        except ValueError:
            raise MetricsFormatError(f"/metrics line {number}: value {rest[0]!r}") from None
    return out


# name="value", the value with the format's three escapes (\\, \", \n)
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def series_labels(series: str) -> tuple[str, dict[str, str]]:
    """``'x{a="b",c="d"}'`` -> ``('x', {'a': 'b', 'c': 'd'})``."""
    name, brace, rest = series.partition("{")
    if not brace:
        return name, {}
    body, labels, at = rest.removesuffix("}"), {}, 0
    while at < len(body):
        m = _LABEL.match(body, at)
        if not m:
            raise MetricsFormatError(f"/metrics series {series[:160]!r}: labels at {at}")
        labels[m[1]] = re.sub(r"\\[\\\"n]", lambda e: _UNESCAPE[e[0]], m[2])
        at = m.end()
    return name, labels
