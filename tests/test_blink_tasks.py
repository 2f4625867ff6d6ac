"""How BLINK-style tasks draw answers and distractors, on hand-made inputs: Jigsaw's answer is the true
centre, localization distractors fall in their IoU band, counting distractors are distinct and positive,
homography correspondences map back within 1 px, and the depth order follows the disparity."""

import numpy as np
import pytest
from PIL import Image

from perceptforge.logic.blink_tasks import (
    correspondence,
    counting_options,
    depth_pair,
    grid_cells,
    iou,
    jigsaw,
    localization_distractor,
    warp_points,
)


def photo(seed=0, size=(300, 240)):
    """A picture with structure (blocks and gradients) that ORB finds corners in."""
    rng = np.random.default_rng(seed)
    img = np.zeros((size[1], size[0], 3), np.uint8)
    img[:] = np.linspace(0, 120, size[0], dtype=np.uint8)[None, :, None]
    for _ in range(40):
        x, y = rng.integers(0, size[0] - 30), rng.integers(0, size[1] - 30)
        img[y : y + rng.integers(8, 30), x : x + rng.integers(8, 30)] = rng.integers(0, 255, 3)
    return Image.fromarray(img)


def test_jigsaw_answer_is_the_true_centre_cell():
    image = photo()
    for seed in range(6):
        item = jigsaw(image, np.random.default_rng(seed))
        centre = grid_cells(image.size)[4]
        assert np.array_equal(np.asarray(item.options[item.answer]), np.asarray(image.crop(centre)))
        assert not np.array_equal(np.asarray(item.options[1 - item.answer]), np.asarray(image.crop(centre)))
        assert item.cells[item.answer] == centre
        assert item.reference.size == (centre[2], centre[3])  # the upper-left 2×2 cells
        assert (np.asarray(item.reference.crop(centre)) == 255).all()  # with the grid's centre cut out
        assert np.array_equal(
            np.asarray(item.reference.crop(grid_cells(image.size)[0])),
            np.asarray(image.crop(grid_cells(image.size)[0])),
        )
        assert item.options[0].size == item.options[1].size  # size gives nothing away
    answers = {jigsaw(image, np.random.default_rng(s)).answer for s in range(20)}
    assert answers == {0, 1}


def test_localization_distractors_fall_in_the_iou_band_inside_the_image():
    box, size = (60.0, 50.0, 160.0, 170.0), (320, 240)
    for seed in range(20):
        cand = localization_distractor(box, size, np.random.default_rng(seed), band=(0.3, 0.6))
        assert 0.3 <= iou(box, cand) <= 0.6
        assert cand[0] >= 0 and cand[1] >= 0 and cand[2] <= size[0] and cand[3] <= size[1]
    with pytest.raises(ValueError, match="no distractor box"):
        localization_distractor(box, size, np.random.default_rng(0), band=(0.999, 1.0), tries=50)


def test_counting_distractors_are_distinct_positive_and_include_the_truth():
    for count in (1, 2, 5, 11):
        for seed in range(10):
            options, answer = counting_options(count, np.random.default_rng(seed))
            assert len(set(options)) == 4 and all(c >= 1 for c in options) and options[answer] == count
    # the truth's place is drawn too: even a count of 1 is not always the first option
    assert {counting_options(1, np.random.default_rng(seed))[1] for seed in range(20)} == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="at least one object"):
        counting_options(0, np.random.default_rng(0))


def test_homography_correspondence_maps_back_within_a_pixel():
    image = photo(1)
    for seed in range(5):
        item = correspondence(image, np.random.default_rng(seed))
        matrix = np.array(item.matrix)
        truth = np.array(item.options[item.answer])
        back = warp_points(np.linalg.inv(matrix), truth[None])[0]
        assert np.hypot(*(back - np.array(item.reference_point))) <= 1.0
        others = [np.array(o) for k, o in enumerate(item.options) if k != item.answer]
        assert all(np.hypot(*(o - truth)) > 0.08 * 300 for o in others)  # distractors are clearly elsewhere


def test_depth_order_follows_the_disparity():
    disparity = np.tile(np.linspace(1.0, 10.0, 200), (150, 1))  # nearer to the right
    disparity[:, :20] = 0  # invalid: never picked
    for seed in range(10):
        pair = depth_pair(disparity, np.random.default_rng(seed))
        (x0, y0), (x1, y1) = pair.points
        near, far = (x0, x1) if pair.closer == 0 else (x1, x0)
        assert near > far and disparity[y0, x0] > 0 and disparity[y1, x1] > 0
        assert max(disparity[y0, x0], disparity[y1, x1]) / min(disparity[y0, x0], disparity[y1, x1]) >= 1.3
    with pytest.raises(ValueError, match="disparity ratio"):
        depth_pair(np.ones((100, 100)), np.random.default_rng(0), tries=20)


def test_spatial_relations_are_stated_only_when_unambiguous():
    from perceptforge.logic.blink_tasks import separated

    assert separated((0, 0, 10, 10), (30, 0, 40, 10), 5) == "left of"
    assert separated((30, 0, 40, 10), (0, 0, 10, 10), 5) == "right of"
    assert separated((0, 0, 10, 10), (0, 30, 10, 40), 5) == "above"
    assert separated((0, 0, 10, 10), (12, 0, 20, 10), 5) is None  # too close to tell
    assert separated((0, 0, 10, 10), (30, 30, 40, 40), 5) is None  # diagonal: two relations at once
    assert separated((0, 0, 10, 10), (5, 5, 15, 15), 5) is None  # overlapping


def test_iq_puzzles_continue_their_sequence():
    from perceptforge.logic.blink_tasks import draw_iq_puzzle, iq_puzzle

    for seed in range(20):
        puzzle = iq_puzzle(np.random.default_rng(seed))
        a, b, c = puzzle.counts
        assert b - a == c - b > 0 and puzzle.options[puzzle.answer] == c + (c - b)
        assert len(set(puzzle.options)) == 4 and min(puzzle.options) >= 1
    # by index, a run's puzzles never repeat
    from perceptforge.logic.blink_tasks import IQ_SPACE

    drawn = {
        (p.counts, p.shape)
        for p in (iq_puzzle(np.random.default_rng(k), index=k, seed=3) for k in range(len(IQ_SPACE)))
    }
    assert len(drawn) == len(IQ_SPACE) == 36
    image, boxes = draw_iq_puzzle(puzzle)
    assert len(boxes) == 4 and all(0 <= b[0] and b[2] <= image.width and b[3] <= image.height for b in boxes)
