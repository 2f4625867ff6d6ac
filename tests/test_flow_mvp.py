import json
import shutil

from perceptforge.flows.mvp import mvp_flow


def test_mvp_flow_ingests_and_grounds_sample(prefect_api, sample_dir, tmp_path):
    out = tmp_path / "run"
    summary = mvp_flow(source=str(sample_dir), profile="local", out=str(out), seed=0)
    assert summary["counts"] == {"sources": 6, "ingested": 6, "grounded": 3, "quarantined": 0}
    sources = [json.loads(line) for line in (out / "sources.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sources] == ["1", "2", "3", "4", "5", "6"]
    for s in sources:
        assert (out / s["stored"]).exists()
    assert sorted(p.name for p in (out / "groundings").iterdir()) == ["1.json", "2.json", "3.json"]
    first = (out / "sources.jsonl").read_bytes()
    mvp_flow(source=str(sample_dir), profile="local", out=str(out), seed=0)
    assert (out / "sources.jsonl").read_bytes() == first


def test_corrupt_and_escaping_images_are_quarantined(prefect_api, sample_dir, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "images" / "coffee.jpg").write_bytes(b"garbage")
    doc = json.loads((src / "annotations.json").read_text())
    doc["images"][4]["file_name"] = "../../outside.jpg"
    (src / "annotations.json").write_text(json.dumps(doc))
    out = tmp_path / "run"
    summary = mvp_flow(source=str(src), profile="local", out=str(out))
    assert summary["counts"]["ingested"] == 4 and summary["counts"]["quarantined"] == 2
    q = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    assert [r["unit"] for r in q] == ["source-4", "source-5"]
    assert "cannot decode image" in q[0]["detail"]
    assert "outside the source directory" in q[1]["detail"]
