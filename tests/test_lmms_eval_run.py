"""lmms-eval itself (0.7.x, its own venv: `make lmms-eval-venv`) runs our exported task folder with its `dummy`
model, on val and on test; `perceptforge score` reads its sample log and gets the numbers lmms-eval reported."""

import glob
import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import perceptforge_cmd
from test_export import make_run

import perceptforge
from perceptforge.outputs.export import export_split
from perceptforge.scorer.predictions import lmms_eval_record

REPO = Path(__file__).resolve().parent.parent
LMMS_EVAL_VENV = Path(os.environ.get("PERCEPTFORGE_LMMS_EVAL_VENV", REPO / ".venv-lmms-eval"))


def test_a_0_7_sample_log_line_names_its_item_through_the_logged_metric():
    """lmms-eval 0.7.3 logs no `doc` and a plain-string `filtered_resps` (a line as it wrote it, shortened)."""
    row = {
        "doc_id": 3,
        "target": "no",
        "filtered_resps": "No, it is not.",
        "perceptforge_overall": {"doc": {"id": "B3-2-2#natural", "image": "natural"}, "output": "No, it is not."},
    }
    assert lmms_eval_record(row) == {"id": "B3-2-2#natural", "output": "No, it is not."}
    older = {"doc_id": 0, "doc": {"id": "S1-0-1", "image": ""}, "filtered_resps": ["B"], "resps": [["B"]]}
    assert lmms_eval_record(older) == {"id": "S1-0-1", "output": "B"}


@pytest.mark.parametrize("split", ["val", "test"])
def test_lmms_eval_runs_our_task_and_perceptforge_scores_its_log_the_same(tmp_path, split):
    python = LMMS_EVAL_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no lmms-eval venv at {LMMS_EVAL_VENV} (make lmms-eval-venv builds it)")
    out = tmp_path / "export"
    export_split(make_run(tmp_path, n_per_cat=6), out, name="perceptforge-mvp")
    # the task's utils.py imports perceptforge: the code under test, through a link named after the package
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "perceptforge").symlink_to(Path(perceptforge.__file__).parent)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "pkg"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "WANDB_MODE": "disabled",
    }
    task = "perceptforge_mvp" + ("_val" if split == "val" else "")
    logs = tmp_path / "lmms"
    done = subprocess.run(
        [str(python), "-m", "lmms_eval", "--model", "dummy", "--model_args", "response=B"]
        + ["--include_path", "lmms_eval", "--tasks", task, "--batch_size", "1"]
        + ["--log_samples", "--output_path", str(logs)],
        cwd=out,  # the task's data files are relative to the export folder
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (results,) = glob.glob(str(logs / "**" / "*_results.json"), recursive=True)
    (samples,) = glob.glob(str(logs / "**" / f"*_samples_{task}.jsonl"), recursive=True)
    theirs = json.loads(Path(results).read_text())["results"][task]
    assert (
        len(Path(samples).read_text().splitlines())
        == json.loads(Path(results).read_text())["n-samples"][task]["effective"]
    )

    ours_json = tmp_path / "ours.json"
    scored = subprocess.run(
        [*perceptforge_cmd(), "score", "perceptforge", "--data", str(out / f"{split}.jsonl")]
        + ["--predictions", samples, "--json", str(ours_json)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scored.returncode == 0, scored.stderr
    ours = json.loads(ours_json.read_text())
    assert "missing predictions: 0" in scored.stdout.replace("\n", " ")
    assert (ours["overall"], ours["overall_micro"]) == (
        theirs["perceptforge_overall,none"],
        theirs["perceptforge_micro,none"],
    )
    assert ours["overall_micro"] > 0  # "B" is right on some questions: the numbers compared are not all zero
