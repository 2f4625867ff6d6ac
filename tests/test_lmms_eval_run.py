"""lmms-eval itself (0.7.x, its own venv: `make lmms-eval-venv`) runs our exported task folder as its users run it:
its `openai` model against an OpenAI-compatible server on 127.0.0.1, with nothing of perceptforge importable in its
environment (the folder carries its scorer, `perceptforge_scorer.py`). Each item's verdict in its sample log equals
`perceptforge score`'s on the same outputs, and so do the numbers it reports."""

import glob
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
from chat_server import ChatServer
from helpers import perceptforge_cmd
from test_export import make_run

from perceptforge.outputs.export import export_split
from perceptforge.scorer.benchmarks.perceptforge import question_text, read_data
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


# Replies of the shapes models give, one drawn per request from a hash of what was asked (the images included), so
# the verdicts are a mix of right, wrong and unparsed, and the same on every run.
YES_NO_REPLIES = ("Yes", "No.", "No, it is not.", "yes, clearly", "I cannot tell from this image.")
MCQ_REPLIES = ("A", "(B)", "The answer is C.", "B. That one.", "I'm not sure.", "E")


def reply(request: dict) -> str:
    content = request["messages"][-1]["content"]
    text = (
        content if isinstance(content, str) else " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    )
    replies = YES_NO_REPLIES if "Yes or No" in text else MCQ_REPLIES
    digest = hashlib.sha256(json.dumps(request["messages"], sort_keys=True).encode()).digest()
    return replies[digest[0] % len(replies)]


def asked_text(request: dict) -> str:
    content = request["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content if p.get("type") == "text")


@pytest.mark.parametrize("split", ["val", "test"])
def test_lmms_eval_runs_our_task_alone_and_its_verdicts_are_ours_item_by_item(tmp_path, split):
    python = LMMS_EVAL_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no lmms-eval venv at {LMMS_EVAL_VENV} (make lmms-eval-venv builds it)")
    out = tmp_path / "export"
    export_split(make_run(tmp_path, n_per_cat=6), out, name="perceptforge-mvp")
    # lmms-eval's environment as its users have it: no PYTHONPATH, and perceptforge is not installed there
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "WANDB_MODE": "disabled",
        "OPENAI_API_KEY": "local",
    }
    probe = subprocess.run([str(python), "-c", "import perceptforge"], cwd=tmp_path, env=env, capture_output=True)
    assert probe.returncode != 0, "perceptforge is importable in the lmms-eval venv: the test would prove nothing"
    task = "perceptforge_mvp" + ("_val" if split == "val" else "")
    logs = tmp_path / "lmms"
    with ChatServer(reply) as server:
        done = subprocess.run(
            [str(python), "-m", "lmms_eval", "--model", "openai"]
            + ["--model_args", f"model=tiny,base_url={server.base_url},api_key=local,num_concurrent=2,max_retries=1"]
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
    logged = [json.loads(line) for line in Path(samples).read_text().splitlines()]
    assert len(logged) == json.loads(Path(results).read_text())["n-samples"][task]["effective"]

    # every question was asked, once, with the text `perceptforge predict` asks it with
    rows = read_data([out / f"{split}.jsonl"])
    expected = sorted(
        question_text(r["kind"], r["question"], r.get("options")) for r in rows for _ in r.get("answers") or [0]
    )
    assert sorted(map(asked_text, server.requests)) == expected

    ours_json, ours_items = tmp_path / "ours.json", tmp_path / "ours_items.jsonl"
    scored = subprocess.run(
        [*perceptforge_cmd(), "score", "perceptforge", "--data", str(out / f"{split}.jsonl")]
        + ["--predictions", samples, "--json", str(ours_json), "--items", str(ours_items)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert scored.returncode == 0, scored.stderr
    assert "missing predictions: 0" in scored.stdout.replace("\n", " ")
    # item by item: what the exported module read of each output, and its verdict, are ours
    mine = {
        i["id"]: (i["extracted"], i["method"], i["correct"])
        for i in map(json.loads, ours_items.read_text().splitlines())
    }
    records = [row["perceptforge_overall"] for row in logged]
    verdicts = {r["doc"]["id"]: (r["read"], r["method"], r["correct"]) for r in records}
    assert verdicts == mine
    assert 0 < sum(c for _, _, c in mine.values()) < len(mine)  # some right, some wrong: the comparison can tell
    assert any(read is None for read, _, _ in mine.values())  # and some unparsed
    ours = json.loads(ours_json.read_text())
    assert (ours["overall"], ours["overall_micro"]) == (
        theirs["perceptforge_overall,none"],
        theirs["perceptforge_micro,none"],
    )
    print(
        f"\n{task}: {len(mine)} questions, {sum(c for _, _, c in mine.values())} right by both, "
        f"{sum(r is None for r, _, _ in mine.values())} unparsed; lmms-eval overall {theirs['perceptforge_overall,none']}"
        f" micro {theirs['perceptforge_micro,none']}; perceptforge score {ours['overall']} / {ours['overall_micro']}"
    )
