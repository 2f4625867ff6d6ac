"""Reading prediction files: one output per item id, with every problem reported by file and line.

Identical repeats of an id are dropped with a warning; conflicting repeats are an error naming both
lines; ids that the data does not have are reported; items without a prediction are listed and count
as wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from perceptforge.errors import InputError
from perceptforge.fileio import iter_jsonl, read_json


@dataclass(frozen=True)
class Prediction:
    key: str
    output: str | None
    where: str  # "file:line" or "file[index]"


@dataclass
class PredictionSet:
    by_key: dict[str, Prediction] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # "file:line: id X"

    def output(self, key: str) -> str | None:
        pred = self.by_key.get(key)
        return pred.output if pred else None


def iter_records(path: Path) -> Iterator[tuple[str, dict]]:
    """Records of a JSON Lines file, a JSON list, or a JSON object holding a list (``{"val": [...]}``)."""
    if path.is_dir():
        raise InputError(str(path), "is a directory; pass the files inside it")
    head = b""
    if path.exists():
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    # A file opening with "{" is one JSON document or JSON Lines; parse it once to tell which.
    doc = read_json(path) if head.startswith(b"[") else _whole_json(path) if head.startswith(b"{") else None
    if doc is None:
        for lineno, row in iter_jsonl(path):
            yield f"{path}:{lineno}", row
        return
    rows = doc
    if isinstance(doc, dict):
        lists = [v for v in doc.values() if isinstance(v, list)]
        if not lists:
            raise InputError(str(path), "a JSON object without a list of records")
        rows = doc["val"] if "val" in doc else [r for v in lists for r in v]
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{path}[{k}]", f"expected a JSON object, got {type(row).__name__}")
        yield f"{path}[{k}]", row


def _whole_json(path: Path) -> object | None:
    """The parsed document when the whole file is one JSON value, else None (JSON Lines, or broken)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def read_predictions(
    paths: Iterable[str | Path],
    key_of: Callable[[dict], Iterable[tuple[str, str | None]]],
    known: set[str] | None = None,
) -> PredictionSet:
    """``key_of(record)`` yields ``(key, output)`` pairs (a CODIS record can hold two outputs)."""
    result = PredictionSet()
    for raw in paths:
        path = Path(raw)
        for where, record in iter_records(path):
            try:
                pairs = list(key_of(record))
            except KeyError as exc:
                raise InputError(where, f"prediction record lacks {exc}") from None
            for key, output in pairs:
                if output is not None and not isinstance(output, str):
                    output = json.dumps(output) if not isinstance(output, (int, float)) else str(output)
                if known is not None and key not in known:
                    result.unknown.append(f"{where}: id {key}")
                    continue
                prior = result.by_key.get(key)
                if prior is not None:
                    if prior.output == output:
                        result.warnings.append(f"{where}: id {key} repeats {prior.where} identically; kept once")
                        continue
                    raise InputError(where, f"id {key} conflicts with {prior.where} (different outputs)")
                result.by_key[key] = Prediction(key, output, where)
    return result
