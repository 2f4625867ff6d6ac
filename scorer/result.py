"""What a benchmark scorer returns: the metrics (the JSON contract), tables for people, scored items."""

from __future__ import annotations

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
        return {"id": self.id, group_key: self.group, "output": self.output, "extracted": self.extracted, "method": self.method, "correct": self.correct}


def count_unparsed(items: list[ScoredItem]) -> int:
    """Outputs that were there but gave no answer (missing predictions are counted apart)."""
    return sum(1 for i in items if i.output is not None and i.extracted is None)


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
    items: list[ScoredItem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    bar_chart: dict[str, float | None] = field(default_factory=dict)  # what --plot draws
    group_key: str = "category"  # how --items names ScoredItem.group: "task" for BLINK

    @property
    def parse_failure_rate(self) -> float | None:
        answered = sum(1 for i in self.items if i.output is not None)
        return 100.0 * count_unparsed(self.items) / answered if answered else None

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
