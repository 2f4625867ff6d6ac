"""`perceptforge sources check`: each reason a source cannot serve a category or task, before any run; the run's
plan skips the same units up front."""

import json
import shutil
import subprocess

import numpy as np
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
    # I1 reads the photo's pixels (a hair recolour needs hair the colour can tell from the skin): the portrait is
    # drawn where its boxes say, black hair over a face before a bookshelf's brown
    image = np.full((480, 640, 3), (120, 100, 90), np.uint8)
    image[180:, 200:470] = (170, 30, 30)  # the red jacket
    image[70:180, 285:365] = (222, 176, 146)  # the face
    image[42:85, 272:378] = (30, 25, 20)  # short black hair, down over the face's top
    Image.fromarray(image).save(tmp_path / "images" / "portrait.jpg")
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    out = check(cli_env, str(tmp_path))
    assert all(f"{c}: 1 of 1 sources" in out for c in ("B1", "I1", "S1", "S2")), out


def portrait(hair: tuple, skin: tuple = (225, 180, 150), grey: bool = False) -> np.ndarray:
    """A 120×120 head and shoulders before a blue backdrop: hair over the top of the face and beside it."""
    image = np.zeros((120, 120, 3), np.uint8)
    image[:] = (70, 110, 170)
    image[90:, 25:95] = (60, 60, 60)  # shoulders in a dark coat
    image[15:95, 40:80] = skin  # the face, up to the crown where no hair covers it
    if hair:
        image[15:40, 35:85] = hair
        image[40:70, 35:41] = image[40:70, 79:85] = hair  # falling beside the face
    return image.mean(axis=2, keepdims=True).repeat(3, axis=2).astype(np.uint8) if grey else image


PORTRAITS = {
    "brown": portrait((110, 70, 35)),
    "grey": portrait((110, 70, 35), grey=True),  # a black-and-white photo
    "pale": portrait((235, 222, 200), skin=(232, 200, 180)),  # white hair beside pale skin
    "bald": portrait(()),  # a hair box over a bald crown: no hair to see
}


def portrait_folder(root) -> str:
    from PIL import Image

    (root / "images").mkdir(parents=True)
    images, annotations = [], []
    boxes = (
        ("man", "subject", [25, 12, 70, 108]),
        ("face", "face", [38, 30, 44, 66]),
        ("hair", "other", [33, 12, 54, 30]),
    )
    for k, (name, pixels) in enumerate(PORTRAITS.items()):
        Image.fromarray(pixels).save(root / "images" / f"{name}.png")
        images.append(
            {"id": name, "file_name": f"images/{name}.png", "width": 120, "height": 120, "license": 1,
             "caption": "A man before a blue backdrop.", "subject": "man",
             "attributes": {"physical_feature": "short hair", "background": "a blue backdrop"}}
        )  # fmt: skip
        annotations += [
            {"id": 10 * k + n, "image_id": name, "label": label, "role": role, "bbox": box}
            for n, (label, role, box) in enumerate(boxes)
        ]
    doc = {"images": images, "annotations": annotations, "licenses": [{"id": 1, "name": "CC0-1.0", "url": ""}]}
    (root / "annotations.json").write_text(json.dumps(doc))
    return str(root)


def test_sources_check_refuses_for_i1_what_the_run_quarantines(tmp_path, cli_env):
    """Issue 41: `sources check` marked I1 served for a black-and-white photo and for white hair beside pale skin,
    which the run then quarantined. It now asks the mask stage's own refusal of the photo's hair
    (``tasks/mask.region_refusal``), and says what the run's quarantine says, word for word."""
    src = portrait_folder(tmp_path / "src")
    check(cli_env, src, "--only", "I1", "--json", str(tmp_path / "check.json"))
    verdicts = json.loads((tmp_path / "check.json").read_text())["verdicts"]["I1"]
    done = subprocess.run(
        [*perceptforge_cmd(), "run", "mvp", "--source", src, "--out", str(tmp_path / "run"), "--categories", "I1"],
        env=cli_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = (tmp_path / "run" / "quarantine.jsonl").read_text().splitlines()
    quarantined = {r["unit"]: r for r in map(json.loads, lines)}
    assert verdicts["brown"] is None and "brown-I1" not in quarantined
    assert "black-and-white photo" in verdicts["grey"] and "as skin-coloured as the face" in verdicts["pale"]
    assert verdicts["bald"] == "source bald: the edit mask for template I1 is empty"
    for name in ("grey", "pale", "bald"):
        assert quarantined[f"{name}-I1"]["stage"] == "mask" and quarantined[f"{name}-I1"]["detail"] == verdicts[name]


def test_a_photo_refusing_one_value_still_serves_with_another():
    """The photo's refusal takes out only the values that name its region: a profile that also renders face paint
    serves a black-and-white photo with that."""
    pink = Rendering(value="pink hair", high="dyed", backend="recolour", how="colour", colour="#ff00ff", region="hair")
    paint = Rendering(value="face paint", high="a clown", backend="sd", how="prompt")
    with_hair = GROUNDING.model_copy(
        update={
            "regions": [
                *GROUNDING.regions,
                Region(label="hair", box=Box(x0=0, y0=0, x1=9, y1=9)),
                Region(label="face", box=Box(x0=0, y0=5, x1=20, y1=30), role="face"),
            ]
        }
    )
    asked = []

    def refusal(old: str, region: str) -> str:
        asked.append((old, region))
        return "a black-and-white photo"

    assert unmet(templates()["I1"], with_hair, [pink, paint], refusal) is None
    assert unmet(templates()["I1"], with_hair, [pink], refusal) == "a black-and-white photo"
    assert asked == [("short hair", "hair")] * 2
