"""Reading prediction files: one output per item id, with every problem reported by file and line.

Besides our JSON / JSON Lines records, the files evaluators already have are read as they are:
VLMEvalKit result tables (``.xlsx``, ``.tsv``, ``.csv`` with a ``prediction`` column, keyed by ``id`` or
else ``index``) and lmms-eval sample logs (``samples_*.jsonl``: ``doc_id``, ``doc``, ``filtered_resps``).

Identical repeats of an id are dropped with a warning; conflicting repeats are an error naming both
lines; ids that the data does not have are reported; items without a prediction are listed and count
as wrong.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.fileio import iter_jsonl, read_json


@dataclass(frozen=True)
class Prediction:
    key: str
    output: str | None
    where: str  # "file:line" or "file[index]"
    order: int = 0  # its place among the predictions read (MVP-Bench's first rotation is the first read)


class PredictionStore:
    """key → Prediction, kept in a temporary SQLite file so memory stays flat for any number of predictions."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", check_same_thread=False)  # "": a temporary on-disk database
        self._db.execute("CREATE TABLE p (key TEXT PRIMARY KEY, output TEXT, is_null INTEGER, loc TEXT)")

    def get(self, key: str) -> Prediction | None:
        row = self._db.execute("SELECT output, is_null, loc, rowid FROM p WHERE key = ?", (key,)).fetchone()
        return Prediction(key, None if row[1] else row[0], row[2], row[3]) if row else None

    def __contains__(self, key: object) -> bool:
        return self._db.execute("SELECT 1 FROM p WHERE key = ?", (key,)).fetchone() is not None

    def __setitem__(self, key: str, pred: Prediction) -> None:
        self._db.execute("INSERT INTO p VALUES (?, ?, ?, ?)", (key, pred.output or "", pred.output is None, pred.where))

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM p").fetchone()[0]

    def items(self) -> Iterator[tuple[str, Prediction]]:
        for key, output, is_null, loc, order in self._db.execute(
            "SELECT key, output, is_null, loc, rowid FROM p ORDER BY rowid"
        ):
            yield key, Prediction(key, None if is_null else output, loc, order)


@dataclass
class PredictionSet:
    by_key: PredictionStore = field(default_factory=PredictionStore)
    warnings: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # "file:line: id X"

    def output(self, key: str) -> str | None:
        pred = self.by_key.get(key)
        return pred.output if pred else None


TABLE_SUFFIXES = (".xlsx", ".tsv", ".csv")


def iter_records(path: Path) -> Iterator[tuple[str, dict]]:
    """Records of a JSON Lines file, a JSON list, a JSON object holding a list (``{"val": [...]}``), a
    VLMEvalKit-style table, or an lmms-eval sample log.

    JSON Lines is streamed; only a single JSON document or a table is read whole.
    """
    if path.is_dir():
        raise InputError(str(path), "is a directory; pass the files inside it")
    if path.suffix.lower() in TABLE_SUFFIXES:
        yield from iter_table_rows(path)
        return
    if _is_json_lines(path):
        for lineno, row in iter_jsonl(path):
            yield f"{path}:{lineno}", lmms_eval_record(row) if is_lmms_eval_sample(row) else row
        return
    doc = read_json(path)
    rows = [doc]
    if isinstance(doc, list):
        rows = doc
    elif isinstance(doc, dict) and any(isinstance(v, list) for v in doc.values()):
        rows = doc["val"] if "val" in doc else [r for v in doc.values() if isinstance(v, list) for r in v]
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InputError(f"{path}[{k}]", f"expected a JSON object, got {type(row).__name__}")
        yield f"{path}[{k}]", row


def iter_table_rows(path: Path) -> Iterator[tuple[str, dict]]:
    """Rows of a spreadsheet-like file as records, every cell a string (empty cells dropped), named by the
    row number a spreadsheet shows (the header is row 1). A row without ``id`` takes its ``index``."""
    import pandas as pd

    if not path.exists():
        raise InputError(str(path), "file not found")
    try:
        if path.suffix.lower() == ".xlsx":
            try:
                import openpyxl  # noqa: F401  (pandas reads .xlsx through it)
            except ImportError:
                raise InputError(str(path), "reading .xlsx needs openpyxl: pip install openpyxl") from None
            frame = pd.read_excel(path, dtype=str, keep_default_na=False)
        else:
            sep = "\t" if path.suffix.lower() == ".tsv" else ","
            frame = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, encoding="utf-8")
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError, zipfile.BadZipFile, OSError, KeyError) as exc:
        raise InputError(str(path), f"not a readable {path.suffix} table: {str(exc).splitlines()[0][:200]}") from None
    for n, row in enumerate(frame.to_dict("records"), start=2):
        rec = {str(k): v for k, v in row.items() if v != ""}
        if "id" not in rec and "index" in rec:
            rec["id"] = rec["index"]
        yield f"{path} row {n}", rec


def is_lmms_eval_sample(row: dict) -> bool:
    return "doc_id" in row and ("filtered_resps" in row or "resps" in row)


def lmms_eval_record(row: dict) -> dict:
    """One lmms-eval logged sample as ``{id, output}``: the id from the document (else ``doc_id``), the output
    the task's filters kept (else the first raw response)."""
    doc: dict = row["doc"] if isinstance(row.get("doc"), dict) else {}
    responses = row.get("filtered_resps") or row.get("resps") or [None]
    output = responses[0]
    while isinstance(output, list):  # resps nest one list per request
        output = output[0] if output else None
    record = {"id": str(doc.get("id", row["doc_id"])), "output": output}
    record.update({k: doc[k] for k in ("image", "context") if k in doc})
    return record


def _is_json_lines(path: Path) -> bool:
    """JSON Lines unless the file is one JSON document: it opens with "[", or its first line alone is not
    a complete JSON value (pretty-printed), or nothing follows that first line in a file not named ``.jsonl``."""
    if not path.exists():
        return True  # iter_jsonl reports the missing file
    with open(path, "rb") as f:
        first = f.readline()
        while first and not first.strip():
            first = f.readline()
        rest = any(line.strip() for line in f)  # stops at the first non-blank line
    if first.lstrip().startswith(b"["):
        return False
    try:
        json.loads(first)
    except RecursionError:
        return True  # iter_jsonl reports it, naming the line
    except (json.JSONDecodeError, UnicodeDecodeError):
        return not first.lstrip().startswith(b"{")  # "{" alone: a pretty-printed document
    # one complete line: JSON Lines when the name says so (a one-line lmms-eval sample log), else one document
    return rest or path.suffix.lower() == ".jsonl"


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
                if isinstance(key, bool) or not isinstance(key, str | int):
                    raise InputError(where, f"a prediction's id must be a text or a number, got {key!r}")
                key = str(key)
                if output is None:  # a null or absent output is no prediction: counted as missing, said so
                    result.warnings.append(f"{where}: id {key} has no output; counted as missing")
                    continue
                if not isinstance(output, str):
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
