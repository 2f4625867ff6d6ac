"""export: stratified seeded split, byte-identical reruns, Parquet for `datasets`, TSV back through the scorer."""

import hashlib
import json

import numpy as np
import pytest
import yaml
from PIL import Image

from perceptforge.data.schema import BenchmarkItem
from perceptforge.errors import InputError
from perceptforge.outputs.export import export_split, vlmevalkit_names
from perceptforge.scorer.benchmarks import perceptforge as pf_scorer
from perceptforge.store.rundir import RunDir

SHA = "b" * 64
CATS = [("behaviour", "B3", "Behaviour-Object Association"), ("scenario", "S1", "Scenario-Background")]
# the VLMEvalKit files of an export with the default name: VLMEvalKit reads dataset X from $LMUData/X.tsv
MCQ_TSV, YORN_TSV = "perceptforge-mvp_MCQ.tsv", "perceptforge-mvp_YORN.tsv"


def make_run(tmp_path, n_per_cat=4, five_questions=False):
    """A run of ``n_per_cat`` pairs per category, three questions per pair (single MCQ, cross MCQ, Yes/No);
    ``five_questions``: a real unit's five (Yes/No and cross MCQ each at the low and the high level), so that
    two questions show the same image(s)."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True, exist_ok=True)
    (run.path / "run.json").write_text('{"flow": "mvp"}')  # what every run directory records: its family
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
            if five_questions:
                questions += [
                    {
                        "kind": "yes_no_pair",
                        "question": "Is the woman threatening someone?",
                        "level": "high",
                        "answer_natural": "no",
                        "answer_manipulated": "yes",
                    },
                    {
                        "kind": "cross_mcq",
                        "question": "Which aspect of the pair of images differs?",
                        "options": ["The behaviour.", "The scenario.", "The identity."],
                        "answer": "AB"[_c],
                        "level": "high",
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
                            "source_id": f"{low}-{k}",
                            "source_sha256": hashlib.sha256(f"{low}-{k}".encode()).hexdigest(),
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
        MCQ_TSV,
        YORN_TSV,
        "vlmevalkit_config.json",
        "manifest.json",
        "README.md",
    ):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert a.counts["val"] == 12 and a.counts["test"] == 12
    assert a.counts["val/B3"] == a.counts["val/S1"] == 6  # half of each category
    c = export_split(run, tmp_path / "c", seed=2)
    assert (tmp_path / "c" / "val.jsonl").read_bytes() != (tmp_path / "a" / "val.jsonl").read_bytes()
    assert c.templates == {"B3": 1, "S1": 1} and c.models == {"llm": ["template"]}


def test_the_manifest_and_card_name_every_backend_that_made_an_item(tmp_path):
    """A stage served by several backends (the local profile's edits: `filters` for some values, `recolour` for
    others) names them all, not the last item's."""
    run = make_run(tmp_path)
    for n, path in enumerate(sorted((run / "items").glob("*.json"))):
        item = json.loads(path.read_text())
        item["lineage"]["backends"]["edit"] = {"name": ("filters", "recolour", "composite")[n % 3]}
        if n == 0:
            item["lineage"]["backends"]["grounder"] = {"name": "openai-vlm", "model_id": "qwen2.5-vl"}
        path.write_text(json.dumps(item))
    manifest = export_split(run, tmp_path / "s")
    assert manifest.models == {
        "edit": ["composite", "filters", "recolour"],
        "grounder": ["qwen2.5-vl"],
        "llm": ["template"],
    }
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["models"] == manifest.models
    card = (tmp_path / "s" / "README.md").read_text()
    assert "models by stage edit: composite, filters, recolour; grounder: qwen2.5-vl; llm: template;" in card


def test_vlmevalkit_files_are_named_after_the_export():
    assert vlmevalkit_names("perceptforge-mvp") == ("perceptforge-mvp_MCQ", "perceptforge-mvp_YORN")
    assert vlmevalkit_names("My bench / v2") == ("My_bench_v2_MCQ", "My_bench_v2_YORN")  # a file name, one word
    assert vlmevalkit_names("//") == ("perceptforge_MCQ", "perceptforge_YORN")


def test_only_verified_and_bad_run(tmp_path):
    run = make_run(tmp_path)
    m = export_split(run, tmp_path / "v", only_verified=True, formats=("jsonl",))
    assert m.counts["val"] + m.counts["test"] == 18
    with pytest.raises(InputError, match="no items/ folder"):
        export_split(tmp_path, tmp_path / "x")
    (run / "items" / "broken.json").write_text('{"id": "x"}')
    with pytest.raises(InputError, match=r"broken.json: category: Field required"):
        export_split(run, tmp_path / "y")


def test_the_export_folder_loads_with_datasets_as_val_and_test(tmp_path, caplog):
    """`load_dataset` reads the folder with no warning: Python's warnings are errors here, and nothing is logged at
    WARNING (datasets logs its own, "The `splits` field in YAML is malformed", through logging)."""
    import logging
    import warnings

    datasets = pytest.importorskip("datasets")
    export_split(make_run(tmp_path), tmp_path / "s", license="cc-by-4.0")
    # what a Hub upload of the folder gives: the card's configs pick the Parquet splits, not the JSONL
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING):
        warnings.simplefilter("error")
        ds = datasets.load_dataset(str(tmp_path / "s"), cache_dir=str(tmp_path / "cache"))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert sorted(ds) == ["test", "val"] and len(ds["val"]) + len(ds["test"]) == 24
    assert {r["split"] for r in ds["val"]} == {"val"} and {r["split"] for r in ds["test"]} == {"test"}
    row = ds["val"][0]
    assert row["natural_image"].size == (8, 8) and row["manipulated_image"].mode == "RGB"
    # lineage is a struct (its maps as lists of records), not a JSON string
    assert row["lineage"]["template_id"] in ("B3", "S1") and row["lineage"]["template_version"] == 1
    assert row["lineage"]["backends"] == [{"stage": "llm", "name": "template", "model_id": ""}]
    assert row["lineage"]["prompts"] == [{"id": "questions/yes_no", "version": 1, "sha256": SHA}]
    # the card's split records are whole (num_bytes too), and datasets took them: its sizes are the card's
    header_splits = yaml.safe_load((tmp_path / "s" / "README.md").read_text().split("---\n")[1])["dataset_info"]
    for record in header_splits["splits"]:
        assert ds[record["name"]].info.splits[record["name"]].num_bytes == record["num_bytes"] > 0
    card = (tmp_path / "s" / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["license"] == "cc-by-4.0" and "visual-question-answering" in header["task_categories"]
    assert header["configs"][0]["data_files"] == [
        {"split": "test", "path": "data/test.parquet"},
        {"split": "val", "path": "data/val.parquet"},
    ]
    assert "not filtered by human verification" in card


def test_datasets_and_huggingface_hub_read_the_hand_written_features_as_intended(tmp_path):
    datasets = pytest.importorskip("datasets")
    huggingface_hub = pytest.importorskip("huggingface_hub")
    import pyarrow.parquet as pq

    export_split(make_run(tmp_path), tmp_path / "s", license="cc-by-4.0")
    text, image = datasets.Value("string"), datasets.Image()
    intended = datasets.Features(
        {
            **{n: text for n in ("id", "split", "category", "category_high", "category_low", "kind", "level")},
            "question": text,
            "options": datasets.List(text),
            "answer": text,
            "natural_image": image,
            "manipulated_image": image,
            "lineage": {
                "source_id": text,
                "source_sha256": text,
                "template_id": text,
                "template_version": datasets.Value("int64"),
                "prompts": datasets.List({"id": text, "version": datasets.Value("int64"), "sha256": text}),
                "backends": datasets.List({"stage": text, "name": text, "model_id": text}),
                "seed": datasets.Value("int64"),
                "artifacts": datasets.List({"name": text, "path": text}),
                "parent_id": text,
            },
        }
    )
    schema = pq.read_schema(tmp_path / "s" / "data" / "val.parquet")
    assert datasets.Features.from_arrow_schema(schema) == intended
    assert schema.remove_metadata() == intended.arrow_schema.remove_metadata()  # the same Arrow types, in order
    # the list column as datasets 3 reads it too: 4 and later would write "List" (huggingface/datasets#7739)
    assert json.loads(schema.metadata[b"huggingface"])["info"]["features"]["options"]["_type"] == "Sequence"
    card = huggingface_hub.DatasetCard.load(tmp_path / "s" / "README.md")
    assert card.data.license == "cc-by-4.0" and card.data.pretty_name and "perceptforge" in card.data.tags
    assert datasets.Features._from_yaml_list(card.data.dataset_info["features"]) == intended
    assert card.text.lstrip().startswith("# ") and "## Files" in card.text


def hand_written_predictions(out):
    """Every single MCQ right, every cross MCQ wrong (A instead of B), each Yes/No pair answered No on both
    images (right on the natural image, wrong on the manipulated one): by id as our scorer keys them."""
    preds = {}
    for split in ("val", "test"):
        for line in (out / f"{split}.jsonl").read_text().splitlines():
            item = json.loads(line)
            q = item["question"]
            if q["kind"] == "yes_no_pair":
                preds[f"{item['id']}#natural"] = preds[f"{item['id']}#manipulated"] = "No."
            else:
                preds[item["id"]] = q["answer"] if q["kind"] == "single_mcq" else "The answer is (A)."
    return preds


EXPECTED = {"single_mcq": 100.0, "cross_mcq": 0.0, "yes_no_pair": 50.0}


def test_tsv_and_jsonl_round_trip_through_scorer(tmp_path):
    """The VLMEvalKit TSVs (MCQ and Y/N) hold every item kind and score exactly like the JSONL split; a
    VLMEvalKit result workbook and an lmms-eval sample log of the same predictions score the same."""
    import pandas as pd

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out)
    tsvs = [out / MCQ_TSV, out / YORN_TSV]
    tsv_rows = pf_scorer.read_data(tsvs)
    jsonl = [out / "val.jsonl", out / "test.jsonl"]
    strip = lambda rows: sorted((r | {"question": r["question"]} for r in rows), key=lambda r: r["id"])  # noqa: E731
    json_rows = pf_scorer.read_data(jsonl)
    assert {r["kind"] for r in tsv_rows} == {"single_mcq", "cross_mcq", "yes_no_pair"}
    assert strip(tsv_rows) == strip(json_rows)  # nothing lost or changed on the way through the TSVs
    yorn = pd.read_csv(out / YORN_TSV, sep="\t")
    assert set(yorn["answer"]) == {"Yes", "No"} and len(yorn) == 16  # two rows per pair
    mcq = pd.read_csv(out / MCQ_TSV, sep="\t")
    cross = mcq[mcq["kind"] == "cross_mcq"].iloc[0]
    assert cross["image"].startswith("['") and len(eval(cross["image"])) == 2  # VLMEvalKit's list of images
    assert sorted([*mcq["index"], *yorn["index"]]) == list(range(32))  # one index sequence across both
    # VLMEvalKit's run.py --config: the class of each file's dataset (its build_dataset cannot tell Y/N by the file)
    assert json.loads((out / "vlmevalkit_config.json").read_text()) == {
        "data": {
            "perceptforge-mvp_MCQ": {"class": "CustomMCQDataset", "dataset": "perceptforge-mvp_MCQ"},
            "perceptforge-mvp_YORN": {"class": "ImageYORNDataset", "dataset": "perceptforge-mvp_YORN"},
        }
    }
    assert "`perceptforge-mvp_YORN` a Y/N dataset" in (out / "README.md").read_text()
    # VLMEvalKit asks each row's `question`: a Y/N row's is predict's whole prompt, an MCQ row's carries predict's
    # instruction (VLMEvalKit lays out the options after it); `bare_question` is what our scorer reads back
    assert list(yorn["question"]) == [pf_scorer.question_text("yes_no_pair", q) for q in yorn["bare_question"]]
    assert "Yes or No" in yorn["question"][0]
    instruction = pf_scorer.predict_prompts()["mcq"].splitlines()[-1]
    assert list(mcq["question"]) == [f"{q}\n{instruction}" for q in mcq["bare_question"]]

    preds = hand_written_predictions(out)
    plain = tmp_path / "p.jsonl"
    plain.write_text("".join(json.dumps({"id": k, "output": v}) + "\n" for k, v in preds.items()))
    reference = pf_scorer.score(jsonl, [plain]).metrics
    assert {k: reference["kinds"][k] for k in EXPECTED} == EXPECTED
    assert reference["yes_no"]["qAcc"]["low"] == 0.0 and reference["yes_no"]["aAcc"] == 50.0

    # a VLMEvalKit result workbook: the TSV rows (images dropped) with a prediction column
    results = pd.concat([mcq, yorn]).drop(columns=["image"])
    results["prediction"] = [preds[i] for i in results["id"]]
    xlsx = tmp_path / "Model_perceptforge.xlsx"
    results.to_excel(xlsx, index=False)
    # an lmms-eval sample log: one logged sample per question
    samples = tmp_path / "samples_perceptforge.jsonl"
    samples.write_text(
        "".join(
            json.dumps({"doc_id": n, "doc": {"id": k}, "target": "", "resps": [[v]], "filtered_resps": [v]}) + "\n"
            for n, (k, v) in enumerate(preds.items())
        )
    )
    for data in (jsonl, tsvs):
        for given in (xlsx, samples):
            assert pf_scorer.score(data, [given]).metrics == reference, (data, given)

    # the same pairs with the image as a field, as `perceptforge predict` writes them
    plain.write_text(
        "".join(
            json.dumps(
                {"id": k.split("#")[0], "image": k.split("#")[1], "output": v} if "#" in k else {"id": k, "output": v}
            )
            + "\n"
            for k, v in preds.items()
        )
    )
    assert pf_scorer.score(jsonl, [plain]).metrics == reference

    # a Yes/No pair's prediction without its image is a format slip, said as such (not an unknown id)
    pair = next(k for k in preds if "#" in k).split("#")[0]
    plain.write_text(json.dumps({"id": pair, "output": "No."}) + "\n")
    slip = pf_scorer.score(jsonl, [plain])
    assert slip.unknown == [] and f"id {pair} is a pair: each prediction names its image" in slip.warnings[0]


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


def test_lmms_eval_task_parses_names_files_that_exist_and_scores_like_our_scorer(tmp_path, monkeypatch):
    """The task folder as lmms-eval reads it: its YAML (with lmms-eval's `!function` tags) names data files
    under the export folder and functions its utils.py has; run over the Parquet with hand-written answers,
    its metrics are our scorer's numbers."""
    import importlib.util

    datasets = pytest.importorskip("datasets")
    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, name="perceptforge-mvp")
    task_dir = out / "lmms_eval"
    spec = importlib.util.spec_from_file_location("task_utils", task_dir / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)

    class TaskLoader(yaml.SafeLoader):
        pass

    TaskLoader.add_constructor(
        "!function", lambda loader, node: getattr(utils, loader.construct_scalar(node).split(".")[1])
    )
    config = yaml.load((task_dir / "perceptforge_mvp.yaml").read_text(), Loader=TaskLoader)
    assert config["task"] == "perceptforge_mvp" and config["dataset_path"] == "parquet"
    files = config["dataset_kwargs"]["data_files"]
    assert sorted(files) == ["test", "val"] and all((out / f).is_file() for f in files.values())
    assert all(callable(config[k]) for k in ("process_docs", "doc_to_visual", "doc_to_text", "process_results"))

    monkeypatch.chdir(out)  # lmms-eval runs from the export folder: the data files are relative to it
    docs = config["process_docs"](datasets.load_dataset(config["dataset_path"], data_files=files)[config["test_split"]])
    preds = hand_written_predictions(out)
    kinds = [json.loads(line)["question"]["kind"] for line in (out / "test.jsonl").read_text().splitlines()]
    assert len(docs) == len(kinds) + kinds.count("yes_no_pair")  # each pair as two questions
    assert {d["id"] for d in docs} <= set(preds)
    records = {m["metric"]: [] for m in config["metric_list"]}
    for doc in docs:
        images = config["doc_to_visual"](doc)
        assert len(images) == (2 if doc["kind"] == "cross_mcq" else 1) and images[0].mode == "RGB"
        assert doc["question"] in config["doc_to_text"](doc)
        for metric, record in config["process_results"](doc, [preds[doc["id"]]]).items():
            records[metric].append(record)
    got = {m["metric"]: m["aggregation"](records[m["metric"]]) for m in config["metric_list"]}
    test_preds = tmp_path / "test_preds.jsonl"
    test_preds.write_text("".join(json.dumps({"id": d["id"], "output": preds[d["id"]]}) + "\n" for d in docs))
    reference = pf_scorer.score([out / "test.jsonl"], [test_preds]).metrics
    assert got == {"perceptforge_overall": reference["overall"], "perceptforge_micro": reference["overall_micro"]}


def test_score_cli_reads_a_vlmevalkit_workbook_and_writes_csv_and_excel(tmp_path, cli_env):
    import subprocess

    import pandas as pd
    from helpers import perceptforge_cmd

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl", "vlmevalkit"))
    preds = hand_written_predictions(out)
    results = pd.concat([pd.read_csv(out / f, sep="\t") for f in (MCQ_TSV, YORN_TSV)]).drop(columns=["image"])
    results["prediction"] = [preds[i] for i in results["id"]]
    results.to_excel(tmp_path / "Model_perceptforge.xlsx", index=False)
    tables, workbook = tmp_path / "t.csv", tmp_path / "t.xlsx"
    proc = subprocess.run(
        [
            *perceptforge_cmd(),
            "score",
            "perceptforge",
            *("--data", str(out / MCQ_TSV), "--data", str(out / YORN_TSV)),
            *("--predictions", str(tmp_path / "Model_perceptforge.xlsx")),
            *("--csv", str(tables), "--xlsx", str(workbook)),
        ],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    long = pd.read_csv(tables)
    by_kind = long[(long["table"] == "perceptforge split by kind") & (long["column"] == "accuracy")]
    shown = dict(zip(by_kind["row"], by_kind["value"].astype(float)))
    assert {k: shown[k] for k in EXPECTED} == EXPECTED and shown["aAcc"] == 50.0
    items = pd.read_csv(tmp_path / "t_items.csv")
    assert len(items) == 32 and items["correct"].sum() == 8 + 0 + 8  # single MCQs, cross MCQs, natural images
    sheets = pd.read_excel(workbook, sheet_name=None)
    assert "items" in sheets and len(sheets["items"]) == 32 and "perceptforge split by kind" in sheets
    assert sheets["perceptforge split by kind"].set_index("kind").loc["single_mcq", "accuracy"] == 100.0


def test_the_exported_scorer_module_is_the_scorers_code_and_imports_nothing_of_ours(tmp_path):
    """`perceptforge_scorer.py` is generated from the scorer's own modules: each function of theirs is there
    as written, its imports are the standard library's, and the prompts are predict's."""
    import ast
    import inspect
    import sys

    from perceptforge.scorer import extract, lmms_eval, verdicts
    from perceptforge.scorer.benchmarks.perceptforge import predict_prompts

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, name="perceptforge-mvp")
    text = (out / "lmms_eval" / "perceptforge_scorer.py").read_text()
    tree = ast.parse(text)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert {m.split(".")[0] for m in imported} <= set(sys.stdlib_module_names)
    for module in (extract, verdicts, lmms_eval):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__:
                assert inspect.getsource(fn) in text, f"{module.__name__}.{name}"
    namespace: dict = {"__name__": "exported"}
    sys.modules["exported"] = type(sys)("exported")  # dataclasses looks the module up
    try:
        exec(compile(text, "perceptforge_scorer.py", "exec"), namespace)
    finally:
        del sys.modules["exported"]
    assert namespace["PROMPTS"] == predict_prompts()
    utils = (out / "lmms_eval" / "utils.py").read_text()
    assert "perceptforge_scorer.py" in utils and "import perceptforge" not in utils
