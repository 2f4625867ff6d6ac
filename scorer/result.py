"""What a benchmark scorer returns: the metrics (the JSON contract), tables for people, scored items."""

from __future__ import annotations

import json
import tempfile
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
    """Scored items, spooled to a temporary file so memory stays flat however many items are scored.

    It behaves as a read-only list (iterate, ``len``, index) and keeps the counts reports need.
    """

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._count = 0
        self.answered = 0  # items with an output
        self.unparsed = 0  # outputs that gave no answer (missing predictions are counted apart)

    def append(self, item: ScoredItem) -> None:
        self._file.seek(0, 2)
        self._file.write(
            json.dumps([item.id, item.group, item.output, item.extracted, item.method, item.correct]) + "\n"
        )
        self._count += 1
        if item.output is not None:
            self.answered += 1
            self.unparsed += item.extracted is None

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[ScoredItem]:
        self._file.flush()
        self._file.seek(0)
        for _ in range(self._count):
            yield ScoredItem(*json.loads(self._file.readline()))

    def __getitem__(self, index: int) -> ScoredItem:
        if not -self._count <= index < self._count:
            raise IndexError(index)
        for k, item in enumerate(self):
            if k == index % self._count:
                return item
        raise IndexError(index)


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
