"""ARCHITECTURE.md matches the code: its folders exist, its import rules hold, and the wheel ships them."""

import ast
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOT_MODULES = {"errors", "fileio", "settings"}


def import_rules() -> dict[str, set[str]]:
    text = (REPO / "ARCHITECTURE.md").read_text()
    table = text.split("<!-- import-rules: folder | may import -->")[1].split("<!-- /import-rules -->")[0]
    rules = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        folder, allowed = cells[0].strip("`"), cells[-1]
        rules[folder] = {"*"} if "anything" in allowed else set(re.findall(r"[a-z_]+", allowed.replace("nothing", "")))
    return rules


def perceptforge_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        out |= {n.split(".")[1] for n in names if n.startswith("perceptforge.")}
    return out


def test_every_folder_named_exists_and_every_package_is_named():
    rules = import_rules()
    assert rules, "no import-rules table in ARCHITECTURE.md"
    for folder in rules:
        assert (REPO / folder).is_dir(), f"ARCHITECTURE.md names {folder}/, which does not exist"
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages <= set(rules), f"folders missing from ARCHITECTURE.md: {sorted(packages - set(rules))}"


def test_import_rules_hold():
    broken = []
    for folder, allowed in import_rules().items():
        if "*" in allowed:
            continue
        for path in sorted((REPO / folder).rglob("*.py")):
            for target in perceptforge_imports(path) - allowed - {folder}:
                broken.append(f"{path.relative_to(REPO)} imports perceptforge.{target}")
    assert not broken, "\n".join(broken)


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
    skip = ("tests", "benchmarks", "build", "runs", ".")
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
