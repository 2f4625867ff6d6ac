"""``perceptforge score``: the papers' metrics on official releases and on our splits."""

from __future__ import annotations

import gc
import inspect
from pathlib import Path
from typing import Optional

import typer

from perceptforge.cli.app import console, err_console
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import refuse_overwrite
from perceptforge.scorer import benchmarks

READABLE = (".json", ".jsonl", ".xlsx", ".tsv", ".csv")
# each resample rescores every item: a mistyped count would run until killed
MAX_BOOTSTRAP = 100_000


def expand_paths(paths: list[Path]) -> list[Path]:
    """A directory stands for the JSON / JSON Lines files and tables inside it (e.g. BLINK's saved_outputs/)."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() in READABLE)
            if not found:
                raise PerceptforgeError(f"{path}: directory holds no {', '.join(READABLE)} files")
            out.extend(found)
        elif not path.exists():
            raise PerceptforgeError(f"{path}: file not found")
        else:
            out.append(path)
    return out


def score(
    benchmark: str = typer.Argument(..., help=benchmarks.choices()),
    data: list[Path] = typer.Option(..., "--data", help="the benchmark's data / answer file(s); repeat for several"),
    predictions: list[Path] = typer.Option(
        [],
        "--predictions",
        help="prediction file(s) or a directory of them: JSON / JSON Lines, VLMEvalKit results (.xlsx .tsv .csv), "
        "lmms-eval samples_*.jsonl; repeat for several",
    ),
    protocol: str = typer.Option(
        "strict", "--protocol", help="strict (our extraction) or official (the official script's rules)"
    ),
    judge: Optional[str] = typer.Option(
        None, "--judge", help="LLM judge for what rules cannot decide: openai:MODEL@BASE_URL"
    ),
    judge_timeout: float = typer.Option(
        60.0,
        "--judge-timeout",
        min=0.1,
        help="seconds one try of a judge request may take, from connecting to the answer's last byte (4 retries)",
    ),
    json_out: Optional[Path] = typer.Option(None, "--json", help="write the metrics as JSON"),
    csv_out: Optional[Path] = typer.Option(
        None, "--csv", help="write the metric tables as CSV, and the per-item results beside them (NAME_items.csv)"
    ),
    xlsx_out: Optional[Path] = typer.Option(
        None, "--xlsx", help="write the metric tables and the per-item results as Excel sheets (needs openpyxl)"
    ),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write per-category bars as PNG"),
    items_out: Optional[Path] = typer.Option(None, "--items", help="write one JSON line per scored item"),
    bootstrap: int = typer.Option(
        0,
        "--bootstrap",
        min=0,
        max=MAX_BOOTSTRAP,
        help=f"bootstrap resamples for 95% intervals (0: none; at most {MAX_BOOTSTRAP:,}, far past where the "
        "interval stops moving)",
    ),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap"),
    allow_missing: bool = typer.Option(
        False, "--allow-missing", help="exit 0 even when no item of the data has a prediction"
    ),
) -> None:
    """Score model predictions with the papers' metrics, per category, with a random-choice row."""
    from perceptforge.scorer import report
    from perceptforge.scorer.metrics import bootstrap_groups

    if protocol not in ("strict", "official"):
        raise PerceptforgeError(f"--protocol must be strict or official, got {protocol!r}")
    module = benchmarks.get(benchmark)
    data, predictions = expand_paths(data), expand_paths(predictions)
    items_csv = report.items_path(csv_out) if csv_out else None
    refuse_overwrite(
        {"--json": json_out, "--csv": csv_out, "--csv (items)": items_csv, "--xlsx": xlsx_out, "--plot": plot,
         "--items": items_out},
        {"--data": list(data), "--predictions": list(predictions)},
    )  # fmt: skip
    judge_client = None
    if judge:
        from perceptforge.scorer.judge import Judge

        judge_client = Judge.from_spec(judge, judge_timeout)
    options = {}
    if "keep_items" in inspect.signature(module.score).parameters:  # a plug-in need not know the option
        options["keep_items"] = bool(items_out or csv_out or xlsx_out or bootstrap)  # kept only to be read
    # Reading makes many small objects and no reference cycles: the cyclic collector, which would walk
    # them over and over, is paused while the scorer runs (reference counting still frees everything).
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = module.score(
            data=list(data), predictions=list(predictions), protocol=protocol, judge=judge_client, **options
        )
    finally:
        if collecting:
            gc.enable()
    if bootstrap:
        intervals = bootstrap_groups([(i.group, i.correct) for i in result.items], bootstrap, seed)
        result.metrics["bootstrap_95"] = {k: list(v) if v else None for k, v in intervals.items()}
    report.print_result(result, console)
    if json_out:
        report.write_json(result, json_out)
    if csv_out:
        report.write_csv(result, csv_out)
    if xlsx_out:
        report.write_xlsx(result, xlsx_out)
    if plot:
        report.write_plot(result, plot)
    if items_out:
        report.write_items(result, items_out)
    if len(result.items) and len(result.missing) >= len(result.items) and not allow_missing:
        err_console.print(
            f"[bold red]error:[/] no item of the data has a prediction ({len(result.missing)} missing): "
            "wrong --predictions? (--allow-missing scores it anyway)",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
