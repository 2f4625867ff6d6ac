"""A BLINK-style task added from outside the package, end to end through the CLI: a task folder named by
PERCEPTFORGE_BLINK_TASKS (its template and its prompt beside it, a built-in builder) is built, exported and
scored with no edit to the scorer; a builder and a task folder from a tiny distribution's entry points
(`perceptforge.blink_builders`, `perceptforge.blink_tasks`); and a bad template is one line naming its file."""

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import dist_info, perceptforge_cmd
from PIL import Image

from perceptforge.errors import InputError
from perceptforge.logic.perception_templates import load_perception_templates

PIECE_FIT = """\
# A Jigsaw-built task under a name of its own, from a folder outside the package.
id: piece_fit
version: 1
task: Piece_Fit
builder: jigsaw
needs: [image]
prompt: blink_ext/piece_fit
choices: 2
random_choice: 50.0
"""
PIECE_FIT_PROMPT = "The first image lacks its lower-right part. Which of the next two images fits the gap?\n"


def cli(args, env):
    return subprocess.run([*perceptforge_cmd(), *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def task_folder(root: Path) -> Path:
    (root / "prompts" / "blink_ext").mkdir(parents=True)
    (root / "piece_fit.yaml").write_text(PIECE_FIT)
    (root / "prompts" / "blink_ext" / "piece_fit.v1.txt").write_text(PIECE_FIT_PROMPT)
    return root


def test_a_task_folder_from_the_environment_builds_exports_and_scores(tmp_path, sample_dir, cli_env):
    env = dict(cli_env, PERCEPTFORGE_BLINK_TASKS=str(task_folder(tmp_path / "tasks")))
    run, out = tmp_path / "run", tmp_path / "export"
    built = cli(["run", "blink", "--source", sample_dir, "--out", run, "--tasks", "piece_fit", "--seed", "0"], env)
    assert built.returncode == 0, built.stderr[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    # the pillar scene's two secondary views serve Multi-view tasks only: 7 of the 9 sources
    assert summary["items_per_task"] == {"Piece_Fit": 7} and summary["prompts"] == ["blink_ext/piece_fit v1"]
    item = json.loads(next((run / "items").glob("*.json")).read_text())
    assert item["question"] == PIECE_FIT_PROMPT.rstrip("\n")
    assert item["lineage"]["prompts"][0]["id"] == "blink_ext/piece_fit"

    exported = cli(["export", run, "--out", out], env)  # the audit beside it reads the new task too
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert json.loads((out / "tasks.json").read_text()) == {
        "Piece_Fit": {"options": 2, "choices": ["the second image", "the third image"]}
    }
    answers = json.loads((out / "val_answers.json").read_text())
    assert sorted(answers) == [f"val_Piece_Fit_{n}" for n in range(1, 8)]

    # items 1-3 answered in the options' words (tasks.json's choices find them), item 4 by its letter,
    # items 5-7 wrong: 4 of 7 right
    preds = tmp_path / "preds.jsonl"
    words = ["the second image", "the third image"]
    with open(preds, "w") as f:
        for idx, answer in answers.items():
            n, right = int(idx.rsplit("_", 1)[1]), "AB".index(answer[1])
            output = f"It is {words[right]}." if n <= 3 else answer if n == 4 else f"({'AB'[1 - right]})"
            f.write(json.dumps({"idx": idx, "output": output}) + "\n")
    scored = cli(
        ["score", "blink", "--data", out / "val_answers.json", "--predictions", preds, "--json", tmp_path / "s.json"],
        env,
    )
    assert scored.returncode == 0, scored.stderr[-2000:]
    metrics = json.loads((tmp_path / "s.json").read_text())
    assert metrics["tasks"] == {"Piece_Fit": 100.0 * 4 / 7} and metrics["random_choice"] == 50.0
    assert metrics["unparsed"] == 0

    # without the export's task table the scorer knows only BLINK's own tasks
    (out / "tasks.json").unlink()
    bare = cli(["score", "blink", "--data", out / "val_answers.json", "--predictions", preds], env)
    assert bare.returncode == 2 and "unknown BLINK task 'Piece_Fit'" in bare.stderr


BRIGHTER_HALF = '''
"""A builder living outside perceptforge: which half of the photo is brighter."""
import numpy as np

from perceptforge.logic.perception_build import Built


def brighter_half(t, sources, draw, style):
    grey = np.asarray(sources[0].image.convert("L"), np.float64)
    half = grey.shape[1] // 2
    left, right = grey[:, :half].mean(), grey[:, half:].mean()
    if abs(left - right) < float(t.params.get("min_gap", 1.0)):
        raise ValueError(f"the halves differ by only {abs(left - right):.2f} grey levels")
    return Built([sources[0].image], ["the left half", "the right half"], 0 if left > right else 1)
'''
BRIGHTER_HALF_TASK = """\
id: brighter_half
version: 1
task: Brighter_Half
builder: brighter_half
needs: [image]
prompt: blink_ext/brighter_half
choices: 2
random_choice: 50.0
params: {min_gap: 1.0}
"""


def distribution(root: Path) -> Path:
    """A tiny installed distribution: a builder module and a task package (template and prompt), each named by
    an entry point."""
    package = root / "pf_blink_ext"
    tasks = package / "tasks"
    (tasks / "prompts" / "blink_ext").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "builders.py").write_text(BRIGHTER_HALF)
    (tasks / "__init__.py").write_text("")
    (tasks / "brighter_half.yaml").write_text(BRIGHTER_HALF_TASK)
    (tasks / "prompts" / "blink_ext" / "brighter_half.v1.txt").write_text("Which half of the image is brighter?\n")
    return dist_info(
        root,
        "pf-blink-ext",
        """\
        [perceptforge.blink_builders]
        brighter_half = pf_blink_ext.builders:brighter_half

        [perceptforge.blink_tasks]
        brighter = pf_blink_ext.tasks
        """,
    )


def test_a_builder_and_a_task_from_entry_points(tmp_path, sample_dir, cli_env):
    ext = distribution(tmp_path / "ext")
    env = dict(cli_env, PYTHONPATH=os.pathsep.join(p for p in (str(ext), cli_env.get("PYTHONPATH")) if p))
    run = tmp_path / "run"
    args = ["run", "blink", "--source", sample_dir, "--out", run, "--tasks", "brighter_half", "--seed", "0"]
    built = cli(args, env)
    assert built.returncode == 0, built.stderr[-2000:]
    items = [json.loads(p.read_text()) for p in sorted((run / "items").glob("*.json"))]
    assert len(items) == 7
    for item in items:
        grey = np.asarray(Image.open(run / item["images"][0]["path"]).convert("L"), np.float64)
        half = grey.shape[1] // 2
        brighter = "A" if grey[:, :half].mean() > grey[:, half:].mean() else "B"
        assert item["answer"] == brighter and item["task"] == "Brighter_Half"
        assert item["lineage"]["template_id"] == "brighter_half"
    assert {i["answer"] for i in items} == {"A", "B"}
    # without the distribution neither the task nor its builder exists
    gone = cli(args, cli_env)
    assert gone.returncode == 2 and "unknown task(s) ['brighter_half']" in gone.stderr


def test_a_template_with_an_unknown_builder_or_need_is_one_line_naming_its_file(tmp_path, sample_dir, cli_env):
    folder = tmp_path / "bad"
    folder.mkdir()
    template = folder / "odd.yaml"
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: odd").replace("builder: jigsaw", "builder: nope"))
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(template))}: builder: unknown builder 'nope'; known: art_style, "
    ):
        load_perception_templates([folder])
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: odd").replace("[image]", "[image, depth_map]"))
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(template))}: needs: unknown need 'depth_map'; known: image, "
    ):
        load_perception_templates([folder])
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: jigsaw").replace("blink_ext/piece_fit", "blink/jigsaw"))
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(template))}: template id 'jigsaw' is already defined in .*jigsaw.yaml$"
    ):
        load_perception_templates([folder])
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: odd"))  # its prompt file is not beside it
    with pytest.raises(InputError, match=rf"^{re.escape(str(template))}: unknown prompt 'blink_ext/piece_fit'"):
        load_perception_templates([folder])
    proc = cli(
        ["run", "blink", "--source", sample_dir, "--out", tmp_path / "r"],
        dict(cli_env, PERCEPTFORGE_BLINK_TASKS=str(tmp_path / "missing")),
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "missing: BLINK task folder not found" in lines[0]
