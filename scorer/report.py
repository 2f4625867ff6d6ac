"""Showing and writing a ScoreResult: rich tables, JSON, CSV, per-item JSONL, a bar chart."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table as RichTable

from perceptforge.fileio import atomic_write_bytes, atomic_write_text
from perceptforge.scorer.result import ScoreResult


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "—" if value is None else str(value)


def print_result(result: ScoreResult, console: Console) -> None:
    for table in result.tables:
        rt = RichTable(title=f"{table.title} · protocol {result.protocol}")
        for k, col in enumerate(table.columns):
            rt.add_column(col, justify="left" if k == 0 else "right")
        for row in table.rows:
            rt.add_row(*(fmt(v) for v in row))
        console.print(rt)
    intervals = result.metrics.get("bootstrap_95")
    if intervals:
        rt = RichTable(title="bootstrap 95% intervals")
        for col in ("group", "low", "high"):
            rt.add_column(col, justify="left" if col == "group" else "right")
        for group, ci in intervals.items():
            rt.add_row(group, *(fmt(v) for v in (ci or (None, None))))
        console.print(rt)
    rate = result.parse_failure_rate
    console.print(
        f"parse failures: {fmt(rate)}% of outputs · missing predictions: {len(result.missing)} (count as wrong)"
    )
    if result.unknown:
        console.print(
            f"[yellow]{len(result.unknown)} predictions have ids the data does not have[/], e.g. {result.unknown[0]}"
        )
    for warning in result.warnings[:5]:
        console.print(f"[yellow]warning:[/] {warning}")
    if len(result.warnings) > 5:
        console.print(f"[yellow]… {len(result.warnings) - 5} more warnings[/]")


def write_json(result: ScoreResult, path: Path) -> None:
    atomic_write_text(path, json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")


def write_items(result: ScoreResult, path: Path) -> None:
    atomic_write_text(
        path, "".join(json.dumps(i.as_json(result.group_key), ensure_ascii=False) + "\n" for i in result.items)
    )


def write_csv(result: ScoreResult, path: Path) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["table", "row", "column", "value"])
    for table in result.tables:
        for row in table.rows:
            for col, value in zip(table.columns[1:], row[1:]):
                writer.writerow([table.title, row[0], col, "" if value is None else value])
    atomic_write_text(path, buf.getvalue())


def write_plot(result: ScoreResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = {k: v for k, v in result.bar_chart.items() if v is not None}
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(bars) + 2), 4.5), dpi=120)
    ax.bar(range(len(bars)), list(bars.values()), color="#4C72B0")
    intervals = result.metrics.get("bootstrap_95") or {}
    for x, (label, v) in enumerate(bars.items()):  # bootstrap 95% intervals where a bar has one
        ci = intervals.get(label)
        if ci:
            ax.errorbar(x, v, yerr=[[v - ci[0]], [ci[1] - v]], color="black", capsize=3, lw=1)
    random = result.metrics.get("random_choice")
    if isinstance(random, (int, float)):
        ax.axhline(random, color="#C44E52", ls="--", lw=1, label=f"random choice {random:.1f}%")
        ax.legend(fontsize=7, loc="upper right")
    ax.set_xticks(range(len(bars)), list(bars), rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{result.benchmark} ({result.protocol})")
    for x, v in enumerate(bars.values()):
        ax.text(x, v + 1, f"{v:.1f}", ha="center", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
