"""``perceptforge``: the command line. Commands import their flows lazily so ``--help`` stays fast."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape

from perceptforge.cli.app import console, err_console, new_app
from perceptforge.cli.models import app as models_app
from perceptforge.cli.sources import app as sources_app
from perceptforge.cli.sources import selected_ids
from perceptforge.cli.templates import app as templates_app
from perceptforge.errors import InputError, shown
from perceptforge.flows.family import Family, RunRequest
from perceptforge.flows.registry import Refusal, family, registered
from perceptforge.settings import configure_prefect

app = new_app(
    "perceptforge: build multimodal perception benchmarks (MVP-Bench, BLINK, CODIS, MME-RealWorld) "
    "end to end and score models on them."
)
run_app = new_app("Run a construction flow over a source image set.")
profile_app = new_app("Inspect and validate profiles (which backend serves each stage).")
app.add_typer(run_app, name="run")
app.add_typer(profile_app, name="profile")
app.add_typer(templates_app, name="templates")
app.add_typer(sources_app, name="sources")
app.add_typer(models_app, name="models")


def bundled_sample() -> Path:
    return Path(str(resources.files("perceptforge.data").joinpath("sample")))


def run_and_print(fam: Family, request: RunRequest) -> dict:
    """The one run path (``flows/run.run_family``), then the family's table, the quarantine, where things are."""
    configure_prefect()
    from rich.table import Table

    from perceptforge.flows.run import run_family, stops_on_signals

    # No spinner here: the stage runner draws a progress bar per stage.
    console.print(f"[bold]{fam.name} flow[/] on {request.source} → {request.out}", soft_wrap=True)
    with stops_on_signals():  # SIGTERM, Ctrl-C: the run stops in one line, resumable
        summary = run_family(fam, request)
    title, columns, rows = fam.table(summary)
    table = Table(title=title)
    for k, column in enumerate(columns):
        table.add_column(column, justify="left" if k == 0 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for reason, n in summary["failures"].items():
        console.print(f"  [yellow]quarantined[/] {n} × {reason}")
    for line in fam.notes(summary):
        console.print(f"  {line}")
    out = Path(request.out).resolve()
    console.print(f"run directory: [bold]{out}[/]", soft_wrap=True)
    console.print(f"report:        [bold]{summary['report']}[/]", soft_wrap=True)
    if fam.next_step:
        console.print(f"next: {fam.next_step.format(out=request.out)}", soft_wrap=True)
    if not fam.built(summary):
        reasons = ", ".join(f"{n} × {r}" for r, n in summary["failures"].items()) or "no unit reached the last stage"
        err_console.print(f"[bold red]error:[/] {fam.nothing_built} ({reasons})", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    return summary


def _run_command(fam: Family) -> Callable[..., None]:
    """``perceptforge run <family>``: the same options with the same meaning for every family, plus the
    family's own (``Family.options``)."""
    select = fam.select_option.lstrip("-")

    def command(**given: Any) -> None:
        request = RunRequest(
            source=str(given["source"]),
            out=str(given["out"]),
            profile=given["profile"],
            seed=given["seed"],
            limit=given["limit"],
            select=selected_ids(given[select], fam.select_option),
            fresh=given["fresh"],
            runner=given["runner"],
            dask_address=given["dask_address"],
            options={k: given[k] for k in fam.options if given.get(k) is not None},
        )
        run_and_print(fam, request)

    def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)

    what = "template ids, e.g. B1,B3,E2" if select == "categories" else "task ids, e.g. jigsaw,counting"
    params = [
        option(
            "source", Path, typer.Option(..., "--source", help="source directory with images and their annotations")
        ),
        option("out", Path, typer.Option(..., "--out", help="run directory (created; an existing one is resumed)")),
        option(
            "profile", str, typer.Option("local", "--profile", help="bundled profile name (local, gpu) or a YAML path")
        ),
        option(
            "seed",
            Optional[int],
            typer.Option(None, "--seed", min=0, help="seed for every random choice (default: the profile's)"),
        ),
        option(
            "limit",
            Optional[int],
            typer.Option(None, "--limit", min=1, help="only the first N source images the family builds from (by id)"),
        ),
        option(
            select, Optional[str], typer.Option(None, fam.select_option, help=f"comma-separated {what} (default: all)")
        ),
        option(
            "fresh",
            bool,
            typer.Option(
                False, "--fresh", help="clear OUT first when it holds a run of other settings (seed, profile …)"
            ),
        ),
        option(
            "runner",
            Optional[str],
            typer.Option(None, "--runner", help="threads or dask; overrides the profile's runner.kind"),
        ),
        option(
            "dask_address",
            Optional[str],
            typer.Option(None, "--dask-address", help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786"),
        ),
        *(
            option(name, Optional[str], typer.Option(None, "--" + name.replace("_", "-"), help=text))
            for name, text in fam.options.items()
        ),
    ]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__doc__ = fam.summary
    command.__name__ = f"run_{fam.name.replace('-', '_')}"
    return command


def _refused_command(refusal: Refusal) -> Callable[..., None]:
    """``perceptforge run <name>`` of a refused family: one line saying so, whatever options were given (the
    warning every command prints says why)."""

    def command() -> None:
        raise InputError(f"run {refusal.name}", "this family was refused when it registered (the warning above)")

    return command


# Prefect reads its settings when first imported, and a family module (a plug-in's too) may import it:
# our defaults (state folder, quiet logs, the startup timeout) go in first.
configure_prefect()
_registered = registered()
for _family in _registered.families.values():
    run_app.command(_family.name)(_run_command(_family))
# A refused plug-in is one warning line on every command, and the other families and commands work as before.
for _refusal in _registered.refused:
    err_console.print(f"[yellow]warning:[/] {escape(shown(_refusal.error))}", highlight=False, soft_wrap=True)
    if _refusal.name not in _registered.families:
        run_app.command(
            _refusal.name,
            hidden=True,
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
        )(_refused_command(_refusal))


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="run directory for the demo"),
    seed: int = typer.Option(0, "--seed", min=0),
) -> None:
    """Run the mvp flow on the bundled photos with the local (CPU, offline) profile, afresh: a demo directory left
    by an earlier version (other templates, another profile) is started over, never refused."""
    request = RunRequest(source=str(bundled_sample()), out=str(out), seed=seed, fresh=True)
    run_and_print(family("mvp"), request)


@profile_app.command("check")
def profile_check(profiles: list[str] = typer.Argument(..., help="profile names or YAML paths")) -> None:
    """Validate profiles; the first bad one stops with one line naming the key."""
    from perceptforge.configs.profile import load_profile

    for name in profiles:
        prof = load_profile(name)
        console.print(f"[green]ok[/] {name}: " + ", ".join(f"{k}={v}" for k, v in prof.backend_names().items()))


@profile_app.command("show")
def profile_show(profile: str = typer.Argument("local")) -> None:
    """Print a profile with every default filled in."""
    import yaml

    from perceptforge.configs.profile import load_profile

    console.print(yaml.safe_dump(load_profile(profile).model_dump(mode="json"), sort_keys=False), highlight=False)


@app.command()
def schema(
    out: Optional[Path] = typer.Option(None, "--out", help="write the JSON Schema here instead of printing it"),
) -> None:
    """Export the JSON Schema of every record (data/schema.json)."""
    import json

    from perceptforge.data.schema import json_schema
    from perceptforge.fileio import atomic_write_text

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if out:
        atomic_write_text(out, text)
        console.print(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


from perceptforge.cli.annotate import app as annotate_app  # noqa: E402
from perceptforge.cli.audit import audit  # noqa: E402
from perceptforge.cli.export import export  # noqa: E402
from perceptforge.cli.predict import predict  # noqa: E402
from perceptforge.cli.score import score  # noqa: E402

app.command()(score)
app.command()(predict)
app.command()(export)
app.command()(audit)
app.add_typer(annotate_app, name="annotate")
