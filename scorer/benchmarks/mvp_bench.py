"""MVP-Bench release: ``all_questions.json`` (+ ``mcq_questions.json`` for CircularEval).

Both files are JSON Lines despite their names. Yes/No records come in pairs (``y/n-s`` on the natural
image, ``y/n-e`` on the edited one); ``id`` links a pair. ``--protocol official`` is the release's
``evaluate.py``, quirks included:

- vanilla MCQ (``all_questions.json``): the first piece of the output split on "." then "," then ")",
  stripped of parentheses, compared case-insensitively ("(C) text" and "c" are C);
- CircularEval (``mcq_questions.json``): the first piece split on "." then ",", compared exactly;
- Yes/No: only an exact first clause ("Yes", "no.", "No, …") is read by rule; everything else, an empty
  output too, goes to the GPT judge. With ``--judge`` it goes to that judge as the script sends it: the
  script's own prompt (``prompts/judge/mvp_bench_official``), asked 5 times at temperature 0, 0.5, … 2,
  each reply read the script's way (``judge.mvp_official_reading``) and the last reading kept; without,
  it is reported as needing a judge and counted as the script counts an undecided answer (wrong), never
  read by our own rule;
- iAcc over images with more than one question, mAcc over pairs with more than three records.

``strict`` keeps the metric definitions and uses our extraction.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.scorer import metrics as m
from perceptforge.scorer.extract import LETTERS, Extraction, extract_choice, extract_yes_no
from perceptforge.scorer.judge import judge_unparsed
from perceptforge.scorer.predictions import iter_records, read_predictions
from perceptforge.scorer.result import ItemLog, ScoredItem, ScoreResult, Table

_OPTION_LINE = re.compile(r"^([A-H])\. (.*)$", re.M)
from perceptforge.scorer.requests import Request, image_under

TYPES = ("y/n-s", "y/n-e", "mcq-e", "mcq-cross")
LEVELS = ("high", "low")


def check_record(where: str, rec: dict) -> None:
    """One MVP-Bench question record as the official script needs it; else one line naming the field."""
    for key in ("question_id", "question", "answer", "type", "level"):
        if key not in rec:
            raise InputError(where, f"not an MVP-Bench question record: no '{key}'")
    qid = rec["question_id"]
    if isinstance(qid, bool) or not isinstance(qid, int | str):
        raise InputError(where, f"question_id must be a number or a string, got {qid!r}")
    if rec["type"] not in TYPES:
        raise InputError(where, f"type must be one of {', '.join(TYPES)}, got {rec['type']!r}")
    if rec["level"] not in LEVELS:
        raise InputError(where, f"level must be high or low, got {rec['level']!r}")
    if not isinstance(rec["question"], str) or not isinstance(rec["answer"], str):
        raise InputError(where, "question and answer must be text")
    pair = rec.get("id")
    if rec["type"].startswith("y/n") and (isinstance(pair, bool) or not isinstance(pair, int | str)):
        # the pair id joins a question's natural and manipulated halves (qAcc, iAcc, mAcc)
        raise InputError(where, f"a Yes/No record needs its pair's id (a number or a string), got {pair!r}")


def iter_data(paths: list[Path]):
    """Question records one at a time, each checked (records are not held: scoring streams over the data files);
    a question_id given twice is an error naming both places."""
    found = False
    first: dict[str, str] = {}
    for path in paths:
        for where, rec in iter_records(Path(path)):
            check_record(where, rec)
            qid = str(rec["question_id"])
            if qid in first:
                raise InputError(where, f"question_id {qid} again (first at {first[qid]}): it would be scored twice")
            first[qid] = where
            found = True
            yield rec
    if not found:
        raise InputError(", ".join(map(str, paths)), "no MVP-Bench records")


def options_of(question: str) -> list[str]:
    return [text for _, text in _OPTION_LINE.findall(question)]


def official_letter(output: str | None) -> Extraction:
    """CircularEval's rule: the first piece of the output split on "." then ","; compared exactly."""
    if output is None:
        return Extraction(None, "empty")
    return Extraction(output.strip().split(".")[0].strip().split(",")[0].strip() or None, "official_split")


def official_vanilla_letter(output: str | None) -> Extraction:
    """The vanilla MCQ rule: split on ".", ",", ")"; parentheses stripped; upper-cased here because the
    script compares case-insensitively."""
    if output is None:
        return Extraction(None, "empty")
    piece = output.split(".")[0].strip().split(",")[0].strip().split(")")[0].strip("()").strip()
    return Extraction(piece.upper() or None, "official_split")


def official_yes_no(output: str | None) -> Extraction:
    """The exact first clause, or ``needs_judge``: the script sends every other answer to its GPT judge."""
    if output is None:
        return Extraction(None, "empty")
    clause = output.split(".")[0].strip().split(",")[0].strip().lower()
    if clause in ("yes", "no"):
        return Extraction(clause, "official_first_clause")
    return Extraction(None, "needs_judge")


def _yes_no(rec: dict, output: str | None, official: bool, judge=None) -> Extraction:
    if not official:
        return extract_yes_no(output)
    ex = official_yes_no(output)
    # an empty output too: the script sends "" to its judge like any answer its rule cannot read
    if ex.method == "needs_judge" and judge is not None and output is not None:
        return Extraction(judge.mvp_bench_official(rec["question"], output), "judge")
    return ex


def _mcq(rec: dict, output: str | None, official: bool, judge=None) -> Extraction:
    if official:
        return official_letter(output) if "mcq_id" in rec else official_vanilla_letter(output)
    opts = options_of(rec["question"])
    ex = extract_choice(output, len(opts) or 5, opts)
    return judge_unparsed(ex, judge, rec["question"], LETTERS[: len(opts) or 5], output)


def _kind(rec: dict, official: bool) -> str:
    """``cross`` or ``single``. The circular set marks every record "mcq-e": the official script tells the
    kinds there by ``_e`` in the image's name (the edited single image); we, by the image folder."""
    if official:
        if "mcq_id" in rec:
            return "single" if "_e" in str(rec.get("image", "")) else "cross"
        return "cross" if rec["type"] == "mcq-cross" else "single"
    return "cross" if rec["type"] == "mcq-cross" or str(rec.get("image", "")).startswith("Cross") else "single"


def score(data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, **_) -> ScoreResult:
    official = protocol == "official"
    # the raw id: read_predictions keys a whole float (1838.0) as the script's dict finds it (1838)
    preds = read_predictions(predictions, lambda r: [(r["question_id"], r.get("output", r.get("prediction")))])
    items = ItemLog()
    missing: list[str] = []
    seen: set[str] = set()
    yes_no: list[m.YesNoRecord] = []
    vanilla: dict[str, list[bool]] = defaultdict(list)
    # group → question → [(order, correct)] of its rotations
    rotations: dict[str, dict[str, list[tuple[int, bool]]]] = defaultdict(lambda: defaultdict(list))

    for n, rec in enumerate(iter_data(data)):
        qid = str(rec["question_id"])
        seen.add(qid)
        pred = preds.by_key.get(qid)
        if rec["type"].startswith("y/n"):
            side = "S" if rec["type"] == "y/n-s" else "E"
            group = f"yes_no/{side}_{rec['level']}"
        else:
            group = f"{_kind(rec, official)}_{rec['level']}"
            if "mcq_id" in rec:
                group = f"circular/{group}"
        if pred is None:
            missing.append(qid)
            if official:  # the official script reads the predictions: a question without one is left out
                items.append(ScoredItem(qid, group, None, None, "missing", False))
                continue
        output = pred.output if pred else None
        if rec["type"].startswith("y/n"):
            ex = _yes_no(rec, output, official, judge)
            correct = ex.value is not None and ex.value == str(rec["answer"]).strip().lower()
            yes_no.append(m.YesNoRecord(rec["id"], side, rec["level"], rec["question"], correct))
        else:
            ex = _mcq(rec, output, official, judge)
            correct = ex.value == rec["answer"]
            if "mcq_id" in rec:
                # official: the rotations of one mcq_id, the first one the predictions give first;
                # strict: the first in the data
                key = str(rec["mcq_id"]) if official else qid.split("__")[0]
                rotations[group.removeprefix("circular/")][key].append(
                    (pred.order if official and pred else n, correct)
                )
            else:
                vanilla[group].append(correct)
        items.append(ScoredItem(qid, group, output, ex.value, ex.method if pred else "missing", correct))
    unknown = [p.where + f": id {k}" for k, p in preds.by_key.items() if k not in seen]  # in file order

    yn = m.mvp_yes_no(yes_no, official=official)
    groups = ("cross_low", "cross_high", "single_high")
    levels = ("low", "high")
    circular = {g: {q: [c for _, c in sorted(r)] for q, r in rotations[g].items()} for g in groups if g in rotations}
    metrics = {
        "yes_no": yn,
        "mcq": {
            "vanilla": {g: m.pct(vanilla.get(g, [])) for g in groups},
            "vanilla_pooled": {
                **{
                    level: m.pct([c for g in groups if g.endswith(level) for c in vanilla.get(g, [])])
                    for level in levels
                },
                "all": m.pct([c for g in groups for c in vanilla.get(g, [])]),
            },
            "circular": {g: m.circular(circular[g]) if g in circular else None for g in groups},
            "circular_first_rotation": {
                g: m.pct([flags[0] for flags in circular[g].values()]) if g in circular else None for g in groups
            },
        },
        "unparsed": items.unparsed,
        "needs_judge": sum(1 for i in items if i.method == "needs_judge"),
        "missing_counted": "left out (official)" if official else "counted as wrong",
        "random_choice": {"yes_no": 50.0, "mcq_vanilla": 20.0, "mcq_circular": 100 * 0.2**5},
    }
    pooled = metrics["mcq"]["vanilla_pooled"]
    tables = [
        Table(
            "MVP-Bench Yes/No",
            ["metric", "value"],
            [[f"accuracy {k}", v] for k, v in yn["accuracy"].items()]
            + [[f"accuracy {k} (pooled)", v] for k, v in yn["pooled"].items()]
            + [[f"qAcc {k}", v] for k, v in yn["qAcc"].items()]
            + [[f"iAcc {k}", v] for k, v in yn["iAcc"].items()]
            + [["aAcc", yn["aAcc"]], ["mAcc", yn["mAcc"]], ["random choice (accuracy)", 50.0]],
        ),
        Table(
            "MVP-Bench MCQ",
            ["set", "vanilla", "circular", "circular, first rotation", "random (vanilla)"],
            [
                [
                    g,
                    metrics["mcq"]["vanilla"][g],
                    metrics["mcq"]["circular"][g],
                    metrics["mcq"]["circular_first_rotation"][g],
                    20.0,
                ]
                for g in groups
            ]
            + [[f"{level} (pooled)", pooled[level], None, None, 20.0] for level in (*levels, "all")],
        ),
    ]
    if missing:
        preds.warnings.append(
            f"{len(missing)} questions have no prediction: "
            + ("left out of every figure, as the official script does" if official else "counted as wrong")
        )
    bars = {f"Y/N {k}": v for k, v in yn["accuracy"].items()} | {
        f"MCQ {g}": metrics["mcq"]["vanilla"][g] for g in groups
    }
    return ScoreResult(
        "mvp-bench",
        protocol,
        metrics,
        tables,
        items,
        preds.warnings,
        missing,
        unknown,
        bars,
        left_out=len(missing) if official else 0,
    )


def requests(data: Path, images: Path) -> Iterator[Request]:
    """What ``perceptforge predict`` asks, with the paper's prompt."""
    for where, rec in iter_records(data):
        yield Request({"question_id": rec["question_id"]}, rec["question"], (image_under(images, rec["image"], where),))
