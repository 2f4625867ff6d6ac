"""BLINK: ``val_answers.json`` (``{idx: "(A)"}``) or the Hugging Face parquet; per-task accuracy and the
unweighted mean over tasks.

What each task's items offer (the number of options, and the option texts when a task words them the same for
every item) comes from a ``tasks.json`` beside ``val_answers.json`` when there is one (``perceptforge export``
writes it, so a task BLINK does not have scores too), else from BLINK's own table (``blink_tasks.yaml``); with
the parquet, each item's own choices.

Predictions: the official ``saved_outputs/<Task>.json`` files (``{"val": [{idx, full_prediction,
prediction}]}``) or JSON Lines ``{idx, output}``. ``--protocol official`` scores the official
``prediction`` field as the official script does (string equality with the answer, "(Z)" = failed);
``strict`` extracts from the raw output (``full_prediction`` / ``output``) with our rules. As in the
official script, the same idx given twice keeps the last (with a warning), and a task whose file holds no
prediction (``"val": []``) scores 0.00; a task no file names and no prediction reaches shows "—".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path

import yaml

from perceptforge.errors import InputError
from perceptforge.fileio import read_json
from perceptforge.scorer import metrics as m
from perceptforge.scorer.extract import LETTERS, Extraction, extract_choice
from perceptforge.scorer.judge import judge_unparsed
from perceptforge.scorer.predictions import RecordError, read_predictions
from perceptforge.scorer.result import ItemLog, ScoredItem, ScoreResult, Table

_ANSWER = re.compile(r"^\(?([A-H])\)?$")
from perceptforge.scorer.requests import Request


@lru_cache(maxsize=1)
def task_table() -> dict[str, dict]:
    text = resources.files("perceptforge.scorer.benchmarks").joinpath("blink_tasks.yaml").read_text()
    return yaml.safe_load(text)


def task_of(idx: str) -> str:
    """``val_Relative_Depth_12`` → ``Relative_Depth``."""
    match = re.match(r"^(?:val|test)_(.+)_\d+$", idx)
    if not match:
        raise ValueError(f"not a BLINK idx: {idx!r}")
    return match.group(1)


def tasks_beside(path: Path) -> dict[str, dict]:
    """The task table for a data file: ``tasks.json`` in its folder when present, else BLINK's."""
    beside = path.parent / "tasks.json"
    if not beside.is_file():
        return task_table()
    doc = read_json(beside)
    if not isinstance(doc, dict) or not all(
        isinstance(v, dict) and isinstance(v.get("options"), int) for v in doc.values()
    ):
        raise InputError(str(beside), 'expected {Task: {"options": n, "choices": [...]}}')
    return doc


def read_data(paths: list[Path]) -> dict[str, dict]:
    """idx → {answer letter, task, choices, n (the item's options), options (its task's)}."""
    items: dict[str, dict] = {}
    for path in map(Path, paths):
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            for row in pq.read_table(path, columns=["idx", "answer", "choices", "sub_task"]).to_pylist():
                items[row["idx"]] = _item(str(path), row["idx"], row["answer"], row.get("choices"), task_table())
            continue
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise InputError(str(path), 'expected BLINK answers as an object {idx: "(A)"}')
        table = tasks_beside(path)
        for idx, answer in doc.items():
            items[idx] = _item(str(path), idx, answer, None, table)
    if not items:
        raise InputError(", ".join(map(str, paths)), "no BLINK items")
    return items


def _item(where: str, idx: str, answer: str, choices: list[str] | None, table: dict[str, dict]) -> dict:
    try:
        task = task_of(idx)
    except ValueError as exc:
        raise InputError(where, str(exc)) from None
    info = table.get(task)
    if info is None and not choices:
        raise InputError(where, f"{idx}: unknown BLINK task {task!r} (and no tasks.json beside it names it)")
    letter = _ANSWER.match(str(answer).strip())
    if not letter:
        raise InputError(where, f"{idx}: answer {answer!r} is not a letter like '(A)'")
    own = {"options": len(choices), "choices": list(choices)} if choices else info or {}
    return {
        "answer": letter.group(1),
        "task": task,
        "choices": own.get("choices"),
        "n": own["options"],
        "options": (info or own)["options"],  # the task's, for the random-choice row
    }


def score(data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, **_) -> ScoreResult:
    official = protocol == "official"
    items = read_data(data)

    def key_of(rec: dict):
        if official:
            if "prediction" not in rec:
                raise RecordError("--protocol official needs the official 'prediction' field (saved_outputs files)")
            return [(rec["idx"], rec["prediction"])]
        return [(rec["idx"], rec.get("full_prediction", rec.get("output")))]

    # the same idx twice: the official script keeps the last (a dict filled in reading order), reading the
    # task files in its own order, so "the last" across files is the one its order reads last
    order = official_file_order(predictions) if official else list(predictions)
    preds = read_predictions(order, key_of, known=set(items), repeats="last")
    scored, missing = ItemLog(), []
    for idx, item in items.items():
        pred = preds.by_key.get(idx)
        if pred is None:
            missing.append(idx)
            scored.append(ScoredItem(idx, item["task"], None, None, "missing", False))
            continue
        if official:
            # The official script compares strings: "(C) Point C" is not "(C)"; "(Z)" marks a failure.
            letter = _ANSWER.match((pred.output or "").strip())
            ex = Extraction(letter.group(1) if letter and pred.output.strip() != "(Z)" else None, "official_prediction")
            correct = (pred.output or "") == f"({item['answer']})"
        else:
            ex = extract_choice(pred.output, item["n"], item["choices"])
            options = "\n".join(f"({LETTERS[k]}) {c}" for k, c in enumerate(item["choices"] or []))
            ex = judge_unparsed(ex, judge, f"BLINK task {item['task']}\n{options}", LETTERS[: item["n"]], pred.output)
            correct = ex.value == item["answer"]
        scored.append(ScoredItem(idx, item["task"], pred.output, ex.value, ex.method, correct))

    flags = [(s.group, s.correct) for s in scored]
    counted = m.per_group(flags)  # missing predictions count as wrong in the overall means
    # A task with no prediction at all shows "—", not 0 — unless a predictions file is named for it (the
    # official saved_outputs/<Task>.json): one with "val": [] is 0.00 in the official output.
    answered = {s.group for s in scored if s.method != "missing"} | _tasks_named(predictions, counted)
    tasks = {t: (v if t in answered else None) for t, v in counted.items()}
    sizes = Counter(group for group, _ in flags)
    task_options = {item["task"]: item["options"] for item in items.values()}
    random_row = {t: 100.0 / task_options[t] for t in tasks}
    metrics = {
        "tasks": tasks,
        "overall": m.mean(counted.values()),
        "overall_micro": m.pct([correct for _, correct in flags]),
        "random_choice": m.mean(random_row.values()),
        "unparsed": scored.unparsed,
    }
    rows = [[t, acc, random_row[t], sizes[t]] for t, acc in tasks.items()]
    rows += [
        ["overall (macro)", metrics["overall"], metrics["random_choice"], len(scored)],
        ["overall (micro)", metrics["overall_micro"], None, len(scored)],
    ]
    return ScoreResult(
        "blink",
        protocol,
        metrics,
        [Table("BLINK", ["task", "accuracy", "random choice", "n"], rows)],
        scored,
        preds.warnings,
        missing,
        preds.unknown,
        dict(tasks),
        group_key="task",
    )


# eval/evaluate.py's ``subtasks``: the order get_prediction_file reads the task files in
OFFICIAL_TASK_ORDER = (
    "Visual_Similarity", "Counting", "Relative_Depth", "Jigsaw", "Art_Style", "Functional_Correspondence",
    "Semantic_Correspondence", "Spatial_Relation", "Object_Localization", "Visual_Correspondence",
    "Multi-view_Reasoning", "Relative_Reflectance", "Forensic_Detection", "IQ_Test",
)  # fmt: skip


def official_file_order(predictions: list[Path]) -> list[Path]:
    """The prediction files in the official script's task order; files named for no BLINK task (JSON
    Lines, our own tasks) after them, in the order given. Stable, so files named for one task keep theirs."""
    rank = {task: k for k, task in enumerate(OFFICIAL_TASK_ORDER)}

    def place(path: Path) -> int:
        return rank.get(Path(path).stem.replace(" ", "_").removesuffix("_concat"), len(rank))

    return sorted(predictions, key=place)


def _tasks_named(predictions: list[Path], tasks: dict) -> set[str]:
    """The tasks the prediction files are named for: ``Art Style.json``, ``Art_Style.json``,
    ``Art Style_concat.json`` (the released folders' names) → Art_Style."""
    named = set()
    for path in map(Path, predictions):
        stem = path.stem.replace(" ", "_").removesuffix("_concat")
        if stem in tasks:
            named.add(stem)
    return named


def requests(data: Path, images: Path) -> Iterator[Request]:
    """What ``perceptforge predict`` asks, with the paper's prompt."""
    if data.suffix != ".parquet":
        raise InputError(str(data), "BLINK prediction needs the Hugging Face parquet (it holds the prompts and images)")
    import pyarrow.parquet as pq

    table = pq.read_table(data)
    for row in table.to_pylist():
        imgs = tuple(row[f"image_{k}"]["bytes"] for k in range(1, 5) if row.get(f"image_{k}"))
        yield Request({"idx": row["idx"]}, row["prompt"], imgs)
