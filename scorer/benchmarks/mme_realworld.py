"""MME-RealWorld: five-option MCQ records; (E) means "the image does not feature it".

Outputs come inline (``Output``) or from a separate ``{Question_id, output}`` file.
``--protocol official`` is the release's ``eval_your_results.py``, quirks included:

- it strips answer prefixes, but its list lacks two commas, so "The best option is" and "Best answer:"
  are never stripped alone ("Best answer: C" reads as B, from "Best"), and "Answer:" is not in it
  ("Answer: E" reads as A); then the first capital A–E anywhere ("Based on the image, …" reads as B);
- with no capital A–E (and at most ten words), the first option whose text contains the output, lowered
  ("d" is the first option with a "d" in it; an empty output is A);
- categories are lower-cased, and every ``…/attribute/…`` category is merged into ``…/attribute``,
  before the per-category average (Avg-C).

``strict`` (default) reports unreadable outputs as unparsed and keeps the release's categories.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.fileio import iter_jsonl, read_json
from perceptforge.scorer import metrics as m
from perceptforge.scorer.extract import Extraction, extract_choice
from perceptforge.scorer.judge import judge_unparsed
from perceptforge.scorer.predictions import PredictionSet, read_predictions
from perceptforge.scorer.result import ItemLog, ScoredItem, ScoreResult, Table

# The official list as Python reads it: two missing commas join four prefixes into two.
_OFFICIAL_PREFIXES = (
    "The best answer is",
    "The correct answer is",
    "The answer is",
    "The answer",
    "The best option isThe correct option is",
    "Best answer:Best option:",
)
from perceptforge.prompts.library import load_prompt
from perceptforge.scorer.predictions import iter_records
from perceptforge.scorer.requests import Request, image_under


def official_extract(output: str | None, choices: list[str]) -> Extraction:
    """The official rule (see the module docstring); ``choices`` are the release's "(A) …" strings."""
    if output is None:
        return Extraction(None, "empty")
    s = output.strip()
    for prefix in _OFFICIAL_PREFIXES:
        s = s.replace(prefix, "")
    if len(s.split()) > 10 and not re.search("[ABCDE]", s):
        return Extraction(None, "official_first_capital")
    match = re.search(r"[ABCDE]", s)
    if match:
        return Extraction(match.group(0), "official_first_capital")
    for choice in choices:
        if s.lower() in choice.lower():
            return Extraction(choice[1], "official_option_text")
    return Extraction(None, "official_option_text")


def official_category(category: str) -> str:
    """The official grouping: lower-cased, ``vehicle/attribute/color`` → ``vehicle/attribute``."""
    c = category.lower()
    return c.split("/")[0] + "/attribute" if "attribute" in c else c


def check_record(where: str, rec: dict) -> None:
    """The fields the scorer decides by: text where text is meant, a ground truth among the record's options."""
    for key in ("Task", "Subtask", "Category"):
        if not isinstance(rec[key], str) or not rec[key]:
            raise InputError(where, f"{key} must be a non-empty text, got {rec[key]!r}")
    choices = rec["Answer choices"]
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices) or not choices:
        raise InputError(where, f"Answer choices must be a list of texts, got {choices!r}")
    letters = [c.strip()[1] for c in choices if c.strip().startswith("(") and len(c.strip()) > 2]
    letters = letters or list("ABCDE"[: len(choices)])
    truth = str(rec["Ground truth"]).strip()
    if truth not in letters:
        raise InputError(where, f"Ground truth {rec['Ground truth']!r} is not one of the options {', '.join(letters)}")


def _records(path: Path) -> Iterator[tuple[str, object]]:
    """(where, record) of a results file: JSON Lines when it is named ``.jsonl`` (as the official script
    reads it), else one JSON list."""
    if path.suffix.lower() == ".jsonl":
        yield from ((f"{path}:{n}", rec) for n, rec in iter_jsonl(path))
        return
    doc = read_json(path)
    if not isinstance(doc, list):
        raise InputError(str(path), "expected a list of MME-RealWorld records")
    yield from ((f"{path}[{k}]", rec) for k, rec in enumerate(doc))


def read_data(paths: list[Path]) -> list[dict]:
    records = []
    for path in map(Path, paths):
        seen: set[str] = set()
        for where, rec in _records(path):
            if not isinstance(rec, dict):
                raise InputError(where, f"expected an MME-RealWorld record (an object), got {type(rec).__name__}")
            missing = [
                key
                for key in ("Question_id", "Answer choices", "Ground truth", "Task", "Subtask", "Category")
                if key not in rec
            ]
            if missing:
                raise InputError(where, f"not an MME-RealWorld record: missing {missing}")
            check_record(where, rec)
            if str(rec["Question_id"]) in seen:
                raise InputError(where, f"Question_id {rec['Question_id']} again: each question is scored once")
            seen.add(str(rec["Question_id"]))
            records.append(rec)
    return records


def score(data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, **_) -> ScoreResult:
    official = protocol == "official"
    records = read_data(data)
    known = {str(r["Question_id"]) for r in records}
    preds = (
        read_predictions(
            predictions, lambda r: [(str(r["Question_id"]), r.get("output", r.get("Output")))], known=known
        )
        if predictions
        else PredictionSet()
    )
    scored, mme, missing = ItemLog(), [], []
    model_e = []
    for rec in records:
        qid = str(rec["Question_id"])
        if qid in preds.by_key:
            output = preds.output(qid)
        elif "Output" in rec:
            output = rec["Output"]
        else:
            output = None
            missing.append(qid)
        choices = [re.sub(r"^\([A-E]\)\s*", "", c) for c in rec["Answer choices"]]
        if official:
            ex = official_extract(output, rec["Answer choices"])
        else:
            ex = extract_choice(output, len(choices), choices)
            ex = judge_unparsed(
                ex,
                judge,
                rec.get("Text", "") + "\n" + "\n".join(rec["Answer choices"]),
                "ABCDE"[: len(choices)],
                output,
            )
        correct = ex.value == str(rec["Ground truth"]).strip()
        task = str(rec["Task"]).lower()
        scored.append(ScoredItem(qid, f"{task}/{rec['Subtask']}", output, ex.value, ex.method, correct))
        category = official_category(rec["Category"]) if official else rec["Category"]
        mme.append(m.MMERecord(task, rec["Subtask"], category, correct, ex.value == "E"))
        model_e.append(ex.value == "E")
    metrics = m.mme_realworld(mme)
    metrics["E_rate"] = {
        "model": m.pct(model_e),
        "ground_truth": m.pct([str(r["Ground truth"]).strip() == "E" for r in records]),
    }
    metrics["unparsed"] = scored.unparsed
    rows = []
    for task in ("perception", "reasoning"):
        for domain, v in metrics.get(task, {}).items():
            if isinstance(v, dict):
                rows.append([task, domain, v["Avg"], v["Avg_C"], v["E"]])
        if task in metrics:
            rows.append([task, "(all)", metrics[task]["Avg"], metrics[task]["Avg_C"], metrics[task]["E"]])
    rows.append(["overall", "(all)", metrics["overall"], None, sum(model_e)])
    tables = [
        Table("MME-RealWorld", ["task", "domain", "Avg", "Avg-C", "answered E"], rows),
        Table(
            "MME-RealWorld answers 'E'",
            ["who", "share of E"],
            [
                ["model", metrics["E_rate"]["model"]],
                ["ground truth", metrics["E_rate"]["ground_truth"]],
                ["random choice accuracy", 20.0],
            ],
        ),
    ]
    bars = {f"{r[0]}/{r[1]}": r[2] for r in rows if r[1] != "(all)"}
    return ScoreResult("mme-realworld", protocol, metrics, tables, scored, preds.warnings, missing, preds.unknown, bars)


def requests(data: Path, images: Path) -> Iterator[Request]:
    """What ``perceptforge predict`` asks, with the paper's prompt."""
    prompt = load_prompt("predict/mme_realworld")
    for where, rec in iter_records(data):
        text = prompt.render(question=rec["Text"], choices="\n".join(rec["Answer choices"]))
        yield Request({"Question_id": rec["Question_id"]}, text, (image_under(images, rec["Image"], where),))
