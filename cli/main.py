"""``perceptforge``: the command line. Commands import their flows lazily so ``--help`` stays fast."""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path
from typing import Optional

import typer

from perceptforge.cli.app import console, err_console, new_app
from perceptforge.cli.templates import app as templates_app
from perceptforge.errors import PerceptforgeError
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


class _PrintedByTheCli(logging.Filter):
    """Prefect logs a failed flow's traceback. An input error or a stopped run (a full disk) is printed by the
    CLI as one line instead; real faults keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, PerceptforgeError)


def bundled_sample() -> Path:
    return Path(str(resources.files("perceptforge.data").joinpath("sample")))


def _run_mvp(
    source: Path,
    profile: str,
    out: Path,
    seed: int | None,
    limit: Optional[int],
    categories: Optional[str] = None,
    runner: Optional[str] = None,
    dask_address: Optional[str] = None,
    fresh: bool = False,
) -> dict:
    configure_prefect()
    from perceptforge.flows.common import task_runner
    from perceptforge.flows.mvp import mvp_flow, plan_mvp

    cats = [c.strip() for c in categories.split(",") if c.strip()] if categories else None
    # Source, profile, templates and run directory are checked before the flow starts: a problem is one line.
    plan = plan_mvp(source, profile, out, seed, limit, cats, fresh)
    prof = plan.profile
    kind = runner or prof.runner.kind
    workers = prof.thread_workers() if kind == "threads" else prof.runner.max_workers
    workers = prof.workers_within_memory(workers, max((e.width * e.height for e in plan.entries), default=0))
    flow = mvp_flow.with_options(task_runner=task_runner(kind, workers, dask_address or prof.runner.dask_address))
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).addFilter(_PrintedByTheCli())
    # No spinner here: the stage runner draws a progress bar per stage.
    console.print(f"[bold]mvp flow[/] on {source} → {out}")
    return flow(source=str(source), profile=profile, out=str(out), seed=seed, limit=limit, categories=cats, fresh=fresh)


def _require_items(summary: dict) -> None:
    """A run that built nothing is a failure: exit 1 with what went wrong."""
    if summary["counts"].get("items", 0) == 0:
        reasons = ", ".join(f"{n} × {r}" for r, n in summary["failures"].items()) or "no unit reached the items stage"
        err_console.print(f"[bold red]error:[/] the run built no items ({reasons})", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _print_summary(summary: dict, out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"mvp run · profile {summary['profile']} · seed {summary['seed']}")
    table.add_column("stage")
    table.add_column("count", justify="right")
    for key, value in summary["counts"].items():
        table.add_row(key, str(value))
    console.print(table)
    for reason, n in summary["failures"].items():
        console.print(f"  [yellow]quarantined[/] {n} × {reason}")
    for category, reason in summary.get("skipped_categories", {}).items():
        console.print(f"  [dim]skipped {category}: {reason}[/]")


@run_app.command("mvp")
def run_mvp(
    source: Path = typer.Option(..., "--source", help="source directory with images and a COCO-style annotations.json"),
    profile: str = typer.Option("local", "--profile", help="bundled profile name (local, gpu) or a YAML path"),
    out: Path = typer.Option(..., "--out", help="run directory (created; an existing one is resumed)"),
    seed: Optional[int] = typer.Option(
        None, "--seed", min=0, help="seed for every random choice of the run (default: the profile's seed)"
    ),
    limit: Optional[int] = typer.Option(
        None,
        "--limit",
        min=1,
        help="only the first N source images with a main subject (by id); donor scenes are always used",
    ),
    categories: Optional[str] = typer.Option(
        None, "--categories", help="comma-separated template ids, e.g. B1,B3,E2 (default: all)"
    ),
    runner: Optional[str] = typer.Option(
        None, "--runner", help="threads (default) or dask; overrides the profile's runner.kind"
    ),
    dask_address: Optional[str] = typer.Option(
        None, "--dask-address", help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786"
    ),
    fresh: bool = typer.Option(
        False, "--fresh", help="clear OUT first when it holds a run of other settings (seed, profile, sources …)"
    ),
) -> None:
    """Build MVP-Bench-style items (MVP-Bench §4.1) from SOURCE into the run directory OUT."""
    summary = _run_mvp(source, profile, out, seed, limit, categories, runner, dask_address, fresh)
    _print_summary(summary, out)
    console.print(f"run directory: [bold]{out.resolve()}[/]")
    console.print(f"report:        [bold]{summary['report']}[/]")
    _require_items(summary)


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), "--out", help="run directory for the demo"),
    seed: int = typer.Option(0, "--seed", min=0),
) -> None:
    """Run the mvp flow on the bundled photos with the local (CPU, offline) profile."""
    summary = _run_mvp(bundled_sample(), "local", out, seed, None)
    _print_summary(summary, out)
    console.print(f"run directory: [bold]{out.resolve()}[/]")
    console.print(f"report:        [bold]{summary['report']}[/]")
    _require_items(summary)


@run_app.command("blink")
def run_blink(
    source: Path = typer.Option(..., "--source", help="source directory with images and a COCO-style annotations.json"),
    out: Path = typer.Option(..., "--out", help="run directory (created; an existing one is resumed)"),
    profile: str = typer.Option("local", "--profile", help="bundled profile name (local, gpu) or a YAML path"),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="seed for every random choice of the run"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N source images (by id)"),
    tasks: Optional[str] = typer.Option(
        None, "--tasks", help="comma-separated task template ids, e.g. jigsaw,counting (default: all)"
    ),
    prompt_variants: Optional[str] = typer.Option(
        None,
        "--prompt-variants",
        help="BLINK §4.3's visual-prompt ablation as variants of one split: RADII:COLOURS, e.g. 5,10,15:red,grey",
    ),
    fresh: bool = typer.Option(False, "--fresh", help="clear OUT first when it holds a run of other settings"),
) -> None:
    """Build BLINK-style items (BLINK §3.2: vision tasks as MCQs with visual prompts) from SOURCE into OUT."""
    configure_prefect()
    from perceptforge.flows.blink import blink_flow, plan_blink

    chosen = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
    plan_blink(source, out, profile, seed, limit, chosen, prompt_variants, fresh)  # each input problem: one line
    summary = blink_flow(
        source=str(source),
        out=str(out),
        profile=profile,
        seed=seed,
        limit=limit,
        tasks=chosen,
        prompt_variants=prompt_variants,
        fresh=fresh,
    )
    from rich.table import Table

    table = Table(title=f"blink run · seed {summary['seed']} · variants {', '.join(summary['variants'])}")
    for col in ("task", "items", "random choice %"):
        table.add_column(col, justify="left" if col == "task" else "right")
    for task_name, n in summary["items_per_task"].items():
        table.add_row(task_name, str(n), f"{summary['random_choice_per_task'][task_name]:.1f}")
    console.print(table)
    for reason, n in summary["failures"].items():
        console.print(f"  [yellow]quarantined[/] {n} × {reason}")
    for task_name, reason in summary["skipped_tasks"].items():
        console.print(f"  [dim]skipped {task_name}: {reason}[/]")
    console.print(f"run directory: [bold]{out.resolve()}[/]")
    console.print(f"report:        [bold]{summary['report']}[/]")
    _require_items(summary)


def _run_authored(
    benchmark: str, source: Path, out: Path, profile: str, seed: Optional[int], limit: Optional[int], fresh: bool
) -> None:
    configure_prefect()
    from perceptforge.flows.authored import plan_authored

    plan_authored(benchmark, source, out, profile, seed, limit, fresh)  # each input problem: one line
    if benchmark == "codis":
        from perceptforge.flows.codis import codis_flow as flow
    else:
        from perceptforge.flows.mme_realworld import mme_realworld_flow as flow
    summary = flow(source=str(source), out=str(out), profile=profile, seed=seed, limit=limit, fresh=fresh)
    from rich.table import Table

    table = Table(title=f"{benchmark} run · drafter {summary['drafter']} · seed {summary['seed']}")
    for col in ("drafts per category", "items"):
        table.add_column(col)
    for category, n in summary["drafts_per_category"].items():
        table.add_row(category, str(n))
    console.print(table)
    for reason, n in summary["failures"].items():
        console.print(f"  [yellow]quarantined[/] {n} × {reason}")
    for check, n in summary["flagged_checks"].items():
        console.print(f"  [yellow]flagged[/] {n} draft(s) by {check}")
    console.print(f"run directory: [bold]{out.resolve()}[/]", soft_wrap=True)
    console.print(f"report:        [bold]{summary['report']}[/]", soft_wrap=True)
    console.print(
        f"next: `perceptforge annotate push {out}`: annotators write the items from these drafts", soft_wrap=True
    )
    if not summary["counts"]["drafts"]:
        err_console.print("[bold red]error:[/] the run drafted no items", highlight=False)
        raise typer.Exit(1)


SOURCE = typer.Option(..., "--source", help="source directory with images and a COCO-style annotations.json")
PROFILE = typer.Option("local", "--profile", help="bundled profile name (local, gpu) or a YAML path")
SEED = typer.Option(None, "--seed", min=0, help="seed for every random choice of the run")
LIMIT = typer.Option(None, "--limit", min=1, help="only the first N source images (by id)")
FRESH = typer.Option(False, "--fresh", help="clear OUT first when it holds a run of other settings")


@run_app.command("codis")
def run_codis(
    source: Path = SOURCE,
    out: Path = typer.Option(..., "--out", help="run directory (created; an existing one is resumed)"),
    profile: str = PROFILE,
    seed: Optional[int] = SEED,
    limit: Optional[int] = LIMIT,
    fresh: bool = FRESH,
) -> None:
    """Draft CODIS items (CODIS §3.3) from SOURCE into OUT, for annotators to write and cross-check in Label Studio."""
    _run_authored("codis", source, out, profile, seed, limit, fresh)


@run_app.command("mme-realworld")
def run_mme_realworld(
    source: Path = SOURCE,
    out: Path = typer.Option(..., "--out", help="run directory (created; an existing one is resumed)"),
    profile: str = PROFILE,
    seed: Optional[int] = SEED,
    limit: Optional[int] = LIMIT,
    fresh: bool = FRESH,
) -> None:
    """Draft MME-RealWorld items (§3.2) from full-resolution images in SOURCE into OUT, for annotators to write
    and review."""
    _run_authored("mme-realworld", source, out, profile, seed, limit, fresh)


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
