"""``perceptforge predict``: any OpenAI-compatible vision model over a benchmark release."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from perceptforge.cli.app import console, err_console
from perceptforge.errors import shown
from perceptforge.fileio import refuse_overwrite
from perceptforge.scorer import benchmarks

# Each request in flight is a thread holding its images as base64: a mistyped count (100000) would start that
# many threads and exhaust memory before the first answer; servers take far fewer at once anyway.
MAX_CONCURRENCY = 256


def predict(
    benchmark: str = typer.Argument(..., help=benchmarks.choices()),
    data: Path = typer.Option(
        ..., "--data", help="our split's val.jsonl/test.jsonl, or a release's question file (BLINK: the HF parquet)"
    ),
    images: Optional[Path] = typer.Option(
        None, "--images", help="folder the records' image paths are relative to (default: beside --data)"
    ),
    endpoint: str = typer.Option(..., "--endpoint", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1"),
    model: str = typer.Option(..., "--model", help="model name the server knows"),
    out: Path = typer.Option(
        ...,
        "--out",
        help="predictions JSONL (appended as answers arrive; existing ids are skipped); failed requests are listed "
        "with their reasons in OUT.failed.jsonl and asked again by the next run",
    ),
    concurrency: int = typer.Option(
        4,
        "--concurrency",
        min=1,
        max=MAX_CONCURRENCY,
        help=f"requests in flight (1 to {MAX_CONCURRENCY}; each holds a thread and its images in memory)",
    ),
    timeout_s: float = typer.Option(
        60.0,
        "--timeout",
        min=0.1,
        help="seconds one try of a request may take, from connecting to its answer's last byte",
    ),
    retries: int = typer.Option(
        2,
        "--retries",
        min=0,
        max=20,  # each try may take --timeout: a mistyped count would keep a dead endpoint's request for days
        help="tries after the first for a request that timed out or met a 408/409/429/5xx (the openai client's "
        "backoff: 0.5, 1, 2 … s up to 8, or the server's Retry-After); a request takes at most (retries + 1) × "
        "timeout plus the backoff",
    ),
    concat_images: bool = typer.Option(False, "--concat-images", help="join several images side by side into one"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="environment variable holding the key"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens"),
    blind: Optional[str] = typer.Option(
        None,
        "--blind",
        help="a blind baseline: grey (each image replaced by a grey one of its size), none (no image), "
        "no_context (CODIS: the question without its context)",
    ),
) -> None:
    """Run a model over a release with the paper's prompt; images go as base64 data URLs. Exit status 1 when some
    request failed (the line says how many, and OUT.failed.jsonl which and why), 0 when every one was answered."""
    from perceptforge.backends.chat import ChatClient
    from perceptforge.scorer.predict import predict as run_predict

    refuse_overwrite({"--out": out}, {"--data": [data]})
    client = ChatClient(
        base_url=endpoint,
        model=model,
        api_key_env=api_key_env,
        max_tokens=max_tokens,
        seed=0,
        timeout_s=timeout_s,
        max_retries=retries,
    )
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(f"{benchmark} → {model}", total=None)
        summary = run_predict(
            benchmark,
            data,
            images or data.parent,
            client,
            out,
            concurrency,
            concat_images,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            blind=blind,
        )
    console.print(
        f"{summary['answered']} answered, {summary['skipped']} already in {out}; tokens in/out "
        f"{summary['prompt_tokens']}/{summary['completion_tokens']}"
    )
    if summary["failed"]:
        first = escape(shown(summary["first_failure"]))
        err_console.print(
            f"[bold red]error:[/] {summary['failed']} request(s) failed, e.g. {first}; "
            f"all are listed with their reasons in {summary['failed_file']}: run the same command again to ask only "
            "what is missing",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
