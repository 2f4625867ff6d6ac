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
    preds = write(tmp_path, "p.jsonl", '{"idx": "val_Counting_1", "output": "(A) 2"}\n{"idx": "val_Jigsaw_1", "output": "I cannot tell."}\n')
    r = blink.score([answers], [preds])
    assert r.metrics["tasks"] == {"Counting": 50.0, "Jigsaw": 0.0}
    assert r.metrics["overall"] == 25.0 and r.metrics["overall_micro"] == pytest.approx(100 / 3)
    assert r.missing == ["val_Counting_2"] and r.metrics["unparsed"] == 1


def test_identical_repeat_warns_conflict_fails_unknown_reported(answers, tmp_path):
    same = write(tmp_path, "same.jsonl", '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Nope_9", "output": "A"}\n')
    r = blink.score([answers], [same])
    assert r.warnings == [f"{same}:2: id val_Counting_1 repeats {same}:1 identically; kept once"]
    assert r.unknown == [f"{same}:3: id val_Nope_9"]
    clash = write(tmp_path, "clash.jsonl", '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Counting_1", "output": "B"}\n')
    with pytest.raises(InputError, match=r"clash.jsonl:2: id val_Counting_1 conflicts with .*clash.jsonl:1"):
        blink.score([answers], [clash])


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("trunc.jsonl", '{"idx": "val_Counting_1", "output": "A"}\n{"idx": "val_Coun', r"trunc.jsonl:2: not a JSON object"),
        ("preds.csv", "idx,output\nval_Counting_1,A\n", r"preds.csv:1: not a JSON object.*looks like CSV"),
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
