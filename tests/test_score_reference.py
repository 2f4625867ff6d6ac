"""The scorer against the official release files in ../shared/reference (test material, not shipped)."""

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import SHARED_REFERENCE as REF
from helpers import perceptforge_cmd

from perceptforge.scorer.benchmarks import blink, codis, mme_realworld, mvp_bench
from perceptforge.scorer.extract import extract_choice

pytestmark = pytest.mark.skipif(not REF.exists(), reason=f"reference release files not present at {REF}")


def test_mvp_bench_official_reproduces_published_row():
    d = REF / "mvp-bench"
    r = mvp_bench.score(
        [d / "all_questions.json", d / "mcq_questions.json"],
        [d / "llava_v1.5_7b.jsonl", d / "mcq_llava_v1.5_7b.jsonl"],
        "official",
    ).metrics
    yn, mcq = r["yes_no"], r["mcq"]
    published = {
        ("accuracy", "S_low"): 86.30,
        ("accuracy", "E_low"): 82.59,
        ("accuracy", "S_high"): 79.57,
        ("accuracy", "E_high"): 71.30,
        ("qAcc", "low"): 68.89,
        ("qAcc", "high"): 51.74,
        ("iAcc", "S"): 64.50,
        ("iAcc", "E"): 52.66,
    }
    for (metric, key), value in published.items():
        assert round(yn[metric][key], 2) == value, (metric, key)
    assert round(yn["aAcc"], 2) == 80.30 and round(yn["mAcc"], 2) == 31.36
    assert {k: round(v, 2) for k, v in mcq["vanilla"].items()} == {
        "cross_low": 39.21,
        "cross_high": 26.87,
        "single_high": 71.29,
    }
    assert {k: round(v, 2) for k, v in mcq["circular"].items()} == {
        "cross_low": 20.26,
        "cross_high": 14.10,
        "single_high": 57.18,
    }


@pytest.mark.parametrize("model, published", [("llava_v1.5_7b", 37.13), ("GPT4V", 51.14)])
def test_blink_official_macro(model, published):
    files = sorted((REF / "blink" / f"saved_outputs_{model}").glob("*.json"))
    r = blink.score([REF / "blink" / "val_answers.json"], files, "official").metrics
    assert round(r["overall"], 2) == published
    assert len(r["tasks"]) == 14 and "Relative_Depth" in r["tasks"]
    assert r["overall_micro"] != r["overall"]
    assert round(r["random_choice"], 2) == 38.10


def test_blink_strict_extraction_agrees_with_official():
    files = sorted((REF / "blink" / "saved_outputs_GPT4V").glob("*.json"))
    official = {}
    for f in files:
        for rec in json.loads(f.read_text())["val"]:
            match = re.fullmatch(r"\(([A-E])\)", rec["prediction"])
            if match:
                official[rec["idx"]] = match.group(1)
    result = blink.score([REF / "blink" / "val_answers.json"], files, "strict")
    extracted = {i.id: i.extracted for i in result.items if i.id in official and i.extracted}
    coverage = len(extracted) / len(official)
    agreement = sum(extracted[k] == official[k] for k in extracted) / len(extracted)
    assert coverage >= 0.95, coverage
    assert agreement >= 0.99, agreement


def test_blink_strict_extraction_over_every_released_output():
    """Every saved_outputs_<model>/ folder beside val_answers.json (val and test): strict extraction reads a
    letter for ≥ 97% of the outputs that have an official one, and agrees with it on ≥ 99.9% of those. Where
    PERCEPTFORGE_BLINK_OUTPUTS names the BLINK repository's eval/saved_outputs/ (all 21 released model
    folders, 74,084 outputs with an official letter), issue 45's bar: ≥ 98.5% at ≥ 99.9%."""
    import os

    import yaml

    released = os.environ.get("PERCEPTFORGE_BLINK_OUTPUTS")
    folder = Path(released or REF / "blink")
    tasks = yaml.safe_load((Path(blink.__file__).parent / "blink_tasks.yaml").read_text())
    graded = []
    for path in sorted(folder.glob("saved_outputs_*/*.json") if not released else folder.glob("*/*.json")):
        for part in json.loads(path.read_text()).values():
            for rec in part:
                official = re.fullmatch(r"\(?([A-E])\)?", (rec.get("prediction") or "").strip())
                if official:
                    info = tasks[blink.task_of(rec["idx"])]
                    got = extract_choice(rec["full_prediction"], info["options"], info.get("choices")).value
                    graded.append((got, official.group(1)))
    read = [(got, official) for got, official in graded if got]
    assert len(graded) > (74_000 if released else 7000)
    assert len(read) / len(graded) >= (0.985 if released else 0.97), len(read) / len(graded)
    agree = sum(got == official for got, official in read)
    assert agree / len(read) >= 0.999, (agree / len(read), len(read) - agree)


def test_codis_and_mme_readers_load():
    r = codis.score([REF / "codis" / "data.json"], [REF / "codis" / "output_example.json"])
    assert len(codis.read_data([REF / "codis" / "data.json"])) == 353
    assert set(r.metrics["categories"]) == {
        "Temporal Information",
        "Location and Orientation",
        "Attributes",
        "Relationships",
        "Cultural Background",
    }
    assert r.metrics["overall"]["Acc_p"] is not None and not r.missing
    m = mme_realworld.score([REF / "mme-realworld" / "output_test_template.json"], []).metrics
    assert set(m) >= {"perception", "reasoning", "E_rate", "unparsed"}
    assert m["perception"]["Autonomous_Driving"]["Avg"] == 100.0
    assert m["E_rate"]["ground_truth"] == 20.0


def test_cli_json_contract(tmp_path, cli_env):
    out = tmp_path / "blink.json"
    items = tmp_path / "items.jsonl"
    proc = subprocess.run(
        [
            *perceptforge_cmd(),
            "score",
            "blink",
            "--data",
            str(REF / "blink" / "val_answers.json"),
            "--predictions",
            str(REF / "blink" / "saved_outputs_llava_v1.5_7b"),
            "--json",
            str(out),
            "--items",
            str(items),
            "--csv",
            str(tmp_path / "t.csv"),
            "--plot",
            str(tmp_path / "t.png"),
        ],
        capture_output=True,
        text=True,
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert set(doc) >= {"tasks", "overall", "overall_micro", "random_choice", "unparsed"}
    first = json.loads(items.read_text().splitlines()[0])
    assert set(first) == {"id", "task", "output", "extracted", "method", "correct"}
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
