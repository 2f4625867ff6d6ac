"""Commands whose implementation lands with later issues: listed now so the CLI's shape is stable."""

from __future__ import annotations

import typer
from perceptforge.cli.app import new_app
from perceptforge.errors import PerceptforgeError


def _not_yet(what: str, issue: int) -> None:
    raise PerceptforgeError(f"'{what}' is not available in this version yet (tracked in issue {issue})")


def register(app: typer.Typer) -> None:
    annotate = new_app("Human verification in Label Studio: push candidates, pull annotations.")
    app.add_typer(annotate, name="annotate")

    @annotate.command("push")
    def annotate_push(run_dir: str = typer.Argument(..., help="run directory")) -> None:
        """Create or update the Label Studio project(s) and import the run's candidates."""
        _not_yet("annotate push", 6)

    @annotate.command("pull")
    def annotate_pull(run_dir: str = typer.Argument(..., help="run directory")) -> None:
        """Export annotations, apply corrections, decide retention, report agreement."""
        _not_yet("annotate pull", 6)

