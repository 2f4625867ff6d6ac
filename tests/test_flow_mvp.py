import json
import shutil

from perceptforge.flows.mvp import mvp_flow


def test_mvp_flow_ingests_and_grounds_sample(prefect_api, sample_dir, tmp_path):
    out = tmp_path / "run"
    summary = mvp_flow(source=str(sample_dir), profile="local", out=str(out), seed=0)
    # 3 people × 11 categories (E2, S2 need an instruction editor); the cameraman has no sign or paper
    # (B4) and Grace Hopper holds nothing (B3): those two units are quarantined with the reason.
    counts = summary["counts"]
    assert {k: counts[k] for k in ("sources", "ingested", "grounded", "candidates", "edited")} == {
        "sources": 6,
        "ingested": 6,
        "grounded": 3,
        "candidates": 31,
        "edited": 31,
    }
    assert counts["items"] == 5 * counts["pairs"] and counts["pairs"] >= 25
    assert counts["quarantined"] == 2 + (counts["edited"] - counts["pairs"])  # the two below, plus gate failures
    assert set(summary["skipped_categories"]) == {"E2", "S2"}
    assert "needs an instruction editor" in summary["skipped_categories"]["E2"]
    q = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [(r["unit"], r["stage"]) for r in q if r["stage"] == "idea"] == [("2-B4", "idea"), ("3-B3", "idea")]
    assert all(r["stage"] == "gates" for r in q if r["stage"] != "idea")
    item = json.loads(next((out / "items").iterdir()).read_text())
    for ref in ("natural", "manipulated"):
        assert (out / item["pair"][ref]["path"]).exists()
    assert set(item["lineage"]["artifacts"]) >= {"grounding", "candidate", "edit"}
    assert item["lineage"]["backends"]["segmenter"]["name"] == "grabcut" and item["edit"]["backend"] == "composite"
    assert "<img src='images/" in (out / "report.html").read_text()
    sources = [json.loads(line) for line in (out / "sources.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sources] == ["1", "2", "3", "4", "5", "6"]
    for s in sources:
        assert (out / s["stored"]).exists()
    assert sorted(p.name for p in (out / "groundings").iterdir()) == ["1.json", "2.json", "3.json"]
    first = (out / "sources.jsonl").read_bytes()
    mvp_flow(source=str(sample_dir), profile="local", out=str(out), seed=0)
    assert (out / "sources.jsonl").read_bytes() == first
    candidate = json.loads((out / "candidates" / "1-B3.json").read_text())
    assert (
        candidate["lineage"]["source_sha256"] == sources[0]["sha256"] and candidate["lineage"]["template_version"] == 1
    )
    assert candidate["lineage"]["artifacts"]["grounding"] == "groundings/1.json"


def test_candidates_are_byte_identical_per_seed(prefect_api, sample_dir, tmp_path):
    def run(name, seed):
        out = tmp_path / name
        mvp_flow(
            source=str(sample_dir), profile="local", out=str(out), seed=seed, limit=2, categories=["B1", "B3", "I1"]
        )
        return {f"{d}/{p.name}": p.read_bytes() for d in ("candidates", "items") for p in sorted((out / d).iterdir())}

    a, b, c = run("a", 5), run("b", 5), run("c", 6)
    assert len([k for k in a if k.startswith("candidates/")]) == 6 and a == b
    assert a != c


def test_corrupt_and_escaping_images_are_quarantined(prefect_api, sample_dir, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "images" / "coffee.jpg").write_bytes(b"garbage")
    doc = json.loads((src / "annotations.json").read_text())
    doc["images"][4]["file_name"] = "../../outside.jpg"
    (src / "annotations.json").write_text(json.dumps(doc))
    out = tmp_path / "run"
    summary = mvp_flow(source=str(src), profile="local", out=str(out))
    assert summary["counts"]["ingested"] == 4
    q = [
        json.loads(line)
        for line in (out / "quarantine.jsonl").read_text().splitlines()
        if json.loads(line)["stage"] == "ingest"
    ]
    assert [r["unit"] for r in q] == ["source-4", "source-5"]
    assert "cannot decode image" in q[0]["detail"]
    assert "outside the source directory" in q[1]["detail"]
