"""`perceptforge sources check`: each reason a source cannot serve a category or task, before any run; the run's
plan skips the same units up front."""

import json
import shutil
import subprocess

import pytest
from helpers import perceptforge_cmd

from perceptforge.data.schema import Box, Grounding, Region, Rendering
from perceptforge.logic.category_needs import servable, unmet
from perceptforge.logic.templates import templates


def source_folder(tmp_path, sample_dir, edit) -> str:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    doc = json.loads((src / "annotations.json").read_text())
    edit(doc)
    (src / "annotations.json").write_text(json.dumps(doc))
    return str(src)


def check(env, src, *extra) -> str:
    done = subprocess.run(
        [*perceptforge_cmd(), "sources", "check", src, *extra], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return " ".join(done.stdout.split())  # rich wraps long lines


def without(doc, image_id, label):
    """The image's boxes of ``label`` taken out, and the label from what it declares completely boxed."""
    doc["annotations"] = [a for a in doc["annotations"] if not (a["image_id"] == image_id and a.get("label") == label)]
    image = next(i for i in doc["images"] if i["id"] == image_id)
    if label in image.get("complete_labels", []):
        image["complete_labels"].remove(label)


def test_each_mvp_reason_is_printed_per_source_and_counted_per_category(tmp_path, sample_dir, cli_env):
    def mistakes(doc):
        doc["images"][0]["attributes"].pop("physical_feature")  # astronaut: the attribute I1 asks about
        doc["images"][1]["attributes"]["physical_feature"] = "none"  # cameraman: a value that says there is none
        without(doc, 3, "face")  # Grace Hopper: no face, so nothing marks her body as hers (still served)

    src = source_folder(tmp_path, sample_dir, mistakes)
    out = check(cli_env, src, "--json", str(tmp_path / "check.json"))
    assert "source 1 · I1: no 'physical_feature' attribute" in out
    assert "source 2 · I1: 'physical_feature' is 'none'" in out
    assert "source 3 · I1: no 'hair' region" in out  # her hair is under her cap: the bundled file has none
    assert "source 4: no main subject: a donor image" in out
    assert "I1: 0 of 3 sources (1 × no 'physical_feature' attribute; 1 × 'physical_feature' is 'none'; 1 × no" in out
    assert "B1: 3 of 3 sources" in out and "S1: 3 of 3 sources" in out
    assert "E2: none on this profile (no value of E2 is a photo filter)" in out
    doc = json.loads((tmp_path / "check.json").read_text())
    assert doc["verdicts"]["I1"] == {
        "1": "no 'physical_feature' attribute",
        "2": "'physical_feature' is 'none'",
        "3": "no 'hair' region",
    }


def test_each_blink_reason_is_printed(tmp_path, sample_dir, cli_env):
    src = source_folder(
        tmp_path, sample_dir, lambda doc: [without(doc, 4, a["label"]) for a in list(doc["annotations"])]
    )
    out = check(cli_env, src, "--flow", "blink", "--only", "counting,relative_depth,multi_view")
    assert "source 4 · counting: no label declared completely boxed (complete_labels) with a box of a thing" in out
    assert "source 1 · relative_depth: no disparity map (and the profile names no depth model)" in out
    assert "source 1 · multi_view: no camera pose" in out
    assert "per task: counting:" in out


def test_a_run_says_up_front_which_units_it_skips_and_why(tmp_path, sample_dir, cli_env):
    src = source_folder(tmp_path, sample_dir, lambda doc: doc["images"][0]["attributes"].pop("physical_feature"))
    done = subprocess.run(
        [*perceptforge_cmd(), "run", "mvp", "--source", src, "--out", str(tmp_path / "run"), "--categories", "I1"],
        env=cli_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    said = " ".join((done.stdout + done.stderr).split())
    assert "skipping 1 unit(s) up front (no 'physical_feature' attribute): 1-I1" in said
    assert "skipping 1 unit(s) up front (no 'hair' region): 3-I1" in said
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["skipped_units"] == {"1-I1": "no 'physical_feature' attribute", "3-I1": "no 'hair' region"}
    quarantined = tmp_path / "run" / "quarantine.jsonl"
    assert not quarantined.exists() or "hair' region" not in quarantined.read_text()  # skipped, not quarantined


GROUNDING = Grounding(
    source_id="s",
    caption="A man.",
    subject=Region(label="man", box=Box(x0=0, y0=0, x1=50, y1=80), role="subject"),
    regions=[Region(label="helmet", box=Box(x0=30, y0=50, x1=50, y1=70))],
    attributes={"physical_feature": "short hair", "held_object": "a camera", "attire": "a coat"},
    backend="annotations",
)


@pytest.mark.parametrize(
    ("category", "offered", "reason"),
    [
        ("R1", [Rendering(value="a police uniform", high="a police officer", backend="sd", how="prompt")],
         "template R1 edits the face, but no face region is annotated"),
        ("B3", [Rendering(value="a microphone", high="giving a speech", backend="sd", how="prompt")],
         "no object region matches 'a camera' for template B3"),
        ("I1", [Rendering(value="short hair", high="x", backend="sd", how="prompt")],
         "the only value the profile can render is the photo's own (short hair)"),
        ("I1", [Rendering(value="pink hair", high="dyed", backend="recolour", how="colour", colour="#ff00ff", region="hair")],
         "no 'hair' region"),
    ],
)  # fmt: skip
def test_unmet_names_what_the_category_lacks(category, offered, reason):
    assert unmet(templates()[category], GROUNDING, offered) == reason


def test_values_naming_a_region_are_drawn_only_where_it_is_annotated():
    pink = Rendering(value="pink hair", high="dyed", backend="recolour", how="colour", colour="#ff00ff", region="hair")
    paint = Rendering(value="face paint", high="a clown", backend="sd", how="prompt")
    assert servable([pink, paint], GROUNDING) == [paint]
    with_hair = GROUNDING.model_copy(
        update={"regions": [*GROUNDING.regions, Region(label="Hair", box=Box(x0=0, y0=0, x1=9, y1=9))]}
    )
    assert servable([pink, paint], with_hair) == [pink, paint]


def test_schema_md_lists_what_every_category_reads():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "data" / "SCHEMA.md").read_text()
    rows = {line.split("|")[1].split()[0]: line for line in text.splitlines() if line.startswith("| ") and "`" in line}
    for tid, template in templates().items():
        assert tid in rows and f"`{template.attribute}`" in rows[tid], tid


def test_the_worked_example_of_schema_md_serves_what_it_says(tmp_path, cli_env):
    from pathlib import Path

    from PIL import Image

    text = (Path(__file__).resolve().parents[1] / "data" / "SCHEMA.md").read_text()
    block = text[text.index("A worked example") :]
    start = block.index("```json") + len("```json")
    doc = json.loads(block[start : block.index("```", start)])
    (tmp_path / "images").mkdir()
    Image.new("RGB", (640, 480), (120, 100, 90)).save(tmp_path / "images" / "portrait.jpg")
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    out = check(cli_env, str(tmp_path))
    assert all(f"{c}: 1 of 1 sources" in out for c in ("B1", "I1", "S1", "S2")), out
