"""What a benchmark scorer returns: the metrics (the JSON contract), tables for people, scored items."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ScoredItem:
    id: str
    group: str  # task or category
    output: str | None
    extracted: str | None
    method: str
    correct: bool

    def as_json(self, group_key: str = "category") -> dict:
        return {
            "id": self.id,
            group_key: self.group,
            "output": self.output,
            "extracted": self.extracted,
            "method": self.method,
            "correct": self.correct,
        }


class ItemLog:
    """Scored items, kept in a temporary SQLite file so memory stays flat however many items are scored
    (written a batch at a time: one statement per batch, not per item).

    It behaves as a read-only list (iterate, ``len``, index) and keeps the counts reports need.
    """

    _BATCH = 5000

    def __init__(self, keep: bool = True) -> None:
        """``keep=False`` keeps the counts only (when nobody will read the items: no ``--items``, ``--csv``…)."""
        self.keep = keep
        self._db = sqlite3.connect("", check_same_thread=False)  # "": a temporary on-disk database
        self._db.execute("PRAGMA journal_mode = OFF")  # a scratch file: nothing to recover after a crash
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute(
            "CREATE TABLE i (id TEXT, grp TEXT, output TEXT, extracted TEXT, method TEXT, correct INTEGER)"
        )
        self._pending: list[tuple] = []
        self._count = 0
        self.answered = 0  # items with an output
        self.unparsed = 0  # outputs that gave no answer (missing predictions are counted apart)

    def add(self, id: str, group: str, output: str | None, extracted: str | None, method: str, correct: bool) -> None:
        """``append`` without building a ScoredItem (the scorers' loops call this once per output)."""
        if self.keep:
            self._pending.append((id, group, output, extracted, method, correct))
        self._count += 1
        if output is not None:
            self.answered += 1
            self.unparsed += extracted is None
        if len(self._pending) >= self._BATCH:
            self._flush()

    def append(self, item: ScoredItem) -> None:
        self.add(item.id, item.group, item.output, item.extracted, item.method, item.correct)

    def _flush(self) -> None:
        if self._pending:
            with self._db:
                self._db.executemany("INSERT INTO i VALUES (?, ?, ?, ?, ?, ?)", self._pending)
            self._pending.clear()

    def __len__(self) -> int:
        return self._count

    def _kept(self) -> None:
        if not self.keep and self._count:
            raise RuntimeError("the scored items were not kept (score with keep_items=True to read them)")

    def __iter__(self) -> Iterator[ScoredItem]:
        self._kept()
        self._flush()
        for id, group, output, extracted, method, correct in self._db.execute("SELECT * FROM i ORDER BY rowid"):
            yield ScoredItem(id, group, output, extracted, method, bool(correct))

    def __getitem__(self, index: int) -> ScoredItem:
        if not -self._count <= index < self._count:
            raise IndexError(index)
        self._kept()
        self._flush()
        row = self._db.execute("SELECT * FROM i ORDER BY rowid LIMIT 1 OFFSET ?", (index % self._count,)).fetchone()
        return ScoredItem(row[0], row[1], row[2], row[3], row[4], bool(row[5]))


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[object]]


@dataclass
class ScoreResult:
    benchmark: str
    protocol: str
    metrics: dict
    tables: list[Table] = field(default_factory=list)
    items: ItemLog = field(default_factory=ItemLog)
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    bar_chart: dict[str, float | None] = field(default_factory=dict)  # what --plot draws
    group_key: str = "category"  # how --items names ScoredItem.group: "task" for BLINK
    left_out: int = 0  # of ``missing``, those the tables leave out (an official script reads only the predictions)

    @property
    def parse_failure_rate(self) -> float | None:
        return 100.0 * self.items.unparsed / self.items.answered if self.items.answered else None

    def as_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "protocol": self.protocol,
            **self.metrics,
            "parse_failure_rate": self.parse_failure_rate,
            "missing": self.missing,
            "unknown_ids": self.unknown,
            "warnings": self.warnings,
        }
