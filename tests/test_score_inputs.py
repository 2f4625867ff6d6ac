"""Bad and awkward prediction files: clear errors naming file and line, duplicates, unknown and missing ids."""

import json
import subprocess

import pytest
from helpers import perceptforge_cmd

from perceptforge.errors import InputError
from perceptforge.scorer.benchmarks import blink

ANSWERS = {"val_Counting_1": "(A)", "val_Counting_2": "(B)", "val_Jigsaw_1": "(B)"}


@pytest.fixture
def answers(tmp_path):
    path = tmp_path / "val_answers.json"
    path.write_text(json.dumps(ANSWERS))
    return path


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def run_score(args, env):
    return subprocess.run([*perceptforge_cmd(), "score", *map(str, args)], capture_output=True, text=True, env=env)


def test_scores_jsonl_predictions(answers, tmp_path):
    preds = write(
        tmp_path,
        "p.jsonl",
        '{"idx": "val_Counting_1", "output": "(A) 2"}\n{"idx": "val_Jigsaw_1", "output": "I cannot tell."}\n',
    )
    r = blink.score([answers], [preds])
    assert r.metrics["tasks"] == {"Counting": 50.0, "Jigsaw": 0.0}
    assert r.metrics["overall"] == 25.0 and r.metrics["overall_micro"] == pytest.approx(100 / 3)
    assert r.missing == ["val_Counting_2"] and r.metrics["unparsed"] == 1


def test_scores_a_csv_table_of_predictions(answers, tmp_path):
    preds = write(tmp_path, "p.csv", 'idx,output\nval_Counting_1,"(A) 2"\nval_Jigsaw_1,I cannot tell.\n')
    r = blink.score([answers], [preds])
    assert r.metrics["tasks"] == {"Counting": 50.0, "Jigsaw": 0.0} and r.missing == ["val_Counting_2"]


def test_identical_repeat_warns_conflict_fails_unknown_reported(answers, tmp_path):
    same = write(
        tmp_path,
        "same.jsonl",
        '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Nope_9", "output": "A"}\n',
    )
    r = blink.score([answers], [same])
    assert r.warnings == [f"{same}:2: id val_Counting_1 repeats {same}:1 identically; kept once"]
    assert r.unknown == [f"{same}:3: id val_Nope_9"]
    # BLINK keeps the last of two different predictions, as its official script does; others stop
    clash = write(
        tmp_path, "clash.jsonl", '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Counting_1", "output": "B"}\n'
    )
    r = blink.score([answers], [clash])
    assert r.metrics["tasks"]["Counting"] == 0.0  # "B" kept, and val_Counting_1's answer is A
    assert r.warnings == [f"{clash}:2: id val_Counting_1 repeats {clash}:1 with another output; the last is kept"]
    from perceptforge.scorer.benchmarks import mvp_bench

    data = write(
        tmp_path,
        "q.jsonl",
        json.dumps({"question_id": 1, "question": "Q?", "answer": "A", "type": "mcq-e", "level": "high"}) + "\n",
    )
    mvp_clash = write(tmp_path, "m.jsonl", '{"question_id": 1, "output": "A"}\n{"question_id": 1, "output": "B"}\n')
    with pytest.raises(InputError, match=r"m.jsonl:2: id 1 conflicts with .*m.jsonl:1"):
        mvp_bench.score([data], [mvp_clash])


@pytest.mark.parametrize(
    "name, text, message",
    [
        (
            "trunc.jsonl",
            '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Coun',
            r"trunc.jsonl:2: not a JSON object",
        ),
        ("preds.jsonl", "idx,output\nval_Counting_1,A\n", r"preds.jsonl:1: not a JSON object.*looks like CSV"),
        ("preds.csv", "item,answer\nval_Counting_1,A\n", r"preds.csv row 2: prediction record lacks 'idx'"),
        ("empty.jsonl", "", r"empty.jsonl: file is empty"),
    ],
)
def test_bad_files_name_file_and_line(answers, tmp_path, cli_env, name, text, message):
    path = write(tmp_path, name, text)
    proc = run_score(["blink", "--data", answers, "--predictions", path], cli_env)
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    import re

    assert re.search(message, lines[0]), lines[0]


def test_wrong_benchmark_name(answers, cli_env):
    proc = run_score(["blinkk", "--data", answers], cli_env)
    assert proc.returncode == 2
    assert "unknown benchmark 'blinkk': choose one of blink, codis, mme-realworld, mvp-bench" in proc.stderr


def test_blink_hf_parquet_layout_uses_item_choices(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "idx": ["val_Counting_1", "val_Relative_Depth_1"],
            "answer": ["(B)", "(A)"],
            "sub_task": ["Counting", "Relative_Depth"],
            "choices": [["0", "1", "2", "3"], ["A is closer", "B is closer"]],
        }
    )
    pq.write_table(table, tmp_path / "val.parquet")
    preds = write(
        tmp_path,
        "p.jsonl",
        '{"idx": "val_Counting_1", "output": "There is 1 dog."}\n{"idx": "val_Relative_Depth_1", "output": "I believe A is closer to the camera."}\n',
    )
    r = blink.score([tmp_path / "val.parquet"], [preds])
    assert r.metrics["tasks"] == {"Counting": 100.0, "Relative_Depth": 100.0}
    assert [i.method for i in r.items] == ["option_text_lead", "option_text_lead"]


def test_mme_realworld_separate_output_file(tmp_path):
    from perceptforge.scorer.benchmarks import mme_realworld

    rec = {
        "Question_id": "Perception/Monitoring/x/1",
        "Text": "How many cars?",
        "Answer choices": ["(A) 1", "(B) 2", "(C) 3", "(D) 4", "(E) The image does not feature the cars."],
        "Ground truth": "D",
        "Task": "Perception",
        "Subtask": "Monitoring",
        "Category": "counting",
        "Image": "x.jpg",
    }
    data = write(tmp_path, "data.json", json.dumps([rec, {**rec, "Question_id": "q2", "Ground truth": "E"}]))
    preds = write(
        tmp_path,
        "p.jsonl",
        '{"Question_id": "Perception/Monitoring/x/1", "output": "Based on the image, the answer is D"}\n{"Question_id": "q2", "output": ""}\n',
    )
    strict = mme_realworld.score([data], [preds]).metrics
    official = mme_realworld.score([data], [preds], "official").metrics
    assert strict["perception"]["Avg"] == 50.0 and strict["unparsed"] == 1  # "" is unparsed, not "A"
    assert official["perception"]["Avg"] == 0.0  # the official rule reads "Based" as B… and "" as A
    assert strict["E_rate"] == {"model": 0.0, "ground_truth": 50.0}


def test_null_output_counts_as_missing_and_no_predictions_at_all_fails(answers, tmp_path, cli_env):
    preds = write(
        tmp_path, "p.jsonl", '{"idx": "val_Counting_1", "output": null}\n{"idx": "val_Jigsaw_1", "output": "B"}\n'
    )
    r = blink.score([answers], [preds])
    assert sorted(r.missing) == ["val_Counting_1", "val_Counting_2"]
    assert r.metrics["tasks"]["Counting"] is None  # no prediction at all: "—", not 0.00
    assert r.metrics["overall"] == 50.0  # the macro mean still counts the missing ones as wrong
    assert r.warnings == [f"{preds}:1: id val_Counting_1 has no output; counted as missing"]
    nothing = write(tmp_path, "other.jsonl", '{"idx": "val_Nope_1", "output": "A"}\n')
    proc = run_score(["blink", "--data", answers, "--predictions", nothing], cli_env)
    assert proc.returncode == 1 and "no item of the data has a prediction (3 missing)" in proc.stderr
    allowed = run_score(["blink", "--data", answers, "--predictions", nothing, "--allow-missing"], cli_env)
    assert allowed.returncode == 0, allowed.stderr


def test_the_example_of_unknown_ids_is_the_first_offending_line(tmp_path):
    from perceptforge.scorer.benchmarks import mvp_bench

    data = write(
        tmp_path,
        "all.json",
        json.dumps({"question_id": "q1", "id": 1, "image": "Single_Images/1_e.jpg", "question": "Q?",
                    "answer": "A", "type": "mcq-e", "level": "high"}) + "\n",
    )  # fmt: skip
    lines = [{"question_id": f"zz{k}", "output": "A"} for k in range(12)] + [{"question_id": "q1", "output": "A"}]
    preds = write(tmp_path, "p.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    r = mvp_bench.score([data], [preds])
    assert r.unknown[0] == f"{preds}:1: id zz0" and len(r.unknown) == 12


def test_bootstrap_intervals_are_printed_when_asked(answers, tmp_path, cli_env):
    preds = write(tmp_path, "p.jsonl", "".join(json.dumps({"idx": k, "output": v}) + "\n" for k, v in ANSWERS.items()))
    proc = run_score(["blink", "--data", answers, "--predictions", preds, "--bootstrap", "50"], cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "bootstrap 95% intervals" in proc.stdout and "overall" in proc.stdout


def test_score_never_writes_over_its_inputs(tmp_path, cli_env):
    """--items, --json, --csv (and its items file) naming --data or --predictions stop in one line; nothing changes."""
    import subprocess

    from helpers import perceptforge_cmd

    data = tmp_path / "data.jsonl"
    data.write_text(
        '{"question_id": 0, "id": 1, "image": "x.jpg", "question": "q", "answer": "A", "type": "mcq-e", "level": "high"}\n'
    )
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"question_id": 0, "output": "A"}\n')
    before = {p: p.read_bytes() for p in (data, preds)}
    base = [*perceptforge_cmd(), "score", "mvp-bench", "--data", str(data), "--predictions", str(preds)]
    for option, target in (("--items", preds), ("--json", data), ("--csv", tmp_path / "preds.jsonl")):
        done = subprocess.run([*base, option, str(target)], env=cli_env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "is also read as" in done.stdout + done.stderr, (option, done.stderr)
        assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in (data, preds)} == before


def test_values_read_from_input_are_shown_escaped():
    """(``score`` with such an id: benchmarks/bad_inputs, "an ESC sequence and U+202E in a prediction id")"""
    from perceptforge.errors import shown

    assert shown("a\x1b[31mb\u202ec\td\n") == "a\\x1b[31mb\\u202ec\td\n"


def test_predict_stops_on_an_out_file_that_holds_other_content(tmp_path):
    from perceptforge.errors import PerceptforgeError
    from perceptforge.scorer.predict import done_keys

    out = write(tmp_path, "p.jsonl", '{"question_id": 1, "output": "A"}\nmy notes\n')
    with pytest.raises(PerceptforgeError, match=r"p.jsonl:2: not a prediction line"):
        done_keys(out)


def test_our_split_random_choice_row_is_the_mean_over_items_of_one_over_options(tmp_path):
    """One cross_mcq item offers 4 options, four offer 5: chance is (1/4 + 4 × 1/5) / 5 = 21%, read from
    val.jsonl or from the VLMEvalKit TSV alike (not 1/options of whichever item came last)."""
    from perceptforge.scorer.benchmarks import perceptforge as pf_scorer

    counts = [5, 5, 4, 5, 5]
    records, tsv = [], ["id\tquestion\tA\tB\tC\tD\tE\tanswer\tcategory\tlevel\tkind"]
    for k, n in enumerate(counts):
        options = [f"option {x}" for x in "ABCDE"[:n]]
        records.append(
            {
                "id": f"i{k}",
                "category": {"name": "Scenario-Background"},
                "question": {
                    "kind": "cross_mcq",
                    "question": "What changed?",
                    "options": options,
                    "answer": "A",
                    "level": "low",
                },
            }  # fmt: skip
        )
        tsv.append("\t".join([f"i{k}", "What changed?", *options, *[""] * (5 - n), "A", "Scenario-Background", "low",
                              "cross_mcq"]))  # fmt: skip
    (tmp_path / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "mcq.tsv").write_text("\n".join(tsv) + "\n")
    preds = write(tmp_path, "p.jsonl", "".join(json.dumps({"id": f"i{k}", "output": "A"}) + "\n" for k in range(5)))
    for data in (tmp_path / "val.jsonl", tmp_path / "mcq.tsv"):
        r = pf_scorer.score([data], [preds])
        assert r.metrics["random_choice"]["cross_mcq"] == pytest.approx(21.0), data
        assert r.metrics["kinds"]["cross_mcq"] == 100.0


BLINK_TASKS = ["Visual_Similarity", "Counting", "Relative_Depth", "Jigsaw", "Art_Style", "Functional_Correspondence",
               "Semantic_Correspondence", "Spatial_Relation", "Object_Localization", "Visual_Correspondence",
               "Multi-view_Reasoning", "Relative_Reflectance", "Forensic_Detection", "IQ_Test"]  # fmt: skip


@pytest.mark.parametrize("protocol", ["official", "strict"])
def test_blink_keeps_the_last_of_an_idx_given_twice_and_scores_an_empty_task_file_zero(tmp_path, protocol):
    """Expected numbers: what eval/evaluate.py (zeyofu/BLINK_Benchmark at 2d6a779) prints for these files —
    every task 1.0, Jigsaw 0.0 (its file's "val" is empty), "Average Accuracy … is 92.86%"."""
    answers = {f"val_{t}_1": "(B)" if t == "Counting" else "(A)" for t in BLINK_TASKS}
    write(tmp_path, "val_answers.json", json.dumps(answers))
    outputs = tmp_path / "saved_outputs_m"
    outputs.mkdir()
    for t in BLINK_TASKS:
        if t == "Counting":  # "(A)" then "(B)": the last is kept
            val = [{"idx": "val_Counting_1", "full_prediction": "A", "prediction": "(A)"},
                   {"idx": "val_Counting_1", "full_prediction": "B", "prediction": "(B)"}]  # fmt: skip
        elif t == "Jigsaw":
            val = []
        else:
            val = [{"idx": f"val_{t}_1", "full_prediction": "(A)", "prediction": "(A)"}]
        write(outputs, f"{t.replace('_', ' ')}.json", json.dumps({"val": val}))
    r = blink.score([tmp_path / "val_answers.json"], sorted(outputs.glob("*.json")), protocol)
    assert r.metrics["tasks"] == {t: 0.0 if t == "Jigsaw" else 100.0 for t in BLINK_TASKS}
    assert round(r.metrics["overall"], 2) == 92.86
