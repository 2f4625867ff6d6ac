"""Background edits keep what is the subject: its face, its body, what it holds, even when it touches the edge."""

import numpy as np

from perceptforge.backends.segmenters import GrabCutSegmenter
from perceptforge.data.schema import Box, Grounding, Region
from perceptforge.logic.edit_region import Hints, protected_regions, subject_hints


def grounding(**attributes: str) -> Grounding:
    return Grounding(
        source_id="s",
        caption="A person.",
        subject=Region(label="man", box=Box(x0=40, y0=20, x1=100, y1=100), role="subject"),
        regions=[
            Region(label="face", box=Box(x0=60, y0=20, x1=80, y1=40), role="face"),
            Region(label="camera", box=Box(x0=10, y0=50, x1=30, y1=70)),
            Region(label="flag", box=Box(x0=0, y0=0, x1=30, y1=40)),
        ],
        attributes=attributes,
        backend="annotations",
    )


def test_protected_regions_are_the_face_middle_the_body_below_it_and_what_is_held():
    regions = protected_regions(grounding(held_object="a camera"))
    assert regions["face"] == (65.0, 25.0, 75.0, 35.0)
    assert regions["body"] == (65.0, 45.0, 75.0, 60.0)  # half as wide as the face, a face height below the chin
    assert regions["camera"] == (15.0, 55.0, 25.0, 65.0)
    assert "camera" not in protected_regions(grounding(held_object="nothing"))
    hints = subject_hints(grounding(held_object="a camera"), "a flag")
    # the held camera is segmented on its own, not seeded as a box; the flag is probably background
    assert hints.inside == (regions["face"], regions["body"]) and hints.outside == ((0.0, 0.0, 30.0, 40.0),)
    assert hints.extent == (40.0, 20.0, 100.0, 100.0)


def test_a_subject_touching_the_image_edge_is_kept_when_the_jittered_box_stops_short_of_it():
    rng = np.random.default_rng(0)
    image = rng.normal(150, 12, (100, 100, 3)).clip(0, 255).astype(np.uint8)  # a grey, grainy backdrop
    image[30:, 55:] = (230, 110, 40)  # an orange figure cut by the right and bottom edges
    image[30:45, 65:85] = (200, 160, 130)  # its face
    subject = (55.0, 30.0, 100.0, 100.0)
    jittered = (50.0, 25.0, 92.0, 90.0)  # Eq. 1's jitter moved the box up and left
    hints = Hints(inside=((70.0, 34.0, 80.0, 41.0),), extent=subject)
    kept = GrabCutSegmenter(iterations=5).hinted_candidates(image, jittered, hints)[0]
    figure = np.zeros((100, 100), bool)
    figure[30:, 55:] = True
    assert (kept & figure).sum() / figure.sum() > 0.95  # the strip beyond the jittered box is the figure too
    assert (kept & ~figure).sum() / (~figure).sum() < 0.05
    unhinted = GrabCutSegmenter(iterations=5).hinted_candidates(image, jittered, Hints(inside=hints.inside))[0]
    assert (unhinted & figure).sum() / figure.sum() < 0.95  # without the extent, the edge strip is lost


def head_image(grey: bool = False) -> np.ndarray:
    """A 100x100 picture: sky, a face (skin), brown hair over its top and falling down both sides below the
    hair's box, and a light highlight inside the hair."""
    image = np.zeros((100, 100, 3), np.uint8)
    image[:] = (150, 190, 230)  # sky
    image[30:90, 35:65] = (225, 180, 150)  # the face
    image[15:40, 30:70] = (110, 70, 35)  # hair over the top
    image[40:65, 30:36] = image[40:65, 64:70] = (110, 70, 35)  # falling beside the face, below the box
    image[20:24, 45:50] = (180, 150, 110)  # a highlight in the hair
    return image.mean(axis=2, keepdims=True).repeat(3, axis=2).astype(np.uint8) if grey else image


def test_the_colour_region_follows_the_hair_past_its_box_and_never_onto_the_face():
    from perceptforge.logic.edit_region import colour_region

    hair_box, face = (28.0, 12.0, 72.0, 40.0), (33.0, 30.0, 67.0, 90.0)
    region = colour_region(head_image(), hair_box, [face])
    hair = np.zeros((100, 100), bool)
    hair[15:40, 30:70] = hair[40:65, 30:36] = hair[40:65, 64:70] = True
    assert (region & hair).sum() / hair.sum() > 0.97  # the sides below the box and the highlight too
    assert not region[45:90, 40:60].any()  # no skin
    assert not region[:12].any() and not region[70:].any()  # no sky, nothing below the face's three quarters


def test_a_black_and_white_photo_has_no_colour_region_to_recolour():
    import pytest

    from perceptforge.logic.edit_region import colour_region

    with pytest.raises(ValueError, match="black-and-white photo"):
        colour_region(head_image(grey=True), (28.0, 12.0, 72.0, 40.0), [(33.0, 30.0, 67.0, 90.0)])


def test_grey_hair_beside_a_pale_temple_is_refused_not_painted_on_the_face():
    """Grey hair at the side of a face, in a box that catches the temple too: by colour the region found is
    mostly the temple's skin, and recolouring it would paint the face."""
    import pytest

    from perceptforge.logic.edit_region import colour_region

    image = np.zeros((100, 100, 3), np.uint8)
    image[:] = (60, 90, 170)  # a blue backdrop
    image[20:90, 30:70] = (215, 180, 165)  # the face
    image[30:70, 24:29] = (200, 190, 185)  # thin grey hair at its side
    with pytest.raises(ValueError, match="as skin-coloured as the face"):
        colour_region(image, (22.0, 28.0, 36.0, 72.0), [(28.0, 20.0, 72.0, 90.0)])


def test_a_partly_recoloured_region_fails_its_gate():
    from PIL import Image

    from perceptforge.logic.gates import pair_measurements, pair_verdict

    natural = np.full((10, 10, 3), 100, np.uint8)
    manipulated = natural.copy()
    manipulated[:5, :4] = (255, 0, 128)  # the top of the region changed, its bottom half not
    region = np.zeros((10, 10), bool)
    region[:, :4] = True
    m = pair_measurements(Image.fromarray(natural), Image.fromarray(manipulated), region)
    assert m["region_changed"] == 0.5
    assert pair_verdict(m, 1.0, 6.0, None, 0.9) == "only 50% of the region changed (at least 90%)"
    assert pair_verdict(m, 1.0, 6.0, None, None) is None  # a pasted background is not held to it


def test_photo_filters_render_what_they_declare_and_nothing_else():
    from PIL import Image

    from perceptforge.backends.filters import FilterEditor, pencil_sketch, sepia
    from perceptforge.backends.protocols import EditRequest
    from perceptforge.logic.templates import templates

    editor = FilterEditor()
    declared, _ = editor.renderings(templates()["S2"])
    assert {r.value: r.photo_filter for r in declared} == {
        "a pencil sketch": "pencil_sketch",
        "a sepia photograph": "sepia",
        "a cartoon": "watercolour",  # OpenCV's stylization looks like a cartoon: its items call it one
    }
    assert editor.renderings(templates()["E2"]) == ([], "no value of E2 is a photo filter")
    image = head_image()
    toned = sepia(image)
    r, g, b = (toned[..., k].astype(int) for k in range(3))
    assert (r >= g).all() and (g >= b).all()  # brown-toned: red over green over blue everywhere
    sketch = pencil_sketch(image)
    assert (sketch[..., 0] == sketch[..., 1]).all()  # graphite grey
    card = np.full((64, 96, 3), 250, np.uint8)
    card[16:48, 8:40] = 20  # a black patch on white
    drawn = pencil_sketch(card)[..., 0].astype(float)
    assert drawn[:, 60:].mean() > 235  # white paper stays paper
    dark = drawn[22:42, 14:34]
    assert dark.mean() < 110 and dark.std() > 8  # a dark area stays dark, shaded with strokes, not filled flat
    assert drawn[16:48, 36:40].mean() < dark.mean() - 30  # its edge is drawn darker than its shading
    request = EditRequest(Image.fromarray(image), None, "", 0, rendering=declared[1])
    out = editor.edit([request, request])
    assert np.array_equal(np.asarray(out[0]), np.asarray(out[1]))  # the same image gives the same bytes


def test_what_a_background_edit_keeps_is_the_subject_cleaned():
    from perceptforge.logic.edit_region import subject_only

    keep = np.zeros((40, 40), bool)
    keep[10:38, 10:30] = True  # the subject
    keep[20:23, 15:18] = False  # a badge GrabCut took for background: a small hole
    keep[10:14, 10:13] = False  # a notch bitten out of the outline at a corner
    keep[2:6, 33:38] = True  # a fragment of old background outside the subject's box
    cleaned = subject_only(keep, [(10, 10, 30, 38)])
    assert cleaned[20:23, 15:18].all() and cleaned[10:38, 10:30].sum() >= 20 * 28 - 12  # hole filled, notch closed
    assert not cleaned[2:6, 33:38].any()  # nothing outside the box
    gap = keep.copy()
    gap[15:35, 14:26] = False  # an enclosed gap of 15% of the image (between an arm and the body) stays open
    assert not subject_only(gap, [(10, 10, 30, 38)])[20:30, 16:24].any()


def test_a_held_thing_cut_by_the_frame_keeps_its_part_at_the_edge():
    """A helmet whose box ends at the photo's bottom edge continues past it: its lower corners are the helmet
    (its rim, its latch), not background beside it; a box inside the photo keeps its corners out."""
    from perceptforge.logic.edit_region import inscribed_ellipse

    inside = inscribed_ellipse((20, 20, 60, 60), 100, 100)
    assert not inside[22, 22] and not inside[58, 58] and inside[40, 40]
    cut = inscribed_ellipse((20, 60, 60, 100), 100, 100)
    assert cut[98, 22] and cut[98, 57]  # the lower corners, at the frame
    assert not cut[61, 21]  # the upper corner is still beside it


def test_an_occluder_is_kept_whole_with_the_subject_and_never_taken_for_a_standing_object():
    """A podium before a speaker (role occluder) is what a background edit keeps with him, segmented on its own:
    its middle is protected and it is neither a sure-foreground box (its corners are floor) nor a standing object
    the mask gate would ask about; as an ``object`` it is one, and the annotation must place it."""
    from perceptforge.logic.edit_region import kept_objects, standing_objects

    g = grounding()
    podium = Region(label="podium", box=Box(x0=30, y0=90, x1=110, y1=120), role="occluder")
    g = g.model_copy(update={"regions": [*g.regions, podium]})
    assert [r.label for r in kept_objects(g)] == ["podium"]
    assert protected_regions(g)["podium"] == (50.0, 97.5, 90.0, 112.5)
    assert (50.0, 97.5, 90.0, 112.5) not in subject_hints(g, "a flag").inside
    assert "podium" not in [r.label for r in standing_objects(g)]
    as_object = g.model_copy(update={"regions": [*g.regions[:-1], podium.model_copy(update={"role": "object"})]})
    assert [r.label for r in standing_objects(as_object)] == ["podium"] and not kept_objects(as_object)
    held = g.model_copy(update={"attributes": {"held_object": "a camera"}})
    assert [r.label for r in kept_objects(held)] == ["camera", "podium"]


def test_an_unknown_role_is_refused_naming_the_annotation(tmp_path):
    import json

    import pytest

    from perceptforge.errors import InputError
    from perceptforge.store.sources import grounding_from_entry, read_source_dir

    (tmp_path / "a.png").write_bytes(b"")
    ann = {
        "images": [{"id": 1, "file_name": "a.png", "width": 50, "height": 50, "caption": "A man.", "subject": "man"}],
        "annotations": [
            {"id": 1, "image_id": 1, "label": "man", "role": "subject", "bbox": [0, 0, 50, 50]},
            {"id": 2, "image_id": 1, "label": "podium", "role": "occluder", "bbox": [0, 40, 50, 10]},
            {"id": 3, "image_id": 1, "label": "mic", "role": "in front", "bbox": [0, 30, 5, 5]},
        ],
    }
    (tmp_path / "annotations.json").write_text(json.dumps(ann))
    (entry,) = read_source_dir(tmp_path)
    with pytest.raises(InputError, match=r"annotation 3.*role"):
        grounding_from_entry(entry)
    ann["annotations"].pop()
    (tmp_path / "annotations.json").write_text(json.dumps(ann))
    (entry,) = read_source_dir(tmp_path)
    assert [r.role for r in grounding_from_entry(entry).regions] == ["occluder"]


def test_an_occluder_across_the_whole_photo_keeps_its_whole_box():
    """A podium whose box the frame cuts on both sides is a band across the photo: its whole box is the podium (its
    lit moulding, which GrabCut splits off, too). A box inside the photo keeps only what the segmenter finds in its
    inscribed ellipse."""
    from perceptforge.logic.edit_region import kept_object, spans_frame

    image = np.full((100, 120, 3), (90, 60, 40), np.uint8)  # dark wood
    image[90:, :] = (230, 150, 60)  # its lit bottom moulding
    segmenter = GrabCutSegmenter()
    band = (0.0, 70.0, 120.0, 100.0)
    assert spans_frame(band, 100, 120) and not spans_frame((10.0, 70.0, 120.0, 100.0), 100, 120)
    assert kept_object(segmenter, image, band)[70:, :].all()
    inside = kept_object(segmenter, image, (30.0, 20.0, 90.0, 60.0))
    assert not inside[20, 30] and not inside[:20].any() and not inside[60:].any()


def test_the_objects_on_the_subject_are_those_its_box_holds():
    """A pin inside the man's box is on him (the gate on what stays judges it); the camera half outside his box, the
    flag the old background names and the podium kept on its own are not."""
    from perceptforge.logic.edit_region import worn_objects

    g = grounding(background="a flag")
    pin = Region(label="pin", box=Box(x0=70, y0=60, x1=76, y1=66), role="object")
    podium = Region(label="podium", box=Box(x0=45, y0=80, x1=95, y1=100), role="occluder")
    g = g.model_copy(update={"regions": [*g.regions, pin, podium]})
    assert [r.label for r in worn_objects(g)] == ["pin"]
