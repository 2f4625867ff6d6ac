"""Edit backends declare what they can render; the idea stage draws only from that."""

import cv2
import numpy as np
import pytest
from PIL import Image

from perceptforge.backends.inpainters import CompositeInpainter
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.recolour import RecolourEditor, hex_to_lab, recolour
from perceptforge.configs.profile import load_profile
from perceptforge.errors import InputError
from perceptforge.flows.common import renderable_values
from perceptforge.logic import renderings
from perceptforge.logic.scene_fit import focus_shown, scene_window
from perceptforge.logic.templates import templates
from perceptforge.store.donors import DonorLibrary


def test_composite_offers_only_library_scenes_that_say_what_they_mean_at_the_category_level():
    found, composite = templates(), CompositeInpainter()
    b1, why = composite.renderings(found["B1"])
    s1, _ = composite.renderings(found["S1"])
    assert {r.donor for r in b1} == {"launch-pad"}  # the sky and the wall say nothing about behaviour
    assert {r.donor for r in s1} == {"launch-pad", "deep-space", "brick-wall"}
    assert all(r.how == "donor" and r.backend == "composite" for r in b1 + s1) and why == ""
    launch = next(r for r in b1 if r.donor == "launch-pad")
    assert (launch.value, launch.high) == ("a rocket launch pad", "visiting a rocket launch site")
    none, why = composite.renderings(found["B2"])
    assert none == [] and "names no donor kind" in why


def test_recolour_offers_the_colour_values_and_diffusion_every_value():
    found = templates()
    values, why = RecolourEditor().renderings(found["I1"])
    assert [r.value for r in values] == ["bright green hair", "bright pink hair", "bright blue hair"]
    assert all(r.how == "colour" and r.region == "hair" and r.colour.startswith("#") for r in values)
    assert RecolourEditor().renderings(found["B1"]) == ([], "no value of B1 is a colour")
    everything = renderings.from_alternatives(found["I1"], "sd-inpaint")
    assert [r.value for r in everything] == [a.value for a in found["I1"].writer.alternatives]


def test_profile_offers_and_skips_with_reasons():
    prof = load_profile("local")
    offers, skipped = renderable_values(templates(), prof, prof.build("inpainter"), prof.build("editor"))
    assert sorted(offers) == ["B1", "I1", "S1", "S2"]
    assert [r.photo_filter for r in offers["S2"]] == ["pencil_sketch", "sepia", "watercolour"]
    assert skipped["E2"] == "no value of E2 is a photo filter"
    gpu = load_profile("gpu")
    offers, skipped = renderable_values(templates(), gpu, gpu.build("inpainter"), gpu.build("editor"))
    assert sorted(offers) == sorted(templates()) and skipped == {}


def test_two_categories_making_one_change_never_draw_one_donor():
    """B1 and S1 both paste a new background: a source drawing the launch pad for both gave one image twice, the
    second quarantined as a near-duplicate (two new photos lost their S1). The narrower B1 keeps its one donor;
    S1 draws the others, and the same ones in a run of S1 alone."""
    prof, found = load_profile("local"), templates()
    build = (prof.build("inpainter"), prof.build("editor"))
    offers, _ = renderable_values(found, prof, *build)
    assert {r.donor for r in offers["B1"]} == {"launch-pad"}
    assert {r.donor for r in offers["S1"]} == {"deep-space", "brick-wall"}
    alone, _ = renderable_values({"S1": found["S1"]}, prof, *build)
    assert alone == {"S1": offers["S1"]}
    launch = offers["B1"]
    assert renderings.apart("S1", {"B1": launch, "S1": launch}, found) == launch  # nothing else left: it shares


def test_choices_leave_out_the_natural_value_and_merge_keeps_the_first_backend():
    found = templates()
    first = renderings.colours(found["I1"], "recolour")
    merged = renderings.merge([first, renderings.from_alternatives(found["I1"], "sd-inpaint")])
    assert len(merged) == len(found["I1"].writer.alternatives)
    assert next(r for r in merged if r.value == "bright pink hair").backend == "recolour"
    assert "bright pink hair" not in [r.value for r in renderings.choices(merged, "Bright Pink Hair ")]
    # a value that means what the photo already means at the high level is no change there (sepia on a
    # black-and-white photo that looks historical already)
    styles = renderings.from_alternatives(found["S2"], "filters")
    kept = [r.value for r in renderings.choices(styles, "a black-and-white photograph", " Historical")]
    assert "a sepia photograph" not in kept and "a pencil sketch" in kept
    assert "a sepia photograph" in [r.value for r in renderings.choices(styles, "a black-and-white photograph")]


def test_recolour_changes_hue_keeps_shading_and_leaves_the_outside_alone():
    rng = np.random.default_rng(0)
    image = np.full((40, 40, 3), (200, 120, 40), np.uint8)  # orange cloth
    image[:, 20:] = (90, 90, 90)  # grey wall
    shade = rng.integers(-25, 25, (40, 20, 1))
    image[:, :20] = np.clip(image[:, :20].astype(int) + shade, 0, 255).astype(np.uint8)
    mask = np.zeros((40, 40), bool)
    mask[:, :30] = True  # the box caught some wall too
    out = recolour(image, mask, "#1f6fff", tolerance=30, feather_px=0)
    assert (out[:, 20:] == image[:, 20:]).all()  # the wall in the box is not the cloth's colour: unchanged
    lab_in = cv2.cvtColor(image[:, :20].astype(np.float32) / 255, cv2.COLOR_RGB2LAB)
    lab_out = cv2.cvtColor(out[:, :20].astype(np.float32) / 255, cv2.COLOR_RGB2LAB)
    # the cloth is blue now, with the same relative light and dark
    assert np.abs(lab_out[..., 1:].mean((0, 1)) - hex_to_lab("#1f6fff")[1:]).max() < 12
    assert np.corrcoef(lab_in[..., 0].ravel(), lab_out[..., 0].ravel())[0, 1] > 0.95


def test_recolour_editor_needs_a_colour():
    image = Image.new("RGB", (8, 8), (200, 100, 50))
    mask = np.ones((8, 8), bool)
    with pytest.raises(ValueError, match="target colour"):
        RecolourEditor().edit([EditRequest(image=image, mask=mask, prompt="", seed=0)])


def test_donor_library_errors_name_the_file(tmp_path):
    (tmp_path / "donors.yaml").write_text(
        "version: 1\ndonors:\n- {id: a, file: a.jpg, kind: scene, label: a lake, highs: {scenario: at a lake}, licence: CC0}\n"
    )
    with pytest.raises(InputError, match=r"donors.yaml: donor a: file 'a.jpg' not found"):
        DonorLibrary.load(tmp_path)
    Image.new("RGB", (4, 4)).save(tmp_path / "a.jpg")
    assert DonorLibrary.load(tmp_path).of_kind("scene", "scenario")[0].label == "a lake"
    (tmp_path / "donors.yaml").write_text("version: 1\ndonors:\n- {id: a, file: a.jpg, kind: planet}\n")
    with pytest.raises(InputError, match="donors.0.kind"):
        DonorLibrary.load(tmp_path)


def test_bundled_library_entries_carry_a_licence_and_exist():
    library = DonorLibrary.load()
    assert len(library.donors) >= 3
    for donor in library.donors.values():
        assert donor.licence and library.path(donor.id).is_file()


def test_scene_window_keeps_the_aspect_and_slides_the_focus_beside_the_subject():
    shown = np.ones((100, 100), bool)
    shown[:, :50] = False  # the subject fills the left half
    assert scene_window((300, 100), (100, 100), shown, None) == (100, 0, 200, 100)  # centred, never stretched
    # the focus near the scene's right end: the window slides right, but only as far as it must
    window = scene_window((300, 100), (100, 100), shown, (250, 20, 280, 80))
    assert window == (180, 0, 280, 100) and focus_shown(window, (100, 100), shown, (250, 20, 280, 80)) == 1.0
    assert focus_shown((100, 0, 200, 100), (100, 100), shown, (110, 20, 140, 80)) == 0.0
    # a tall scene slides down, and a window the scene's size has nowhere to go
    assert scene_window((100, 300), (100, 100), np.ones((100, 100), bool), (0, 250, 100, 300))[1] >= 200
    assert scene_window((100, 100), (50, 50), shown[:50, :50], (0, 0, 10, 10)) == (0, 0, 100, 100)


def test_composite_places_the_scene_unstretched_and_refuses_to_hide_its_focus(tmp_path):
    scene = np.zeros((100, 300, 3), np.uint8)
    scene[:, :100], scene[:, 100:200], scene[:, 200:] = (200, 0, 0), (0, 200, 0), (0, 0, 200)
    Image.fromarray(scene).save(tmp_path / "s.png")
    entry = "{id: s, file: s.png, kind: scene, label: a blue wall, highs: {scenario: by a wall}, licence: CC0"
    (tmp_path / "donors.yaml").write_text(f"version: 1\ndonors:\n- {entry}, focus: [210, 10, 290, 90]}}\n")
    editor = CompositeInpainter(feather_px=0, colour_match=False, library=DonorLibrary.load(tmp_path), matte_band=0)
    mask = np.ones((60, 60), bool)
    mask[:, 40:] = False  # the subject on the right
    rendering = editor.renderings(templates()["S1"])[0][0]
    photo = Image.new("RGB", (60, 60), (90, 160, 40))
    out = np.asarray(editor.edit_one(EditRequest(photo, mask, "", 0, rendering=rendering)))
    assert tuple(out[30, 10]) == (0, 0, 200)  # the blue third, the focus, beside her; no green squeezed in
    mask[:, 20:] = False  # now she hides all but a sliver of any window
    with pytest.raises(ValueError, match=r"donor s: only \d+% of what its label names \(a blue wall\)"):
        editor.edit_one(EditRequest(photo, mask, "", 0, rendering=rendering))


def test_donor_focus_must_be_a_box_inside_its_photo(tmp_path):
    Image.new("RGB", (40, 30)).save(tmp_path / "a.jpg")
    entry = "{id: a, file: a.jpg, kind: scene, label: a lake, highs: {scenario: at a lake}, licence: CC0"
    (tmp_path / "donors.yaml").write_text(f"version: 1\ndonors:\n- {entry}, focus: [10, 5, 50, 20]}}\n")
    with pytest.raises(InputError, match=r"donor a: focus \[10, 5, 50, 20\] is not a box inside its 40x30 photo"):
        DonorLibrary.load(tmp_path)


def test_a_region_recolour_reaches_the_mixed_pixels_along_its_outline():
    image = np.full((30, 30, 3), (225, 215, 205), np.uint8)  # a pale wall
    image[:, :14] = (90, 70, 30)  # brown hair
    image[:, 14] = (158, 142, 118)  # one column half hair, half wall
    region = np.zeros((30, 30), bool)
    region[:, :14] = True  # the outline runs inside the mixed column
    out = recolour(image, region, "#ff1493", tolerance=None, feather_px=2).astype(int)
    shift = np.abs(out - image.astype(int)).sum(axis=2)
    assert shift[15, 14] > 40  # the mixed column turns part pink: no rim of the old brown
    assert shift[15, 25] == 0 and shift[15, 5] > shift[15, 14]  # the wall stays; the hair turns wholly
