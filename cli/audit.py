"""``perceptforge audit``: the validity audit of a split (ours or an official release)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from perceptforge.cli.app import console, err_console


def print_audit(doc: dict, out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"audit of {doc['items']} questions ({doc['benchmark']})")
    for col in ("check", "result", "flagged", "summary"):
        table.add_column(col)
    shown = {True: "[green]passed[/]", False: "[red]FAILED[/]", None: "[dim]not checked[/]"}
    for check in doc["checks"]:
        table.add_row(check["name"], shown[check["passed"]], str(len(check["flags"])), check["summary"])
    console.print(table)
    corpus = doc.get("gate_corpus")
    if corpus:  # what the gates stop, beside what the checks above found (a split of ours)
        state = {True: " [red](stale: measured with other gate limits)[/]", None: " (this split's gate limits unknown)"}
        console.print(
            f"gate corpus ({corpus['date']}, {corpus['pairs']} pairs labelled by looking): the gates stop "
            f"{corpus['recall']}% of the bad pairs and {corpus['false_quarantines']}% of the good ones"
            + state.get(corpus["stale"], ""),
            soft_wrap=True,
        )
    console.print(f"audit: [bold]{(out / 'audit.html').resolve()}[/] and audit.json", soft_wrap=True)


def audit(
    paths: list[Path] = typer.Argument(..., help="an export folder, a run directory, or official release files"),
    benchmark: str = typer.Option(
        "perceptforge", "--benchmark", help="perceptforge (our splits), blink, mvp-bench, codis, mme-realworld"
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="where audit.json and audit.html go (default: beside)"),
    thresholds: Optional[Path] = typer.Option(None, "--thresholds", help="YAML overriding the default thresholds"),
    images: Optional[Path] = typer.Option(None, "--images", help="image folder of an official release (blind runs)"),
    predict_endpoint: Optional[str] = typer.Option(
        None, "--predict-endpoint", help="OpenAI-compatible endpoint for the blind baseline (images grey)"
    ),
    model: Optional[str] = typer.Option(None, "--model", help="model name at --predict-endpoint"),
    strict: bool = typer.Option(False, "--strict", help="exit 1 when a check fails (for a dataset repository's CI)"),
) -> None:
    """Balance, option bias, a blind baseline, duplicates and leakage, human verification: audit.json + audit.html."""
    from perceptforge.audit.run import audit as run_audit

    target = out or (paths[0] if paths[0].is_dir() else paths[0].parent)
    blind = None
    if predict_endpoint:
        if not model:
            raise typer.BadParameter("--predict-endpoint needs --model")
        from perceptforge.backends.chat import ChatClient

        blind = ChatClient(base_url=predict_endpoint, model=model)
    with console.status("auditing"):
        doc = run_audit(paths, target, benchmark, thresholds, blind=blind, images=images)
    print_audit(doc, target)
    if strict and not doc["passed"]:
        err_console.print("[bold red]audit failed[/] (--strict)", highlight=False)
        raise typer.Exit(1)
