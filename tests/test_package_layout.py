"""karpenter_e2e/ is a real package: its layers are relative symlinks to the top-level folders,
so every internal import resolves by path in a clone with nothing installed, mypy runs there,
and the wheel holds every package as a real folder."""

import ast
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "karpenter_e2e"
LAYERS = ("clusters", "fixtures", "rendering", "checks", "runners")
SOURCES = (*LAYERS, "suites", "tests", "examples")


def internal_imports() -> list[tuple[str, str]]:
    """(file, module) for every `import karpenter_e2e...` and `from karpenter_e2e... import`."""
    out = []
    files = [ROOT / "conftest.py"] + [p for d in SOURCES for p in (ROOT / d).rglob("*.py")
                                      if ".venv" not in p.parts]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] == "karpenter_e2e":
                out.append((str(path.relative_to(ROOT)), node.module))
                # `from karpenter_e2e.x import y`: y may itself be a module
                out += [(str(path.relative_to(ROOT)), f"{node.module}.{a.name}")
                        for a in node.names if _is_module(f"{node.module}.{a.name}")]
            elif isinstance(node, ast.Import):
                out += [(str(path.relative_to(ROOT)), a.name) for a in node.names
                        if a.name.split(".")[0] == "karpenter_e2e"]
    return out


def _path(module: str) -> Path:
    return ROOT.joinpath(*module.split("."))


def _is_module(module: str) -> bool:
    p = _path(module)
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def test_the_layers_are_relative_symlinks_to_the_top_level_folders():
    assert (PKG / "__init__.py").is_file()
    for layer in LAYERS:
        link = PKG / layer
        assert link.is_symlink() and os.readlink(link) == f"../{layer}", link
        assert link.resolve() == ROOT / layer


def test_run_output_is_no_package():
    """reports/ is where runs write (runs/, latest, site/, ...): no layer links to it and no
    module lives there; the code that renders into it is rendering/."""
    assert not os.path.lexists(PKG / "reports")
    assert not list((ROOT / "reports").glob("*.py"))


def test_every_internal_import_resolves_by_path():
    found = internal_imports()
    unresolved = sorted({f"{f}: {m}" for f, m in found if not _is_module(m)})
    assert not unresolved, "imports that do not resolve by path: " + "; ".join(unresolved[:20])
    assert len(found) > 600, f"only {len(found)} internal imports found: is the scan broken?"


def test_mypy_runs_in_a_clone_with_nothing_installed_there(tmp_path):
    """A fresh clone of this commit; the tools come from the harness's venv, the package from
    the clone's own folders (mypy follows no import hook)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True,
                   timeout=120)
    mypy = Path(sys.executable).parent / "mypy"
    run = subprocess.run([str(mypy), "--no-incremental"], cwd=clone, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "no issues found" in run.stdout, run.stdout[-500:]
    checked = int(run.stdout.split(" in ")[-1].split()[0])
    assert checked >= 100, run.stdout


def test_the_wheel_holds_every_package_and_each_imports_from_it(tmp_path):
    """The wheel's files alone (installed with --target; the dependencies from the harness's
    venv): every package of karpenter_e2e/ is in it, and each imports from there."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path / "dist"), str(ROOT)], check=True, timeout=300)
    wheel, = (tmp_path / "dist").glob("karpenter_e2e-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = sorted(".".join(p.relative_to(ROOT).parent.parts)
                      for layer in LAYERS for p in (PKG / layer).rglob("__init__.py"))
    packages.append("karpenter_e2e")
    missing = [p for p in packages if f"{p.replace('.', '/')}/__init__.py" not in names]
    assert not missing, f"packages missing from {wheel.name}: {missing}"
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, timeout=300)
    code = ("import importlib, sys\n"
            f"for name in {packages!r}:\n"
            "    m = importlib.import_module(name)\n"
            f"    assert m.__file__.startswith({str(site)!r}), (name, m.__file__)\n"
            "print(len(sys.modules))")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(site)})
    assert run.returncode == 0, run.stderr[-3000:]
    # the one command, from the wheel's files: the package run as a module
    run = subprocess.run([sys.executable, "-m", "karpenter_e2e", "check", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(site)})
    assert run.returncode == 0 and run.stdout.startswith("usage: karpenter-e2e check"), run.stderr


def test_the_suites_import_the_harness_through_its_one_front_door():
    """Scenarios speak one vocabulary (karpenter_e2e.fixtures.scenario): no other module of
    the harness, no Allure (a step is scenario.step), no raw ["metadata"] reads (the object
    view reads them)."""
    suites = Path(__file__).resolve().parent.parent / "suites"
    bad = []
    for path in sorted(suites.glob("*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for mod in mods:
                if (mod.startswith("karpenter_e2e") and mod != "karpenter_e2e.fixtures.scenario") \
                        or mod.split(".")[0] == "allure":
                    bad.append(f"{path.name}:{node.lineno}: imports {mod}")
        bad += [f"{path.name}: reads ['metadata'] raw" for _ in [1] if '["metadata"]' in text]
    assert not bad, "\n".join(bad)


def test_no_scenario_is_longer_than_sixty_lines():
    """A scenario reads like the workshop page: given, act, expect. One that grows past 60
    lines is building a framework inside a test; that belongs in a table or the library."""
    import ast
    long = []
    for path in sorted((ROOT / "suites").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 60:
                    long.append(f"{path.name}::{node.name} ({lines} lines)")
    assert not long, long


def _contracts() -> list[dict]:
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_architecture_page_lists_the_contracts_make_lint_checks():
    page = (ROOT / "docs" / "architecture.md").read_text()
    listed = {line[2:].strip() for line in page.splitlines() if line.startswith("- ")}
    names = {c["name"] for c in _contracts()}
    assert names <= listed, f"contracts the page does not list: {sorted(names - listed)}"


def test_every_fixtures_module_is_glue_or_library_and_the_library_never_imports_pytest():
    """A module added to fixtures/ must be named on one side of the glue line, or the
    contract that keeps pytest out of the library would silently not cover it."""
    (contract,) = [c for c in _contracts() if c["name"].startswith("only the plugin's glue")]
    library = {m.rsplit(".", 1)[-1] for m in contract["source_modules"]
               if m.startswith("karpenter_e2e.fixtures.")}
    glue = {m.rsplit(".", 1)[-1] for m in contract["forbidden_modules"]
            if m.startswith("karpenter_e2e.fixtures.")}
    fixtures = ROOT / "fixtures"
    modules = {p.stem for p in fixtures.glob("*.py") if p.stem != "__init__"}
    modules |= {d.name for d in fixtures.iterdir() if (d / "__init__.py").is_file()}
    assert modules == library | glue, f"fixtures modules on neither side: {sorted(modules - library - glue)}"


def test_a_module_over_500_lines_says_why_it_is_long():
    """Small modules named for what they are; one that grows past 500 lines says why in its
    docstring ("Long because ..."), so the next split has its seam named."""
    import ast
    silent = []
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            text = path.read_text()
            if text.count("\n") > 500 and "Long because" not in (ast.get_docstring(ast.parse(text)) or ""):
                silent.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not silent, silent
