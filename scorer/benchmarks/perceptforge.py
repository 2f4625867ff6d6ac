"""Our own splits: ``val.jsonl`` / ``test.jsonl`` from ``perceptforge export``, or its VLMEvalKit TSVs
(``<name>_MCQ.tsv``, ``<name>_YORN.tsv``).

Predictions are ``{id, output}``; a Yes/No pair is asked on both images, so its predictions carry
``image: natural|manipulated`` (or ids ``<id>#natural`` / ``<id>#manipulated``). Scored per item kind:
MVP-Bench Yes/No metrics for pairs, accuracy for the MCQ kinds, per category and level.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from perceptforge.errors import InputError
from perceptforge.fileio import iter_jsonl, pairs_object
from perceptforge.prompts.library import load_prompt
from perceptforge.scorer.benchmarks.codis import judge_by_rule
from perceptforge.scorer.extract import LETTERS
from perceptforge.scorer.judge import judge_unparsed
from perceptforge.scorer.predictions import (
    TABLE_SUFFIXES,
    PredictionSet,
    is_json_lines,
    iter_records,
    read_predictions,
)
from perceptforge.scorer.requests import Request, image_under
from perceptforge.scorer.result import ItemLog, ScoreResult, Table
from perceptforge.scorer.verdicts import accuracy, ask, read_answer


def iter_data(paths: list[Path]) -> Iterator[dict]:
    """Flat question records, one at a time (a split is never held whole): id, kind, category, level,
    question, options, answer (or yes/no per image), and where the record was read."""
    found = False
    for path in map(Path, paths):
        if path.suffix == ".tsv":
            rows = read_vlmevalkit_tsv(path)
            found = found or bool(rows)
            yield from rows
        elif path.suffix.lower() not in TABLE_SUFFIXES and is_json_lines(path):
            # An exported item is mostly lineage and image records: read as pairs, only the item, its
            # question and its category are made into dicts (and checked for keys given twice).
            name = str(path)
            for lineno, pairs in iter_jsonl(path, pairs=True):
                rec = dict(pairs)
                if len(rec) != len(pairs):
                    pairs_object(pairs, f"{name}:{lineno}", "item")  # raises, naming the key given twice
                found = True
                yield _row((name, lineno), rec, _from_pairs)
        else:
            for where, rec in iter_records(path):
                found = True
                yield _row((where, None), rec, _as_dict)
    if not found:
        raise InputError(", ".join(map(str, paths)), "no items")


def read_data(paths: list[Path]) -> list[dict]:
    """``iter_data``'s records, all of them (without the place each was read from)."""
    return [{k: v for k, v in row.items() if k not in ("where", "keys")} for row in iter_data(paths)]


def _where(place: tuple[str, int | None]) -> str:
    """ "file:line" of a record (``_row``'s ``where``)."""
    return place[0] if place[1] is None else f"{place[0]}:{place[1]}"


def _as_dict(value: object, name: str) -> dict:
    if not isinstance(value, dict):
        raise TypeError(name)
    return value


def _from_pairs(value: object, name: str) -> dict:
    """A nested object read as pairs (``iter_jsonl(pairs=True)``), as a dict."""
    if not isinstance(value, list) or value and not isinstance(value[0], tuple):
        raise TypeError(name)
    out = dict(value)
    if len(out) != len(value):
        raise ValueError(name)
    return out


def _row(where: tuple[str, int | None], rec: dict, obj: Callable[[object, str], dict]) -> dict:
    """One exported item as a flat question record (``obj`` reads a nested object: the question, the
    category)."""
    try:
        q, cat = obj(rec["question"], "question"), obj(rec["category"], "category")
        base = {"id": rec["id"], "kind": q["kind"], "category": cat["name"], "level": q.get("level", ""),
                "question": q["question"]}  # fmt: skip
        if q["kind"] == "yes_no_pair":
            base["answers"] = {"natural": q["answer_natural"], "manipulated": q["answer_manipulated"]}
        elif q["kind"] == "context_pair":
            base["answers"] = {"1": q["answers"][0], "2": q["answers"][1]}
        else:
            base["options"], base["answer"] = q["options"], q["answer"]
    except (KeyError, TypeError, IndexError) as exc:
        raise InputError(_where(where), f"not a perceptforge item: missing {exc}") from None
    except ValueError as exc:  # a nested object read as pairs gives a key twice: name it
        pairs_object(rec[exc.args[0]], _where(where), exc.args[0])
        raise
    base["where"] = where
    base["keys"] = _row_keys(base)
    return base


def read_vlmevalkit_tsv(path: Path) -> list[dict]:
    """Rows of our VLMEvalKit export: MCQ rows (options ``A…``, a letter) and Y/N rows (``Yes``/``No``, ids
    ``<item>#<image>``), the two halves of a Yes/No pair joined back into one record."""
    csv.field_size_limit(sys.maxsize)  # base64 images are long fields
    rows: list[dict] = []
    pairs: dict[str, dict] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for lineno, row in enumerate(csv.DictReader(f, delimiter="\t"), start=2):
            where = f"{path}:{lineno}"
            base = {
                "category": row.get("category") or "",
                "level": row.get("level") or "",
                # `question` is what VLMEvalKit asks (with predict's instruction); the item's own is `bare_question`
                "question": row.get("bare_question") or row.get("question") or "",
            }
            options = [row[c] for c in LETTERS if row.get(c)]
            if options:
                if row.get("answer") not in LETTERS[: len(options)]:
                    raise InputError(where, f"MCQ row's answer {row.get('answer')!r} is not one of its option letters")
                rows.append(
                    {
                        "id": row["id"],
                        "kind": row.get("kind") or "mcq",
                        **base,
                        "options": options,
                        "answer": row["answer"],
                    }
                )
                continue
            item_id, _, image = (row.get("id") or "").rpartition("#")
            if row.get("answer") not in ("Yes", "No") or image not in ("natural", "manipulated"):
                raise InputError(
                    where,
                    "expected an MCQ row (options A…) or a Y/N row (answer Yes/No, id <item>#natural|manipulated)",
                )
            if item_id not in pairs:
                pairs[item_id] = {"id": item_id, "kind": "yes_no_pair", **base, "answers": {}}
                rows.append(pairs[item_id])
            pairs[item_id]["answers"][image] = row["answer"].lower()  # our records spell yes / no
    return rows


def _keys(rec: dict):
    image = rec.get("image") or rec.get("context")
    return [(f"{rec['id']}#{image}" if image else str(rec["id"]), rec.get("output", rec.get("prediction")))]


def score(
    data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, keep_items: bool = True, **_
) -> ScoreResult:
    """``keep_items=False``: the per-item results are counted, not kept (nobody asked for them)."""
    preds = read_predictions(predictions, _keys)  # ids the data lacks: found at the end (the store's look_up)
    result = score_rows(iter_data(data), preds, protocol, judge, track_known=True, keep_items=keep_items)
    # A pair's id without its image is a format slip, not an id the data lacks: say what is missing.
    unknown = []
    for pred in preds.by_key.unknown():
        pair = _pair_of(preds, pred.key)
        if pair:
            result.warnings.append(f"{pred.where}: id {pred.key} is a pair: each prediction names its {pair}")
        else:
            unknown.append(f"{pred.where}: id {pred.key}")
    result.unknown = unknown
    return result


def _pair_of(preds: PredictionSet, key: str) -> str | None:
    """What a pair's prediction must name, when ``key`` is the id of a pair the data has."""
    known = preds.by_key.known_among([f"{key}#natural", f"{key}#1"])
    if f"{key}#natural" in known:
        return "image: natural|manipulated"
    if f"{key}#1" in known:
        return "context: 1|2"
    return None


class _PairTally:
    """MVP-Bench's Yes/No metrics (``metrics.mvp_yes_no``) counted as the items stream past: each item of our
    split is one question on both images of its own pair, so every group (question, image, pair) is one
    item's, and four counts per level give them all."""

    def __init__(self) -> None:
        self.counts = {"low": [0, 0, 0, 0], "high": [0, 0, 0, 0]}  # items, natural right, manipulated right, both

    def add(self, level: str, natural: bool, manipulated: bool) -> None:
        count = self.counts.setdefault(level, [0, 0, 0, 0])
        count[0] += 1
        count[1] += natural
        count[2] += manipulated
        count[3] += natural and manipulated

    def metrics(self) -> dict | None:
        n, s, e, both = (sum(c[k] for c in self.counts.values()) for k in range(4))
        if not n:
            return None

        def pct(right: int, total: int) -> float | None:
            return 100.0 * right / total if total else None

        low, high = self.counts["low"], self.counts["high"]
        return {
            "accuracy": {
                "S_low": pct(low[1], low[0]),
                "S_high": pct(high[1], high[0]),
                "E_low": pct(low[2], low[0]),
                "E_high": pct(high[2], high[0]),
            },  # fmt: skip
            "pooled": {"low": pct(low[1] + low[2], 2 * low[0]), "high": pct(high[1] + high[2], 2 * high[0])},
            "qAcc": {"low": pct(low[3], low[0]), "high": pct(high[3], high[0]), "all": pct(both, n)},
            "iAcc": {"S": pct(s, n), "E": pct(e, n), "all": pct(s + e, 2 * n)},
            "aAcc": pct(s + e, 2 * n),
            "mAcc": pct(both, n),
        }


@dataclass
class _Tallies:
    """What scoring the rows gathers: the per-item log, missing keys, Yes/No pairs, options per kind, and per
    (kind, category) the right and total counts (one count per question)."""

    scored: ItemLog
    missing: list[str] = field(default_factory=list)
    pairs: _PairTally = field(default_factory=lambda: _PairTally())
    n_options: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    def add(self, key: str, group: str, output: str | None, value: str | None, method: str, correct: bool) -> None:
        self.scored.add(key, group, output, value, method if output is not None else "missing", correct)
        if output is None:
            self.missing.append(key)


def _held_outputs(batch: list[dict], preds: PredictionSet, track_known: bool) -> dict[str, str | None]:
    """The batch's predictions by key, one look-up; with ``track_known``, an id the data holds twice is refused."""
    keys = [key for r in batch for key in (r.get("keys") or _row_keys(r))]
    if not track_known:
        return {key: pred.output for key, pred in preds.by_key.get_many(keys).items()}
    held, again = preds.by_key.look_up(keys)
    for key in again:
        place = next((r["where"] for r in reversed(batch) if "where" in r and key in _row_keys(r)), None)
        raise InputError(
            _where(place) if place else key, f"id {key.rpartition('#')[0] or key} again: each item is scored once"
        )
    return held


def _score_yes_no_pair(r: dict, group: str, held: dict, t: _Tallies) -> list[bool]:
    flags = {}
    for image, answer in r["answers"].items():
        key = f"{r['id']}#{image}"
        output = held.get(key)
        ex = read_answer(r["kind"], output)
        flags[image] = correct = ex.value == answer
        t.add(key, group, output, ex.value, ex.method, correct)
    t.pairs.add(r["level"], flags.get("natural", False), flags.get("manipulated", False))
    return list(flags.values())


def _score_context_pair(r: dict, group: str, held: dict, t: _Tallies) -> list[bool]:
    verdicts = []
    for c, own in r["answers"].items():
        key = f"{r['id']}#{c}"
        output = held.get(key)
        judged, method = judge_by_rule(output, own, r["answers"]["2" if c == "1" else "1"])
        t.scored.add(key, group, output, output if judged is not None else None, method, bool(judged))
        if output is None:
            t.missing.append(key)
        verdicts.append(bool(judged))
    return verdicts


def _score_choice(r: dict, group: str, held: dict, t: _Tallies, judge: Any) -> list[bool]:
    options, output = r["options"], held.get(r["id"])
    ex = read_answer(r["kind"], output, options)
    if judge is not None and ex.value is None:
        listed = "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(options))
        ex = judge_unparsed(ex, judge, r["question"] + "\n" + listed, LETTERS[: len(options)], output)
    correct = ex.value == r["answer"]
    t.add(r["id"], group, output, ex.value, ex.method, correct)
    t.n_options[r["kind"]][len(options)] += 1
    return [correct]


def _score_batch(batch: list[dict], preds: PredictionSet, track_known: bool, judge: Any, t: _Tallies) -> None:
    held = _held_outputs(batch, preds, track_known)
    for r in batch:
        kind, category = r["kind"], r["category"]
        group = f"{category}/{kind}"
        if kind == "yes_no_pair":
            verdicts = _score_yes_no_pair(r, group, held, t)
        elif kind == "context_pair":
            verdicts = _score_context_pair(r, group, held, t)
        else:
            verdicts = _score_choice(r, group, held, t, judge)
        count = t.counts.setdefault((kind, category), [0, 0])
        count[0] += sum(verdicts)
        count[1] += len(verdicts)


def score_rows(
    rows: Iterable[dict],
    preds: PredictionSet,
    protocol: str = "strict",
    judge=None,
    track_known: bool = False,
    keep_items: bool = True,
) -> ScoreResult:
    """Score flat question records (``iter_data``'s) against predictions keyed as ``_keys`` keys them, a batch
    at a time (one look-up of the predictions per batch). ``track_known`` records the data's keys in the
    prediction store, so that the caller can ask it for the predictions the data lacks."""
    t = _Tallies(ItemLog(keep_items))
    batch: list[dict] = []

    def run(batch: list[dict]) -> None:
        _score_batch(batch, preds, track_known, judge, t)

    for row in rows:
        batch.append(row)
        if len(batch) >= 2000:
            run(batch)
            batch = []
    run(batch)

    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (kind, category), (right, total) in t.counts.items():
        for tally in (by_kind[kind], by_category[category]):
            tally[0] += right
            tally[1] += total

    def pct(tally: dict[str, list[int]]) -> dict[str, float]:
        return {k: 100.0 * right / total for k, (right, total) in sorted(tally.items())}

    kinds, categories = pct(by_kind), pct(by_category)
    # the headline numbers as the exported lmms-eval task computes them (verdicts.accuracy: one code for both)
    overall, overall_micro = accuracy((category, r, n) for (_, category), (r, n) in t.counts.items())
    metrics = {
        "kinds": kinds,
        "categories": categories,
        "overall": overall,
        "overall_micro": overall_micro,
        "yes_no": t.pairs.metrics(),
        "unparsed": t.scored.unparsed,
    }
    # random choice per kind: 1/2 for each image of a Yes/No pair (1/4 for the pair), and for the MCQ kinds
    # the mean over their items of 1/options (items of one kind may offer different numbers of options)
    random_kind = {k: _mean_chance(t.n_options[k]) if k in t.n_options else 50.0 for k in kinds}
    metrics["random_choice"] = random_kind
    pair_rows = []
    if metrics["yes_no"]:
        yn = metrics["yes_no"]
        pair_rows = [[f"qAcc {k}", v, 25.0] for k, v in yn["qAcc"].items()]
        pair_rows += [[f"iAcc {k}", v, None] for k, v in yn["iAcc"].items()]
        pair_rows += [["aAcc", yn["aAcc"], 50.0], ["mAcc", yn["mAcc"], None]]
    tables = [
        Table(
            "perceptforge split by kind",
            ["kind", "accuracy", "random choice"],
            [[k, v, random_kind[k]] for k, v in kinds.items()] + pair_rows,
        ),
        Table(
            "perceptforge split by category",
            ["category", "accuracy"],
            [[k, v] for k, v in categories.items()] + [["overall (macro)", metrics["overall"]]],
        ),
    ]
    return ScoreResult(
        "perceptforge", protocol, metrics, tables, t.scored, preds.warnings, t.missing, preds.unknown, categories
    )


def _mean_chance(options: Counter[int]) -> float:
    """The mean over items of 1/options, in percent (exact: a sum of floats would drift)."""
    return float(100 * sum(Fraction(items, n) for n, items in options.items()) / sum(options.values()))


def _row_keys(row: dict) -> list[str]:
    """The prediction keys of a question record: its id, or one per image or context of a pair."""
    if "answers" in row:
        return [f"{row['id']}#{k}" for k in row["answers"]]
    return [row["id"]]


def question_text(kind: str, question: str, options: list[str] | None = None, context: str | None = None) -> str:
    """What a model is asked for one question (the prompts `predict` and the lmms-eval task share)."""
    if kind == "context_pair":
        return load_prompt("predict/codis_di_cot").render(context=context, question=question)
    return ask(predict_prompts(), kind, question, options or [])


def predict_prompts() -> dict[str, str]:
    """The texts of the Yes/No and MCQ prompts ``predict`` asks with (``verdicts.ask``'s ``prompts``)."""
    texts = {}
    for name, fields in PREDICT_FIELDS.items():
        prompt = load_prompt(f"predict/{name}")
        prompt.render(**dict.fromkeys(fields, ""))  # a prompt with other placeholders fails here, in one line
        texts[name] = prompt.text
    return texts


# the placeholders verdicts.ask fills in each prompt
PREDICT_FIELDS = {"yes_no": ("question",), "mcq": ("question", "options")}


def requests(data: Path, images: Path) -> Iterator[Request]:
    """Our exported split (val.jsonl / test.jsonl): Yes/No pairs asked on each image, MCQs with lettered options."""
    for where, rec in iter_records(data):
        q, pair = rec["question"], rec["pair"]
        natural, manipulated = (
            image_under(images, pair["natural"]["path"], where),
            image_under(images, pair["manipulated"]["path"], where),
        )
        if q["kind"] == "yes_no_pair":
            for name, img in (("natural", natural), ("manipulated", manipulated)):
                yield Request({"id": rec["id"], "image": name}, question_text(q["kind"], q["question"]), (img,))
        elif q["kind"] == "context_pair":
            for c, context in enumerate(q["contexts"], start=1):
                yield Request(
                    {"id": rec["id"], "context": str(c)},
                    question_text(q["kind"], q["question"], context=context),
                    (manipulated,),
                )
        else:
            imgs = (natural, manipulated) if q["kind"] == "cross_mcq" else (manipulated,)
            yield Request({"id": rec["id"]}, question_text(q["kind"], q["question"], q["options"]), imgs)
