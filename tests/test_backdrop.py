"""A plain backdrop beside a box-annotated subject (logic/backdrop), and two background swaps of one photo told
apart by their pixels (logic/gates.distinct_edits), each on a tiny drawn image."""

import numpy as np
import pytest

from perceptforge.logic import backdrop as bd
from perceptforge.logic.body_mask import lab_of
from perceptforge.logic.gates import distinct_edits, near_duplicates
from perceptforge.logic.matting import matte

BACKDROP = (120, 150, 170)  # a grey-blue studio backdrop
HAIR = (60, 35, 20)
SIZE = 200


def disc(centre, radius, shape=(SIZE, SIZE)):
    yy, xx = np.mgrid[0 : shape[0], 0 : shape[1]]
    return np.hypot(xx - centre[0], yy - centre[1]) <= radius


def painted(parts, backdrop=BACKDROP, seed=0):
    """A 200×200 photo: ``backdrop`` with a little sensor noise, each (mask, colour) of ``parts`` painted on it."""
    rng = np.random.default_rng(seed)
    image = np.zeros((SIZE, SIZE, 3), np.float64) + backdrop
    for mask, colour in parts:
        image[mask] = colour
    return np.clip(image + rng.normal(0, 1.5, image.shape), 0, 255).astype(np.uint8)


def curl_scene():
    """A dark head (a disc) and a lock of hair 5 px thick curling out 15 px past it, on a plain backdrop; the
    segmenter kept the head only."""
    head = disc((90, 100), 50)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    ring = np.abs(np.hypot(xx - 145, yy - 100) - 8) <= 2
    lock = ring & (xx >= 139)  # a C open towards the head, its ends on the head's rim
    return painted([(head, HAIR), (lock, HAIR)]), head, lock & ~head


def test_a_lock_past_the_cut_on_a_plain_backdrop_is_kept():
    image, head, lock = curl_scene()
    kept = bd.see_through(image, head)
    assert (kept & lock).sum() >= 0.9 * lock.sum()
    assert not (kept & ~head & ~lock).any()  # not a pixel of the backdrop


def test_a_wisp_one_pixel_wide_is_left_to_the_matte():
    head = disc((90, 100), 50)
    wisp = np.zeros((SIZE, SIZE), bool)
    wisp[100, 140:170] = True  # a single hair straight out of the head
    image = painted([(head, HAIR), (wisp, HAIR)])
    assert (bd.see_through(image, head) == head).all()


def test_the_backdrop_seen_through_a_lens_goes_and_protect_keeps_it():
    head = disc((90, 100), 50)
    lens = disc((130, 100), 6)  # 4 px inside the cut, well within the reach
    image = painted([(head, HAIR), (lens & head, BACKDROP)])
    kept = bd.see_through(image, head)
    assert not (kept & lens).any()
    assert (kept == (head & ~lens)).all()
    assert (bd.see_through(image, head, protect=lens) == head).all()


def test_a_fleck_of_the_backdrop_between_locks_goes_and_noise_stays():
    """A gap between two locks near the cut, 2×3 px, showing the backdrop (4 px of it or more is the backdrop,
    whatever its shape: the 3×3 opening that keeps a lens's corner from noise left it, a grey-blue speck in the hair
    over the new scene); a single pixel of it stays."""
    head = disc((90, 100), 50)
    gap = np.zeros((SIZE, SIZE), bool)
    gap[99:101, 133:136] = True  # 4-5 px inside the cut
    dot = np.zeros((SIZE, SIZE), bool)
    dot[80, 134] = True
    image = painted([(head, HAIR), (gap | dot, BACKDROP)])
    kept = bd.see_through(image, head)
    assert not (kept & gap).any()
    assert kept[dot].all()


def test_a_speck_of_backdrop_colour_deep_in_the_subject_stays():
    head = disc((90, 100), 50)
    deep = disc((90, 100), 6)  # the middle of the head, beyond the pocket's reach
    image = painted([(head, HAIR), (deep, BACKDROP)])
    assert (bd.see_through(image, head) == head).all()


@pytest.mark.parametrize("busy_share", [1.0, 0.3])
def test_a_backdrop_that_is_not_plain_changes_nothing(busy_share):
    """A window's or a painting's detail (bands of colour) beside the head: what differs from its blur past the
    cut is no curl, and even its smooth reaches are not taken as a studio's paper when the rest is busy."""
    image, head, _ = curl_scene()
    rng = np.random.default_rng(1)
    busy = np.zeros((SIZE, SIZE), bool)
    busy[:, : int(SIZE * busy_share)] = True
    stripes = (np.arange(SIZE)[None, :] // 3 % 2).astype(bool) & busy & ~head
    image[stripes] = rng.integers(0, 255, 3)
    lab = lab_of(image)
    assert not bd.learnt(lab, head).plain.any()
    assert (bd.see_through(image, head) == head).all()


def test_the_matte_frees_the_lock_of_its_backdrop():
    """The head's kept mask with the lock added, matted as any mask is: the backdrop the lock encloses stays the
    backdrop (alpha 0), and the lock's core is the subject (alpha 1)."""
    image, head, lock = curl_scene()
    keep = bd.see_through(image, head)
    alpha, _ = matte(image, keep, 2)
    inside_c = disc((145, 100), 5) & ~head & ~lock  # the backdrop the C encloses
    assert alpha[inside_c].max() <= 0.05
    core = lock & ~disc((90, 100), 53)
    assert np.median(alpha[core]) >= 0.9


def swapped(natural, keep, donor_colour):
    out = natural.copy()
    out[~keep] = donor_colour
    return out


def test_two_scenes_behind_one_subject_are_distinct_edits():
    image, head, _ = curl_scene()
    launch = swapped(image, head, (30, 40, 90))
    space = swapped(image, head, (5, 5, 10))
    assert distinct_edits(image, launch, space)
    assert not distinct_edits(image, launch, launch.copy())
    assert not distinct_edits(image, image.copy(), image.copy())  # nothing changed: nothing tells them apart


def test_near_duplicates_ask_alike_for_the_last_word():
    hashes = [("a", 0b1111), ("b", 0b1110), ("c", 0b1111)]
    assert near_duplicates(hashes, 4) == {"b": "a", "c": "a"}
    assert near_duplicates(hashes, 4, alike=lambda unit, other: unit == "c") == {"c": "a"}
    assert near_duplicates(hashes, 4, alike=lambda unit, other: False) == {}


@pytest.mark.parametrize("kept", ["none", "all"])
def test_a_mask_with_nothing_or_everything_kept_comes_back_as_it_is(kept):
    image = painted([])
    keep = np.full((SIZE, SIZE), kept == "all")
    assert (bd.see_through(image, keep) == keep).all()
    tiny = painted([])[:12, :9]
    assert (bd.see_through(tiny, keep[:12, :9]) == keep[:12, :9]).all()


def test_the_backdrop_between_locks_goes_and_a_dark_heads_pale_highlights_stay():
    """Red curls whose gaps 3-6 px inside the cut hold the plain backdrop mixed with the locks (about 11 ΔE off
    it): they stayed pale grey-blue specks over the new scene. Where the outline is hair, a kept pixel near the
    backdrop and nearer it than any of the hair's own colours goes; a dark head's pale highlight strands, one of its
    colours, stay, and so does all of it where no hair is said to be."""
    head = disc((90, 100), 50)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    rim = head & ~disc((90, 100), 46)  # within the reach of the cut
    gap = rim & (np.abs(yy - 100) <= 1) & (xx < 60)  # a gap between locks on the left
    highlight = rim & (np.abs(yy - 80) <= 1) & (xx > 120)  # pale strands on the right
    mixed = tuple(0.8 * np.array(BACKDROP) + 0.2 * np.array((150, 60, 30)))
    image = painted([(head, (150, 60, 30)), (gap, mixed), (highlight, (190, 160, 130))])
    hair = np.ones((SIZE, SIZE), bool)
    kept = bd.see_through(image, head, hair=hair)
    assert not (kept & gap).any() and kept[highlight].all()
    assert kept[head & ~gap].all()
    assert bd.see_through(image, head)[gap].all()  # no hair zone: the gap is no pocket of the backdrop's colour
