import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perceptforge.flows.run import run as run_flow
from perceptforge.logic.templates import templates
from perceptforge.outputs.report import bar_chart, bar_figure, counted
from perceptforge.store.donors import DonorLibrary


def test_mvp_flow_ingests_grounds_and_renders_only_what_the_local_backends_can(demo_run, sample_dir):
    out, summary = demo_run
    # 3 people × the 4 categories the local editors can render: scenes (B1, S1) from the donor library, hair
    # colours (I1) by recolouring, photo filters (S2); every other category is skipped with the reason.
    counts = summary["counts"]
    # 9 sources: the 6 photos and the 3 rendered views of the BLINK-style depth scene (no subject: ingested only);
    # Grace Hopper's hair is under her cap: her I1 unit is skipped up front
    assert {k: counts[k] for k in ("sources", "ingested", "grounded", "ideas", "candidates")} == {
        "sources": 9,
        "ingested": 9,
        "grounded": 3,
        "ideas": 11,
        "candidates": 11,
    }
    assert summary["skipped_units"] == {"3-I1": "no 'hair' region"}
    # 5 questions a pair; I1 and S2 ask no high-level Yes/No the photo cannot answer (is this hair dyed?) but of
    # the cameraman, whose file says his black-and-white photo looks historical; B1 no "which aspect has been
    # altered?" (a new background is the scenario first), and I1's hair colours none either (dyed hair does not
    # change who someone is)
    asked = {"B1": 4, "S1": 5, "I1": 3, "S2": 4, "2-S2": 5}
    made = [json.loads(p.read_text()) for p in (out / "items").iterdir()]
    pairs = {i["lineage"]["artifacts"]["edit"].split("/")[1][:-5] for i in made}
    assert counts["items"] == sum(asked.get(u, asked[u.split("-")[1]]) for u in pairs) and counts["pairs"] == 10
    assert len({u.split("-")[1] for u in pairs}) == 4
    assert counts["quarantined"] == counts["candidates"] - counts["pairs"]
    skipped = summary["skipped_categories"]
    assert set(skipped) == {"B2", "B3", "B4", "E1", "E2", "I2", "R1", "R2", "R3"}
    assert skipped["E2"] == "no value of E2 is a photo filter"
    assert "the donor library has no group" in skipped["R2"] and "no value of R2 is a colour" in skipped["R2"]
    q = {r["unit"]: r for r in map(json.loads, (out / "quarantine.jsonl").read_text().splitlines())}
    assert "a black-and-white photo" in q["2-I1"]["detail"]  # the cameraman's hair is as dark as his coat
    # the bundled subjects carry drawn outlines: every background edit keeps what was drawn, at the first try
    for unit in ("1-B1", "1-S1", "2-B1", "2-S1", "3-B1", "3-S1"):
        record = json.loads((out / "masks" / f"{unit}.json").read_text())
        assert record["segmenter"] == {"name": "annotations", "model_id": "drawn-outline"}
        assert record["measurements"].get("old_kept", 0.0) == 0.0 and "attempts" not in record["measurements"]
    # the cameraman's tripod stands before the old background: drawn whole, it stays whole (a leg at y 400)
    mask_path = json.loads((out / "masks" / "2-S1.json").read_text())["mask"]["path"]
    changed = np.asarray(Image.open(out / mask_path)) > 0
    assert not changed[400, 269] and not changed[400, 292] and changed[400, 282]
    for r in q.values():
        assert r["stage"] in ("mask", "gates")
        if r["reason"] == "QualityGate":  # a gate's verdict comes with every measurement and the mask it judged
            assert {"mask_area", "subject_in_mask"} <= set(r["measurements"]) and (out / r["mask"]).exists()
    item = json.loads(next((out / "items").iterdir()).read_text())
    for ref in ("natural", "manipulated"):
        assert (out / item["pair"][ref]["path"]).exists()
    assert set(item["lineage"]["artifacts"]) >= {"grounding", "candidate", "edit"}
    # lineage names who made each mask: the drawn outline for a background, the selfie segmenter's GrabCut else
    made_by = {
        (i["category"]["low"], i["lineage"]["backends"]["segmenter"]["name"])
        for i in (json.loads(f.read_text()) for f in (out / "items").iterdir())
    }
    assert {c for c, name in made_by if name == "annotations"} == {"B1", "S1"}
    assert {c for c, name in made_by if name == "selfie"} == {"I1", "S2"}
    report = (out / "report.html").read_text()
    assert '<img src="images/' in report and "quarantined units" in report and item["id"] in report
    assert "categories this profile cannot render" in report
    items = [json.loads(p.read_text()) for p in (out / "items").iterdir()]
    assert f"· 10 pairs · {len(items)} items ·" in report
    per_cat_level = Counter(f"{i['category']['low']} {i['question'].get('level', '')}" for i in items)
    assert chart_in(report, "items per category and level") == {k: str(n) for k, n in per_cat_level.items()}
    assert chart_in(report, "failures per stage") == {
        k: str(n) for k, n in Counter(q["stage"] for q in q.values()).items()
    }
    for unit in {
        i["lineage"]["artifacts"]["edit"].split("/")[1][:-5]
        for i in map(json.loads, map(Path.read_text, (out / "items").iterdir()))
    }:
        gate = json.loads((out / "gates" / f"{unit}.json").read_text())
        assert gate["passed"] and {"inside_change", "outside_change"} <= set(gate["measurements"])
    sources = [json.loads(line) for line in (out / "sources.jsonl").read_text().splitlines()]
    assert [s["id"] for s in sources] == ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
    assert sorted(p.name for p in (out / "groundings").iterdir()) == ["1.json", "2.json", "3.json"]
    first = {p.name: p.read_bytes() for p in sorted((out / "items").iterdir())}
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(out), seed=0)
    assert {p.name: p.read_bytes() for p in sorted((out / "items").iterdir())} == first
    candidate = json.loads((out / "candidates" / "1-B1.json").read_text())
    assert candidate["lineage"]["source_sha256"] == sources[0]["sha256"]
    assert candidate["lineage"]["template_version"] == 3
    assert candidate["lineage"]["artifacts"]["grounding"] == "groundings/1.json"


def test_every_item_answers_with_the_value_its_edit_rendered(demo_run):
    out, _ = demo_run
    library = DonorLibrary.load()
    found = templates()
    items = [json.loads(p.read_text()) for p in sorted((out / "items").iterdir())]
    assert items
    for item in items:
        rendered, idea, q = item["edit"]["rendered"], item["idea"], item["question"]
        assert rendered == idea["rendering"] and rendered["value"] == idea["new"], item["id"]
        if rendered["how"] == "donor":  # the pasted photo is the library entry whose label is the answer
            donor = library.donors[rendered["donor"]]
            assert donor.label == rendered["value"] and item["edit"]["backend"] == "composite"
            assert donor.highs[item["category"]["high"]] == idea["high_level_value"]
        else:  # recoloured to the colour, or filtered by the filter, the template gives that very value
            alt = next(a for a in found[item["category"]["low"]].writer.alternatives if a.value == rendered["value"])
            if rendered["how"] == "filter":
                assert alt.photo_filter == rendered["photo_filter"] and item["edit"]["backend"] == "filters"
            else:
                assert (
                    rendered["how"] == "colour"
                    and alt.colour == rendered["colour"]
                    and item["edit"]["backend"] == "recolour"
                )
        if q["kind"] == "single_mcq":
            assert q["options"]["ABCDE".index(q["answer"])] == rendered["value"], item["id"]
        elif q["kind"] == "yes_no_pair":
            wanted = rendered["value"] if q["level"] == "low" else rendered["high"]
            assert wanted in q["question"] and q["answer_manipulated"] == "yes", item["id"]


def test_candidates_are_byte_identical_per_seed(prefect_api, sample_dir, tmp_path):
    def run(name, seed):
        out = tmp_path / name
        run_flow(
            "mvp",
            source=str(sample_dir),
            profile="local",
            out=str(out),
            seed=seed,
            limit=2,
            categories=["B1", "S1", "I1"],
        )
        return {f"{d}/{p.name}": p.read_bytes() for d in ("candidates", "items") for p in sorted((out / d).iterdir())}

    a, b, c = run("a", 5), run("b", 5), run("c", 6)
    assert len([k for k in a if k.startswith("candidates/")]) == 6 and a == b
    assert a != c


def test_corrupt_and_escaping_images_are_quarantined(prefect_api, sample_dir, tmp_path, caplog):
    import logging

    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "images" / "coffee.jpg").write_bytes(b"garbage")
    doc = json.loads((src / "annotations.json").read_text())
    doc["images"][4]["file_name"] = "../../outside.jpg"
    (src / "annotations.json").write_text(json.dumps(doc))
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        summary = run_flow("mvp", source=str(src), profile="local", out=str(out), categories=["S1"])
    assert summary["counts"]["ingested"] == 7  # the 9 bundled sources but the two bad ones
    # every quarantine, bad files included, is one warning line: no error, no traceback
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("ingest: source-4 quarantined" in r.getMessage() for r in caplog.records)
    q = [
        json.loads(line)
        for line in (out / "quarantine.jsonl").read_text().splitlines()
        if json.loads(line)["stage"] == "ingest"
    ]
    assert [r["unit"] for r in q] == ["source-4", "source-5"]
    assert "cannot decode image" in q[0]["detail"]
    assert "outside the source directory" in q[1]["detail"]


def test_identity_conflicts_name_what_differs_and_let_resume_grow():
    from perceptforge.flows.common import identity_conflict

    old = {"flow": "mvp", "profile": "p", "seed": 0, "categories": ["B1"], "sources": "s", "limit": 1}
    assert identity_conflict(old, {**old}) is None
    assert identity_conflict(old, {**old, "categories": ["B1", "S1"], "limit": 2}) is None  # more: resume serves it
    assert identity_conflict(old, {**old, "limit": None}) is None
    assert identity_conflict(old, {**old, "seed": 7}) == "seed 0 → 7"
    assert identity_conflict(old, {**old, "categories": ["R1"]}) == "categories ['B1'] → ['R1']"
    assert identity_conflict({**old, "limit": None}, {**old, "limit": 1}) == "limit None → 1"
    assert identity_conflict(old, {**old, "profile": "q", "sources": "t"}) == "profile, sources"


def test_fresh_clears_only_a_run_directory(tmp_path, caplog):
    import logging

    from perceptforge.errors import InputError
    from perceptforge.flows.common import prepare_run

    ident = {"flow": "mvp", "profile": "p", "seed": 0, "categories": ["B1"], "sources": "s", "limit": None}
    run = prepare_run(tmp_path / "run", ident)
    (run.path / "items").mkdir()
    (run.path / "items" / "x.json").write_text("{}")
    with pytest.raises(InputError, match=r"holds another run \(seed 0 → 3\)"):
        prepare_run(tmp_path / "run", {**ident, "seed": 3})
    (run.path / "notes.txt").write_text("mine")  # a user's file beside the run's
    with caplog.at_level(logging.WARNING, logger="perceptforge"):
        prepare_run(tmp_path / "run", {**ident, "seed": 3}, fresh=True)
    assert not (run.path / "items").exists() and json.loads((run.path / "run.json").read_text())["seed"] == 3
    assert (run.path / "notes.txt").read_text() == "mine"  # --fresh removes only what a run writes, and says so
    said = [r.getMessage() for r in caplog.records]
    assert "--fresh: removed the earlier run's items/, run.json" in said
    assert "--fresh: kept what no run writes: notes.txt" in said
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    with pytest.raises(InputError, match="holds no run"):
        prepare_run(folder, ident, fresh=True)
    (folder / "run.json").write_text('{"note": "my own run.json"}')  # a file of that name is not a run
    with pytest.raises(InputError, match="holds a run.json that is not a perceptforge run's .* nothing was removed"):
        prepare_run(folder, ident, fresh=True)
    assert (folder / "thesis.tex").read_text() == "precious"


def test_workers_are_cut_to_the_memory_budget():
    from perceptforge.configs.profile import load_profile

    prof = load_profile("local")  # 8 GiB budget, 100 bytes per pixel at peak
    assert prof.workers_within_memory(4, 512 * 512) == 4
    assert prof.workers_within_memory(4, 40_000_000) == 2
    assert prof.workers_within_memory(4, 200_000_000) == 1


def test_a_source_above_the_pixel_limit_is_refused_before_decoding(tmp_path, sample_dir):
    from perceptforge.errors import InputError
    from perceptforge.store.rundir import RunDir
    from perceptforge.store.sources import read_source_dir
    from perceptforge.tasks.ingest import ingest_entry

    entry = read_source_dir(sample_dir)[0]
    with pytest.raises(InputError, match=r"512x512 is 0.3 MP, above the profile's ingest.max_pixels"):
        ingest_entry(sample_dir, entry, RunDir(tmp_path), max_pixels=100_000)
    assert not (tmp_path / "images").exists()


def test_a_unit_that_succeeds_on_resume_drops_its_old_quarantine_record(tmp_path):
    from perceptforge.store.rundir import RunDir

    run = RunDir(tmp_path)
    run.quarantine("1-B1", "mask", "OSError", "disk full")
    run.clear_quarantine("1-B1")
    assert run.quarantined() == []


def test_resume_removes_the_temporary_files_a_killed_run_left(tmp_path):
    import os
    import time

    from perceptforge.flows.common import prepare_run

    ident = {"flow": "mvp", "profile": "p", "seed": 0, "categories": ["B1"], "sources": "s", "limit": None}
    run = prepare_run(tmp_path / "run", ident)
    (run.path / "items").mkdir()
    old = run.path / "items" / ".abc.json.x1y2.tmp"
    fresh = run.path / "items" / ".def.json.z3.tmp"
    for path in (old, fresh):
        path.write_text("half a record")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    prepare_run(tmp_path / "run", ident)  # resume
    assert not old.exists() and fresh.exists()  # a write in flight (just now) is left alone


def old_bar_chart(title: str, counts: dict, colour: str = "#4C72B0") -> str:
    """The hand-drawn SVG chart ``outputs/report.bar_chart`` was before matplotlib drew it (issue 29),
    kept here only so the test can show the new chart says what the old one said."""
    if not counts:
        return f"<div><h3>{html.escape(title)}</h3><p>none</p></div>"
    label_w = max(150, 7 * max(len(str(label)) for label in counts) + 12)
    width, bar_h = label_w + 270, 18
    top = max(counts.values())
    rows = []
    for k, (label, n) in enumerate(counts.items()):
        w = (width - label_w - 40) * n / top
        y = k * (bar_h + 4)
        rows.append(
            f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end" font-size="12">{html.escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + 13}" font-size="12">{n}</text>'
        )
    height = len(counts) * (bar_h + 4)
    return f'<div><h3>{html.escape(title)}</h3><svg width="{width}" height="{height}">{"".join(rows)}</svg></div>'


def svg_rows(chart: str) -> dict[str, str]:
    """What a chart's SVG says, as a reader pairs it: each right-aligned label with the text on its line."""
    svg = ET.fromstring(chart[chart.index("<svg") : chart.rindex("</svg>") + 6])
    texts = []
    for t in (e for e in svg.iter() if e.tag.rsplit("}", 1)[-1] == "text"):  # matplotlib's SVG has a namespace
        anchor = t.get("text-anchor") or re.search(r"text-anchor: (\w+)|$", t.get("style", "")).group(1)
        texts.append((t.text, float(t.get("y")), anchor == "end"))
    labels = [(text, y) for text, y, is_label in texts if is_label]
    values = [(text, y) for text, y, is_label in texts if not is_label]
    assert len(labels) == len(values)
    return {label: min(values, key=lambda v: abs(v[1] - y))[0] for label, y in labels}


def test_the_header_counts_in_words():
    assert (counted(1, "pair"), counted(2, "pair"), counted(0, "item")) == ("1 pair", "2 pairs", "0 items")


def chart_in(report: str, title: str) -> dict[str, str]:
    start = report.index(f"<h3>{html.escape(title)}</h3>")
    return svg_rows(report[start : report.index("</svg>", start) + 6]) if "<svg" in report[start : start + 80] else {}


CHARTS = [
    {"S1 low": 3, "S2 high": 12, "B1 low": 0},
    {"A": 40, "B": 38, "C": 41, "D": 39},
    {"A": 12.5, "B": 12.5, "C": 12.5, "D": 12.5},  # the audit's expected letters are rounded floats
    {"a category named with <, & and $5": 1},
    {f"category {k}": k * k for k in range(1, 25)},
]


@pytest.mark.parametrize("counts", CHARTS)
def test_the_matplotlib_chart_shows_the_labels_and_values_the_hand_drawn_one_did(counts):
    new, old = bar_chart("t", counts), old_bar_chart("t", counts)
    assert svg_rows(new) == svg_rows(old) == {label: str(n) for label, n in counts.items()}
    ax = bar_figure(counts).axes[0]
    assert [bar.get_width() for bar in ax.patches] == list(counts.values())
    assert [t.get_text() for t in ax.get_yticklabels()] == list(counts)
    assert ax.get_ylim()[0] > ax.get_ylim()[1]  # the first label drawn on top, as the old chart did


def test_a_chart_is_the_same_bytes_each_time_and_an_empty_one_says_none():
    counts = {"S1 low": 3, "S2 high": 12}
    assert bar_chart("t", counts) == bar_chart("t", dict(counts))
    assert bar_chart("t", {}) == old_bar_chart("t", {}) == "<div><h3>t</h3><p>none</p></div>"
