"""VLMEvalKit's own dataset code (its source at commit e8e78f05, in its own venv: `make vlmevalkit-venv`) reads the
TSVs an export writes, as they are, from `$LMUData`, builds each with the class `vlmevalkit_config.json` names, and
evaluates a prediction column with its own `evaluate` (exact matching, no judge); `perceptforge score` reads the
same prediction files and gets VLMEvalKit's numbers, row by row and in every figure both report."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SHARED_REFERENCE
from helpers import perceptforge_cmd
from PIL import Image
from test_export import CATS, MCQ_TSV, YORN_TSV, make_run

from perceptforge.data.schema import LETTERS
from perceptforge.outputs.export import export_split

VLMEVALKIT_VENV = Path(os.environ.get("PERCEPTFORGE_VLMEVALKIT_VENV", REPO / ".venv-vlmevalkit"))
VLMEVALKIT_SRC = SHARED_REFERENCE / "vlmevalkit" / "VLMEvalKit-e8e78f05.tar.gz"

# Run by the VLMEvalKit venv's python: argv = the export's vlmevalkit_config.json, predictions by id (JSON), a work
# folder for the prediction files, the JSON to write. The TSVs are read from $LMUData.
IN_VLMEVALKIT = r'''
import inspect, json, sys

import vlmeval.dataset
from vlmeval.dataset import build_dataset
from vlmeval.smp import dump, get_intermediate_file_path, load

config_path, predictions_path, work, out_path = sys.argv[1:5]
config = json.load(open(config_path))["data"]
predictions = json.load(open(predictions_path))
out = {"build_dataset": {}, "config": {}, "images": {}, "rows": {}, "reports": {}}

def from_config(entry):
    """run.py's build_dataset_from_config (open-compass/VLMEvalKit run.py at e8e78f05; run.py is not in the
    tarball): the class named by "class", called with the entry's keys that its __init__ takes."""
    entry = dict(entry)
    cls = getattr(vlmeval.dataset, entry.pop("class"))
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in entry.items() if k in params})

for name, entry in sorted(config.items()):
    plain = build_dataset(name)  # what `run.py --data <name>` gets
    out["build_dataset"][name] = type(plain).__name__
    dataset = from_config(entry)  # what `run.py --config vlmevalkit_config.json` gets
    out["config"][name] = {"class": type(dataset).__name__, "type": dataset.TYPE, "rows": len(dataset)}
    # every row's prompt, as inference builds it: its images decoded into $LMUData/images/<name>/
    out["images"][name] = {
        str(dataset.data.iloc[k]["id"]): [m["value"] for m in dataset.build_prompt(k) if m["type"] == "image"]
        for k in range(len(dataset))
    }
    # the prediction file inference writes: the dataset's rows less the image, with a prediction column
    data = dataset.data.copy()
    data["prediction"] = [predictions[i] for i in data["id"]]
    data.pop("image")
    eval_file = f"{work}/FakeModel_{name}.xlsx"
    dump(data, eval_file)
    report = dataset.evaluate(eval_file, model="exact_matching", nproc=1)
    out["reports"][name] = {"eval_file": eval_file, "table": json.loads(report.to_json(orient="records"))}
    if dataset.TYPE == "MCQ":  # the rows as judged: hit 0/1
        rows = load(get_intermediate_file_path(eval_file, "_exact_matching_result"))
        out["rows"][name] = {str(i): bool(h) for i, h in zip(rows["id"], rows["hit"])}
    else:  # score True/False
        rows = load(get_intermediate_file_path(eval_file, "_auxmatch"))
        out["rows"][name] = {str(i): bool(s) for i, s in zip(rows["id"], rows["score"])}
json.dump(out, open(out_path, "w"), indent=1)
'''


def skip_without_torchvision(python: Path) -> None:
    """`import vlmeval` imports torchvision (its video and document benchmarks do, at module level): a venv built
    before the Makefile installed it cannot run VLMEvalKit."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([str(python), "-c", "import torchvision"], env=env, capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(
            f"torchvision does not load in {python.parent.parent} (built before the Makefile installed it? "
            f"rm -r it and make vlmevalkit-venv): {probe.stderr.strip().splitlines()[-1]}"
        )


def fake_predictions(mcq: pd.DataFrame, yorn: pd.DataFrame) -> dict[str, str]:
    """A deterministic mix, drawn by a hash of the row's id: right and wrong letters, bare and in sentences, the right
    option's text, and outputs that say nothing (wrong for both). Only forms both extractions read alike (`Yes and
    no.` is Unknown to VLMEvalKit and yes to ours, so it is not among them)."""

    def draw(row_id: str, n: int) -> int:
        return int(hashlib.sha256(row_id.encode()).hexdigest(), 16) % n

    preds = {}
    for row in mcq.itertuples():
        options = [getattr(row, c) for c in LETTERS if isinstance(getattr(row, c), str)]
        right = row.answer
        wrong = LETTERS[(LETTERS.index(right) + 1) % len(options)]
        text = options[LETTERS.index(right)]
        forms = [right, f"({wrong})", f"The answer is {right}, {text}", text, "I cannot tell from the image.", wrong]
        preds[row.id] = forms[draw(row.id, len(forms))]
    for row in yorn.itertuples():
        other = "No" if row.answer == "Yes" else "Yes"
        sentence = {"Yes": "yes, it is", "No": "No, it is not."}
        forms = [row.answer, f"{other}.", sentence[row.answer], "I am not sure.", sentence[other]]
        preds[row.id] = forms[draw(row.id, len(forms))]
    return preds


def test_vlmevalkit_reads_our_tsvs_and_scores_a_prediction_column_as_perceptforge_does(tmp_path):
    python = VLMEVALKIT_VENV / "bin" / "python"
    if not python.exists():
        where = "" if VLMEVALKIT_SRC.is_file() else f"; its source {VLMEVALKIT_SRC} is absent too"
        pytest.skip(f"no VLMEvalKit venv at {VLMEVALKIT_VENV} (make vlmevalkit-venv builds it{where})")
    skip_without_torchvision(python)
    out = tmp_path / "export"
    export_split(make_run(tmp_path, n_per_cat=3, five_questions=True), out)
    mcq = pd.read_csv(out / MCQ_TSV, sep="\t")
    yorn = pd.read_csv(out / YORN_TSV, sep="\t")
    # both files store an image (a cross row: its pair) once; later rows showing it name that row's index
    for table in (mcq, yorn):
        refs = table[table["image"].str.len() <= 64]
        assert len(refs) and set(refs["image"].astype(int)) <= set(table["index"])
    config = json.loads((out / "vlmevalkit_config.json").read_text())
    names = {MCQ_TSV.removesuffix(".tsv"): "MCQ", YORN_TSV.removesuffix(".tsv"): "Y/N"}
    assert sorted(config["data"]) == sorted(names)

    lmu = tmp_path / "LMUData"  # the user's step: the TSVs copied into $LMUData as they are
    lmu.mkdir()
    for tsv in (MCQ_TSV, YORN_TSV):
        shutil.copy(out / tsv, lmu / tsv)
    preds = fake_predictions(mcq, yorn)
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    (tmp_path / "work").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(LMUData=str(lmu), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run(
        [str(python), "-c", IN_VLMEVALKIT, str(out / "vlmevalkit_config.json"), str(tmp_path / "preds.json")]
        + [str(tmp_path / "work"), str(tmp_path / "vlmevalkit.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    theirs = json.loads((tmp_path / "vlmevalkit.json").read_text())
    mcq_name, yorn_name = (n.removesuffix(".tsv") for n in (MCQ_TSV, YORN_TSV))

    # `--data <name>` alone: the MCQ file is a CustomMCQDataset, the Y/N file an open VQA set (hence the config)
    assert theirs["build_dataset"] == {mcq_name: "CustomMCQDataset", yorn_name: "CustomVQADataset"}
    assert theirs["config"] == {
        mcq_name: {"class": "CustomMCQDataset", "type": "MCQ", "rows": len(mcq)},
        yorn_name: {"class": "ImageYORNDataset", "type": "Y/N", "rows": len(yorn)},
    }
    # every row's images, decoded by VLMEvalKit, are the item's own: a cross row gives two files, natural first
    items = {}
    for split in ("val", "test"):
        for line in (out / f"{split}.jsonl").read_text().splitlines():
            item = json.loads(line)
            items[item["id"]] = item
    kinds = dict(zip(mcq["id"], mcq["kind"]))
    for name, table in ((mcq_name, mcq), (yorn_name, yorn)):
        assert sorted(theirs["images"][name]) == sorted(table["id"])
        for row_id, paths in theirs["images"][name].items():
            item_id, _, image = row_id.partition("#")
            pair = items[item_id]["pair"]
            if kinds.get(row_id) == "cross_mcq":
                expected = [pair["natural"]["path"], pair["manipulated"]["path"]]
            else:
                expected = [pair[image or "manipulated"]["path"]]
            assert len(set(paths)) == len(expected), (row_id, paths)
            for got, want in zip(paths, expected):
                with Image.open(got) as a, Image.open(out / want) as b:
                    assert a.convert("RGB").tobytes() == b.convert("RGB").tobytes(), (row_id, got, want)

    # our scorer on the same prediction files VLMEvalKit evaluated
    ours = {}
    for name, tsv in ((mcq_name, MCQ_TSV), (yorn_name, YORN_TSV)):
        scored = subprocess.run(
            [*perceptforge_cmd(), "score", "perceptforge", "--data", str(out / tsv)]
            + ["--predictions", theirs["reports"][name]["eval_file"]]
            + ["--json", str(tmp_path / f"{name}.json"), "--items", str(tmp_path / f"{name}_items.jsonl")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert scored.returncode == 0, scored.stdout + scored.stderr
        rows = [json.loads(line) for line in (tmp_path / f"{name}_items.jsonl").read_text().splitlines()]
        ours[name] = json.loads((tmp_path / f"{name}.json").read_text()), {r["id"]: r["correct"] for r in rows}
        assert not ours[name][0]["missing"] and not ours[name][0]["unknown_ids"]
        # row by row: VLMEvalKit's hit (MCQ) or score (Y/N) is our `correct`
        assert ours[name][1] == theirs["rows"][name]
        assert 0 < sum(ours[name][1].values()) < len(ours[name][1])  # some right, some wrong

    high_of = {name: high for high, _, name in CATS}
    # MCQ: VLMEvalKit's report_acc gives, per split (our `split` column), Overall and the accuracy per l2-category
    # (our category.high) and per category, as fractions; ours gives them over the whole file, in percent
    by_split = {r["split"]: r for r in theirs["reports"][mcq_name]["table"]}
    assert sorted(by_split) == ["test", "val"]
    mcq_ours, mcq_correct = ours[mcq_name]
    splits = dict(zip(mcq["id"], mcq["split"]))
    for split, row in by_split.items():  # VLMEvalKit's per-split figure is our items' mean over that split
        ids = [i for i in mcq_correct if splits[i] == split]
        assert row["Overall"] * 100 == pytest.approx(100 * sum(mcq_correct[i] for i in ids) / len(ids))
    counts = mcq.groupby("split").size()
    overall = sum(by_split[s]["Overall"] * counts[s] for s in by_split) / len(mcq) * 100
    assert mcq_ours["overall_micro"] == pytest.approx(overall)
    for category, value in mcq_ours["categories"].items():
        n = mcq[mcq["category"] == category].groupby("split").size()
        theirs_cat = sum(by_split[s][category] * n[s] for s in n.index) / n.sum() * 100
        theirs_high = sum(by_split[s][high_of[category]] * n[s] for s in n.index) / n.sum() * 100
        assert value == pytest.approx(theirs_cat) == pytest.approx(theirs_high)  # one category per high here

    # Y/N: VLMEvalKit's default_rating gives Overall (the mean over rows: our aAcc, the Y/N kind's accuracy) and the
    # accuracy per category and per l2-category, in percent, over the whole file
    (yn_theirs,) = theirs["reports"][yorn_name]["table"]
    yn_ours = ours[yorn_name][0]
    assert yn_theirs["Overall"] == pytest.approx(yn_ours["yes_no"]["aAcc"])
    assert yn_theirs["Overall"] == pytest.approx(yn_ours["kinds"]["yes_no_pair"])
    for category, value in yn_ours["categories"].items():
        assert yn_theirs[category] == pytest.approx(value) == pytest.approx(yn_theirs[high_of[category]])

    print(
        "\nVLMEvalKit MCQ (report_acc, per split): "
        + json.dumps({s: by_split[s] for s in sorted(by_split)})
        + f"\nours MCQ: overall_micro {mcq_ours['overall_micro']}, categories {mcq_ours['categories']},"
        + f" kinds {mcq_ours['kinds']}"
        + f"\nVLMEvalKit Y/N (default_rating): {json.dumps(yn_theirs)}"
        + f"\nours Y/N: aAcc {yn_ours['yes_no']['aAcc']}, categories {yn_ours['categories']},"
        + f" qAcc {yn_ours['yes_no']['qAcc']}, mAcc {yn_ours['yes_no']['mAcc']}"
    )


# VLMEvalKit's entry point. The reference tarball holds vlmeval/, LICENSE, requirements.txt and setup.py of
# open-compass/VLMEvalKit at e8e78f05, not run.py (the repository's top-level script, which setup.py does not install).
RUN_PY_PLACES = [
    Path(os.environ["PERCEPTFORGE_VLMEVALKIT_RUN_PY"]) if os.environ.get("PERCEPTFORGE_VLMEVALKIT_RUN_PY") else None,
    SHARED_REFERENCE / "vlmevalkit" / "run.py",
    VLMEVALKIT_VENV / "src" / "VLMEvalKit" / "run.py",
]


def run_py() -> Path | None:
    return next((p for p in RUN_PY_PLACES if p is not None and p.is_file()), None)


def kit_reply(request: dict) -> str:
    """A model's answer drawn by a hash of what it was asked (its images included): right and wrong letters, bare
    and in sentences, yes and no, and answers that say nothing, in forms VLMEvalKit's extraction and ours read
    alike."""
    import re

    (message,) = request["messages"][-1:]
    text = "".join(p["text"] for p in message["content"] if p.get("type") == "text")
    draw = hashlib.sha256(json.dumps(request["messages"], sort_keys=True).encode()).digest()
    if "Yes or No" in text:
        forms = ["Yes", "No.", "No, it is not.", "yes, it is", "I am not sure."]
        return forms[draw[0] % len(forms)]
    letters = re.findall(r"^([A-E])\. ", text, re.M)
    letter = letters[draw[1] % len(letters)]
    forms = [letter, f"({letter})", f"The answer is {letter}.", "I cannot tell from the image."]
    return forms[draw[0] % len(forms)]


@pytest.mark.parametrize("route", ["config", "data-config"])
def test_vlmevalkit_run_py_runs_our_config_against_a_local_server_and_its_verdicts_are_ours(tmp_path, route):
    """VLMEvalKit as its users run it, in its own venv with real torchvision, the TSVs in `$LMUData`, against an
    OpenAI-compatible server on 127.0.0.1: `python run.py --config` with the exported config plus a model section
    (its OpenAI wrapper), or, with no edit, `--model --data --data-config '<the config's data>' --base-url`. It asks
    what `perceptforge predict` asks, and its verdict on every row (hit, score) is `perceptforge score`'s."""
    from chat_server import ChatServer

    from perceptforge.scorer.benchmarks.perceptforge import predict_prompts, question_text

    python = VLMEVALKIT_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no VLMEvalKit venv at {VLMEVALKIT_VENV} (make vlmevalkit-venv builds it)")
    script = run_py()
    if script is None:
        pytest.skip(
            f"no VLMEvalKit run.py: {VLMEVALKIT_SRC.name} holds vlmeval/, LICENSE, requirements.txt and setup.py, "
            "not the repository's run.py; put open-compass/VLMEvalKit's run.py at commit e8e78f05 at "
            f"{SHARED_REFERENCE / 'vlmevalkit' / 'run.py'} (or name it in PERCEPTFORGE_VLMEVALKIT_RUN_PY)"
        )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    skip_without_torchvision(python)
    out = tmp_path / "export"
    export_split(make_run(tmp_path, n_per_cat=3, five_questions=True), out)
    lmu = tmp_path / "LMUData"
    lmu.mkdir()
    for tsv in (MCQ_TSV, YORN_TSV):
        shutil.copy(out / tsv, lmu / tsv)
    env.update(LMUData=str(lmu), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(OPENAI_API_KEY="local", CUDA_VISIBLE_DEVICES="")
    work = tmp_path / "outputs"
    with ChatServer(kit_reply) as server:
        config = json.loads((out / "vlmevalkit_config.json").read_text())
        config["model"] = {  # the user's part of the config: VLMEvalKit's OpenAI-compatible wrapper
            "tiny": {"class": "GPT4V", "model": "tiny", "key": "local", "api_base": f"{server.base_url}/chat/completions",
                     "retry": 2, "temperature": 0, "img_detail": "low", "timeout": 60},
        }  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps(config))
        if route == "config":
            how = ["--config", str(tmp_path / "config.json")]
        else:  # the README's no-edit route: the data section as JSON, the model by name and URL
            how = ["--model", "tiny", "--data", *sorted(config["data"]), "--data-config", json.dumps(config["data"])]
            how += ["--base-url", server.base_url, "--key", "local", "--retry", "2", "--temperature", "0"]
        done = subprocess.run(
            [str(python), str(script), *how, "--work-dir", str(work), "--judge", "exact_matching", "--api-nproc", "2"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    mcq = pd.read_csv(out / MCQ_TSV, sep="\t")
    yorn = pd.read_csv(out / YORN_TSV, sep="\t")
    asked = sorted("".join(p["text"] for p in r["messages"][-1]["content"] if p.get("type") == "text")
                   for r in server.requests)  # fmt: skip
    assert len(asked) == len(mcq) + len(yorn)  # one request per row
    # the Y/N rows are asked exactly what predict asks; the MCQ rows carry predict's question and instruction
    yes_no = sorted(question_text("yes_no_pair", q) for q in yorn["bare_question"])
    assert [a for a in asked if "Yes or No" in a] == yes_no
    instruction = predict_prompts()["mcq"].splitlines()[-1]
    assert all(instruction in a for a in asked if "Yes or No" not in a)

    mcq_name, yorn_name = (n.removesuffix(".tsv") for n in (MCQ_TSV, YORN_TSV))
    verdict_files = {mcq_name: ("_exact_matching_result", "hit"), yorn_name: ("_auxmatch", "score")}
    right = {}
    for name, tsv in ((mcq_name, MCQ_TSV), (yorn_name, YORN_TSV)):
        # run.py writes each run under tiny/T<time>/ and copies its files up to tiny/
        predictions = work / "tiny" / f"tiny_{name}.xlsx"
        judged = work / "tiny" / f"tiny_{name}{verdict_files[name][0]}.xlsx"
        rows = pd.read_excel(judged)
        theirs = {str(i): bool(v) for i, v in zip(rows["id"], rows[verdict_files[name][1]])}
        items = tmp_path / f"{name}_items.jsonl"
        scored = subprocess.run(
            [*perceptforge_cmd(), "score", "perceptforge", "--data", str(out / tsv), "--predictions", str(predictions)]
            + ["--items", str(items)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert scored.returncode == 0, scored.stdout + scored.stderr
        ours = {r["id"]: r["correct"] for r in map(json.loads, items.read_text().splitlines())}
        assert ours == theirs  # row by row
        assert 0 < sum(ours.values()) < len(ours)  # some right, some wrong
        right[name] = sum(ours.values()), len(ours)
    # the figures run.py reported: the Y/N file's Overall (percent) and the MCQ file's per split (fractions)
    yn = pd.read_csv(work / "tiny" / f"tiny_{yorn_name}_score.csv")
    assert yn["Overall"][0] == pytest.approx(100 * right[yorn_name][0] / right[yorn_name][1])
    acc = pd.read_csv(work / "tiny" / f"tiny_{mcq_name}_acc.csv")
    sizes = mcq.groupby("split").size()
    assert sum(acc.set_index("split")["Overall"] * sizes) == pytest.approx(right[mcq_name][0])
    print(f"\nrun.py and perceptforge score, rows right of rows: {right}; Y/N Overall {yn['Overall'][0]}")
