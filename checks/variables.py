"""Variables for a check's manifests, filled in as envsubst fills them: ``${NAME}`` and
``$NAME``. CLUSTER_NAME is check's own (the cluster's name); a team's are given with
``--vars FILE``, ``--var-from-env NAME`` and ``--var NAME=VALUE``, later over earlier.

Only names given are filled, unlike envsubst, which empties every unset one: a manifest's
``$HOME`` in a container's script keeps its meaning unless HOME is given, and a placeholder
left unfilled is warned about by file and line. ``$$`` before a name or ``{`` is a literal
``$`` (``$${NAME}`` stays ``${NAME}``, and is not warned about), for text that must stay as
written; Kubernetes' own ``$(NAME)`` and its escape ``$$(NAME)`` are left alone.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

BUILTIN = "CLUSTER_NAME"
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
VALID_NAME = re.compile(NAME)
# One pass over a line: an escape, ${NAME}, $NAME, or a blueprint's <<NAME>> (never filled:
# another templating's). Kubernetes' $(NAME) matches none of them. One left unfilled is warned
# about: the manifest is then not what the team applies (a blueprint's <<CLUSTER_NAME>> passed
# in local mode and failed in aws-sim).
REFERENCE = re.compile(rf"\$\$(?=[{{A-Za-z_])|\$\{{({NAME})\}}|\$({NAME})|<<[^<>\n]+>>")
# An unfilled $name in lower case is most often a script's own variable: only $UPPER warns.
WARNED_BARE = re.compile(r"[A-Z_][A-Z0-9_]*")
YAML_SUFFIXES = (".yaml", ".yml")


class VariablesError(ValueError):
    """A --vars file, --var or --var-from-env that cannot be read; names file and line."""


@dataclass
class Variables:
    """The team's variables (CLUSTER_NAME is added per cluster, ``with_builtin``)."""

    values: dict[str, str] = field(default_factory=dict)
    # The names given one by one (--var, --var-from-env) and how: one no manifest uses is a
    # mistake worth a warning; a shared --vars file's other names are not.
    named: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)  # --vars: not manifests, wherever they are

    def with_builtin(self, cluster_name: str) -> dict[str, str]:
        return {**self.values, BUILTIN: cluster_name} if cluster_name else dict(self.values)

    def for_base(self, head: Path, base: Path) -> Variables:
        """The same variables for the base's copy of the folder: a --vars file kept in the
        head's folder has a copy in the base's, which is no manifest either."""
        moved = [base / f.resolve().relative_to(head.resolve()) for f in self.files
                 if f.resolve().is_relative_to(head.resolve())]
        return dataclasses.replace(self, files=self.files + moved)

    def unused(self, used: set[str], folder: Path) -> list[str]:
        return [f"{how}: used by no manifest of {folder}"
                for name, how in self.named.items() if name not in used]


@dataclass
class Filled:
    text: str
    used: set[str] = field(default_factory=set)
    unfilled: list[tuple[int, str]] = field(default_factory=list)  # (line, placeholder)


def load(files: list[Path], pairs: list[str], env_names: list[str],
         environ: Mapping[str, str] = os.environ) -> Variables:
    """The variables given, later over earlier: the files in order, then the environment's
    names, then --var. Raises VariablesError listing every problem at once."""
    given, errors = Variables(files=[Path(f) for f in files]), []
    for path in files:
        try:
            read = read_file(Path(path))
        except VariablesError as exc:
            errors.append(str(exc))
            continue
        for name, (value, where) in read.items():
            _set(given, name, value, where)
    for spec in env_names:
        for name in filter(None, (n.strip() for n in spec.split(","))):
            if not VALID_NAME.fullmatch(name):
                errors.append(f"--var-from-env {name}: not a variable name ({NAME})")
            elif name not in environ:
                errors.append(f"--var-from-env {name}: not set in the environment")
            else:
                _set(given, name, environ[name], f"--var-from-env {name}", named=True)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not VALID_NAME.fullmatch(name):
            errors.append(f"--var {pair!r}: expected NAME=VALUE, NAME as {NAME}")
        else:
            _set(given, name, value, f"--var {name}", named=True)
    if errors:
        raise VariablesError("\n".join(errors))
    return given


def _set(given: Variables, name: str, value: str, where: str, named: bool = False) -> None:
    if name == BUILTIN:  # a team's .env often has it; here it must be the cluster's own
        given.warnings.append(f"{where}: ignored: {BUILTIN} is check's own, the cluster's name "
                              "(--cluster-name)")
        return
    given.values[name] = value
    if named:
        given.named[name] = where


def read_file(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (value, 'file:line'). A .yaml/.yml file is a mapping of names to scalars, read
    as written (``1.10`` stays "1.10", ``true`` "true"); any other file is KEY=VALUE lines."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise VariablesError(f"--vars {path}: cannot be read ({exc.strerror})") from None
    return _read_yaml(path, text) if path.suffix in YAML_SUFFIXES else _read_env(path, text)


def _read_env(path: Path, text: str) -> dict[str, tuple[str, str]]:
    """KEY=VALUE a line, as a .env file: blank lines and # comments skipped, an optional
    ``export``, the value to the end of the line (a ``#`` in it is part of it), one pair of
    enclosing quotes removed and nothing else unescaped."""
    out, errors = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name, sep, value = stripped.removeprefix("export ").partition("=")
        name = name.strip()
        if not sep or not VALID_NAME.fullmatch(name):
            errors.append(f"{path}:{n}: expected NAME=VALUE, got {stripped[:60]!r}")
            continue
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name] = (value, f"{path}:{n}")
    if errors:
        raise VariablesError("\n".join(errors))
    return out


def _read_yaml(path: Path, text: str) -> dict[str, tuple[str, str]]:
    try:  # BaseLoader: every scalar a string as written, so no value changes on the way
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{mark.line + 1}:{mark.column + 1}:" if mark else ""
        raise VariablesError(f"{path}:{at} invalid YAML: "
                             f"{getattr(exc, 'problem', None) or exc}") from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise VariablesError(f"{path}:{root.start_mark.line + 1}: expected a mapping of "
                             "NAME: value")
    out, errors = {}, []
    for key, value in root.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode) or not VALID_NAME.fullmatch(key.value):
            errors.append(f"{path}:{line}: not a variable name ({NAME})")
        elif not isinstance(value, yaml.ScalarNode):
            errors.append(f"{path}:{line}: {key.value}: expected a single value, got a "
                          f"{'list' if isinstance(value, yaml.SequenceNode) else 'mapping'}")
        else:
            out[key.value] = (value.value, f"{path}:{line}")
    if errors:
        raise VariablesError("\n".join(errors))
    return out


def fill(text: str, values: Mapping[str, str]) -> Filled:
    """``text`` with the given names filled in, the names it used, and the placeholders left
    unfilled outside comments, by line."""
    filled = Filled("")
    lines = [_fill_line(line, n, values, filled)
             for n, line in enumerate(text.splitlines(keepends=True), 1)]
    filled.text = "".join(lines)
    return filled


def _fill_line(line: str, n: int, values: Mapping[str, str], filled: Filled) -> str:
    code = _code_length(line)

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        braced, bare = m.group(1), m.group(2)
        name = braced or bare
        if name is not None and name in values:
            filled.used.add(name)
            return values[name]
        if m.start() < code and (bare is None or WARNED_BARE.fullmatch(bare)):
            filled.unfilled.append((n, m.group(0)))
        return m.group(0)

    return REFERENCE.sub(one, line)


def _code_length(line: str) -> int:
    """Where a YAML line's comment begins (a placeholder there is no placeholder)."""
    if line.lstrip().startswith("#"):
        return 0
    at = line.find(" #")
    return len(line) if at < 0 else at
