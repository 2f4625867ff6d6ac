"""Every command the README and the docs show is one the code has: each `perceptforge …` line (in code blocks and in
inline code) names commands that exist and flags those commands take, each command path's `--help` parses, each
`make` target exists, and the docs build with `mkdocs build --strict` (the command reference generated from the
commands)."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perceptforge.cli.reference import is_group, option_names, resolve, root_command

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:\.venv/bin/)?perceptforge [^`]+)`(?!`)")
PROGRAM = re.compile(r"^(?:\$ )?(?:\.venv/bin/)?perceptforge(?= |$)")
# families of the worked example package (examples/), which the docs run once it is installed
EXAMPLE_FAMILIES = set(
    re.findall(r'(?m)^    name = "([a-z0-9_-]+)"', "".join(p.read_text() for p in (REPO / "examples").rglob("*.py")))
)
# words that stand for something the reader fills in
PLACEHOLDER = re.compile(r"^([A-Z][A-Z0-9_]*|<[^>]+>|\{[^}]+\}|…|\.\.\.)$")


def shown_commands() -> list[tuple[str, str]]:
    """(where, command line) for every perceptforge command in the pages, code blocks and inline code."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for block in FENCE.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block.group(1).replace("\\\n", "  ").splitlines()
            for k, line in enumerate(lines):
                line = line.split(" # ")[0].strip()
                if PROGRAM.match(line):
                    found.append((f"{page.name}:{first + k}", line))
        for span in INLINE.finditer(text):
            found.append((f"{page.name}:{text.count(chr(10), 0, span.start()) + 1}", span.group(1)))
    return found


def words_of(line: str) -> list[str]:
    """The line's words after the program name; optional parts' brackets and alternatives' bars taken off."""
    try:
        words = shlex.split(PROGRAM.sub("", line))
    except ValueError:  # an unclosed quote in prose: split on blanks
        words = PROGRAM.sub("", line).split()
    out = []
    for word in words:
        if word in ("|", "&&", ";", ">", "2>&1"):
            break  # the next program
        out.append(word.strip("[]()"))
    return [w for w in out if w]


def check(line: str, root) -> list[str]:
    """What is wrong with one shown command line (nothing: it matches the code)."""
    words = words_of(line)
    path, command, rest = resolve(root, words)
    problems = []
    if path == ("run",) and rest and rest[0] in EXAMPLE_FAMILIES:
        return []  # a plug-in's command: tests/test_example_package.py runs it
    if is_group(command) and rest and not rest[0].startswith("-") and not PLACEHOLDER.match(rest[0]):
        problems.append(f"'perceptforge {' '.join((*path, rest[0]))}': no such command")
        return problems
    known = option_names(command)
    for word in rest:
        if word.startswith("--"):
            flag = word.split("=", 1)[0].rstrip(",.;:")
            if flag not in known:
                problems.append(f"'perceptforge {' '.join(path)}' takes no {flag}")
    return problems


SHOWN = shown_commands()


def test_the_docs_show_commands_at_all():
    assert len(SHOWN) > 60 and any(where.startswith("README.md") for where, _ in SHOWN)


def test_every_shown_command_and_flag_exists():
    root = root_command()
    problems = [f"{where}: {p}  ←  {line}" for where, line in SHOWN for p in check(line, root)]
    assert not problems, "\n".join(problems)


def test_a_renamed_flag_or_command_would_be_caught():
    root = root_command()
    assert check("perceptforge annotate push RUN --sample 20", root) == []
    assert check("perceptforge annotate push RUN --sampel 20", root) == [
        "'perceptforge annotate push' takes no --sampel"
    ]
    assert check("perceptforge annotate shove RUN", root) == ["'perceptforge annotate shove': no such command"]


def test_every_shown_command_path_has_a_help_that_parses():
    from perceptforge.cli.main import app

    root = root_command()
    paths = sorted({resolve(root, words_of(line))[0] for _, line in SHOWN})
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, f"perceptforge {' '.join(path)} --help: {result.output[-500:]}"


def test_every_shown_make_target_exists():
    targets = set(re.findall(r"(?m)^([a-z][a-z0-9_-]*):", (REPO / "Makefile").read_text()))
    shown = {
        (page.name, m[1]) for page in PAGES for m in re.finditer(r"(?:^|`|\n)make ([a-z][a-z0-9_-]*)", page.read_text())
    }
    assert {(where, t) for where, t in shown if t not in targets} == set()


@pytest.mark.timeout(300)
def test_the_docs_build_strict_with_the_generated_reference(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reference = (tmp_path / "site" / "cli" / "index.html").read_text()
    assert "perceptforge annotate push" in reference and "--sample" in reference
