"""``perceptforge export``: a run directory → a versioned, reproducible split."""

from __future__ import annotations

from pathlib import Path

import typer

from perceptforge.cli.app import console


def audit_beside(paths: list[Path], out: Path, benchmark: str = "perceptforge") -> None:
    """`perceptforge audit` of what was exported, its files written beside the split."""
    from perceptforge.audit.run import audit as run_audit
    from perceptforge.cli.audit import print_audit

    print_audit(run_audit(paths, out, benchmark), out)


def given_on_the_command_line(ctx: typer.Context, names: frozenset[str]) -> set[str]:
    """Which of the parameters ``names`` the user gave (a default is not a choice the family could ignore). By the
    source's name: Typer carries its own copy of click, whose ``ParameterSource`` is not ``click.core``'s."""
    sources = {n: ctx.get_parameter_source(n) for n in names}
    return {n for n, source in sources.items() if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")}


def export(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="run directory with items/ and images/"),
    out: Path = typer.Option(..., "--out", help="split directory to write"),
    formats: str = typer.Option(
        "jsonl,parquet,vlmevalkit,lmms-eval",
        "--formats",
        help="comma-separated: jsonl, parquet, vlmevalkit (<name>_MCQ.tsv, <name>_YORN.tsv, vlmevalkit_config.json), "
        "lmms-eval (task over the Parquet)",
    ),
    only_verified: bool = typer.Option(False, "--only-verified", help="only items both annotators accepted"),
    seed: int = typer.Option(0, "--seed", help="seed of the val/test assignment"),
    val_fraction: float = typer.Option(0.5, "--val-fraction", min=0.0, max=1.0, help="share of each category in val"),
    license: str = typer.Option(
        "other", "--license", help="the data card's licence (a Hub licence id, e.g. cc-by-4.0): the sources' terms"
    ),
    audit: bool = typer.Option(True, "--audit/--no-audit", help="run `perceptforge audit` on the split"),
) -> None:
    """Export a run as its family writes it: an MVP run as a split stratified by category (JSONL + images, Parquet,
    VLMEvalKit TSV, manifest, data card); a BLINK-style run in BLINK's official layout; a CODIS or MME-RealWorld run
    as the release's JSON with its kept items' original images. The audit then runs on what was written."""
    from perceptforge.flows.common import begin_export, check_export_out
    from perceptforge.flows.family import EXPORT_OPTIONS, ExportOptions, check_export_options
    from perceptforge.flows.registry import family_of_run

    fam = family_of_run(run_dir)
    check_export_out(out, run_dir, fam.name)
    check_export_options(fam, given_on_the_command_line(ctx, EXPORT_OPTIONS), f"export {run_dir}")
    options = ExportOptions(
        tuple(f.strip() for f in formats.split(",") if f.strip()), only_verified, seed, val_fraction, license
    )
    begin_export(out, fam.name)
    exported = fam.export(run_dir, out, options)
    console.print(exported.message, soft_wrap=True)
    for warning in exported.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    if audit and exported.audit_paths:
        audit_beside(exported.audit_paths, out, fam.audit_benchmark)
