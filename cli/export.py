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


def export(
    run_dir: Path = typer.Argument(..., help="run directory with items/ and images/"),
    out: Path = typer.Option(..., "--out", help="split directory to write"),
    formats: str = typer.Option(
        "jsonl,parquet,vlmevalkit,lmms-eval",
        "--formats",
        help="comma-separated: jsonl, parquet, vlmevalkit (mcq.tsv, yorn.tsv), lmms-eval (task over the Parquet)",
    ),
    only_verified: bool = typer.Option(False, "--only-verified", help="only items both annotators accepted"),
    seed: int = typer.Option(0, "--seed", help="seed of the val/test assignment"),
    val_fraction: float = typer.Option(0.5, "--val-fraction", min=0.0, max=1.0, help="share of each category in val"),
    license: str = typer.Option(
        "other", "--license", help="the data card's licence (a Hub licence id, e.g. cc-by-4.0): the sources' terms"
    ),
    audit: bool = typer.Option(True, "--audit/--no-audit", help="run `perceptforge audit` on the split"),
) -> None:
    """Export a run as a split stratified by category: JSONL + images, Parquet, VLMEvalKit TSV, manifest, data card.
    A BLINK-style run (`run blink`) is written in BLINK's official layout instead, and a CODIS or MME-RealWorld run
    (`run codis`, `run mme-realworld`) as the release's JSON with its kept items' original images."""
    import json

    from perceptforge.outputs.export import export_split

    marker = run_dir / "run.json"
    if marker.is_file() and json.loads(marker.read_text()).get("flow") == "blink":
        from perceptforge.outputs.blink_export import export_blink

        written = export_blink(run_dir, out, license=license, only_verified=only_verified)
        console.print(
            f"BLINK layout: {written['items']} items, {len(written['files'])} files → [bold]{out}[/] (score with "
            f"`perceptforge score blink --data {out}/<Task>/val-00000-of-00001.parquet …` or --data "
            f"{out}/val_answers.json)"
        )
        if audit:
            audit_beside([out / "val_answers.json"], out, "blink")
        return
    if marker.is_file() and json.loads(marker.read_text()).get("flow") in ("codis", "mme-realworld"):
        from perceptforge.outputs.authored_export import export_authored

        written_files = export_authored(run_dir, out, license=license)
        benchmark = written_files["benchmark"]
        official = written_files["official"]
        console.print(
            f"{written_files['items']} kept items in {benchmark}'s official format → [bold]{out}[/] "
            f"({', '.join(official)}); score with `perceptforge score {benchmark} "
            f"--data {out}/{official[0] if official else '…'} --predictions …`"
        )
        if not written_files["items"]:
            console.print("[yellow]warning:[/] no item has passed review yet: the split is empty")
        elif audit:
            audit_beside([out / f for f in official], out, benchmark)
        return

    manifest = export_split(
        run_dir,
        out,
        tuple(f.strip() for f in formats.split(",") if f.strip()),
        seed,
        val_fraction,
        only_verified,
        license=license,
    )
    console.print(
        f"val {manifest.counts.get('val', 0)} · test {manifest.counts.get('test', 0)} items → [bold]{out}[/] "
        f"({len(manifest.files)} files)"
    )
    empty = [s for s in ("val", "test") if not manifest.counts.get(s)]
    if empty:
        console.print(
            f"[yellow]warning:[/] {' and '.join(empty)} split is empty: whole source images go to one side, and "
            f"this run has too few of them for both"
        )
    if audit and "jsonl" in formats:
        audit_beside([out], out)
