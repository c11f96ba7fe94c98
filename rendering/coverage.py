"""The coverage table: which scenario covers each input Karpenter decides on, and which
mutant proves it. ``karpenter-e2e pages`` (rendering/pages.py) writes docs/coverage.md; with
``--check`` it only says whether it is up to date (tests/test_coverage.py checks it).

Read from the code, offline, without pytest:

- the inputs: ``clusters.karpenter.inputs.INPUTS`` (id, group, what, where Karpenter reads
  it; why no simulated node can show it);
- the scenarios: the ``@pytest.mark.scenario`` / ``covers`` / ``modes`` / ``nightly``
  decorators of every test in suites/, parsed (not imported) with ``ast``;
- the mutants: mutants/*.patch headers (``clusters.karpenter.mutants``). A mutant proves an
  input when the input lists it (its ``# regression:`` line is about the input) and it names
  a scenario covering the input; otherwise the covering scenarios' mutants are listed "via
  scenario".
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from karpenter_e2e.clusters.karpenter import inputs as inv
from karpenter_e2e.clusters.karpenter.mutants import MUTANTS_DIR, Mutant, load

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "suites"
OUT = ROOT / "docs" / "coverage.md"
ALL_MODES = ("local", "aws-sim", "kind", "eks")
COMMAND = "karpenter-e2e pages"  # writes the generated pages; each names it


@dataclass(frozen=True)
class Test:
    file: str
    name: str
    scenario: str | None
    covers: tuple[str, ...]
    modes: tuple[str, ...]  # () for every mode
    nightly: bool


def _mark(node: ast.expr) -> tuple[str, list[ast.expr]] | None:
    """``pytest.mark.<name>(args)`` or ``pytest.mark.<name>``: (name, args)."""
    call = node if isinstance(node, ast.Call) else None
    target = call.func if call else node
    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark" and isinstance(target.value.value, ast.Name)
            and target.value.value.id == "pytest"):
        return target.attr, list(call.args) if call else []
    return None


def _strings(args: Iterable[ast.expr], where: str) -> tuple[str, ...]:
    out = []
    for a in args:
        if not (isinstance(a, ast.Constant) and isinstance(a.value, str)):
            raise ValueError(f"{where}: a marker argument that is not a string literal")
        out.append(a.value)
    return tuple(out)


def _module_marks(tree: ast.Module) -> set[str]:
    """Names of the marks in a module's ``pytestmark`` (a mark or a list of them)."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            values = stmt.value.elts if isinstance(stmt.value, ast.List) else [stmt.value]
            names |= {m[0] for m in map(_mark, values) if m}
    return names


def scan(suites: Path = SUITES) -> list[Test]:
    """Every test function in ``suites``, with the marks the table needs."""
    tests = []
    for path in sorted(suites.glob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        nightly_module = "nightly" in _module_marks(tree)
        for fn in tree.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")):
                continue
            where = f"{path.name}::{fn.name}"
            scenario: str | None = None
            covers: tuple[str, ...] = ()
            modes: tuple[str, ...] = ()
            nightly = nightly_module
            for dec in fn.decorator_list:
                mark = _mark(dec)
                if not mark:
                    continue
                name, args = mark
                if name == "scenario":
                    scenario = _strings(args, where)[0]
                elif name == "covers":
                    covers += _strings(args, where)
                elif name == "modes":
                    modes = _strings(args, where)
                elif name == "nightly":
                    nightly = True
            tests.append(Test(path.name, fn.name, scenario, covers, modes, nightly))
    return tests


@dataclass(frozen=True)
class Row:
    input: inv.Input
    scenarios: tuple[str, ...]  # rendered, with the modes a scenario is limited to
    covering: frozenset[str]  # the covering scenario ids
    proved: tuple[str, ...]
    via: tuple[str, ...]


class CoverageError(ValueError):
    """The inventory, the markers and the mutants disagree."""


def _label(scenario: str, tests: list[Test]) -> str:
    """A scenario id, with its modes when none of its covering tests runs everywhere, and
    'nightly' when each of them is nightly-only."""
    notes = []
    if all(t.modes for t in tests):
        modes = sorted({m for t in tests for m in t.modes}, key=ALL_MODES.index)
        if tuple(modes) != ALL_MODES:
            notes.append(", ".join(modes))
    if all(t.nightly for t in tests):
        notes.append("nightly")
    return f"{scenario} ({'; '.join(notes)})" if notes else scenario


def rows(tests: list[Test], mutants: list[Mutant],
         inputs: tuple[inv.Input, ...] = inv.INPUTS) -> list[Row]:
    known = {i.id for i in inputs}
    unknown = sorted({f"{t.file}::{t.name}: {c}" for t in tests for c in t.covers
                      if c not in known})
    if unknown:
        raise CoverageError(f"covers names inputs not in clusters/karpenter/inputs.py: {unknown}")
    untagged = sorted(f"{t.file}::{t.name}" for t in tests if t.covers and not t.scenario)
    if untagged:
        raise CoverageError(f"tests with covers but no scenario: {untagged}")
    patches = {m.name: m for m in mutants if m.patched}
    out = []
    for i in inputs:
        by_scenario: dict[str, list[Test]] = {}
        for t in tests:
            if i.id in t.covers and t.scenario:
                by_scenario.setdefault(t.scenario, []).append(t)
        covering = frozenset(by_scenario)
        for name in i.proved_by:
            m = patches.get(name)
            if m is None:
                raise CoverageError(f"{i.id}: proved_by names {name}, no mutants/{name}.patch")
            if not covering & set(m.scenarios):
                raise CoverageError(f"{i.id}: mutant {name} names {', '.join(m.scenarios)}, "
                                    f"none of which covers it ({', '.join(sorted(covering)) or 'none'})")
        via = () if i.proved_by else tuple(sorted(
            m.name for m in patches.values() if covering & set(m.scenarios)))
        out.append(Row(i, tuple(_label(s, by_scenario[s]) for s in sorted(by_scenario)),
                       covering, i.proved_by, via))
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _where(i: inv.Input) -> str:
    prefix = "" if i.module == inv.CORE else f"{i.module}: "
    return "<br>".join(f"`{prefix}{w}`" for w in i.where)


def _status(r: Row) -> str:
    i = r.input
    if r.scenarios:
        text = ", ".join(r.scenarios)
        return f"{text}<br>*partly*: {i.gap}" if i.gap else text
    if i.kwok:
        return f"**no simulated node can show it**: {i.kwok}<br>*eks only*: {i.eks}"
    return f"not covered yet ({i.gap})" if i.gap else "not covered yet"


def _mutants(r: Row) -> str:
    if r.proved:
        return ", ".join(r.proved)
    if r.via:
        return "via scenario: " + ", ".join(r.via)
    return ""


def render(tests: list[Test] | None = None, mutants: list[Mutant] | None = None,
           inputs: tuple[inv.Input, ...] = inv.INPUTS) -> str:
    tests = scan() if tests is None else tests
    mutants = load(MUTANTS_DIR) if mutants is None else mutants
    table = rows(tests, mutants, inputs)
    covered = [r for r in table if r.scenarios]
    proved = [r for r in covered if r.proved]
    kwok = [r for r in table if not r.scenarios and r.input.kwok]
    todo = [r for r in table if not r.scenarios and not r.input.kwok]
    partly = [r for r in covered if r.input.gap]
    lines = [
        "# Input coverage",
        "",
        f"<!-- generated by `{COMMAND}` from clusters/karpenter/inputs.py, the scenarios' covers "
        "markers and mutants/*.patch headers; edit those, not this file -->",
        "",
        f"**{len(covered)} of {len(table)} inputs are covered** by a scenario "
        f"({len(proved)} of them proved by a mutant whose regression is about the input; "
        f"{len(partly)} only partly). Of the {len(table) - len(covered)} not covered, "
        f"{len(kwok)} cannot be shown by a simulated (KWOK) node"
        + (f" and {len(todo)} {'is' if len(todo) == 1 else 'are'} not covered yet." if todo
           else "; none is left without a reason."),
        "",
        "An *input* is anything Karpenter reads that changes what it decides: what it launches, "
        "where, how big, what it disrupts and when. Each is listed with where Karpenter "
        f"v{inv.VERSIONS[inv.CORE].lstrip('v')} reads it (`sigs.k8s.io/karpenter` unless "
        "another module is named), from `clusters/karpenter/inputs.py`. A scenario covers an "
        "input when it sets it *and asserts on the decision it changes*, said by its "
        "`@pytest.mark.covers(...)`; modes are named where the scenario runs only in some. "
        "*Mutants* are the [mutants](mutants.md) whose regression is about the input and "
        "that name a covering scenario; *via scenario* lists the covering scenarios' mutants "
        "where none is about the input itself.",
        "",
    ]
    for group, title in inv.GROUPS.items():
        lines += [f"## {title}", "",
                  "| input | what Karpenter decides on | read in | scenarios | mutants |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{r.input.id}` | {_cell(r.input.what)} | {_where(r.input)} | "
                  f"{_cell(_status(r))} | {_mutants(r)} |"
                  for r in table if r.input.group == group]
        lines.append("")
    named = {s for t in tests for s in [t.scenario] if s}
    covering = {s for r in table for s in r.covering}
    idle = sorted(named - covering)
    attributed = {m for r in table for m in r.proved}
    spare = sorted((m for m in mutants if m.patched and m.name not in attributed),
                   key=lambda m: m.name)
    lines += ["## Scenarios that cover no input", "",
              "Scenarios whose assertions are about no one input (performance budgets):", ""]
    lines += [f"- {s}" for s in idle] or ["- none"]
    lines += ["", "## Mutants that prove no one input", "",
              "Mutants no input counts as its proof: their regression is about something "
              "other than an input (an internal delay, ownership, the provider's pick), or "
              "about an input none of their scenarios is tagged with. Each still names the "
              "scenarios that must catch it:", ""]
    lines += [f"- `{m.name}` ({', '.join(m.scenarios)}): {m.regression}" for m in spare] \
        or ["- none"]
    from karpenter_e2e.checks.explore import not_drawn  # the generator's own table
    skipped = not_drawn()
    lines += ["", "## Inputs explore does not draw", "",
              f"`make explore` ([differential](differential.md)) draws {len(table) - len(skipped)} "
              f"of the {len(table)} inputs: each is carried by some generated case, read from the "
              "manifests and settings it writes (checks/carried.py; tests/test_explore.py holds "
              "the generator to this inventory). The others, and why:", ""]
    lines += [f"- `{i}`: {_cell(why)}" for i, why in sorted(skipped.items())]
    return "\n".join(lines) + "\n"
