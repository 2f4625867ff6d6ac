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
    assert (launch.value, launch.high) == ("a rocket launch pad at night", "visiting a rocket launch site")
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


def test_choices_leave_out_the_natural_value_and_merge_keeps_the_first_backend():
    found = templates()
    first = renderings.colours(found["I1"], "recolour")
    merged = renderings.merge([first, renderings.from_alternatives(found["I1"], "sd-inpaint")])
    assert len(merged) == len(found["I1"].writer.alternatives)
    assert next(r for r in merged if r.value == "bright pink hair").backend == "recolour"
    assert "bright pink hair" not in [r.value for r in renderings.choices(merged, "Bright Pink Hair ")]


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
