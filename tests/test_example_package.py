"""The worked example of extending perceptforge (``examples/perceptforge-example``), installed as a package is:
pip installs it (``--target``, beside this checkout), and its entry points bring a family (rotation), a BLINK-style
task with its own builder (brighter_half), a variant of a built-in task (piece_fit, ``include: jigsaw``) and an
MVP category (X1). Each is run, exported and scored through the CLI; the BLINK-shaped ones are verified by two
annotators on the real Label Studio server (skipped, saying why, where its venv is absent)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import annotate, perceptforge_cmd

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "perceptforge-example"
BLINK_SHAPED = {"rotation": ("Rotation",), "blink": ("Brighter_Half", "Piece_Fit")}


def cli(env, *args):
    return subprocess.run([*perceptforge_cmd(), *map(str, args)], capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def example(tmp_path_factory, sample_dir):
    """The example installed, and one run of each thing it adds, exported."""
    root = tmp_path_factory.mktemp("example")
    target = root / "site"
    # built from a copy: setuptools writes build/ and *.egg-info beside the project it builds
    source = shutil.copytree(EXAMPLE, root / "src")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", target]
        + [str(source)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = dict(os.environ, PERCEPTFORGE_STATE_DIR=str(root / "state"))
    env.pop("PREFECT_API_URL", None)
    # this checkout first (a test may run it from a path of its own), then the installed example
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(target)) if p)
    runs = {name: root / name for name in ("rotation", "blink", "mvp")}
    common = ["--source", sample_dir, "--seed", "0"]
    for name, args in {
        "rotation": ["run", "rotation", "--limit", "3"],
        "blink": ["run", "blink", "--tasks", "brighter_half,piece_fit", "--limit", "3"],
        "mvp": ["run", "mvp", "--categories", "X1"],
    }.items():
        made = cli(env, *args, *common, "--out", runs[name])
        assert made.returncode == 0, made.stderr[-2000:]
    return env, runs, root


def test_the_example_installs_runs_exports_and_scores(example):
    env, runs, root = example
    listed = cli(env, "run", "--help")
    assert listed.returncode == 0 and "rotation" in listed.stdout

    # the family's items are true of their pictures; the tasks' items are the example's
    rotation = [json.loads(p.read_text()) for p in sorted((runs["rotation"] / "items").glob("*.json"))]
    assert len(rotation) == 3 and {i["task"] for i in rotation} == {"Rotation"}
    blink = json.loads((runs["blink"] / "summary.json").read_text())
    assert set(blink["items_per_task"]) == {"Brighter_Half", "Piece_Fit"}
    assert blink["random_choice_per_task"] == {"Brighter_Half": 50.0, "Piece_Fit": 50.0}  # derived, not written
    mvp = json.loads((runs["mvp"] / "summary.json").read_text())
    assert mvp["counts"]["items"] > 0, mvp

    for name, tasks in BLINK_SHAPED.items():
        out = root / f"{name}-export"
        exported = cli(env, "export", runs[name], "--out", out)
        assert exported.returncode == 0, exported.stderr[-2000:]
        answers = json.loads((out / "val_answers.json").read_text())
        preds = root / f"{name}-preds.jsonl"
        preds.write_text("".join(json.dumps({"idx": idx, "output": a}) + "\n" for idx, a in answers.items()))
        scored = cli(
            env,
            "score",
            "blink",
            "--data",
            out / "val_answers.json",
            "--predictions",
            preds,
            "--json",
            root / f"{name}.json",
        )
        assert scored.returncode == 0, scored.stderr[-2000:]
        assert json.loads((root / f"{name}.json").read_text())["tasks"] == dict.fromkeys(tasks, 100.0)

    out = root / "mvp-export"
    exported = cli(env, "export", runs["mvp"], "--out", out)
    assert exported.returncode == 0, exported.stderr[-2000:]
    preds, data = root / "mvp-preds.jsonl", []
    with open(preds, "w") as f:
        for split in ("val", "test"):
            for line in (out / f"{split}.jsonl").read_text().splitlines():
                item, data = json.loads(line), [*data, out / f"{split}.jsonl"]
                q = item["question"]
                assert item["category"]["low"] == "X1"
                if q["kind"] == "yes_no_pair":
                    f.write(json.dumps({"id": f"{item['id']}#natural", "output": q["answer_natural"]}) + "\n")
                    f.write(json.dumps({"id": f"{item['id']}#manipulated", "output": q["answer_manipulated"]}) + "\n")
                else:
                    f.write(json.dumps({"id": item["id"], "output": q["answer"]}) + "\n")
    data_args = [a for path in sorted(set(data)) for a in ("--data", path)]
    scored = cli(env, "score", "perceptforge", *data_args, "--predictions", preds, "--json", root / "mvp.json")
    assert scored.returncode == 0, scored.stderr[-2000:]
    metrics = json.loads((root / "mvp.json").read_text())
    assert metrics["overall"] == 100.0 and metrics["missing"] == [] and metrics["unparsed"] == 0


def test_the_examples_blink_shaped_items_are_verified_on_label_studio(example, label_studio, monkeypatch, request):
    from perceptforge.annotation.labeling import choice, text
    from perceptforge.flows.registry import family_of_run, registered
    from perceptforge.prompts import library

    env, runs, root = example
    # the plug-ins load in this process too: what they register (a prompt root, a family) goes with the test
    monkeypatch.setattr(library, "_registered", [])
    monkeypatch.syspath_prepend(env["PYTHONPATH"].split(os.pathsep)[-1])
    registered.cache_clear()
    request.addfinalizer(registered.cache_clear)
    ls = label_studio.client()
    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)
    for name in BLINK_SHAPED:
        fam = family_of_run(runs[name])
        pushed = fam.push(runs[name], ls, label_studio.document_root)
        assert pushed["imported"] >= 3 and fam.push(runs[name], ls, label_studio.document_root)["imported"] == 0
        tasks = sorted(
            (t for pid in pushed["projects"].values() for t in ls.export(pid)), key=lambda t: t["data"]["item_id"]
        )[:3]
        # both accept the first item, disagree on the second, both reject the third
        for task, verdicts in zip(tasks, [("Accept", "Accept"), ("Accept", "Reject"), ("Reject", "Reject")]):
            for who, verdict in zip((ann1, ann2), verdicts):
                result = [choice("verdict", "image_1", verdict)]
                if verdict == "Reject":
                    result.append(text("reject_reason", "image_1", "the answer does not follow from the picture"))
                annotate(who, task["id"], result)
        summary = fam.pull(runs[name], ls)
        assert summary["status"].get("kept") == 1, summary
        out = root / f"{name}-verified"
        exported = cli(env, "export", runs[name], "--out", out, "--only-verified")
        assert exported.returncode == 0, exported.stderr[-2000:]
        assert len(json.loads((out / "val_answers.json").read_text())) == 1
