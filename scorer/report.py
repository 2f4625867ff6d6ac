"""Showing and writing a ScoreResult: rich tables, JSON, CSV, per-item JSONL, a bar chart."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from perceptforge.errors import shown
from perceptforge.fileio import atomic_write_bytes, atomic_write_text
from perceptforge.scorer.result import ScoreResult


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return "—" if value is None else escape(shown(value))  # a category or id from the data: never markup


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
    console.print(f"parse failures: {fmt(rate)}% of outputs · {missing_line(len(result.missing), result.left_out)}")
    if result.unknown:
        console.print(
            f"[yellow]{len(result.unknown)} predictions have ids the data does not have[/], e.g. "
            f"{escape(shown(result.unknown[0]))}"
        )
    for warning in result.warnings[:5]:
        console.print(f"[yellow]warning:[/] {escape(shown(warning))}")
    if len(result.warnings) > 5:
        console.print(f"[yellow]… {len(result.warnings) - 5} more warnings[/]")


def missing_line(missing: int, left_out: int) -> str:
    """What the tables did with the missing predictions: counted as wrong, or left out as a script does."""
    if missing and left_out >= missing:
        return f"missing predictions: {missing} (left out, as the official script does)"
    if left_out:
        return (
            f"missing predictions: {missing} ({left_out} left out, as the official script does; "
            f"{missing - left_out} count as wrong)"
        )
    return f"missing predictions: {missing} (count as wrong)"


def write_json(result: ScoreResult, path: Path) -> None:
    atomic_write_text(path, json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n")


def write_items(result: ScoreResult, path: Path) -> None:
    atomic_write_text(
        path, "".join(json.dumps(i.as_json(result.group_key), ensure_ascii=False) + "\n" for i in result.items)
    )


def table_frames(result: ScoreResult) -> dict[str, Any]:
    """Each metric table as a pandas DataFrame (its first column the index), and ``items``: one row per
    scored output (id, group, output, extracted answer, how, correct), as VLMEvalKit users read them."""
    import pandas as pd

    frames = {
        table.title: pd.DataFrame(table.rows, columns=table.columns).set_index(table.columns[0])
        for table in result.tables
    }
    frames["items"] = pd.DataFrame([i.as_json(result.group_key) for i in result.items])
    return frames


def items_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}_items{path.suffix}")


def write_csv(result: ScoreResult, path: Path) -> list[Path]:
    """The metric tables in long form (table, row, column, value) at ``path``, the per-item results beside
    it (``<name>_items.csv``)."""
    frames = table_frames(result)
    long = [
        {"table": title, "row": row, "column": column, "value": value}
        for title, frame in frames.items()
        if title != "items"
        for row, values in frame.iterrows()
        for column, value in values.items()
    ]
    import pandas as pd

    tables = pd.DataFrame(long, columns=["table", "row", "column", "value"])
    atomic_write_text(path, tables.to_csv(index=False, lineterminator="\n"))
    atomic_write_text(items_path(path), frames["items"].to_csv(index=False, lineterminator="\n"))
    return [path, items_path(path)]


def write_xlsx(result: ScoreResult, path: Path) -> Path:
    """One sheet per metric table and an ``items`` sheet (needs openpyxl)."""
    from perceptforge.errors import InputError

    try:
        import openpyxl  # noqa: F401
    except ImportError:
        raise InputError(str(path), "writing .xlsx needs openpyxl: pip install openpyxl") from None
    import pandas as pd

    buf = io.BytesIO()
    with pd.ExcelWriter(buf, engine="openpyxl") as writer:
        for title, frame in table_frames(result).items():
            frame.to_excel(writer, sheet_name=sheet_name(title), index=title != "items")
    return atomic_write_bytes(path, buf.getvalue())


def sheet_name(title: str) -> str:
    """Excel allows 31 characters and none of []:*?/\\ in a sheet name."""
    return "".join("_" if c in "[]:*?/\\" else c for c in title)[:31]


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
