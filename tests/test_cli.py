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


def test_label_studio_sdk_is_imported_only_by_the_annotation_commands(cli_env):
    """label_studio_sdk (and pandas, which it imports) cost start-up time: only `annotate` loads them."""
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from perceptforge.cli import app\n"
        "for args in (['--help'], ['templates', 'list'], ['score', '--help'], ['annotate', 'push', '--help']):\n"
        "    CliRunner().invoke(app, args)\n"
        "print(sorted(m for m in ('label_studio_sdk', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=cli_env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
