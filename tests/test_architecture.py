"""ARCHITECTURE.md matches the code: its folders exist, its import rules hold, and the wheel ships them."""

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT_MODULES = {"errors", "fileio", "settings", "deadline"}


def import_rules() -> dict[str, set[str]]:
    text = (REPO / "ARCHITECTURE.md").read_text()
    table = text.split("<!-- import-rules: folder | may import -->")[1].split("<!-- /import-rules -->")[0]
    rules = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        folder, allowed = cells[0].strip("`"), cells[-1]
        rules[folder] = {"*"} if "anything" in allowed else set(re.findall(r"[a-z_]+", allowed.replace("nothing", "")))
    return rules


def module_name(rel: Path) -> tuple[str, bool]:
    """The dotted name of the module at ``rel`` (a path inside the repository) and whether it is a package."""
    parts = ["perceptforge", *rel.with_suffix("").parts]
    return (".".join(parts[:-1]), True) if parts[-1] == "__init__" else (".".join(parts), False)


def resolve(name: str, level: int, module: str, is_package: bool) -> str | None:
    """``name`` as an absolute module name: a relative import (``level`` dots) counts from the module's package;
    None when it climbs above the top package."""
    if not level:
        return name
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 >= len(base):
        return None
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def literal_import(node: ast.AST) -> tuple[str, str | None] | None:
    """``(name, package)`` of an ``import_module`` / ``importlib.import_module`` / ``__import__`` call whose
    module name is a string literal (``package`` only when it is one too); None for anything else."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    first = node.args[0]
    if called not in ("import_module", "__import__") or not (
        isinstance(first, ast.Constant) and isinstance(first.value, str)
    ):
        return None
    package = next((k.value for k in node.keywords if k.arg == "package"), None)
    if package is None and called == "import_module" and len(node.args) > 1:
        package = node.args[1]
    literal = isinstance(package, ast.Constant) and isinstance(package.value, str)
    return first.value, package.value if literal else None


def imported_names(text: str, module: str, is_package: bool = False) -> set[str]:
    """Every module (or name in one) that source ``text`` of ``module`` imports, as absolute dotted names:
    ``import``, ``from … import`` (relative ones resolved against the module's package), and
    ``import_module`` / ``importlib.import_module`` / ``__import__`` called with a literal name."""
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node.module or "", node.level, module, is_package)
            if base:
                # `from perceptforge import flows` names the folder in the alias, not in the module
                out |= {base if a.name == "*" else f"{base}.{a.name}" for a in node.names}
        elif literal := literal_import(node):
            name, package = literal
            relative = name.lstrip(".")
            level = len(name) - len(relative)
            # a relative name counts from the `package` argument when it is literal, else from the module's own
            where = (package, True) if level and package else (module, is_package)
            out.add(resolve(relative, level, *where) or "")
    return out


def folders_imported(text: str, rel: Path) -> set[str]:
    """The folders and root modules of perceptforge that the file at ``rel`` (its source ``text``) imports."""
    names = imported_names(text, *module_name(rel))
    return {n.split(".")[1] for n in names if n.startswith("perceptforge.")}


def perceptforge_imports(path: Path) -> set[str]:
    return folders_imported(path.read_text(), path.relative_to(REPO))


def rule_violations(rel: Path, text: str, rules: dict[str, set[str]]) -> list[str]:
    """One line per import of the file at ``rel`` that its folder's row in ARCHITECTURE.md does not allow."""
    folder = rel.parts[0]
    allowed = rules.get(folder, set())
    if "*" in allowed or len(rel.parts) == 1:
        return []
    return [f"{rel} imports perceptforge.{t}" for t in sorted(folders_imported(text, rel) - allowed - {folder})]


def test_every_folder_named_exists_and_every_package_is_named():
    rules = import_rules()
    assert rules, "no import-rules table in ARCHITECTURE.md"
    for folder in rules:
        assert (REPO / folder).is_dir(), f"ARCHITECTURE.md names {folder}/, which does not exist"
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages <= set(rules), f"folders missing from ARCHITECTURE.md: {sorted(packages - set(rules))}"


def test_import_rules_hold():
    rules = import_rules()
    broken = []
    for folder in rules:
        for path in sorted((REPO / folder).rglob("*.py")):
            broken += rule_violations(path.relative_to(REPO), path.read_text(), rules)
    assert not broken, "\n".join(broken)


FAKE_LOGIC_MODULE = """
import importlib
from importlib import import_module

import perceptforge.flows.common
from perceptforge.cli import main
from perceptforge import tasks
from ..audit import checks
from .. import scorer
from . import marks
from .boxes import parse_box
from ...outside import nothing

importlib.import_module("perceptforge.outputs.report")
import_module("perceptforge.store.rundir")
import_module("..backends.registry", package="perceptforge.logic")
__import__("perceptforge.annotation")
import_module(name_from_somewhere)  # not a literal: out of reach of the check
"""


def test_the_check_reports_every_kind_of_import():
    """Absolute, `from perceptforge import x`, relative (resolved against the module's package) and
    literal import_module calls are all reported; a folder's own modules are not."""
    rules = import_rules()
    found = rule_violations(Path("logic/fake.py"), FAKE_LOGIC_MODULE, rules)
    forbidden = ["annotation", "audit", "backends", "cli", "flows", "outputs", "scorer", "store", "tasks"]
    assert found == [f"logic/fake.py imports perceptforge.{f}" for f in forbidden]
    assert folders_imported(FAKE_LOGIC_MODULE, Path("logic/fake.py")) == {*forbidden, "logic"}
    # in a package's __init__, one dot is the package itself; two, its parent
    assert folders_imported("from .. import flows\nfrom . import marks", Path("logic/__init__.py")) == {
        "flows",
        "logic",
    }
    # a module two folders down climbs two levels to reach the top package
    assert folders_imported("from ...audit import run", Path("scorer/benchmarks/blink.py")) == {"audit"}
    assert folders_imported("from . import fileio", Path("errors.py")) == {"fileio"}
    assert rule_violations(Path("logic/fake.py"), "from perceptforge.data import geometry", rules) == []


def test_root_modules_stay_at_the_bottom():
    for name in ROOT_MODULES:
        assert perceptforge_imports(REPO / f"{name}.py") <= {"errors"}, name


def test_design_md_is_cited_as_architecture_md():
    for path in REPO.rglob("*"):
        if path.suffix in (".py", ".yaml", ".toml", ".md") and not any(
            p.startswith((".venv", "build")) for p in path.parts
        ):
            if path.name not in ("ARCHITECTURE.md", Path(__file__).name):
                assert "DESIGN.md" not in path.read_text(errors="ignore"), path


@pytest.mark.timeout(600)
def test_wheel_ships_every_subpackage_and_data_file(tmp_path):
    """The repository root is the package, so a folder forgotten in pyproject's list ships a broken wheel
    while editable installs still pass: build the wheel and look inside."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("perceptforge-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    skip = ("tests", "benchmarks", "build", "runs", "examples", ".")  # examples/: packages of their own
    for init in REPO.rglob("__init__.py"):
        rel = init.relative_to(REPO)
        if rel.parts[0].startswith(skip) or len(rel.parts) == 1:
            continue
        assert f"perceptforge/{rel.as_posix()}" in names, f"subpackage {rel.parent} is not in the wheel"
    suffixes = (".yaml", ".txt", ".xml", ".md", ".json", ".jpg", ".png")
    data = [
        p
        for p in REPO.rglob("*")
        if p.is_file()
        and p.suffix in suffixes
        and len(p.relative_to(REPO).parts) > 1
        and not p.relative_to(REPO).parts[0].startswith(skip)
        and (REPO / p.relative_to(REPO).parts[0] / "__init__.py").exists()
    ]
    missing = [str(p.relative_to(REPO)) for p in data if f"perceptforge/{p.relative_to(REPO).as_posix()}" not in names]
    assert not missing, f"data files not in the wheel: {missing[:10]}"
