"""The embedded defaults (GrabCut + composite) turn a bundled photo into a visibly different image."""

import cv2
import numpy as np
import pytest
from helpers import undrawn

from perceptforge.backends.inpainters import CompositeInpainter, matte_band_px
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.segmenters import GrabCutSegmenter
from perceptforge.logic.edit_region import edit_mask, pastes_into_box, target_box
from perceptforge.logic.matting import STRAND_GAP_L, foreground_colours, matte, strand_share, toward_range
from perceptforge.logic.templates import templates
from perceptforge.store.images import load_rgb
from perceptforge.store.sources import grounding_from_entry, read_source_dir


def edit_request(template, image, mask, prompt, seed, donor):
    return EditRequest(image=image, mask=mask, prompt=prompt, seed=seed, donor=donor, partial=pastes_into_box(template))


@pytest.fixture(scope="module")
def astronaut(sample_dir):
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    return (
        load_rgb(sample_dir / entry.file_name),
        undrawn(grounding_from_entry(entry)),
        load_rgb(sample_dir / "images" / "rocket.jpg"),
    )


def change(a, b, where):
    return float(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32)).mean(axis=2)[where].mean())


@pytest.mark.parametrize("template_id", ["B1", "B3", "I1"])
def test_composite_changes_inside_not_outside(astronaut, template_id):
    image, grounding, donor = astronaut
    template = templates()[template_id]
    old = grounding.attributes[template.attribute]
    mask = edit_mask(template, grounding, np.asarray(image), old, GrabCutSegmenter(), np.random.default_rng(0))
    assert mask.shape == (512, 512) and 0.02 < mask.mean() < 0.98
    out = CompositeInpainter().edit([edit_request(template, image, mask, "x", 0, donor)])[0]
    assert out.size == image.size
    assert change(image, out, mask) > 25  # mean absolute change (0-255) inside the edit region
    if pastes_into_box(template):
        assert change(image, out, ~mask) == 0.0  # feathering is inward: nothing outside moves
    else:  # a new scene meets the subject along a matte: only the band along the outline may move
        band = matte_band_px(mask.shape)
        outline = cv2.dilate(mask.astype(np.uint8), np.ones((2 * band + 3, 2 * band + 3), np.uint8)).astype(bool)
        assert change(image, out, ~outline) == 0.0
        assert 0 < change(image, out, outline & ~mask)


def test_matting_leaves_no_rim_of_the_old_background():
    """A subject on a light wall, its edge soft over two pixels, pasted on a dark scene: with the hard cut the
    outline keeps a light rim; the matte takes the wall's share out of the edge pixels."""
    h = w = 64
    yy, xx = np.mgrid[0:h, 0:w]
    alpha = np.clip((20.5 - np.hypot(yy - 32, xx - 32)) / 2, 0, 1)  # a disc, its edge soft over 2 px
    subject, wall, scene = np.array([200, 40, 40.0]), np.array([235, 235, 235.0]), np.zeros(3)
    image = (alpha[..., None] * subject + (1 - alpha[..., None]) * wall).astype(np.uint8)
    mask = alpha < 0.5  # what segmentation gives: the region to change
    found, colours = matte(image, ~mask, band_px=3)
    ring = (alpha > 0.05) & (alpha < 0.95)
    assert np.abs(found - alpha)[ring].mean() < 0.2
    pasted = found[..., None] * colours + (1 - found[..., None]) * scene
    hard = np.where(mask[..., None], scene, image.astype(float))
    # the edge's brightness over the dark scene: the hard cut keeps the wall's light in it, the matte does not
    assert pasted[ring].mean() < hard[ring].mean() - 20
    assert (found[np.hypot(yy - 32, xx - 32) < 14] == 1).all() and (found[np.hypot(yy - 32, xx - 32) > 26] == 0).all()


def test_a_pale_pocket_of_a_busy_backdrop_leaves_no_colour_brighter_than_the_subject_near_it():
    """A dark subject against a backdrop of pale and dark stripes (a window), with a pale stripe's pixel inside the
    band at alpha 0.6: taking the backdrop's blurred (mid-grey) mean out of it left a colour brighter than anything
    the subject has, a pale halo over a dark new scene. Its colour is now held to the subject's own near it."""
    h, w = 40, 40
    image = np.zeros((h, w, 3), np.uint8)
    image[:, : w // 2] = (90, 60, 40)  # the subject, left half
    image[:, w // 2 :: 4] = (230, 230, 235)  # pale stripes of the backdrop
    image[:, w // 2 + 1 :: 4] = (230, 230, 235)
    image[:, w // 2 + 2 :: 4] = (30, 30, 35)
    image[:, w // 2 + 3 :: 4] = (30, 30, 35)
    alpha = np.zeros((h, w))
    alpha[:, : w // 2] = 1.0
    alpha[:, w // 2] = 0.6  # the pale pocket, taken as part subject
    colours = foreground_colours(image, alpha, band_px=3)
    assert (colours[:, w // 2] <= np.array([90, 60, 40]) + 1e-6).all()
    assert (colours[:, : w // 2] == image[:, : w // 2]).all()  # the sure subject keeps its own colours


def test_a_pixel_a_third_subject_or_less_takes_the_subjects_colour_near_it():
    """Light-brown hair beside a blue-grey backdrop whose blurred mean is not the backdrop right behind the rim: a
    rim pixel at alpha 0.3, the old mean taken out of it, came out orange (an orange line round the hair over a
    black sky). Such a pixel now takes the subject's colour near it; one at alpha 0.8 keeps its own recovered one."""
    h, w = 30, 30
    image = np.zeros((h, w, 3), np.uint8)
    image[:, :15] = (160, 120, 80)  # hair, two tones
    image[::2, :15] = (120, 90, 60)
    image[:, 16:] = (110, 130, 160)  # the backdrop
    rim = (0.3 * np.array([160, 120, 80]) + 0.7 * np.array([150, 150, 170])).astype(np.uint8)
    image[:, 15] = rim  # behind the rim the backdrop is paler than its mean
    alpha = np.zeros((h, w))
    alpha[:, :15] = 1.0
    alpha[:, 15] = 0.3
    near = foreground_colours(image, alpha, band_px=2)[10, 15]
    hair_mean = image[:, 10:15].reshape(-1, 3).mean(0)
    assert np.abs(near - hair_mean).max() < 12  # the hair's colour near it, not an over-coloured guess
    alpha[:, 15] = 0.8
    own = foreground_colours(image, alpha, band_px=2)[10, 15]
    assert np.abs(own - hair_mean).max() > 12  # a mostly-subject pixel keeps its own recovered colour


def test_a_dark_rim_pixel_between_pale_skin_and_a_dark_backdrop_takes_the_subjects_dark_colour():
    """A lapel's dark tip beside a pale neck, over a dark backdrop, the matte unsure of it (alpha a fifth): it took
    the blurred mean of the subject near it, the neck's and the shirt's pale, a pale smudge on the new scene. On a
    segmenter's cut it takes the colour of the subject's part nearest its own, the lapel's."""
    h, w = 40, 40
    image = np.zeros((h, w, 3), np.uint8)
    image[:, 20:] = (58, 57, 52)  # the dark backdrop
    image[:, :15] = (230, 175, 160)  # the neck's skin
    image[:, 15:20] = (35, 38, 55)  # the lapel's tip, 5 px wide
    alpha = np.zeros((h, w))
    alpha[:, :18] = 1.0
    alpha[:, 18:20] = 0.2  # the lapel's edge, which the matte took for the backdrop
    tip = foreground_colours(image, alpha, band_px=3, common=True)[20, 19]
    assert tip.max() < 80  # the lapel's navy, not the skin's pale


def test_a_segmenters_cut_holds_a_rim_to_the_colours_the_subject_commonly_has():
    """A navy shoulder's edge over a red curtain, with a paler blue rim of its own: the curtain taken out of the rim
    left a light-blue line over a grey wall. On a segmenter's cut the rim's colour is held to what the jacket
    commonly has near it, even six pixels from its nearest sure pixel; a drawn line keeps the old reach, where that
    pixel has no sure one near enough to be held at all."""
    rng = np.random.default_rng(0)
    h, w = 40, 40
    image = np.zeros((h, w, 3), np.uint8)
    image[:20] = (120, 50, 38)  # the curtain
    image[20:] = np.clip(rng.normal((52, 64, 88), 4, (h - 20, w, 3)), 0, 255)  # the jacket, a little texture
    image[20] = (100, 105, 127)  # its pale edge
    image[20:24:3, ::7] = (90, 110, 140)  # a few bright threads (the extremes)
    alpha = np.zeros((h, w))
    alpha[20] = 0.68
    alpha[21:26] = 0.9
    alpha[26:] = 1.0
    common = foreground_colours(image, alpha, band_px=3, common=True)[20, 10]
    assert common[2] < 88 + 3 * 4 * 2  # within about two standard deviations of the jacket's blue
    drawn = foreground_colours(image, alpha, band_px=3)[20, 10]
    assert drawn[2] > 140  # unheld, the light-blue line
    assert (foreground_colours(image, alpha, band_px=3, common=True)[26:] == image[26:]).all()


def test_a_rim_colour_outside_the_subjects_range_moves_toward_it_and_keeps_its_hue():
    """A shadowed ear's rim before a dark curtain, clipped channel by channel, had its red raised alone to the skin's
    least: a red nub no skin has. Moved straight toward the skin's range it is a darker skin; a colour inside the
    range, or with no range near, stays as it is."""
    lo, hi = np.array([160.0, 100.0, 70.0]), np.array([240.0, 170.0, 140.0])
    rim = np.array([[[99.0, 75.0, 63.0]]])
    moved = toward_range(rim, lo, hi)[0, 0]
    assert (moved >= lo - 1e-9).all() and (moved <= hi + 1e-9).all()
    clipped = np.clip(rim[0, 0], lo, hi)
    skin = (lo + hi) / 2
    assert moved[1] / moved[0] > clipped[1] / clipped[0]  # less red than the clip's (160, 100, 70)
    assert abs(moved[1] / moved[0] - skin[1] / skin[0]) < abs(clipped[1] / clipped[0] - skin[1] / skin[0]) + 0.05
    inside = np.array([[[200.0, 130.0, 100.0]]])
    assert (toward_range(inside, lo, hi) == inside).all()
    nothing = np.full(3, np.inf)
    assert (toward_range(rim, -nothing, nothing) == rim).all()


def test_where_subject_and_backdrop_share_a_colour_the_cut_edge_stands_in_for_the_matte():
    """A grey tweed shoulder over a grey-blue backdrop: the colour lines tell them apart nowhere, and the matte
    followed the tweed, a ragged dark-bitten edge. There the alpha is the cut's own edge softened by a pixel; a
    subject far from its backdrop's colour keeps the matte's alpha."""
    rng = np.random.default_rng(1)
    h, w = 60, 60
    keep = np.zeros((h, w), bool)
    keep[30:] = True
    image = np.zeros((h, w, 3), np.uint8)
    image[:] = (120, 140, 150)  # the backdrop
    tweed = np.clip(rng.normal((125, 138, 148), 20, (h, w, 3)), 0, 255).astype(np.uint8)
    image[keep] = tweed[keep]
    alpha, _ = matte(image, keep, 4)
    edge = cv2.GaussianBlur(keep.astype(np.float64), (0, 0), 1.0)
    band = (np.abs(np.arange(h) - 30) <= 4)[:, None] & np.ones((1, w), bool)
    assert np.abs(alpha - edge)[band].max() < 1e-9
    far = image.copy()
    far[keep] = (200, 60, 40)  # a red coat
    far[28:32, ::2] = (200, 60, 40)  # with threads past the cut
    coat, _ = matte(far, keep, 4)
    assert np.abs(coat - edge)[band].max() > 0.3
    drawn, _ = matte(image, keep, 4, hard_thin=True)
    assert np.abs(drawn - edge)[band].max() > 0.05  # a drawn line keeps its matte


def test_a_strand_pixel_keeps_at_most_its_share_by_lightness_between_the_strands_and_the_backdrop():
    """Dark strands (grey 60) before a lit window (grey 220): an unknown pixel of the hair halfway between them in
    lightness is about half strand. One darker than the strands, or past the backdrop's lightness (a dark strand
    at a temple, darker than the curtain behind it: taken for the curtain it was a hole), is no mix of the two;
    outside the hair, or where strands and backdrop lie less than ``STRAND_GAP_L`` apart, the matte stands."""
    tri = np.full((9, 24), 0.5)
    tri[:3], tri[6:] = 0.0, 1.0
    image = np.zeros((9, 24, 3), np.uint8)
    image[:3], image[6:] = 220, 60
    image[3:6, :6], image[3:6, 6:12], image[3:6, 12:18], image[3:6, 18:] = 140, 40, 240, 140
    hair = np.ones((9, 24), bool)
    hair[:, 18:] = False
    share = strand_share(image, tri, 2, hair)
    assert 0.3 < share[4, 2] < 0.7  # halfway
    assert (share[4, 8] == 1) and (share[4, 14] == 1)  # darker than the strands, paler than the window
    assert share[4, 20] == 1 and (share[tri != 0.5] == 1).all()  # off the hair; the sure pixels
    close = image.copy()
    close[:3] = 75  # a backdrop nearly the strands' lightness
    assert (strand_share(close, tri, 2, hair) == 1).all()
    assert STRAND_GAP_L > 0


def test_dark_hair_before_a_lit_window_leaves_no_pale_blob_over_a_dark_scene():
    """A dark crown whose fringe mixes pixel by pixel with a lit window of cream and pale blue: the matte, its colour
    lines lost in the window's two colours, kept the fringe nearly whole, a pale blob over the dark new scene. Told
    that the outline is hair, the fringe keeps its strands' share and comes out darker; told nothing, or well inside
    the cut, the alpha is the matte's as before."""
    rng = np.random.default_rng(3)
    h, w = 48, 48
    window = np.where((np.arange(w) // 2 % 2 == 0)[None, :, None], (235, 228, 212), (170, 200, 226)).astype(float)
    strands = np.clip(rng.normal((52, 46, 40), 10, (h, w, 3)), 0, 255)
    share = np.zeros((h, w))
    share[24:] = 1.0
    share[14:26] = rng.uniform(0.1, 0.9, (12, w))  # the crown's fringe: strands and window, pixel by pixel
    image = np.clip(share[..., None] * strands + (1 - share[..., None]) * window, 0, 255).astype(np.uint8)
    keep = np.zeros((h, w), bool)
    keep[18:] = True  # the cut lies inside the fringe
    plain, colours = matte(image, keep, 6)
    told, told_colours = matte(image, keep, 6, hair=np.ones((h, w), bool))
    over_dark = lambda a, f: (a[..., None] * f).mean(axis=-1)  # the composite over a black scene
    fringe = np.zeros((h, w), bool)
    fringe[14:22] = True
    assert over_dark(told, told_colours)[fringe].mean() < over_dark(plain, colours)[fringe].mean() - 10
    assert (told[25:] == plain[25:]).all()  # past the band, nothing moves
    same, _ = matte(image, keep, 6, hair=None)
    assert (same == plain).all()


def test_where_colour_cannot_place_a_hair_outline_its_cut_edge_is_softened_wider():
    """White hair before a pale pink painting: the colour lines tell nothing, and the cut's edge softened by one
    pixel was a hard stepped edge no hair has. Where the outline is hair it is softened over ``HAIR_SOFT``; elsewhere
    (a shoulder) by a pixel, as before."""
    rng = np.random.default_rng(2)
    h, w = 60, 60
    keep = np.zeros((h, w), bool)
    keep[:, 30:] = True
    keep[::8, 29] = True  # the cut's steps
    image = np.full((h, w, 3), (225, 215, 210), np.uint8)  # the painting, out of focus
    strands = np.clip(np.array([225, 215, 210]) + rng.normal(0, 20, (h, w, 1)), 0, 255).astype(np.uint8)
    image[keep] = strands[keep]  # white strands of the painting's mean colour
    hair = np.zeros((h, w), bool)
    hair[:30] = True  # the top half of the outline is hair
    alpha, _ = matte(image, keep, 4, hair=hair)
    plain, _ = matte(image, keep, 4)
    soft = lambda a, rows: ((a[rows, 24:36] > 0.05) & (a[rows, 24:36] < 0.95)).sum(axis=1).mean()
    assert soft(alpha, slice(0, 24)) > soft(plain, slice(0, 24)) + 2  # a wider soft edge along the hair
    assert (alpha[36:] == plain[36:]).all()  # the rest as before
    cap = image.copy()
    cap[keep] = (232, 222, 216)  # a cap's smooth white band there instead: no strands, the edge stays sharp
    assert (matte(cap, keep, 4, hair=hair)[0] == matte(cap, keep, 4)[0]).all()


def test_same_seed_same_mask_and_bytes(astronaut):
    image, grounding, donor = astronaut
    b1 = templates()["B1"]
    runs = []
    for _ in range(2):
        mask = edit_mask(
            b1,
            grounding,
            np.asarray(image),
            grounding.attributes["background"],
            GrabCutSegmenter(),
            np.random.default_rng(5),
        )
        runs.append((mask, CompositeInpainter().edit([edit_request(b1, image, mask, "x", 0, donor)])[0].tobytes()))
    assert (runs[0][0] == runs[1][0]).all() and runs[0][1] == runs[1][1]
    other = edit_mask(
        b1,
        grounding,
        np.asarray(image),
        grounding.attributes["background"],
        GrabCutSegmenter(),
        np.random.default_rng(6),
    )
    assert not (other == runs[0][0]).all()


def test_targets_and_bad_inputs(astronaut):
    image, grounding, donor = astronaut
    found = templates()
    assert target_box(found["B3"], grounding, "a space helmet") == (275.0, 345.0, 505.0, 512.0)
    assert target_box(found["I1"], grounding, "short brown hair") == (165.0, 55.0, 285.0, 175.0)
    with pytest.raises(ValueError, match="no object region matches 'a umbrella'"):
        target_box(found["B3"], grounding, "a umbrella")
    with pytest.raises(ValueError, match="mask is 4x4 but the image is 512x512"):
        CompositeInpainter().edit([edit_request(found["B3"], image, np.ones((4, 4), bool), "x", 0, donor)])
    with pytest.raises(ValueError, match="needs a donor"):
        CompositeInpainter().edit([edit_request(found["B3"], image, np.ones((512, 512), bool), "x", 0, None)])
    with pytest.raises(ValueError, match="outside"):
        GrabCutSegmenter().box_mask(np.asarray(image), (600, 600, 700, 700))
    with pytest.raises(ValueError, match="empty box"):
        GrabCutSegmenter().box_mask(np.asarray(image), (10, 10, 10, 50))
    masks = [GrabCutSegmenter().box_mask(np.asarray(image), box) for box in [(20, 15, 370, 512), (275, 345, 505, 512)]]
    assert [m.shape for m in masks] == [(512, 512), (512, 512)] and masks[0].sum() > masks[1].sum()
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8"):
        GrabCutSegmenter().box_mask(np.asarray(image.convert("L")), (10, 10, 50, 50))


def test_a_black_and_white_photo_gets_its_new_scene_in_black_and_white(sample_dir):
    """The cameraman is grey: a colour scene behind him would be a paste, and the aesthetic is not what changes."""
    b1, donor = templates()["B1"], load_rgb(sample_dir / "images" / "rocket.jpg")
    mask = np.zeros((512, 512), bool)
    mask[:, 300:] = True
    grey = load_rgb(sample_dir / "images" / "cameraman.png")
    out = np.asarray(CompositeInpainter(matte_band=0.0).edit([edit_request(b1, grey, mask, "x", 0, donor)])[0])
    assert change(grey, out, mask) > 10
    assert np.abs(out.astype(int) - out.mean(axis=2, keepdims=True)).max() <= 1  # no colour anywhere
    colour = load_rgb(sample_dir / "images" / "astronaut.jpg")
    pasted = np.asarray(CompositeInpainter(matte_band=0.0).edit([edit_request(b1, colour, mask, "x", 0, donor)])[0])
    assert np.abs(pasted[mask].astype(int) - pasted[mask].mean(axis=1, keepdims=True)).mean() > 5  # colour stays


def test_outside_the_cut_the_matte_keeps_the_old_photo_only_where_the_person_is():
    """The closed-form matte kept a patch of dark window behind an ear at alpha 0.8 beside the cut: outside the kept
    subject the alpha is held to where the person segmenter sees the person (a curl past the cut keeps its matte),
    but for the cut's own edge; a subject the segmenter does not see as a person keeps its matte."""
    from perceptforge.logic.matting import within_person

    keep = np.zeros((20, 20), bool)
    keep[:, :10] = True
    alpha = np.where(keep, 1.0, 0.8)  # the matte's patch beside the cut, all along it
    person = np.where(keep, 0.9, 0.0)
    person[:5, 10:14] = 0.6  # a curl the segmenter sees past the cut
    held = within_person(alpha, keep, person)
    assert (held[keep] == 1.0).all()
    assert held[10, 10] > 0.7 and 0.2 < held[10, 11] < 0.4 and (held[10, 12:] == 0.0).all()  # the cut's edge fades
    assert (held[:5, 10:14] == 0.8).all()  # the curl keeps its matte
    assert (within_person(alpha, keep, np.zeros((20, 20))) == alpha).all()  # not a person: as it was
