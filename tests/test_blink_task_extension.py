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
from perceptforge.logic.blink.build import builders
from perceptforge.logic.blink.templates import load_perception_templates, read_tasks

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

from perceptforge.logic.blink.build import Built


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
        load_perception_templates([folder], builders=builders())
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: odd").replace("[image]", "[image, depth_map]"))
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(template))}: needs: unknown need 'depth_map'; known: image, "
    ):
        load_perception_templates([folder], builders=builders())
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: jigsaw").replace("blink_ext/piece_fit", "blink/jigsaw"))
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(template))}: template id 'jigsaw' is already defined in .*jigsaw.yaml$"
    ):
        load_perception_templates([folder], builders=builders())
    template.write_text(PIECE_FIT.replace("id: piece_fit", "id: odd"))  # its prompt file is not beside it
    with pytest.raises(InputError, match=rf"^{re.escape(str(template))}: unknown prompt 'blink_ext/piece_fit'"):
        load_perception_templates([folder], builders=builders())
    proc = cli(
        ["run", "blink", "--source", sample_dir, "--out", tmp_path / "r"],
        dict(cli_env, PERCEPTFORGE_BLINK_TASKS=str(tmp_path / "missing")),
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "missing: BLINK task folder not found" in lines[0]


def write_task(folder: Path, name: str, text: str, prompt: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(text)
    if prompt is not None:
        (folder / "prompts" / "blink_ext").mkdir(parents=True, exist_ok=True)
        (folder / "prompts" / "blink_ext" / f"{name}.v1.txt").write_text(prompt)
    return folder / f"{name}.yaml"


def test_a_variant_includes_its_task_and_random_choice_is_derived(tmp_path):
    folder = tmp_path / "tasks"
    # a variant writes what it changes: its id, version, name, prompt and one mark setting
    write_task(
        folder,
        "depth_grey",
        "id: depth_grey\nversion: 1\ninclude: relative_depth\ntask: Relative_Depth_Grey\n"
        "prompt: blink_ext/depth_grey\nmarks: {colour: [128, 128, 128]}\nparams: {items_per_source: 2}\n",
        "Two points are circled, A and B. Which one is nearer to the camera?\n",
    )
    found = load_perception_templates([folder], builders=builders())
    base, variant = found["relative_depth"], found["depth_grey"]
    assert (variant.builder, variant.needs, variant.choices) == (base.builder, base.needs, base.choices)
    assert variant.random_choice == 50.0 and found["relative_reflectance"].random_choice == 33.33
    assert variant.marks.colour == (128, 128, 128) and variant.marks.radius == base.marks.radius
    assert variant.params == {**base.params, "items_per_source": 2}
    # a written random_choice that disagrees with the choices is refused, naming the field
    bad = write_task(folder, "depth_grey", (folder / "depth_grey.yaml").read_text() + "random_choice: 25.0\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(bad))}: random_choice: 2 choices give 50.00%"):
        load_perception_templates([folder], builders=builders())
    # an include of an unknown task, or of itself, names the file and the field
    bad.write_text("id: depth_grey\nversion: 1\ninclude: relative_dept\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(bad))}: include: unknown task 'relative_dept'; known: "):
        load_perception_templates([folder], builders=builders())
    bad.write_text("id: depth_grey\nversion: 1\ninclude: depth_grey\n")
    with pytest.raises(InputError, match=r"include: depth_grey → depth_grey includes itself$"):
        load_perception_templates([folder], builders=builders())


def test_a_question_that_contradicts_its_builder_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "tasks"
    farther = write_task(
        folder,
        "depth_far",
        "id: depth_far\nversion: 1\ninclude: relative_depth\nprompt: blink_ext/depth_far\n",
        "Two points are circled, A and B. Which point is farther from the camera?\n",
    )
    with pytest.raises(InputError) as refused:
        load_perception_templates([folder], builders=builders())
    assert str(refused.value) == (
        f"{farther}: prompt 'blink_ext/depth_far' asks for 'farther', but builder 'relative_depth' answers "
        "'the point closer to the camera': every answer would be wrong (ask for the point closer to the camera, "
        "or use a builder that answers what you ask)"
    )
    assert "\n" not in str(refused.value)


def test_an_unknown_builder_says_how_to_register_one(tmp_path):
    bad = write_task(tmp_path / "t", "odd", PIECE_FIT.replace("piece_fit", "odd").replace("jigsaw", "nope"))
    with pytest.raises(InputError, match=r"under the perceptforge\.blink_builders entry-point group\)$"):
        load_perception_templates([bad.parent], builders=builders())


def test_a_broken_task_file_stops_only_the_runs_that_ask_for_it(tmp_path, sample_dir, cli_env):
    folder = task_folder(tmp_path / "tasks")
    broken = write_task(folder, "broken", "id: broken\nversion: 1\nbuilder: jigsaw\nchoices: 9\n")
    (folder / "not_yaml.yaml").write_text("id: [unclosed\n")
    env = dict(cli_env, PERCEPTFORGE_BLINK_TASKS=str(folder))
    args = ["run", "blink", "--source", sample_dir, "--limit", "1", "--seed", "0"]
    ok = cli([*args, "--out", tmp_path / "ok", "--tasks", "piece_fit"], env)
    assert ok.returncode == 0, ok.stderr[-2000:]
    warned = [line for line in ok.stderr.splitlines() if "BLINK task file skipped" in line]
    assert len(warned) == 2 and any(str(broken) in w and "choices" in w for w in warned), ok.stderr
    assert any("not_yaml.yaml" in w and "invalid YAML" in w for w in warned)  # strict reading: file and line
    stopped = cli([*args, "--out", tmp_path / "stopped", "--tasks", "broken"], env)
    lines = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert stopped.returncode == 2 and len(lines) == 1 and str(broken) in lines[0] and "choices:" in lines[0]


def test_builders_are_gathered_once_per_process(monkeypatch):
    from perceptforge.logic.blink import build as blink_build

    scans = []
    monkeypatch.setattr(blink_build, "entry_points", lambda group: scans.append(group) or [])
    blink_build.builders.cache_clear()
    try:
        template = load_perception_templates(builders=blink_build.builders())["jigsaw"]
        image = Image.new("RGB", (96, 96), (90, 120, 30))
        source = blink_build.SourceView("s", image)
        style = blink_build.style_of(template)
        for k in range(3):
            draw = blink_build.BuildContext(np.random.default_rng(k))
            blink_build.build(template, [source], draw, style)
        assert scans == ["perceptforge.blink_builders"]
    finally:
        blink_build.builders.cache_clear()


def test_two_tasks_under_one_task_name_are_refused_in_one_line(tmp_path):
    folder = tmp_path / "tasks"
    twin = write_task(folder, "jigsaw_twin", "id: jigsaw_twin\nversion: 1\ninclude: jigsaw\n")
    found = read_tasks([folder], builders=builders())
    assert "jigsaw" in found.templates and "jigsaw_twin" not in found.templates
    line = str(found.broken["jigsaw_twin"])
    assert line.startswith(f"{twin}: task: 'Jigsaw' is already the task name of ") and "\n" not in line
    assert line.endswith("blink_templates/jigsaw.yaml; give it its own")
