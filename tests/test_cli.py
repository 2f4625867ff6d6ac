import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perceptforge.cli import app

COMMANDS = [
    [],
    ["run"],
    ["run", "mvp"],
    ["demo"],
    ["export"],
    ["score"],
    ["predict"],
    ["templates"],
    ["templates", "list"],
    ["annotate"],
    ["annotate", "push"],
    ["annotate", "pull"],
    ["profile", "check"],
    ["schema"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "root")
def test_help(args):
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_console_script_installed():
    proc = subprocess.run([str(Path(sys.executable).parent / "perceptforge"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "score" in proc.stdout
