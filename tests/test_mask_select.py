import numpy as np
import pytest

from perceptforge.logic.mask_select import (
    JitterParams,
    jitter_box,
    mask_box_overlap,
    random_resize,
    resize_mask,
    select_mask,
)


def masks_4x4():
    a = np.zeros((4, 4), bool)
    a[0:2, 0:2] = True  # top-left 2x2
    b = np.zeros((4, 4), bool)
    b[1:4, 1:4] = True  # bottom-right 3x3
    c = np.zeros((4, 4), bool)
    c[0, 3] = True
    return [a, b, c]


def test_overlap_counts_pixels_in_box():
    a, b, c = masks_4x4()
    assert mask_box_overlap(a, (0, 0, 2, 2)) == 4
    assert mask_box_overlap(b, (0, 0, 2, 2)) == 1
    assert mask_box_overlap(b, (0.5, 0.5, 2.2, 2.2)) == 4  # edges rounded outwards: rows/cols 0..2
    assert mask_box_overlap(c, (0, 0, 2, 2)) == 0


def test_select_mask_argmax_and_ties():
    masks = masks_4x4()
    assert select_mask(masks, (0, 0, 2, 2)) == 0
    assert select_mask(masks, (1, 1, 4, 4)) == 1
    # Box (1,0,3,2) overlaps a in 2 pixels and b in 2 pixels: the first wins.
    assert mask_box_overlap(masks[0], (1, 0, 3, 2)) == mask_box_overlap(masks[1], (1, 0, 3, 2)) == 2
    assert select_mask(masks, (1, 0, 3, 2)) == 0
    with pytest.raises(ValueError, match="no candidate mask overlaps"):
        select_mask([masks[2]], (0, 0, 1, 1))
    with pytest.raises(ValueError, match="differ in shape"):
        select_mask([masks[0], np.zeros((8, 8), bool)], (0, 0, 1, 1))
    with pytest.raises(ValueError, match="no candidate masks"):
        select_mask([], (0, 0, 1, 1))


def test_jitter_stays_inside_and_is_seeded():
    for seed in range(200):
        rng = np.random.default_rng(seed)
        x0, y0, x1, y1 = jitter_box((0, 0, 8, 8), 8, 8, rng, JitterParams(max_shift=0.5, scale_range=(0.5, 1.5)))
        assert 0 <= x0 < x1 <= 8 and 0 <= y0 < y1 <= 8
    a = jitter_box((2, 2, 6, 6), 8, 8, np.random.default_rng(3))
    assert a == jitter_box((2, 2, 6, 6), 8, 8, np.random.default_rng(3))
    assert a != jitter_box((2, 2, 6, 6), 8, 8, np.random.default_rng(4))
    # With no shift and unit scale the box is unchanged.
    assert jitter_box((2, 2, 6, 6), 8, 8, np.random.default_rng(0), JitterParams(0.0, (1.0, 1.0))) == (
        2.0,
        2.0,
        6.0,
        6.0,
    )


def test_resize_mask():
    m = np.zeros((8, 8), bool)
    m[3:5, 3:5] = True
    assert resize_mask(m, 1).sum() == 16 and resize_mask(m, 0).sum() == 4
    assert resize_mask(m, -1).sum() == 4  # eroding away everything keeps the original
    big = np.zeros((8, 8), bool)
    big[2:6, 2:6] = True
    assert resize_mask(big, -1).sum() == 4
    assert (random_resize(big, np.random.default_rng(1)) == random_resize(big, np.random.default_rng(1))).all()
