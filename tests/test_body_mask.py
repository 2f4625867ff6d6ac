"""The boxes-only segmentation's rules (logic/body_mask) and the pose referee's body-part gate (logic/pose_gates),
each on a tiny drawn image where the failure is drawn."""

import numpy as np
import pytest

from perceptforge.configs.profile import Gates
from perceptforge.logic import body_mask as bm
from perceptforge.logic import pose as pl
from perceptforge.logic.pose_gates import body_changed, body_part_masks, body_verdict

BACKDROP = (120, 150, 170)  # a grey-blue studio backdrop
SKIN = (220, 170, 140)
HAIR = (60, 35, 20)
JACKET = (40, 60, 160)


def disc(shape, centre, radius):
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]]
    return np.hypot(xx - centre[0], yy - centre[1]) <= radius


def nothing(shape=(64, 64)):
    return np.zeros(shape, bool)


def pose_with(points: dict[int, tuple[float, float]], visible: float = 0.99) -> pl.Pose:
    xy = np.full((33, 2), -100.0)
    vis = np.zeros(33)
    for i, p in points.items():
        xy[i], vis[i] = p, visible
    return pl.Pose(xy, vis, 0.99)


# --- ears kept to their rims -----------------------------------------------------------------------------------


def head_scene():
    """A 64×64 face (a skin disc) with an ear on each side, on a backdrop; the segmenter's kept mask cut the left
    ear's outer half (its rim) off."""
    shape = (64, 64)
    image = np.full((*shape, 3), BACKDROP, np.uint8)
    face = disc(shape, (32, 30), 14)
    ears = disc(shape, (15, 28), 5) | disc(shape, (49, 28), 5)
    image[face | ears] = SKIN
    keep = face | disc(shape, (49, 28), 5) | (disc(shape, (15, 28), 5) & (np.mgrid[0:64, 0:64][1] >= 15))
    parts = bm.BodyParts(nothing(), nothing(), ((18.0, 30.0), (46.0, 30.0)), 28.0, face=face)
    return image, keep, ears, parts


def test_an_ear_cut_at_its_rim_is_kept_whole():
    image, keep, ears, parts = head_scene()
    assert (ears & ~keep).sum() > 20  # the drawn cut: the left ear's rim is gone
    grown = bm.whole_ears(image, keep, parts)
    assert not (ears & ~grown).any()  # the whole ear is kept
    assert not (grown & ~keep & ~ears).any()  # and nothing of the backdrop beside it


def test_a_shadow_one_pixel_thin_past_an_ears_rim_is_not_kept():
    """Two pixels of a skin-dark shadow sticking out one pixel thin past an ear's rim, over a curtain, came out a
    red-brown nub on the new scene: the ear is kept to its rim, the spur is not (a rounded rim's own tip is)."""
    image, keep, ears, parts = head_scene()
    image[34:36, 15] = SKIN  # a spur leaving the left ear's lowest tip (15, 33), within the ear's reach
    grown = bm.whole_ears(image, keep, parts)
    assert not (ears & ~grown).any() and not grown[34:36, 15].any()


def test_an_ear_lobe_hanging_below_the_ears_disc_is_kept():
    """A lobe hangs a quarter of the ears' spacing below the ear's opening: 6-x's lay past the ear's disc and was cut,
    a notch in the lobe over the new scene. The lobe's own disc, below the ear's, keeps it; the backdrop stays out."""
    image, keep, ears, parts = head_scene()
    (x, y), radius = bm.ear_reach(parts)[0][0], bm.ear_reach(parts)[1]
    lobe = np.zeros((64, 64), bool)
    lobe[31 : int(y + radius) + 2, 16:19] = True  # under the ear point, from the ear's foot to a row past its disc
    lobe &= ~ears
    image[lobe] = SKIN
    grown = bm.whole_ears(image, keep, parts)
    assert (lobe & ~disc((64, 64), (x, y), radius)).sum() >= 4 and grown[lobe].all()
    assert not (grown & ~keep & ~ears & ~lobe).any()


def test_a_dark_shadow_beside_an_ears_rim_is_not_taken_for_skin_by_the_faces_darkest_features():
    """A dark red shadow just past an ear's rim was nearest the face's darkest colour centre (its eyebrows and mouth)
    and kept: dark dots beside the ear over the new scene. The ear's skin is learnt from the face less its darkest
    tenth; the ear itself is still kept whole."""
    image, keep, ears, parts = head_scene()
    image[parts.face & (np.mgrid[0:64, 0:64][0] >= 40)] = (70, 30, 30)  # a dark mouth, under a tenth of the face
    centres, radius = bm.ear_reach(parts)
    x = np.mgrid[0:64, 0:64][1]
    shadow = disc((64, 64), centres[0], radius - 1) & ~ears & (x <= 11)  # just past the left ear's rim
    image[shadow] = (75, 38, 32)
    grown = bm.whole_ears(image, keep, parts)
    assert not (ears & ~grown).any() and not (grown & shadow).any()


def test_no_ear_seen_keeps_the_mask_as_it_is():
    image, keep, _, parts = head_scene()
    unseen = bm.BodyParts(nothing(), nothing(), (), 0.0, face=parts.face)
    assert (bm.whole_ears(image, keep, unseen) == keep).all()


# --- hair grown to its tips -----------------------------------------------------------------------------------------


def curl_scene():
    """Hair (a dark disc) with a curl sticking out to the right, on a backdrop; the segmenter kept the hair's disc
    but cut the curl."""
    shape = (64, 64)
    image = np.full((*shape, 3), BACKDROP, np.uint8)
    hair = disc(shape, (28, 28), 16)
    curl = np.zeros(shape, bool)
    curl[30:34, 40:52] = True  # within reach of the outline: 0.15 of the hair box's side
    image[hair | curl] = HAIR
    return image, hair, curl


def test_a_cut_curl_is_grown_back_within_the_hair_box():
    image, keep, curl = curl_scene()
    parts = bm.BodyParts(nothing(), nothing(), hair=(8.0, 8.0, 60.0, 50.0))
    grown = bm.grown_hair(image, keep, parts)
    assert grown[curl].mean() > 0.95
    assert not (grown & ~keep & ~curl).any()  # none of the backdrop


def test_hair_is_not_grown_outside_its_box_nor_as_a_block_the_person_model_does_not_see():
    image, keep, curl = curl_scene()
    outside = bm.BodyParts(nothing(), nothing(), hair=(8.0, 8.0, 44.0, 50.0))  # the box ends before the curl
    beyond = curl.copy()
    beyond[:, :47] = False  # past the box and its margin (5% of its side)
    assert not bm.grown_hair(image, keep, outside)[beyond].any()
    # a dark block beside the hair (a window's frame) that the person segmenter gives no person
    block = np.zeros((64, 64), bool)
    block[20:40, 44:60] = True
    image[block] = HAIR
    person = np.where(keep, 0.99, 0.0)
    parts = bm.BodyParts(nothing(), nothing(), hair=(8.0, 8.0, 62.0, 50.0), person=person)
    assert bm.grown_hair(image, keep, parts)[block].mean() < 0.3
    # by colour alone (no person map) the block's part within reach of the outline would pass for hair
    assert (
        bm.grown_hair(image, keep, bm.BodyParts(nothing(), nothing(), hair=(8.0, 8.0, 62.0, 50.0)))[block].mean() > 0.3
    )


def test_hair_is_grown_only_below_the_ears():
    image, keep, curl = curl_scene()  # the curl at rows 30-33
    below = bm.BodyParts(nothing(), nothing(), ((10.0, 20.0), (50.0, 22.0)), 40.0, hair=(8.0, 8.0, 60.0, 50.0))
    above = bm.BodyParts(nothing(), nothing(), ((10.0, 40.0), (50.0, 40.0)), 40.0, hair=(8.0, 8.0, 60.0, 50.0))
    assert bm.grown_hair(image, keep, below)[curl].mean() > 0.95
    assert (bm.grown_hair(image, keep, above) == keep).all()  # a temple's blur beside short hair stays out


def test_gaps_between_curls_are_not_counted_as_bites():
    keep = np.zeros((64, 64), bool)
    keep[10:40, 10:40] = True
    keep[40:50, 10:50] = True  # a shoulder below, the gap between it and the hair is backdrop
    gaps = bm.between_curls(keep, (10, 10, 45, 45), (0, 0, 64, 64))
    assert gaps.any() and not (gaps & keep).any()
    assert not bm.between_curls(keep, (0, 0, 5, 5), (0, 0, 64, 64)).any()  # outside the hair box: none


# --- slivers of the old background trimmed -----------------------------------------------------------------------


def jacket_before_backdrop(bottom: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """A 64-pixel photo: a jacket (rows 10 to ``bottom``, columns 20 to 44) before the backdrop; (image, jacket)."""
    shape = (64, 64)
    image = np.full((*shape, 3), BACKDROP, np.uint8)
    body = np.zeros(shape, bool)
    body[10:bottom, 20:44] = True
    image[body] = JACKET
    return image, body


def test_a_sliver_of_the_old_background_beside_the_neck_is_trimmed_and_the_face_stays():
    shape = (64, 64)
    image, body = jacket_before_backdrop()
    sliver = np.zeros(shape, bool)
    sliver[20:50, 16:20] = True  # four columns of backdrop the segmenter kept beside the body
    keep = body | sliver
    face = np.zeros(shape, bool)
    face[12:24, 24:40] = True
    image[face] = SKIN
    parts = bm.BodyParts(nothing(), nothing(), face=face)
    trimmed = bm.trimmed(image, keep, parts, band=2)  # a 64-pixel photo: a 2-pixel band
    assert not (trimmed & sliver).any()
    assert trimmed[body].all()


def test_trimming_peels_from_the_outside_and_leaves_no_hole():
    """A pocket of the backdrop's colour behind the jacket's own kept edge line is no sliver: taken out, it was a hole
    the new scene showed through (a grey nick in a dark shoulder). A sliver on the outline still goes."""
    shape = (64, 64)
    image, keep = jacket_before_backdrop()
    pocket = np.zeros(shape, bool)
    pocket[30:34, 21:23] = True  # behind column 20, the jacket's edge, kept
    image[pocket] = BACKDROP
    sliver = np.zeros(shape, bool)
    sliver[40:50, 16:20] = True  # four columns of backdrop kept beside the body
    parts = bm.BodyParts(nothing(), nothing())
    trimmed = bm.trimmed(image, keep | sliver, parts, band=2)
    assert trimmed[pocket].all()
    assert not (trimmed & sliver).any()


def test_what_is_surely_the_subject_is_never_trimmed():
    shape = (64, 64)
    image, keep = jacket_before_backdrop(54)
    grey = np.zeros(shape, bool)
    grey[20:40, 20:23] = True  # a grey sleeve edge, the backdrop's colour
    image[grey] = BACKDROP
    assert not bm.trimmed(image, keep, bm.BodyParts(nothing(), nothing()), band=2)[grey].all()
    assert bm.trimmed(image, keep, bm.BodyParts(grey, nothing()), band=2)[grey].all()


# --- the pose's limbs ----------------------------------------------------------------------------------------------


def arms_pose():
    return pose_with(
        {
            pl.LEFT_SHOULDER: (44, 20),
            pl.RIGHT_SHOULDER: (20, 20),
            pl.LEFT_ELBOW: (48, 40),
            pl.RIGHT_ELBOW: (16, 40),
            pl.LEFT_WRIST: (44, 58),
            pl.RIGHT_WRIST: (20, 58),
        }
    )


def test_limbs_are_capsules_along_the_seen_arms_on_the_person():
    core, body = bm.limbs(arms_pose(), (64, 64))
    assert core[20, 32] and core[40, 48] and core[58, 44]  # the shoulder line, an elbow, a wrist
    assert not core[5, 5] and (body & ~core).any() and not (core & ~body).any()
    person = np.zeros((64, 64))
    person[:, :32] = 0.9  # the person segmenter sees only the photo's left half: the subject's right arm
    core, _ = bm.limbs(arms_pose(), (64, 64), person)
    assert core[40, 16] and not core[40, 48]
    assert not bm.limbs(pose_with({pl.LEFT_SHOULDER: (44, 20)}), (64, 64))[0].any()  # one shoulder: nothing


def test_a_swap_that_cuts_off_a_forearm_fails_the_body_part_gate_and_a_clean_one_passes():
    parts = body_part_masks(arms_pose(), (64, 64))
    assert set(parts) == {
        "shoulder line",
        "left upper arm",
        "right upper arm",
        "left forearm and wrist",
        "right forearm and wrist",
    }
    clean = body_changed(np.zeros((64, 64), bool), parts)
    assert max(clean.values()) == 0 and body_verdict(clean, 0.1) is None
    cut = np.zeros((64, 64), bool)
    cut[44:, 36:] = True  # the new scene drawn over the subject's left forearm
    measured = body_changed(cut, parts)
    assert measured["body_changed:left forearm and wrist"] > 0.4 and measured["body_changed:right upper arm"] == 0
    assert "left forearm and wrist changed" in body_verdict(measured, 0.1)
    with pytest.raises(ValueError, match="changed pixels"):
        body_changed(np.zeros((8, 8), bool), parts)


def test_grey_hair_against_a_lit_window_is_not_trimmed():
    shape = (64, 64)
    image = np.full((*shape, 3), (200, 200, 205), np.uint8)  # a lit window
    keep = np.zeros(shape, bool)
    keep[10:64, 20:44] = True
    image[keep] = JACKET
    tips = np.zeros(shape, bool)
    tips[10:14, 20:44] = True
    image[tips] = (190, 190, 195)  # grey hair's tips, the window's colour
    hairless = bm.BodyParts(nothing(), nothing())
    assert not bm.trimmed(image, keep, hairless, band=2)[tips].all()  # outside a hair box they would go
    haired = bm.BodyParts(nothing(), nothing(), hair=(18.0, 8.0, 46.0, 22.0))
    assert bm.trimmed(image, keep, haired, band=2)[tips].all()


def window_and_strands(strands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A jacket before a lit window (columns 24 to 44; its hair, columns 20 to 44, down to row 22), with ``strands``
    (H, W bool) the window's grey; (image, kept)."""
    image = np.full((64, 64, 3), (200, 200, 205), np.uint8)
    keep = np.zeros((64, 64), bool)
    keep[4:64, 24:44] = True
    keep[4:22, 20:44] = True
    image[keep] = JACKET
    image[strands] = (190, 190, 195)
    return image, keep | strands


def test_a_sideburn_just_below_the_drawn_hair_box_is_not_trimmed_and_beside_the_box_is():
    """A sideburn's strands grown just below the drawn hair box (as far as ``textured_hair`` reaches past it) were
    peeled as the window's colour: a bite of the new scene in 9-x's temple. Past the box's sides the trim still
    peels (white hair's fringe before a pale painting, left there, came out notched)."""
    haired = bm.BodyParts(nothing(), nothing(), hair=(20.0, 0.0, 64.0, 22.0))
    sideburn = np.zeros((64, 64), bool)
    sideburn[22:25, 20:24] = True  # below the drawn box (to row 22), within its 5% margin (2 px of 44)
    image, keep = window_and_strands(sideburn)
    assert not bm.trimmed(image, keep, bm.BodyParts(nothing(), nothing()), band=2)[sideburn].all()
    assert bm.trimmed(image, keep, haired, band=2)[sideburn].all()
    beside = np.zeros((64, 64), bool)
    beside[10:14, 16:20] = True  # left of the drawn box, within its margin too
    image, keep = window_and_strands(beside)
    assert not bm.trimmed(image, keep, haired, band=2)[beside].any()


def ear_before(backdrop: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, bm.BodyParts]:
    """``head_scene``'s face and ears before ``backdrop``, a strip of it kept along the left ear's outer edge, in the
    ear's disc."""
    image, keep, ears, parts = head_scene()
    image[~(parts.face | ears)] = backdrop
    strip = disc((64, 64), (15, 28), 7) & ~disc((64, 64), (15, 28), 5) & (np.mgrid[0:64, 0:64][1] <= 13)
    strip &= bm.ear_zone(parts, (64, 64))
    image[strip] = backdrop
    return image, keep | ears | strip, strip, parts


def test_a_pale_wedge_of_window_in_an_ears_disc_is_trimmed_and_a_dark_groove_is_not():
    """The window between a lobe and the jaw, paler than the face's lit skin, was kept in the ear's disc, which the
    trim never touches: a pale wedge under 9-B1's lobe. Paler than the face and nearer the backdrop than the face's
    skin, it is trimmed there; a dark groove before a red curtain, the curtain's colour, and a lit rim before a white
    flag, the skin's, are still the ear's."""
    image, keep, strip, parts = ear_before((225, 225, 230))
    assert bm.trimmed(image, keep, parts, band=2)[strip].sum() <= strip.sum() / 4
    image, keep, strip, parts = ear_before((90, 20, 25))
    assert bm.trimmed(image, keep, parts, band=2)[strip].all()
    image, keep, strip, parts = ear_before((245, 245, 245))
    image[strip] = (245, 200, 175)  # a lit rim before a white flag: paler than the face, and its colour
    assert bm.trimmed(image, keep, parts, band=2)[strip].all()


def test_the_hair_beside_the_neck_below_each_ear_is_the_body():
    """White hair falling below the ears, where a flag's or a backdrop's box reaches over it, is the body's (the
    selfie segmenter does not force it to the old background's there): the zone lies below each seen ear, not above
    it, not over the middle of the face, and is empty where no two ears are seen."""
    shape = (64, 64)
    zone = bm.beside_head(((20.0, 24.0), (44.0, 24.0)), 24.0, shape)
    assert zone[34, 20] and zone[34, 44] and zone[28, 15]  # below each ear, a little outwards too
    assert not zone[12, 20] and not zone[12, 44]  # above the ears: the head's outline, the segmenter's
    assert not zone[30, 32]  # between them: the face and neck, which the face oval and limbs already hold
    assert not bm.beside_head(((20.0, 24.0),), 0.0, shape).any()


def test_white_hair_below_an_ear_beside_a_pale_flag_is_not_trimmed_without_a_hair_box():
    """Grace Hopper's white hair below her ear, beside a flag's white stripe, with no hair box annotated: the trim
    took it as a sliver of the flag. Below the seen ears, where the person segmenter sees a person, it stays; where
    it sees none (a strip of the backdrop), the trim still takes it."""
    shape = (64, 64)
    image = np.full((*shape, 3), (235, 235, 230), np.uint8)  # the flag's white stripe
    keep = np.zeros(shape, bool)
    keep[8:64, 20:44] = True
    image[keep] = JACKET
    image[8:30, 22:42] = SKIN
    wisp = np.zeros(shape, bool)
    wisp[28:38, 16:20] = True  # white hair falling below the left ear, outside the head's outline
    image[wisp] = (225, 225, 220)
    keep |= wisp
    ears, span = ((20.0, 24.0), (44.0, 24.0)), 24.0
    person = keep.astype(np.float32)
    earless = bm.BodyParts(nothing(), nothing(), person=person)
    assert not bm.trimmed(image, keep, earless, band=2)[wisp].all()  # with no ear seen, it would go
    eared = bm.BodyParts(nothing(), nothing(), ears, span, person=person)
    assert bm.trimmed(image, keep, eared, band=2)[wisp].all()
    unseen = bm.BodyParts(nothing(), nothing(), ears, span, person=person * ~wisp)
    assert not bm.trimmed(image, keep, unseen, band=2)[wisp].all()  # the person model sees none there: trimmed
    # short hair, its box ending above the ears, hangs beside no neck: a strip of lit window there is trimmed
    short = bm.BodyParts(nothing(), nothing(), ears, span, hair=(18.0, 2.0, 46.0, 14.0), person=person)
    assert not bm.trimmed(image, keep, short, band=2)[wisp].all()
    assert bm.hangs_below_ears(None, ears) and bm.hangs_below_ears((18.0, 2.0, 46.0, 30.0), ears)
    assert not bm.hangs_below_ears((18.0, 2.0, 46.0, 14.0), ears)


def test_a_fragment_the_trimming_cuts_off_the_subject_goes_with_the_old_background():
    """A dark fragment beside a sleeve, joined to it by a bridge of the pale backdrop's colour: the trim peels the
    bridge, and the fragment left floating (a dark dash on the new scene) goes too; the subject stays whole."""
    from perceptforge.logic.edit_region import cleaned_outline

    shape = (64, 64)
    image = np.full((*shape, 3), (235, 235, 230), np.uint8)
    subject = np.zeros(shape, bool)
    subject[8:64, 20:44] = True
    image[subject] = JACKET
    image[8:30, 22:42] = SKIN
    fragment = np.zeros(shape, bool)
    fragment[40:47, 6:13] = True
    image[fragment] = JACKET
    bridge = np.zeros(shape, bool)
    bridge[42:44, 13:20] = True  # the backdrop's colour, kept by the cut
    keep = subject | fragment | bridge
    parts = bm.BodyParts(nothing(shape), nothing(shape), person=keep.astype(np.float32))
    kept = cleaned_outline(image, keep, parts, [], [(22.0, 8.0, 42.0, 30.0)])
    assert not (kept & (fragment | bridge)).any() and kept[subject].mean() > 0.97


def test_a_swap_that_cuts_the_hair_below_an_ear_is_measured_per_ear():
    """The hair-below-the-ears gate's measure: the share of what the person segmenter sees below an ear that the
    edit swaps, the worse ear's; nothing seen (no ears, no person map) measures 0."""
    shape = (64, 64)
    ears, span = ((20.0, 24.0), (44.0, 24.0)), 24.0
    person = np.zeros(shape, np.float32)
    person[8:64, 14:50] = 1.0
    parts = bm.BodyParts(nothing(), nothing(), ears, span, person=person)
    changed = ~(person > 0)  # a clean swap: only the backdrop
    assert bm.side_hair_cut(changed, parts) == 0.0
    cut = changed.copy()
    cut[24:40, 14:20] = True  # a strip of the hair below the left ear swapped
    left = bm.beside_head((ears[0],), span, shape) & (person >= bm.SIDE_PERSON)
    assert bm.side_hair_cut(cut, parts) == pytest.approx((left & cut).sum() / left.sum())
    assert bm.side_hair_cut(cut, parts) > Gates().max_side_hair_cut
    assert bm.side_hair_cut(cut, bm.BodyParts(nothing(), nothing(), person=person)) == 0.0


# --- the body grown to its own edge ----------------------------------------------------------------------------------


def sleeve_scene(shape=(400, 400)):
    """A dark sleeve below the ears on red and white stripes (a flag); the segmenter's cut lies 4 px inside the
    sleeve's edge, as a coarse map and Eq. 1's shrink leave it."""
    image = np.zeros((*shape, 3), np.uint8)
    image[:, :] = (200, 30, 40)
    image[::8, :] = (235, 235, 235)
    image[1::8, :] = (235, 235, 235)
    image[2::8, :] = (235, 235, 235)
    image[3::8, :] = (235, 235, 235)
    sleeve = np.zeros(shape, bool)
    sleeve[20:, 200:] = True
    image[sleeve] = (25, 35, 60)
    keep = np.zeros(shape, bool)
    keep[20:, 204:] = True  # reach: 1.2% of 400 px, 5 px
    person = np.where(sleeve, 0.9, 0.0)
    person[20:, 196:200] = 0.5  # the coarse map's soft edge
    parts = bm.BodyParts(nothing(shape), nothing(shape), ((250.0, 10.0), (350.0, 10.0)), 100.0, person=person)
    return image, sleeve, keep, parts


def test_a_sleeve_cut_inside_its_edge_is_grown_to_it_and_no_further():
    image, sleeve, keep, parts = sleeve_scene()
    grown = bm.grown_body(image, keep, parts)
    assert (grown[20:, 200:]).all()  # the whole sleeve, to its edge
    assert not (grown & ~sleeve).any()  # and none of the flag beside it


def test_a_suits_lit_edge_the_person_model_is_sure_of_is_grown():
    """A suit's lit edge, paler than the navy within, was not clearly the suit's colour and stayed 4 px outside the
    cut, where the matte held it at alpha 0.8: 9-S1's shoulders soft and see-through over a wall. Where the person
    segmenter is sure of the person, nearer the subject's colours than the backdrop's is enough; where it is not, the
    edge stays out."""
    image, sleeve, keep, parts = sleeve_scene()
    image[(image == 235).all(axis=-1)] = (110, 125, 160)  # the flag's pale stripes a slate blue
    image[20:, 200:204] = (55, 70, 105)  # the lit edge, between the cut (column 204) and the sleeve's edge
    person = parts.person.copy()
    person[20:, 200:204] = 0.5
    unsure = bm.grown_body(image, keep, bm.BodyParts(parts.sure, parts.body, parts.ears, 100.0, person=person))
    assert not unsure[20:, 200:204].any()
    person[20:, 200:] = 0.95
    grown = bm.grown_body(image, keep, bm.BodyParts(parts.sure, parts.body, parts.ears, 100.0, person=person))
    assert grown[20:, 200:204].all() and not (grown & ~sleeve).any()


def test_flecks_of_the_sleeves_colour_touching_only_at_corners_are_not_grown():
    """A flag's dark canton beside a navy sleeve: the pixels found as sleeve scatter, a chain of flecks touching
    each other and the sleeve only at their corners, and the outline's closing (``edit_region.subject_only``) made
    them a solid bump of the old flag. The body grows only through pixels sharing an edge."""
    image, sleeve, keep, parts = sleeve_scene()
    chain = [(104, 199), (103, 198), (102, 197), (101, 196)]
    for y, x in chain:
        image[y, x] = image[50, 250]
    grown = bm.grown_body(image, sleeve, parts)
    assert grown[104, 199]  # sharing an edge with the sleeve: taken as its own
    assert not any(grown[y, x] for y, x in chain[1:])


def test_colour_centres_move_little_with_one_pixel_more():
    """One k-means run from random k-means++ picks moved its centres by 35 ΔE for one sample more: one pixel more of
    an ear kept moved the centres a sleeve beside it was told by, and flecks of a flag came and went. The most compact
    of several runs moves only as the colours do."""
    rng = np.random.default_rng(6)
    clusters = [((20, 130, 118), 4, 300), ((60, 142, 148), 4, 80), ((90, 126, 122), 3, 30), ((10, 129, 121), 3, 200)]
    samples = np.concatenate([rng.normal(mean, sd, (n, 3)) for mean, sd, n in clusters]).astype(np.float32)
    ordered = lambda c: c[np.lexsort(c.T[::-1])]
    before = ordered(bm._centres(samples, 4))
    after = ordered(bm._centres(np.concatenate([samples, samples[:1]]), 4))
    assert np.abs(before - after).max() < 1.0


def test_a_dark_canton_beside_a_dark_sleeve_is_told_by_the_colours_beside_it():
    """A busy backdrop of eight colours along the outline, and beside the sleeve a flag's dark canton, a little
    darker than the sleeve, where the coarse person map reaches: four centres learnt over the whole outline missed
    the canton's colour, and the sleeve grew onto it (lumps of the old flag on the new scene). Learnt beside each
    pixel too, the canton is the backdrop's."""
    shape = (400, 400)
    image = np.zeros((*shape, 3), np.uint8)
    bands = [(150, 40, 40), (235, 235, 235), (190, 150, 60), (120, 170, 210)]
    bands += [(90, 60, 40), (200, 30, 40), (60, 120, 60), (230, 200, 150)]
    for i, colour in enumerate(bands):
        image[i * 50 : (i + 1) * 50] = colour
    image[320:345, 160:200] = (14, 19, 40)  # the canton
    sleeve = np.zeros(shape, bool)
    sleeve[20:, 200:] = True
    image[sleeve] = (25, 35, 60)
    person = np.where(sleeve, 0.9, 0.0)
    person[320:345, 190:200] = 0.5
    parts = bm.BodyParts(nothing(shape), nothing(shape), ((250.0, 10.0), (350.0, 10.0)), 100.0, person=person)
    assert (bm.grown_body(image, sleeve, parts) == sleeve).all()


def test_the_body_is_not_grown_above_the_ears_nor_where_no_person_is_seen():
    image, sleeve, keep, parts = sleeve_scene()
    high = bm.BodyParts(parts.sure, parts.body, ((250.0, 500.0), (350.0, 500.0)), 100.0, person=parts.person)
    assert (bm.grown_body(image, keep, high) == keep).all()  # below no seen ear: the head's outline is left
    unseen = bm.BodyParts(parts.sure, parts.body, parts.ears, 100.0, person=np.zeros(keep.shape))
    assert (bm.grown_body(image, keep, unseen) == keep).all()


def test_a_turned_faces_ears_are_kept_at_the_cheeks_edge():
    """The pose's ear points 6 px inside the cheeks (a fifth of their spacing: a face turned a little) are moved out
    to the face oval's edge, and the ear cut at its rim is kept whole there; points within a tenth of the spacing
    of the edge (a face seen from the front) stay where they are."""
    image, keep, ears, _ = head_scene()
    face = disc((64, 64), (32, 30), 14)
    turned = bm.BodyParts(nothing(), nothing(), ((24.0, 30.0), (40.0, 30.0)), 16.0, face=face)
    assert bm.out_to_oval(turned.ears, face) == [(18.0, 30.0), (46.0, 30.0)]
    grown = bm.whole_ears(image, keep, turned)
    assert not (ears & ~grown).any() and not (grown & ~keep & ~ears).any()
    assert bm.out_to_oval(((20.0, 30.0), (44.0, 30.0)), face) == [(20.0, 30.0), (44.0, 30.0)]


def test_a_subject_box_short_of_the_person_at_the_frame_is_found():
    """Her jacket runs on to the left frame 30 px past her box: a background edit would cut her there (photo 3 of
    the new photos, boxes only). A person who ends before the frame, a second person beyond a gap, or a podium the
    edit keeps anyway, is not such a side."""
    person = np.zeros((100, 80))
    person[20:, 10:70] = 0.95  # the person inside the box
    person[80:, 0:10] = 0.95  # her jacket, on to the left frame, on 20 rows
    box = (10.0, 20.0, 70.0, 100.0)
    assert bm.box_short_of_person(person, box) == ("left", 10, 20)
    ends = person.copy()
    ends[80:, 0:3] = 0.0  # the sleeve stops 3 px before the frame
    assert bm.box_short_of_person(ends, box) is None
    gap = person.copy()
    gap[80:, 5] = 0.0  # another person, beyond a gap
    assert bm.box_short_of_person(gap, box) is None
    kept = np.zeros((100, 80), bool)
    kept[80:, :] = True  # a podium across the bottom, kept whole with the subject
    assert bm.box_short_of_person(person, box, kept) is None
    assert bm.box_short_of_person(person, (0.0, 20.0, 70.0, 100.0)) is None  # the box reaches the frame


# --- side hair told from a blurred backdrop by its strands ----------------------------------------------------------


def strands_scene(textured_backdrop: bool = False, backdrop=(200, 185, 185)):
    """White strands of hair (fine noise about a pinkish grey) to the left of a kept head, before an out-of-focus
    backdrop of the same mean colour (or ``backdrop``), which colour cannot tell apart; the segmenter kept the head
    but cut the side hair, and the person segmenter sees little person there. The ears are below, at row 150."""
    shape = (160, 160)
    rng = np.random.default_rng(0)
    image = np.full((*shape, 3), backdrop, np.float64)
    hair = disc(shape, (90, 80), 60) & (np.mgrid[0:160, 0:160][0] < 140)
    image[hair] = (200, 185, 185)
    noisy = hair | np.ones(shape, bool) if textured_backdrop else hair
    image[noisy] += rng.normal(0, 30, (int(noisy.sum()), 1))
    image = np.clip(image, 0, 255).astype(np.uint8)
    keep = disc(shape, (100, 85), 40)  # the side hair left of x 60 was cut
    person = np.where(keep, 0.99, np.where(hair, 0.2, 0.0))
    parts = bm.BodyParts(
        nothing(shape),
        nothing(shape),
        ((60.0, 150.0), (140.0, 150.0)),
        80.0,
        hair=(30.0, 20.0, 150.0, 140.0),
        person=person,
    )
    return image, keep, hair, parts


def test_side_hair_above_the_ears_is_grown_by_its_texture_and_the_backdrop_is_not():
    image, keep, hair, parts = strands_scene()
    grown = bm.textured_hair(image, keep, parts)
    # the side hair within reach of the outline (0.15 of the hair box's side), less its outer fringe (where the
    # texture's window reaches the backdrop)
    inner = hair & ~keep & disc((160, 160), (90, 80), 60 - bm.HAIR_FRINGE - 1) & disc((160, 160), (100, 85), 58)
    assert inner.sum() > 1000 and grown[inner].mean() > 0.95
    assert not (grown & ~keep & ~hair).any()  # none of the backdrop
    assert not (grown & ~disc((160, 160), (100, 85), 40 + 18.5)).any()  # nor past reach of the outline
    # nothing grows where the backdrop is as textured as the hair, nor without a person map
    image_t, keep_t, _, parts_t = strands_scene(textured_backdrop=True)
    assert (bm.textured_hair(image_t, keep_t, parts_t) == keep_t).all()
    no_map = bm.BodyParts(parts.sure, parts.body, parts.ears, parts.ear_span, hair=parts.hair)
    assert (bm.textured_hair(image, keep, no_map) == keep).all()


def test_the_strands_are_grown_to_their_fringe_and_the_gate_forgives_it_where_it_shows():
    """The strands' outer fringe is half the backdrop's colour. The cut grows to within the texture window's reach
    of the strands' edge before any backdrop (the matte unmixes the fringe; left 12 px short, a dark crown's matte
    ended where its strands began, a grey haze). The side-hair gate forgives ``HAIR_FRINGE`` of it where it shows
    (white hair over a dark painting: pairs labelled good lost that much), and only the window's reach before a
    backdrop as light as the hair (dark temple hair 4-10 px wide, taken whole, is seen gone)."""
    edge = disc((160, 160), (90, 80), 60)
    near_edge = edge & ~disc((160, 160), (90, 80), 60 - bm.HAIR_FRINGE + 2) & disc((160, 160), (100, 85), 58)
    for backdrop in ((200, 185, 185), (70, 60, 60)):
        image, keep, hair, parts = strands_scene(backdrop=backdrop)
        assert bm.textured_hair(image, keep, parts)[near_edge & hair & ~keep].mean() > 0.5
    image, keep, hair, parts = strands_scene()
    assert bm.textured_hair(image, keep, parts, forgiving=True)[near_edge & hair & ~keep].mean() > 0.5
    image_d, keep_d, hair_d, parts_d = strands_scene(backdrop=(70, 60, 60))
    forgiven = bm.textured_hair(image_d, keep_d, parts_d, forgiving=True)
    assert not (forgiven & near_edge & ~keep_d).any()
    assert (forgiven & hair_d & ~keep_d).sum() > 1000  # the hair inside its fringe still counts
    # a cut grown to the strands' fringe leaves the gate nothing it misses
    assert not bm.lost_side_hair(image_d, bm.textured_hair(image_d, keep_d, parts_d, reach=None), parts_d).any()


def test_the_hair_zone_is_the_hair_box_above_the_ears_off_the_face():
    image, keep, hair, parts = strands_scene()
    zone = bm.hair_zone(parts, keep.shape)
    assert zone[60, 40] and not zone[150, 40]  # in the box above the ears; below them
    assert not zone[60, 5]  # outside the box
    no_ears = bm.BodyParts(parts.sure, parts.body, (), 0.0, hair=parts.hair, person=parts.person)
    assert not bm.hair_zone(no_ears, keep.shape).any()


def test_side_hair_swapped_with_the_backdrop_fails_the_hair_gate_and_kept_hair_passes():
    from perceptforge.logic.referee_gates import failing_region

    image, keep, hair, parts = strands_scene()
    limit = Gates().max_hair_texture_cut
    lost = bm.lost_side_hair(image, keep, parts)
    assert bm.hair_texture_cut(lost, parts) > 5 * limit  # the side hair the drawn cut took
    assert not (lost & ~hair).any()
    region = failing_region("hair_texture_cut", ~keep, image, image, lost_hair=lost)
    assert (region == lost).all()  # report.html outlines the hair taken
    kept = bm.textured_hair(image, keep, parts)  # the mask stage's growth: what is left lies past its reach
    left = bm.lost_side_hair(image, kept, parts)
    assert bm.hair_texture_cut(left, parts) < bm.hair_texture_cut(lost, parts) / 3
    assert not (left & disc((160, 160), (100, 85), 40 + 17)).any()
    whole = keep | hair  # a cut along the hair's edge
    assert bm.hair_texture_cut(bm.lost_side_hair(image, whole, parts), parts) == 0.0
