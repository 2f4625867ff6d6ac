"""export: stratified seeded split, byte-identical reruns, Parquet for `datasets`, TSV back through the scorer."""

import json

import numpy as np
import pytest
import yaml
from PIL import Image

from perceptforge.data.schema import BenchmarkItem
from perceptforge.errors import InputError
from perceptforge.outputs.export import export_split
from perceptforge.scorer.benchmarks import perceptforge as pf_scorer
from perceptforge.store.rundir import RunDir

SHA = "b" * 64
CATS = [("behaviour", "B3", "Behaviour-Object Association"), ("scenario", "S1", "Scenario-Background")]


def make_run(tmp_path, n_per_cat=4):
    run = RunDir(tmp_path / "run")
    rng = np.random.default_rng(0)
    for _c, (high, low, name) in enumerate(CATS):
        for k in range(n_per_cat):
            nat = run.store_image(Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)))
            man = run.store_image(Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)))
            questions = [
                {
                    "kind": "single_mcq",
                    "question": "What is the woman holding?",
                    "options": ["a gun", "a helmet", "a cup", "a book", "a phone"],
                    "answer": "ABCDE"[k % 5],
                },
                {
                    "kind": "cross_mcq",
                    "question": "How have the pair of images been modified?",
                    "options": ["Substitute the background.", "Replace the object held by the main subject."],
                    "answer": "B",
                    "level": "low",
                },
                {
                    "kind": "yes_no_pair",
                    "question": "Is the woman holding a gun?",
                    "level": "low",
                    "answer_natural": "no",
                    "answer_manipulated": "yes",
                },
            ]
            for j, q in enumerate(questions):
                item = BenchmarkItem.model_validate(
                    {
                        "id": f"{low}-{k}-{j}",
                        "category": {"high": high, "low": low, "name": name},
                        "question": q,
                        "pair": {"natural": nat.model_dump(), "manipulated": man.model_dump()},
                        "lineage": {
                            "source_id": str(k),
                            "source_sha256": SHA,
                            "template_id": low,
                            "template_version": 1,
                            "seed": 0,
                            "prompts": [{"id": "questions/yes_no", "version": 1, "sha256": SHA}],
                            "backends": {"llm": {"name": "template"}},
                        },
                        "verified": k != 0,
                    }
                )
                run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
    return run.path


def test_export_is_byte_identical_and_stratified(tmp_path):
    run = make_run(tmp_path)
    a = export_split(run, tmp_path / "a", seed=1)
    b = export_split(run, tmp_path / "b", seed=1)
    assert [f.model_dump() for f in a.files] == [f.model_dump() for f in b.files]
    for name in (
        "val.jsonl",
        "test.jsonl",
        "data/val.parquet",
        "data/test.parquet",
        "mcq.tsv",
        "manifest.json",
        "README.md",
    ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert a.counts["val"] == 12 and a.counts["test"] == 12
    assert a.counts["val/B3"] == a.counts["val/S1"] == 6  # half of each category
    c = export_split(run, tmp_path / "c", seed=2)
    assert (tmp_path / "c" / "val.jsonl").read_bytes() != (tmp_path / "a" / "val.jsonl").read_bytes()
    assert c.templates == {"B3": 1, "S1": 1} and c.models == {"llm": "template"}


def test_only_verified_and_bad_run(tmp_path):
    run = make_run(tmp_path)
    m = export_split(run, tmp_path / "v", only_verified=True, formats=("jsonl",))
    assert m.counts["val"] + m.counts["test"] == 18
    with pytest.raises(InputError, match="no items/ folder"):
        export_split(tmp_path, tmp_path / "x")
    (run / "items" / "broken.json").write_text('{"id": "x"}')
    with pytest.raises(InputError, match=r"broken.json: category: Field required"):
        export_split(run, tmp_path / "y")


def test_the_export_folder_loads_with_datasets_as_val_and_test(tmp_path):
    datasets = pytest.importorskip("datasets")
    export_split(make_run(tmp_path), tmp_path / "s", license="cc-by-4.0")
    # what a Hub upload of the folder gives: the card's configs pick the Parquet splits, not the JSONL
    ds = datasets.load_dataset(str(tmp_path / "s"))
    assert sorted(ds) == ["test", "val"] and len(ds["val"]) + len(ds["test"]) == 24
    assert {r["split"] for r in ds["val"]} == {"val"} and {r["split"] for r in ds["test"]} == {"test"}
    row = ds["val"][0]
    assert row["natural_image"].size == (8, 8) and row["manipulated_image"].mode == "RGB"
    assert json.loads(row["lineage"])["template_id"] in ("B3", "S1")
    card = (tmp_path / "s" / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["license"] == "cc-by-4.0" and "visual-question-answering" in header["task_categories"]
    assert header["configs"][0]["data_files"] == [
        {"split": "test", "path": "data/test.parquet"},
        {"split": "val", "path": "data/val.parquet"},
    ]
    assert "not filtered by human verification" in card


def test_tsv_and_jsonl_round_trip_through_scorer(tmp_path):
    out = tmp_path / "s"
    export_split(make_run(tmp_path), out)
    tsv_rows = pf_scorer.read_data([out / "mcq.tsv"])
    assert len(tsv_rows) == 16 and tsv_rows[0]["options"]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "output": f"({r['answer']})"}) + "\n" for r in tsv_rows))
    assert pf_scorer.score([out / "mcq.tsv"], [preds]).metrics["overall_micro"] == 100.0

    lines = []
    for split in ("val", "test"):
        for line in (out / f"{split}.jsonl").read_text().splitlines():
            item = json.loads(line)
            q = item["question"]
            if q["kind"] == "yes_no_pair":
                lines += [
                    {"id": item["id"], "image": "natural", "output": "No."},
                    {"id": item["id"], "image": "manipulated", "output": "No."},
                ]
            else:
                lines.append({"id": item["id"], "output": q["answer"]})
    preds.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = pf_scorer.score([out / "val.jsonl", out / "test.jsonl"], [preds])
    r = result.metrics
    assert r["kinds"]["single_mcq"] == 100.0 and r["kinds"]["yes_no_pair"] == 50.0
    shown = {row[0]: row[1:] for row in result.tables[0].rows}  # the terminal table has the pair metrics
    assert shown["qAcc low"] == [0.0, 25.0] and shown["aAcc"] == [50.0, 50.0] and shown["single_mcq"][1] == 20.0
    assert r["yes_no"]["qAcc"]["low"] == 0.0 and r["yes_no"]["aAcc"] == 50.0

    # a Yes/No pair's prediction without its image is a format slip, said as such (not an unknown id)
    pair = next(x for x in lines if "image" in x)
    preds.write_text(json.dumps({"id": pair["id"], "output": "No."}) + "\n")
    slip = pf_scorer.score([out / "val.jsonl", out / "test.jsonl"], [preds])
    assert slip.unknown == [] and f"id {pair['id']} is a pair: each prediction names its image" in slip.warnings[0]


def test_predict_over_exported_split_scores_back(tmp_path):
    from chat_server import ChatServer

    from perceptforge.backends.chat import ChatClient
    from perceptforge.scorer.predict import predict

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl",))
    kinds = [json.loads(line)["question"]["kind"] for line in (out / "val.jsonl").read_text().splitlines()]

    def reply(req):
        content = req["messages"][0]["content"]
        text = content[-1]["text"]
        n_images = len(content) - 1
        if "Yes or No" in text:
            return "Yes" if n_images == 1 else "No"
        return "B" if n_images == 2 else "A"  # cross-image MCQs carry both images

    with ChatServer(reply) as server:
        summary = predict(
            "perceptforge",
            out / "val.jsonl",
            out,
            ChatClient(base_url=server.base_url, model="tiny"),
            tmp_path / "p.jsonl",
        )
    assert summary["answered"] == len(kinds) + kinds.count("yes_no_pair")  # a pair is asked on both images
    r = pf_scorer.score([out / "val.jsonl"], [tmp_path / "p.jsonl"]).metrics
    assert r["kinds"]["cross_mcq"] == 100.0 and r["kinds"]["yes_no_pair"] == 50.0
    assert not pf_scorer.score([out / "val.jsonl"], [tmp_path / "p.jsonl"]).missing
