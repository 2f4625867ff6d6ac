"""``perceptforge models list / pull PROFILE``: the models a profile names, where a run will read them, and fetching
the missing ones into the Hugging Face cache (``backends/hub.py``)."""

from __future__ import annotations

import os

import typer
from rich.markup import escape
from rich.progress import DownloadColumn, Progress
from rich.table import Table

from perceptforge.backends import hub
from perceptforge.cli.app import console, new_app
from perceptforge.errors import PerceptforgeError

app = new_app("The models a profile names: which are present, and fetching the missing ones.")

PROFILE = typer.Argument(..., help="bundled profile name (local, gpu) or a YAML path")


@app.callback()
def _group() -> None:
    """The models a profile names."""


def _models(profile: str) -> list[hub.ProfileModel]:
    from perceptforge.configs.profile import load_profile

    return hub.profile_models(load_profile(profile))


def size_text(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    raise AssertionError


@app.command("list")
def list_models(profile: str = PROFILE) -> None:
    """Which models of the profile a run finds, and how to fetch the rest.

    Each model field, what it names, and whether it is there: a local path, or the Hugging Face cache at the pinned
    revision. Exits 1 when any is missing."""
    models = _models(profile)
    if not models:
        console.print(f"profile {escape(profile)} names no model weights: nothing to fetch", highlight=False)
        return
    table = Table(title=f"models of profile {profile}")
    for column in ("field", "model", "kind", "status"):
        table.add_column(column)
    absent = 0
    for item in models:
        try:
            found = hub.locate(item.ref.text, item.ref.kind, profile)
            status = f"[green]present[/] {escape(found.label if item.ref.where == 'hub' else str(found.path))}"
        except PerceptforgeError as exc:
            absent += 1
            status = f"[red]missing[/] {escape(str(exc).split(': ', 1)[-1])}"
        if not item.ref.pinned:
            status += " [yellow](revision not pinned: add @<commit>)[/]"
        table.add_row(item.where, escape(item.ref.text), item.ref.kind, status)
    console.print(table)
    if absent:
        fetchable = any(m.ref.where != "local" for m in models)
        how = f"run `{hub.PULL.format(profile=profile)}`" if fetchable else "fix the paths in the profile"
        console.print(f"{absent} missing: {how}", highlight=False)
        raise typer.Exit(1)


def _pull_file(plan: hub.PullPlan) -> hub.Located:
    with Progress(*Progress.get_default_columns(), DownloadColumn(), console=console) as bar:
        task = bar.add_task(escape(plan.ref.filename), total=plan.size or None)
        return hub.pull(plan, lambda done, total: bar.update(task, completed=done, total=total or None))


@app.command("pull")
def pull(profile: str = PROFILE) -> None:
    """Fetch the profile's models into the Hugging Face cache.

    Every hub model at its pinned revision (only the files its pipeline loads) and every published file with its
    digest checked; what is there already is kept, a stopped pull resumes. Local paths are only checked."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise PerceptforgeError("HF_HUB_OFFLINE is set: pulling needs the hub; unset it for this command")
    models = _models(profile)
    fetched = 0
    for item in models:
        ref = item.ref
        if ref.where == "local":
            found = hub.locate(ref.text, ref.kind, profile)
            console.print(f"[green]local[/] {escape(item.where)}: {escape(str(found.path))}", highlight=False)
            continue
        if not ref.pinned:
            console.print(f"[yellow]note[/] {escape(ref.text)}: no pinned revision, the default branch is taken")
        plan = hub.plan_pull(ref)
        at = f"@{plan.commit}" if plan.commit else ""
        console.print(
            f"[bold]{escape(item.where)}[/]: {escape(ref.repo_id or ref.filename)}{at}: {len(plan.files)} files, "
            f"{size_text(plan.size)}",
            highlight=False,
        )
        found = _pull_file(plan) if ref.where == "url" else hub.pull(plan)  # the hub's files: its own bars
        fetched += 1
        console.print(f"  [green]ready[/] {escape(str(found.path))}", highlight=False)
    console.print(f"{fetched} fetched or already there; runs read them offline (HF_HUB_OFFLINE=1 is honoured)")
