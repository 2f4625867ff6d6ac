"""``perceptforge templates``: list, show, check and scaffold category templates."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from perceptforge.cli.app import console, new_app
from perceptforge.errors import PerceptforgeError

app = new_app("List, show and check the category templates (one declarative file each).")


@app.command("list")
def list_templates() -> None:
    """Every discovered template: id, name, high-level category, edit kind, file."""
    from perceptforge.logic.templates import discover

    table = Table(title="category templates")
    for col in ("id", "name", "high", "edit kind", "version", "file"):
        table.add_column(col)
    for tid, (t, path) in discover().items():
        table.add_row(tid, t.name, t.high, t.edit_kind.value, str(t.version), str(path))
    console.print(table)


@app.command("show")
def show(template_id: str = typer.Argument(..., help="template id, e.g. B3")) -> None:
    """Print one template as loaded, with its file."""
    import yaml

    from perceptforge.logic.templates import discover

    found = discover()
    if template_id not in found:
        raise PerceptforgeError(f"no template {template_id!r}; known: {', '.join(found)}")
    template, path = found[template_id]
    console.print(f"# {path}")
    console.print(
        yaml.safe_dump(template.model_dump(mode="json"), sort_keys=False, allow_unicode=True), highlight=False
    )


@app.command("check")
def check_all() -> None:
    """Validate every template and the prompts it names; exit 2 on the first problem list."""
    from perceptforge.logic.templates import check, discover

    found = discover()
    problems = {tid: check(t) for tid, (t, _) in found.items()}
    for tid, probs in problems.items():
        console.print(f"[green]ok[/] {tid}" if not probs else f"[red]bad[/] {tid}: " + "; ".join(probs))
    bad = [tid for tid, probs in problems.items() if probs]
    if bad:
        raise PerceptforgeError(f"{len(bad)} template(s) with problems: {', '.join(bad)}")
    console.print(f"{len(found)} templates ok")


@app.command("new")
def new(
    template_id: str = typer.Argument(..., help="id of the new category, e.g. B5"),
    name: str = typer.Option(..., "--name", help="e.g. 'Behaviour-Vehicle'"),
    out: Path = typer.Option(Path("."), "--out", help="template folder to write into"),
) -> None:
    """Write a scaffold template file to edit (then add its folder to PERCEPTFORGE_TEMPLATES)."""
    from perceptforge.fileio import atomic_write_text
    from perceptforge.logic.templates import scaffold

    path = out / f"{template_id}.yaml"
    if path.exists():
        raise PerceptforgeError(f"{path} exists; not overwriting")
    atomic_write_text(path, scaffold(template_id, name))
    console.print(f"wrote {path}")
