"""A drawn outline (COCO ``segmentation`` polygons): read, rasterised, followed by the edits."""

import json
import shutil

import numpy as np
import pytest
from helpers import undrawn

from perceptforge.errors import InputError
from perceptforge.logic.edit_region import edit_mask
from perceptforge.logic.matting import trimap
from perceptforge.logic.outline import outline_mask
from perceptforge.logic.templates import templates
from perceptforge.store.images import load_rgb
from perceptforge.store.sources import grounding_from_entry, read_source_dir


def test_a_square_outline_covers_the_pixels_whose_centres_it_holds():
    mask = outline_mask([[2, 2, 6, 2, 6, 5, 2, 5]], 8, 8)
    assert mask.sum() == 12 and mask[2:5, 2:6].all()
    two = outline_mask([[0, 0, 2, 0, 2, 2, 0, 2], [4, 4, 6, 4, 6, 6, 4, 6]], 8, 8)
    assert two.sum() == 8  # parts are a union


def test_horizontal_and_zero_length_edges_rasterise_without_a_numpy_warning():
    """A drawn outline has horizontal edges and repeated points (a double click): they cross no row, and their
    crossing is never computed as 0/0 or inf * 0 (`make demo` printed numpy's RuntimeWarning for them)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):  # numpy's own warnings as errors too, whatever the test run's filters
            mask = outline_mask([[2, 2, 6, 2, 6, 2, 6, 5, 2, 5, 2, 5]], 8, 8)
    assert mask.sum() == 12 and mask[2:5, 2:6].all()


def test_a_hole_bridged_into_its_ring_stays_open():
    # a 6×6 square with a 2×2 hole, the hole joined to the ring by a zero-width bridge (as a COCO polygon is)
    ring = [0, 0, 6, 0, 6, 6, 0, 6, 0, 2, 2, 2, 2, 4, 4, 4, 4, 2, 2, 2, 0, 2]
    mask = outline_mask([ring], 6, 6)
    assert not mask[2:4, 2:4].any() and mask.sum() == 32


@pytest.mark.parametrize(
    ("segmentation", "reason"),
    [
        ({"counts": [1, 2], "size": [4, 4]}, "RLE"),
        ([[1, 1, 5, 1]], "at least three points"),
        ([[1, 1, 5, 1, "x", 4]], "must be a number"),
        ([[1, 1, 900, 1, 5, 4]], "reaches outside the 512x512 image"),
        ("1 1 5 1 5 4", "list of polygons"),
    ],
)
def test_a_bad_outline_is_refused_naming_the_annotation(sample_dir, tmp_path, segmentation, reason):
    source = shutil.copytree(sample_dir, tmp_path / "source")
    doc = json.loads((source / "annotations.json").read_text())
    subject = next(a for a in doc["annotations"] if a["image_id"] == 1 and a.get("role") == "subject")
    subject["segmentation"] = segmentation
    (source / "annotations.json").write_text(json.dumps(doc))
    entry = next(e for e in read_source_dir(source) if e.source_id == "1")
    with pytest.raises(InputError, match=reason) as exc:
        grounding_from_entry(entry)
    assert f"annotation {subject['id']}" in str(exc.value)


class NoSegmenter:
    """A background edit with a drawn outline asks no segmenter anything."""

    def box_mask(self, image, box):
        raise AssertionError("the drawn outline is the mask")

    def candidates(self, image, box):
        raise AssertionError("the drawn outline is the mask")


def test_a_drawn_subject_is_kept_exactly_as_drawn_whatever_the_seed(sample_dir):
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("cameraman.png"))
    grounding = grounding_from_entry(entry)
    assert grounding.subject.outline, "the bundled cameraman carries his outline"
    image = np.asarray(load_rgb(sample_dir / entry.file_name))
    b1 = templates()["B1"]
    masks = [
        edit_mask(b1, grounding, image, grounding.attributes["background"], NoSegmenter(), np.random.default_rng(s))
        for s in (0, 1)
    ]
    assert (masks[0] == masks[1]).all()
    drawn = outline_mask(grounding.subject.outline, *image.shape[:2])
    assert (masks[0] == ~drawn).all()
    # the tripod he stands behind stays whole: its legs are in the outline, the grass between them is not
    assert not masks[0][400, 292] and not masks[0][400, 269] and masks[0][400, 282]
    assert undrawn(grounding).subject.outline is None


def test_a_drawn_hair_region_is_what_was_drawn_even_where_colour_cannot_tell_hair_from_skin():
    from perceptforge.data.schema import Box, Region
    from perceptforge.logic.edit_region import drawn_region

    grey = np.full((64, 64, 3), 120, np.uint8)
    grey[10:30, 20:44] = 60  # dark hair over a grey face: a black-and-white photo
    face = (22.0, 20.0, 42.0, 50.0)
    box = Box(x0=18, y0=8, x1=46, y1=32)
    with pytest.raises(ValueError, match="black-and-white"):
        drawn_region(grey, Region(label="hair", box=box), [face])
    outline = [[20, 10, 44, 10, 44, 30, 20, 30]]
    found = drawn_region(grey, Region(label="hair", box=box, outline=outline), [face])
    assert (found == outline_mask(outline, 64, 64)).all()


def test_round_a_thin_piece_a_drawn_outline_is_taken_as_it_is():
    keep = np.zeros((40, 60), bool)
    keep[5:35, 5:25] = True  # a body
    keep[19:22, 25:55] = True  # a strut three pixels thick
    wide = trimap(keep, 2)
    assert wide[20, 40] == 1.0 and wide[18, 40] == 0.5 == wide[21, 40] == wide[20, 4]  # a band on either side
    tri = trimap(keep, 2, hard_thin=True)
    assert (tri[19:22, 30:50] == 1.0).all() and (tri[15:19, 30:50] == 0.0).all() and (tri[22:26, 30:50] == 0).all()
    assert tri[20, 4] == 0.5 == tri[10, 6]  # round the body the band stays, for its soft edge


def test_the_bundled_astronauts_drawn_hair_keeps_the_fringe_end_and_leaves_the_temple(sample_dir):
    from perceptforge.logic.edit_region import drawn_region

    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    grounding = grounding_from_entry(entry)
    hair = next(r for r in grounding.regions if r.label == "hair")
    mask = drawn_region(np.asarray(load_rgb(sample_dir / entry.file_name)), hair, [])
    assert (mask == outline_mask(hair.outline, 512, 512)).all()
    # the fringe's dark end (its colour is not the hair's median) is hair; the shadowed temple beside it is not
    assert mask[93, 263] and mask[110, 272] and not mask[115, 267] and not mask[100, 250]


def test_a_hole_is_joined_to_the_outline_around_it():
    from perceptforge.logic.outline import inside, with_holes

    ring = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]
    gap = [(4.0, 4.0), (6.0, 4.0), (6.0, 6.0), (4.0, 6.0)]
    assert inside((5, 5), ring) and not inside((11, 5), ring)
    (joined,) = with_holes([ring], [gap])
    mask = outline_mask([joined], 10, 10)
    assert mask.sum() == 100 - 4 and not mask[4:6, 4:6].any()  # the gap's four pixels open, the rest kept
    with pytest.raises(ValueError, match="a hole at \\(4.0, 4.0\\) lies inside no outline"):
        with_holes([], [gap])
