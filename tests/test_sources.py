import json
import shutil

import numpy as np
import pytest
from PIL import Image

from perceptforge.errors import InputError
from perceptforge.store.images import load_rgb
from perceptforge.store.sources import grounding_from_entry, read_source_dir, resolve_inside


def test_bundled_sample_reads(sample_dir):
    entries = {e.file_name: e for e in read_source_dir(sample_dir)}
    assert len(entries) == 9
    assert entries["images/depth_scene.png"].extras == {"disparity": "depth/depth_scene.png"}
    assert entries["images/depth_scene_left.png"].pose == {"sequence": "pillars", "yaw": -12.0, "reference": False}
    people = [e for e in entries.values() if e.subject]
    assert sorted(e.subject for e in people) == ["man", "woman", "woman"]
    astro = grounding_from_entry(entries["images/astronaut.jpg"])
    assert astro.subject.label == "woman" and astro.subject.box.xyxy == (20.0, 15.0, 370.0, 512.0)
    assert astro.attributes["held_object"] == "a space helmet"
    assert {r.label for r in astro.regions} >= {"face", "helmet"}
    for e in entries.values():
        img = load_rgb(sample_dir / e.file_name)
        assert (img.width, img.height) == (e.width, e.height) and img.mode == "RGB"


def test_a_missing_extra_file_is_one_line(tmp_path):
    import json

    from perceptforge.errors import InputError

    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    doc = {"images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 4, "disparity": "depth/a.png"}]}
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="disparity file depth/a.png not found"):
        read_source_dir(tmp_path)


def test_a_bad_pose_is_one_line(tmp_path):
    import json

    from perceptforge.errors import InputError

    Image.new("RGB", (4, 4)).save(tmp_path / "a.png")
    doc = {
        "images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 4, "pose": {"sequence": "s", "yaw": "left"}}]
    }
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="pose.yaw must be a number of degrees"):
        read_source_dir(tmp_path)


def test_licences_present(sample_dir):
    text = (sample_dir.parent / "LICENSES").read_text()
    for e in read_source_dir(sample_dir):
        assert e.licence != "unknown"
        assert e.file_name.split("/")[-1] in text


def test_path_outside_source_dir(tmp_path):
    with pytest.raises(InputError, match="outside the source directory"):
        resolve_inside(tmp_path, "../etc/passwd")


def test_box_outside_image_is_named(sample_dir, tmp_path):
    doc = json.loads((sample_dir / "annotations.json").read_text())
    doc["annotations"][0]["bbox"] = [400, 400, 200, 200]
    shutil.copytree(sample_dir, tmp_path, dirs_exist_ok=True)
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    entry = read_source_dir(tmp_path)[0]
    with pytest.raises(InputError, match=r"annotation 1: bbox \[400, 400, 200, 200\] lies outside the 512x512 image"):
        grounding_from_entry(entry)


def test_not_coco(tmp_path):
    (tmp_path / "annotations.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="not a COCO-style file"):
        read_source_dir(tmp_path)
    (tmp_path / "annotations.json").write_text('{"images": [\n{"id": 1,}]}')
    with pytest.raises(InputError, match=r"annotations.json:2: invalid JSON"):
        read_source_dir(tmp_path)


def test_grayscale_cmyk_exif_and_corrupt(tmp_path):
    gray = Image.fromarray(np.arange(12, dtype=np.uint8).reshape(3, 4), mode="L")
    gray.save(tmp_path / "g.png")
    assert load_rgb(tmp_path / "g.png").getpixel((1, 0)) == (1, 1, 1)

    Image.new("CMYK", (4, 3), (0, 255, 255, 0)).save(tmp_path / "c.jpg")
    r, g, b = load_rgb(tmp_path / "c.jpg").getpixel((0, 0))
    assert r > 200 and g < 60 and b < 60  # CMYK (0,255,255,0) is red

    img = Image.new("RGB", (40, 20), (0, 0, 0))
    img.paste((255, 0, 0), (0, 0, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view"
    img.save(tmp_path / "e.jpg", exif=exif, quality=100)
    upright = load_rgb(tmp_path / "e.jpg")
    assert upright.size == (20, 40)
    assert (
        upright.getpixel((15, 5))[0] > 200 and upright.getpixel((5, 5))[0] < 50
    )  # the red corner moved to the top right

    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    with pytest.raises(InputError, match="bad.jpg: cannot decode image"):
        load_rgb(tmp_path / "bad.jpg")


@pytest.mark.parametrize(("field", "value"), [("subject", ["woman"]), ("caption", {"en": "x"}), ("subject", True)])
def test_text_fields_given_as_lists_or_mappings_are_refused(sample_dir, tmp_path, field, value):
    """A subject written as a list would render as "the ['woman']" in every question; it is one line instead."""
    doc = json.loads((sample_dir / "annotations.json").read_text())
    doc["images"][0][field] = value
    shutil.copytree(sample_dir, tmp_path, dirs_exist_ok=True)
    (tmp_path / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=rf"{field}: must be text, got {type(value).__name__} "):
        read_source_dir(tmp_path)


def one_photo(folder, annotations: list[dict], image_id=1) -> None:
    Image.new("RGB", (40, 30)).save(folder / "a.png")
    doc = {
        "images": [{"id": image_id, "file_name": "a.png", "width": 40, "height": 30, "caption": "c", "subject": "man"}],
        "annotations": annotations,
    }
    (folder / "annotations.json").write_text(json.dumps(doc))


def test_an_annotation_for_no_image_is_one_line_naming_it(tmp_path):
    box = {"image_id": 1, "bbox": [1, 1, 10, 10], "role": "subject", "label": "man"}
    one_photo(tmp_path, [box, {**box, "id": 7, "image_id": 2, "role": "object"}])
    with pytest.raises(InputError, match=r"annotations\[1\]: image_id 2 names no image in 'images'$"):
        read_source_dir(tmp_path)
    one_photo(tmp_path, [{**box, "image_id": "1"}])  # "1" is not the image's 1: its box would be lost
    with pytest.raises(InputError, match=r"annotations\[0\]: image_id '1' names no image"):
        read_source_dir(tmp_path)


@pytest.mark.parametrize("bbox", [[1, 1, True, 10], [1, "2", 10, 10], [1, 1, 10, None], [float("nan"), 1, 5, 5]])
def test_a_box_of_booleans_text_or_nan_is_refused_naming_the_annotation(tmp_path, bbox):
    one_photo(tmp_path, [{"id": 3, "image_id": 1, "bbox": bbox, "role": "subject", "label": "man"}])
    (entry,) = read_source_dir(tmp_path)
    with pytest.raises(InputError, match=r"annotation 3: bad bbox"):
        grounding_from_entry(entry)
