"""The plugin's pytest option names: every one begins with ``--karpenter-``.

The plugin runs inside other projects' pytest, beside plugins such as pytest-kind
(``--cluster-name``) and pytest-helm-charts (``--kubeconfig``); argparse refuses a second
option of the same name, so unprefixed names stopped those runs at start-up.
The option's ``dest`` keeps its short name (``config.option.cluster_name``), and the
harness's own command lines (``karpenter-e2e cluster up --cluster-name x``, the
runners' flags) keep theirs: only pytest's flags go through here. (Not named pytest_*:
pytest takes any such name in a plugin module for a hook.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PREFIX = "--karpenter-"


def plugin_flag(name: str) -> str:
    """The pytest flag of option ``name`` (its dest or its short flag name):
    ``cluster_name`` -> ``--karpenter-cluster-name``; a name that already begins with
    ``karpenter-`` keeps it (``karpenter_version`` -> ``--karpenter-version``)."""
    bare = name.removeprefix("--").replace("_", "-")
    return f"--{bare}" if bare.startswith("karpenter-") else f"{PREFIX}{bare}"


def cli_flag(name: str) -> str:
    """The flag of option ``name`` on the harness's own command lines (argparse)."""
    return "--" + name.removeprefix("--").replace("_", "-")


def plugin_dest(name: str) -> str:
    """Where pytest keeps option ``name``: ``cluster_name`` -> ``karpenter_cluster_name``.
    Prefixed too: pytest (9.x) refuses a second option with the same dest, and pytest-kind's
    ``--cluster-name`` and ``--keep-cluster`` and pytest-helm-charts' ``--kubeconfig`` take the
    short ones; two options sharing a dest would silently overwrite each other's value."""
    bare = name.removeprefix("--").replace("-", "_")
    return bare if bare.startswith("karpenter_") else f"karpenter_{bare}"


def adder(add: Callable[..., Any], flag: Callable[[str], str] = cli_flag,
          dest: Callable[[str], str] = lambda name: name.replace("-", "_")) -> Callable[..., Any]:
    """``add`` (argparse's add_argument or pytest's addoption) taking an option's short name:
    ``adder(add)("keep-cluster", ...)`` registers ``flag("keep-cluster")`` with
    ``dest("keep_cluster")``."""
    def by_name(name: str, **kwargs: Any) -> Any:
        kwargs["dest"] = dest(kwargs.get("dest") or name)
        return add(flag(name), **kwargs)
    return by_name


def plugin_adder(addoption: Callable[..., Any]) -> Callable[..., Any]:
    """pytest's addoption by short name: ``--karpenter-<name>``, dest ``karpenter_<name>``."""
    return adder(addoption, plugin_flag, plugin_dest)


class PluginOptions:
    """The plugin's options by their short names (``.cluster_name``, ``.keep_cluster``),
    over pytest's ``config.option``; what backends.create and the fixtures read."""

    def __init__(self, option: Any):
        self._option = option

    def __getattr__(self, name: str) -> Any:
        return getattr(self._option, plugin_dest(name))
