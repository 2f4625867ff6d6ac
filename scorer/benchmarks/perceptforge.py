"""Our own splits: ``val.jsonl`` / ``test.jsonl`` from ``perceptforge export``, or its VLMEvalKit ``mcq.tsv``.

Predictions are ``{id, output}``; a Yes/No pair is asked on both images, so its predictions carry
``image: natural|manipulated`` (or ids ``<id>#natural`` / ``<id>#manipulated``). Scored per item kind:
MVP-Bench Yes/No metrics for pairs, accuracy for the MCQ kinds, per category and level.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.prompts.library import load_prompt
from perceptforge.scorer import metrics as m
from perceptforge.scorer.benchmarks.codis import judge_by_rule
from perceptforge.scorer.extract import LETTERS, extract_choice, extract_yes_no
from perceptforge.scorer.judge import judge_unparsed
from perceptforge.scorer.predictions import PredictionSet, iter_records, read_predictions
from perceptforge.scorer.requests import Request, image_under
from perceptforge.scorer.result import ItemLog, ScoredItem, ScoreResult, Table


def read_data(paths: list[Path]) -> list[dict]:
    """Flat question records: id, kind, category, level, question, options, answer (or yes/no per image), pair."""
    rows = []
    for path in map(Path, paths):
        if path.suffix == ".tsv":
            rows += read_vlmevalkit_tsv(path)
            continue
        for where, rec in iter_records(path):
            try:
                q, cat = rec["question"], rec["category"]
                base = {
                    "id": rec["id"],
                    "kind": q["kind"],
                    "category": cat["name"],
                    "level": q.get("level", ""),
                    "question": q["question"],
                }
            except (KeyError, TypeError) as exc:
                raise InputError(where, f"not a perceptforge item: missing {exc}") from None
            if q["kind"] == "yes_no_pair":
                base |= {"answers": {"natural": q["answer_natural"], "manipulated": q["answer_manipulated"]}}
            elif q["kind"] == "context_pair":
                base |= {"answers": {"1": q["answers"][0], "2": q["answers"][1]}}
            else:
                base |= {"options": q["options"], "answer": q["answer"]}
            rows.append(base)
    if not rows:
        raise InputError(", ".join(map(str, paths)), "no items")
    return rows


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
                "question": row.get("question") or "",
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


def score(data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, **_) -> ScoreResult:
    rows = read_data(data)
    known = set()
    for r in rows:
        known |= {f"{r['id']}#{k}" for k in r["answers"]} if "answers" in r else {r["id"]}
    preds = read_predictions(predictions, _keys, known=known)
    # A pair's id without its image is a format slip, not an id the data lacks: say what is missing.
    pairs = {
        r["id"]: "image: natural|manipulated" if r["kind"] == "yes_no_pair" else "context: 1|2"
        for r in rows
        if "answers" in r
    }
    unknown = []
    for entry in preds.unknown:
        where, _, key = entry.rpartition(": id ")
        if key in pairs:
            preds.warnings.append(f"{where}: id {key} is a pair: each prediction names its {pairs[key]}")
        else:
            unknown.append(entry)
    preds.unknown = unknown
    return score_rows(rows, preds, protocol, judge)


def score_rows(rows: list[dict], preds: PredictionSet, protocol: str = "strict", judge=None) -> ScoreResult:
    """Score flat question records (``read_data``'s) against predictions keyed as ``_keys`` keys them."""
    scored, missing, yes_no = ItemLog(), [], []
    for r in rows:
        group = f"{r['category']}/{r['kind']}"
        if r["kind"] == "yes_no_pair":
            for image, answer in r["answers"].items():
                key = f"{r['id']}#{image}"
                output = preds.output(key)
                ex = extract_yes_no(output)
                correct = ex.value == answer
                yes_no.append(
                    m.YesNoRecord(r["id"], "S" if image == "natural" else "E", r["level"], r["question"], correct)
                )
                scored.append(
                    ScoredItem(key, group, output, ex.value, ex.method if output is not None else "missing", correct)
                )
                if key not in preds.by_key:
                    missing.append(key)
            continue
        if r["kind"] == "context_pair":
            for c, own in r["answers"].items():
                key = f"{r['id']}#{c}"
                other = r["answers"]["2" if c == "1" else "1"]
                output = preds.output(key)
                correct, method = judge_by_rule(output, own, other)
                scored.append(
                    ScoredItem(key, group, output, output if correct is not None else None, method, bool(correct))
                )
                if key not in preds.by_key:
                    missing.append(key)
            continue
        output = preds.output(r["id"])
        ex = extract_choice(output, len(r["options"]), r["options"])
        ex = judge_unparsed(
            ex,
            judge,
            r["question"] + "\n" + "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(r["options"])),
            LETTERS[: len(r["options"])],
            output,
        )
        scored.append(
            ScoredItem(
                r["id"],
                group,
                output,
                ex.value,
                ex.method if output is not None else "missing",
                ex.value == r["answer"],
            )
        )
        if r["id"] not in preds.by_key:
            missing.append(r["id"])
    kinds = m.per_group((s.group.rsplit("/", 1)[1], s.correct) for s in scored)
    categories = m.per_group((s.group.split("/", 1)[0], s.correct) for s in scored)
    metrics = {
        "kinds": kinds,
        "categories": categories,
        "overall": m.mean(categories.values()),
        "overall_micro": m.pct([s.correct for s in scored]),
        "yes_no": m.mvp_yes_no(yes_no) if yes_no else None,
        "unparsed": scored.unparsed,
    }
    # random choice per kind: 1/2 for each image of a Yes/No pair (1/4 for the pair), 1/n for an MCQ
    n_options = {r["kind"]: len(r["options"]) for r in rows if "options" in r}
    random_kind = {k: 100.0 / n_options[k] if k in n_options else 50.0 for k in kinds}
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
        "perceptforge", protocol, metrics, tables, scored, preds.warnings, missing, preds.unknown, categories
    )


def question_text(kind: str, question: str, options: list[str] | None = None, context: str | None = None) -> str:
    """What a model is asked for one question (the prompts `predict` and the lmms-eval task share)."""
    if kind == "yes_no_pair":
        return load_prompt("predict/yes_no").render(question=question)
    if kind == "context_pair":
        return load_prompt("predict/codis_di_cot").render(context=context, question=question)
    lettered = "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(options or []))
    return load_prompt("predict/mcq").render(question=question, options=lettered)


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
