"""Official release files and our own, read by ``score`` and ``audit``: wrong types, keys or ids given twice,
answers outside the options, outputs naming inputs, values that must not reach the terminal raw."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from . import SAMPLE, Outcome, case, cli, small_run, verdict
from .servers import completion, refused, serving

MVP = {
    "question_id": 1,
    "id": 7,
    "image": "x.jpg",
    "question": "Is it?",
    "answer": "Yes",
    "type": "y/n-s",
    "level": "low",
}
MME = {
    "Question_id": "q1", "Image": "x.jpg", "Text": "What?",
    "Answer choices": ["(A) a", "(B) b", "(C) c", "(D) d", "(E) The image does not feature it."],
    "Ground truth": "A", "Task": "Perception", "Subtask": "Autonomous_Driving", "Category": "Objects_Identify",
}  # fmt: skip
CODIS = {
    "id": "000", "image_id": "x.jpg", "question": "Up or down?", "context": {"context_1": "a", "context_2": "b"},
    "answer": {"answer_1": "Up.", "answer_2": "Down."}, "category": "Attributes",
}  # fmt: skip
BLINK = '{"val_Counting_1": "(A)", "val_Counting_2": "(B)"}'
ONE_PREDICTION = '{"question_id": 1, "output": "A"}\n'

# (case, benchmark, data file: name and text, predictions file: name and text (bytes for a binary one), must say)
READER_CASES: list[tuple[str, str, str, str, str, str | bytes, str]] = [
    ("mvp-bench: a record whose type is 7", "mvp-bench", "d.jsonl", json.dumps({**MVP, "type": 7}), "p.jsonl", ONE_PREDICTION,
     "d.jsonl:1: type must be one of y/n-s, y/n-e, mcq-e, mcq-cross, got 7"),
    ("mvp-bench: a record without level", "mvp-bench", "d.jsonl", json.dumps({k: v for k, v in MVP.items() if k != "level"}),
     "p.jsonl", ONE_PREDICTION, "d.jsonl:1: not an MVP-Bench question record: no 'level'"),
    ("mvp-bench: a Yes/No record with id null", "mvp-bench", "d.jsonl", json.dumps({**MVP, "id": None}), "p.jsonl",
     ONE_PREDICTION, "d.jsonl:1: a Yes/No record needs its pair's id"),
    ("mvp-bench: a question_id given as a list", "mvp-bench", "d.jsonl", json.dumps({**MVP, "question_id": [1]}), "p.jsonl",
     ONE_PREDICTION, "question_id must be a number or a string, got [1]"),
    ("mvp-bench: a question_id repeated with another answer", "mvp-bench", "d.jsonl",
     json.dumps(MVP) + "\n" + json.dumps({**MVP, "answer": "No"}), "p.jsonl", ONE_PREDICTION, "d.jsonl:2: question_id 1 again (first at "),
    ("codis: an id given twice", "codis", "d.json", json.dumps([CODIS, {**CODIS, "question": "Left or right?"}]), "p.jsonl",
     ONE_PREDICTION, "d.json[1]: id 000 again"),
    ("mme-realworld: Ground truth F", "mme-realworld", "d.json", json.dumps([{**MME, "Ground truth": "F"}]), "p.jsonl",
     ONE_PREDICTION, "Ground truth 'F' is not one of the options A, B, C, D, E"),
    ("mme-realworld: Task null", "mme-realworld", "d.json", json.dumps([{**MME, "Task": None}]), "p.jsonl", ONE_PREDICTION,
     "d.json[0]: Task must be a non-empty text, got None"),
    ("mme-realworld: a record that is a number", "mme-realworld", "d.json", json.dumps([3]), "p.jsonl", ONE_PREDICTION,
     "d.json[0]: expected an MME-RealWorld record (an object), got int"),
    ("mme-realworld: a Question_id given twice", "mme-realworld", "d.json", json.dumps([MME, {**MME, "Text": "Why?"}]),
     "p.jsonl", ONE_PREDICTION, "d.json[1]: Question_id q1 again"),
    ("blink: a key given twice in val_answers.json", "blink", "val_answers.json", '{"val_Counting_1": "(A)", "val_Counting_1": "(B)"}',
     "p.jsonl", ONE_PREDICTION, "key 'val_Counting_1' is given twice"),
    ("blink: a prediction idx that is a list", "blink", "val_answers.json", BLINK, "p.jsonl",
     '{"idx": ["val_Counting_1"], "output": "A"}\n{"idx": "val_Counting_2", "output": "B"}\n',
     "p.jsonl:1: a prediction's id must be a text or a whole number"),
    ("blink: a corrupt .xlsx of predictions", "blink", "val_answers.json", BLINK, "Model_results.xlsx", b"PK\x03\x04 not a workbook",
     "not a readable .xlsx table"),
    ("blink: a truncated predictions file", "blink", "val_answers.json", BLINK, "p.jsonl",
     '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Coun', "p.jsonl:2: not a JSON object"),
]  # fmt: skip


def reader_case(benchmark: str, data: tuple[str, str], preds: tuple[str, str | bytes], must_say: str) -> Callable:
    def run(tmp: Path, env: dict) -> Outcome:
        (tmp / data[0]).write_text(data[1] + "\n")
        content = preds[1]
        (tmp / preds[0]).write_bytes(content if isinstance(content, bytes) else content.encode())
        return verdict(
            cli(env, "score", benchmark, "--data", str(tmp / data[0]), "--predictions", str(tmp / preds[0])), must_say
        )

    return run


for _name, _benchmark, _data, _data_text, _preds, _preds_text, _says in READER_CASES:
    case(_name)(reader_case(_benchmark, (_data, _data_text), (_preds, _preds_text), _says))


def mvp_files(tmp: Path) -> tuple[Path, Path]:
    data, preds = tmp / "data.jsonl", tmp / "preds.jsonl"
    data.write_text(json.dumps({**MVP, "type": "mcq-e", "level": "high", "answer": "A", "question_id": 0}) + "\n")
    preds.write_text(json.dumps({"question_id": 0, "output": "A"}) + "\n")
    return data, preds


def score_over_input(tmp: Path, env: dict, option: str, target: str) -> Outcome:
    """``score`` with an output option naming one of its inputs: one line, and the inputs unchanged."""
    data, preds = mvp_files(tmp)
    before = {p: p.read_bytes() for p in (data, preds)}
    args = ["score", "mvp-bench", "--data", str(data), "--predictions", str(preds), option, str(tmp / target)]
    proc = cli(env, *args)
    if {p: p.read_bytes() for p in (data, preds)} != before:
        return "data lost", f"{option} wrote over {target}"
    return verdict(proc, "is also read as")


@case("score --items is the --predictions file")
def score_items_into_predictions(tmp, env):
    return score_over_input(tmp, env, "--items", "preds.jsonl")


@case("score --json is the --data file")
def score_json_into_data(tmp, env):
    return score_over_input(tmp, env, "--json", "data.jsonl")


@case("score: an ESC sequence and U+202E in a prediction id", expect="handled")
def score_escape_in_id(tmp, env):
    data, preds = mvp_files(tmp)
    with preds.open("a") as f:
        f.write(json.dumps({"question_id": "\x1b[2J[bold]x\u202e", "output": "A"}) + "\n")
    proc = cli(env, "score", "mvp-bench", "--data", str(data), "--predictions", str(preds))
    shown = proc.stdout + proc.stderr
    if "\x1b[2J" in shown or "\u202e" in shown:
        return "security", "the id reached the terminal raw"
    ok = "\\x1b[2J[bold]x\\u202e" in shown and "Traceback" not in shown
    return ("handled" if ok else "silently wrong"), "the id shown escaped" if ok else shown[-200:]


def split_of(tmp: Path, env: dict) -> Path:
    """The side of a one-source export that holds the questions."""
    split = tmp / "split"
    cli(env, "export", str(small_run(tmp, env)), "--out", str(split), "--formats", "jsonl")
    return max((split / "val.jsonl", split / "test.jsonl"), key=lambda p: p.stat().st_size if p.exists() else -1)


@case("score: a one-line lmms-eval sample log", expect="handled")
def one_line_lmms_log(tmp, env):
    data = split_of(tmp, env)
    first = json.loads(data.read_text().splitlines()[0])
    log = tmp / "samples_perceptforge_overall.jsonl"
    log.write_text(json.dumps({"doc_id": 0, "doc": {"id": first["id"]}, "filtered_resps": ["A"]}) + "\n")
    proc = cli(env, "score", "perceptforge", "--data", str(data), "--predictions", str(log))
    if proc.returncode or "Traceback" in proc.stderr:
        return verdict(proc, "(scored)")
    return "handled", "scored"


@case("an export whose split is one-sided is audited", expect="handled")
def one_sided_export(tmp, env):
    split = tmp / "split"
    proc = cli(env, "export", str(small_run(tmp, env)), "--out", str(split), "--formats", "jsonl")
    if proc.returncode or not (split / "audit.html").exists():
        return verdict(proc, "(exported)")
    notes = json.loads((split / "audit.json").read_text()).get("notes", [])
    return ("handled" if any("no " in n and " split" in n for n in notes) else "silently wrong"), "; ".join(notes)


@case("audit thresholds with min_p_value: .nan")
def nan_threshold(tmp, env):
    (tmp / "t.yaml").write_text("balance:\n  min_p_value: .nan\n")
    return verdict(
        cli(env, "audit", str(small_run(tmp, env)), "--thresholds", str(tmp / "t.yaml")), "must be a finite number"
    )


@case('audit thresholds with min_p_value: "high"')
def text_threshold(tmp, env):
    (tmp / "t.yaml").write_text('balance:\n  min_p_value: "high"\n')
    return verdict(cli(env, "audit", str(small_run(tmp, env)), "--thresholds", str(tmp / "t.yaml")), "min_p_value")


def blind_audit(env: dict, split: Path, url: str, model: str) -> object:
    return cli(env, "audit", str(split), "--predict-endpoint", f"{url}/v1", "--model", model)


@case("audit --predict-endpoint: another model is asked itself", expect="handled")
def blind_per_model(tmp, env):
    split = split_of(tmp, env).parent
    with serving(lambda body: completion("A")) as (url, asked):
        blind_audit(env, split, url, "first")
        first = len(asked)
    with serving(lambda body: completion("B")) as (url, asked):
        proc = blind_audit(env, split, url, "second")
        second = len(asked)
    if not first or second != first or "Traceback" in proc.stderr:
        return "silently wrong", f"the first model was asked {first} question(s), the second {second}"
    return "handled", f"each model asked {first} question(s)"


@case("audit --predict-endpoint answering 401")
def blind_refused(tmp, env):
    split = split_of(tmp, env).parent
    with serving(lambda body: refused(401, "invalid api key")) as (url, _):
        return verdict(blind_audit(env, split, url, "locked"), "HTTP 401")


# --- issue 43: a scorer plug-in that fails to import --------------------------------------------------------------
def broken_scorer_env(tmp: Path, env: dict) -> dict:
    """``env`` with an installed-looking package whose ``perceptforge.benchmarks`` entry point raises on import."""
    site = tmp / "site"
    info = site / "broken_scorer-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-scorer\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[perceptforge.benchmarks]\nbroken = broken_scorer\n")
    (site / "broken_scorer.py").write_text("raise ImportError('needs torchmetrics, not installed')\n")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))}


@case("score with a scorer plug-in that fails to import; the built-in scorers still work")
def broken_scorer_plugin(tmp, env):
    env = broken_scorer_env(tmp, env)
    data, preds = mvp_files(tmp)
    other = cli(env, "score", "mvp-bench", "--data", str(data), "--predictions", str(preds))
    if other.returncode or "Traceback" in other.stderr:
        return ("traceback" if "Traceback" in other.stderr else "silently wrong"), "mvp-bench did not score"
    proc = cli(env, "score", "broken", "--data", str(data), "--predictions", str(preds))
    return verdict(proc, "perceptforge.benchmarks entry point broken = broken_scorer: cannot be imported: ImportError")


# --- issue 43: BLINK plug-ins that fail to load --------------------------------------------------------------------
BROKEN_TASK = """\
id: broken_half
version: 1
task: Broken_Half
builder: broken_half
needs: [image]
prompt: blink_broken/broken_half
choices: 2
"""


def broken_blink_env(tmp: Path, env: dict, builder_fails: bool) -> dict:
    """``env`` with an installed-looking package: a task folder and its builder under the BLINK entry-point groups;
    the builder's module raises on import (``builder_fails``), else the task folder's entry point names a module
    that is not there."""
    site = tmp / "site"
    info = site / "broken_blink-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-blink\nVersion: 0.1\n")
    tasks = "broken_blink.tasks" if builder_fails else "broken_blink.gone"
    (info / "entry_points.txt").write_text(
        f"[perceptforge.blink_builders]\nbroken_half = broken_blink.builder:half\n\n[perceptforge.blink_tasks]\nb = {tasks}\n"
    )
    package = site / "broken_blink"
    (package / "tasks" / "prompts" / "blink_broken").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "builder.py").write_text("raise ImportError('needs scikit-learn, not installed')\n")
    (package / "tasks" / "__init__.py").write_text("")
    (package / "tasks" / "broken_half.yaml").write_text(BROKEN_TASK)
    (package / "tasks" / "prompts" / "blink_broken" / "broken_half.v1.txt").write_text("Which half is brighter?\n")
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))}


def blink_run(env: dict, out: Path, task: str) -> object:
    return cli(env, "run", "blink", "--source", str(SAMPLE), "--out", str(out), "--tasks", task, "--limit", "1")


def broken_blink_plugin(tmp: Path, env: dict, builder_fails: bool, must_say: str) -> Outcome:
    env = broken_blink_env(tmp, env, builder_fails)
    other = blink_run(env, tmp / "other", "iq_test")
    if other.returncode or "Traceback" in other.stderr:
        return ("traceback" if "Traceback" in other.stderr else "silently wrong"), "a built-in task did not run"
    if must_say not in other.stderr:
        return "silently wrong", "a run of another task did not warn about the plug-in"
    return verdict(blink_run(env, tmp / "asked", "broken_half"), must_say)


@case("run blink with a builder plug-in that fails to import; other tasks still run")
def broken_blink_builder(tmp, env):
    must = "perceptforge.blink_builders entry point broken_half = broken_blink.builder:half (package broken-blink)"
    return broken_blink_plugin(tmp, env, True, f"{must}: cannot be loaded: ImportError")


@case("run blink with a task-folder plug-in that fails to load; other tasks still run")
def broken_blink_tasks(tmp, env):
    must = "perceptforge.blink_tasks entry point b = broken_blink.gone (package broken-blink)"
    return broken_blink_plugin(tmp, env, False, f"{must}: cannot be loaded: ModuleNotFoundError")
