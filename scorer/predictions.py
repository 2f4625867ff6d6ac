"""Reading prediction files: one output per item id, with every problem reported by file and line.

Besides our JSON / JSON Lines records, the files evaluators already have are read as they are:
VLMEvalKit result tables (``.xlsx``, ``.tsv``, ``.csv`` with a ``prediction`` column, keyed by ``id`` or
else ``index``) and lmms-eval sample logs (``samples_*.jsonl``: ``doc_id``, ``doc``, ``filtered_resps``).

Identical repeats of an id are dropped with a warning; conflicting repeats are an error naming both
lines (BLINK keeps the last, as its official script does); ids that the data does not have are reported;
items without a prediction are listed and count as wrong.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from perceptforge.errors import InputError
from perceptforge.fileio import iter_jsonl, read_json


class Prediction(NamedTuple):
    key: str
    output: str | None
    where: str  # "file:line" or "file[index]"
    order: int = 0  # its place among the predictions read (MVP-Bench's first rotation is the first read)


class PredictionStore:
    """key → Prediction, kept in a temporary SQLite file so memory stays flat for any number of predictions.

    Written a batch at a time (``add_new``, ``put_many``) and read one key (``get``) or a batch of keys
    (``get_many``) at a time: one statement per batch, not per key. It also holds the keys the data has
    (``look_up`` records them as it reads their predictions), so that the predictions the data lacks are
    found at the end (``unknown``) without a set of every id in memory.
    """

    _BATCH = 900  # keys per "IN (…)" query: under SQLite's oldest limit on parameters (999)

    def __init__(self) -> None:
        self._db = sqlite3.connect("", check_same_thread=False)  # "": a temporary on-disk database
        self._db.execute("PRAGMA journal_mode = OFF")  # a scratch file: nothing to recover after a crash
        self._db.execute("PRAGMA synchronous = OFF")
        # rowid: the order predictions were first read in (a replaced one keeps its row)
        self._db.execute("CREATE TABLE p (key TEXT PRIMARY KEY, output TEXT, loc TEXT)")
        self._db.execute("CREATE TABLE d (key TEXT PRIMARY KEY) WITHOUT ROWID")  # the index alone: cheaper to fill

    def get(self, key: str) -> Prediction | None:
        row = self._db.execute("SELECT output, loc, rowid FROM p WHERE key = ?", (key,)).fetchone()
        return Prediction(key, row[0], row[1], row[2]) if row else None

    def get_many(self, keys: Iterable[str]) -> dict[str, Prediction]:
        """The predictions of those keys that have one."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, Prediction] = {}
        for k in range(0, len(keys), self._BATCH):
            chunk = keys[k : k + self._BATCH]
            marks = ",".join("?" * len(chunk))
            for key, output, loc, order in self._db.execute(
                f"SELECT key, output, loc, rowid FROM p WHERE key IN ({marks})",  # noqa: S608 (only "?"s)
                chunk,
            ):
                found[key] = Prediction(key, output, loc, order)
        return found

    def outputs(self, keys: list[str]) -> dict[str, str | None]:
        """The outputs of those keys that have a prediction (``get_many`` without building Predictions)."""
        found: dict[str, str | None] = {}
        for k in range(0, len(keys), self._BATCH):
            chunk = keys[k : k + self._BATCH]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, output FROM p WHERE key IN ({marks})", chunk))  # noqa: S608
        return found

    def look_up(self, keys: list[str]) -> tuple[dict[str, str | None], list[str]]:
        """The outputs of a batch of the data's keys (those that have a prediction), and the keys of it that
        the data gave before (or twice in it); the keys are recorded as the data's (``unknown``)."""
        again: list[str] = []
        try:
            with self._db:
                self._db.executemany("INSERT INTO d VALUES (?)", zip(keys))  # zip: the one-field rows, in C
        except sqlite3.IntegrityError:  # a key given twice: find which, then record the batch once
            held = set(self.known_among(list(set(keys))))
            again = sorted(held | {key for key, n in _counts(keys).items() if n > 1})
            with self._db:
                self._db.executemany("INSERT OR IGNORE INTO d VALUES (?)", zip(keys))
        return self.outputs(keys), again

    def __contains__(self, key: object) -> bool:
        return self._db.execute("SELECT 1 FROM p WHERE key = ?", (key,)).fetchone() is not None

    def add_new(self, rows: list[tuple[str, str | None, str]]) -> bool:
        """Add (key, output, where) rows whose keys are not held yet, in order; False, adding none, when one
        of the keys is held already (the caller then sorts the repeats out)."""
        try:
            with self._db:
                self._db.executemany("INSERT INTO p VALUES (?, ?, ?)", rows)
        except sqlite3.IntegrityError:
            return False
        return True

    def put_many(self, rows: Iterable[tuple[str, str | None, str]]) -> None:
        """Add (key, output, where) rows, or replace those whose key is held (a replaced one keeps its place
        in the order)."""
        with self._db:
            self._db.executemany(
                "INSERT INTO p VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET output = excluded.output, "
                "loc = excluded.loc",
                rows,
            )

    def __setitem__(self, key: str, pred: Prediction) -> None:
        self.put_many([(key, pred.output, pred.where)])

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM p").fetchone()[0]

    def items(self) -> Iterator[tuple[str, Prediction]]:
        for key, output, loc, order in self._db.execute("SELECT key, output, loc, rowid FROM p ORDER BY rowid"):
            yield key, Prediction(key, output, loc, order)

    def known_among(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` the data has (``look_up``)."""
        found: set[str] = set()
        for k in range(0, len(keys), self._BATCH):
            chunk = keys[k : k + self._BATCH]
            marks = ",".join("?" * len(chunk))
            found.update(r[0] for r in self._db.execute(f"SELECT key FROM d WHERE key IN ({marks})", chunk))  # noqa: S608
        return found

    def unknown(self) -> Iterator[Prediction]:
        """The predictions whose key the data does not have (``look_up``), in the order they were read."""
        for key, output, loc, order in self._db.execute(
            "SELECT key, output, loc, rowid FROM p WHERE key NOT IN (SELECT key FROM d) ORDER BY rowid"
        ):
            yield Prediction(key, output, loc, order)


def _counts(keys: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key in keys:
        counts[key] = counts.get(key, 0) + 1
    return counts


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
    if is_json_lines(path):
        name = str(path)
        for lineno, row in iter_jsonl(path):
            yield f"{name}:{lineno}", lmms_eval_record(row) if "doc_id" in row and is_lmms_eval_sample(row) else row
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
    the task's filters kept (else the first raw response).

    lmms-eval 0.7.x logs no ``doc``: the document is then the one our task's ``process_results`` put in each
    metric's record (``perceptforge_overall.doc``); it also logs ``filtered_resps`` as a plain string, where
    older versions logged a list (``resps`` a list per request)."""
    doc: dict = row["doc"] if isinstance(row.get("doc"), dict) else logged_doc(row)
    responses = row.get("filtered_resps") or row.get("resps") or [None]
    output = responses if isinstance(responses, str) else responses[0]
    while isinstance(output, list):  # resps nest one list per request
        output = output[0] if output else None
    record = {"id": str(doc.get("id", row["doc_id"])), "output": output}
    # a document of one image of a pair may name it in its id already (our task's "<item>#natural")
    record.update({k: doc[k] for k in ("image", "context") if doc.get(k) and not record["id"].endswith(f"#{doc[k]}")})
    return record


def logged_doc(row: dict) -> dict:
    """The document a metric's logged record carries (our task's ``process_results``: ``{"doc", "output"}``)."""
    for value in row.values():
        if isinstance(value, dict) and isinstance(value.get("doc"), dict) and "id" in value["doc"]:
            return value["doc"]
    return {}


def is_json_lines(path: Path) -> bool:
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
    repeats: str = "error",
    nulls: str = "missing",
) -> PredictionSet:
    """``key_of(record)`` yields ``(key, output)`` pairs (a CODIS record can hold two outputs).

    An id given twice with the same output is kept once, with a warning; with different outputs it is an
    error naming both lines, or, with ``repeats="last"``, the later one is kept, with a warning (BLINK's
    official script keeps the last). Ids not in ``known`` are reported (with ``known=None``, the caller finds
    them with the store's ``mark_known`` and ``unknown``). A null output is no prediction (counted missing,
    warned), or, with ``nulls="keep"``, a prediction whose output is None. An output that is not text is
    scored as its JSON text, and the count of them is warned."""
    result = PredictionSet()
    batch: dict[str, tuple[str, str | None, str]] = {}  # key → (key, output, where)

    def flush() -> None:
        rows = list(batch.values())
        batch.clear()
        if result.by_key.add_new(rows):
            return
        held = result.by_key.get_many(row[0] for row in rows)  # a key read in an earlier batch: sort it out
        result.by_key.put_many(row for row in rows if row[0] not in held or _repeat(result, held[row[0]], row, repeats))

    not_text: list[str] = []  # where each output that is not text was read
    for raw in paths:
        path = Path(raw)
        for where, record in iter_records(path):
            try:
                pairs = list(key_of(record))
            except KeyError as exc:
                raise InputError(where, f"prediction record lacks {exc}") from None
            except RecordError as exc:
                raise InputError(where, str(exc)) from None
            for raw_key, output in pairs:
                key = id_text(raw_key, where)
                if type(output) is not str:
                    if output is None:
                        if nulls == "keep":
                            # sent on as the script sends it (CODIS formats a null into its prompt as "None")
                            result.warnings.append(f"{where}: id {key} has a null output; scored as the script does")
                        else:  # a null or absent output is no prediction: counted as missing, said so
                            result.warnings.append(f"{where}: id {key} has no output; counted as missing")
                            continue
                    else:
                        not_text.append(where)
                        output = json.dumps(output) if not isinstance(output, (int, float)) else str(output)
                if known is not None and key not in known:
                    result.unknown.append(f"{where}: id {key}")
                    continue
                prior = batch.get(key)
                if prior is None or _repeat(result, Prediction(*prior), (key, output, where), repeats):
                    batch[key] = (key, output, where)
                    if len(batch) >= 5000:
                        flush()
    flush()
    if not_text:
        result.warnings.append(
            f"{len(not_text)} outputs are not text (an object, a list, a number, true/false or NaN), first at "
            f"{not_text[0]}: each is scored as its JSON text"
        )
    return result


class RecordError(ValueError):
    """What is wrong with one prediction record; ``read_predictions`` names its file and line."""


def id_text(value: object, where: str) -> str:
    """A prediction's id as the data's ids are keyed. A number is its text; a whole float (1838.0, as pandas
    and some writers leave an id) is the integer's, because the official scripts look ids up in Python dicts,
    where 1838.0 finds 1838."""
    if type(value) is str:
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(where, f"a prediction's id must be a text or a whole number, got {value!r}")
    return str(value)


def _repeat(result: PredictionSet, prior: Prediction, row: tuple[str, str | None, str], repeats: str) -> bool:
    """An id read again (``row``: key, output, where): whether it replaces the one held (warned), or an
    error."""
    key, output, where = row
    if prior.output == output:
        result.warnings.append(f"{where}: id {key} repeats {prior.where} identically; kept once")
        return False
    if repeats != "last":
        raise InputError(where, f"id {key} conflicts with {prior.where} (different outputs)")
    result.warnings.append(f"{where}: id {key} repeats {prior.where} with another output; the last is kept")
    return True
