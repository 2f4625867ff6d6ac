import numpy as np
import pytest
from perceptforge.tasks.masks import mask_to_xyxy, rle_decode, rle_encode, xyxy_to_mask


def test_rle_column_major_known_counts():
    mask = np.array([[0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 0]], dtype=bool)
    # Column-major walk: col0 = 000, col1 = 110, col2 = 110, col3 = 000.
    assert rle_encode(mask) == {"size": [3, 4], "counts": [3, 2, 1, 2, 4]}
    assert (rle_decode(rle_encode(mask)) == mask).all()


def test_rle_starting_with_ones_and_full():
    full = np.ones((2, 2), dtype=bool)
    assert rle_encode(full) == {"size": [2, 2], "counts": [0, 4]}
    assert rle_encode(np.zeros((2, 3), bool)) == {"size": [2, 3], "counts": [6]}
    rng = np.random.default_rng(0)
    m = rng.random((8, 8)) > 0.5
    assert (rle_decode(rle_encode(m)) == m).all()


def test_rle_bad():
    with pytest.raises(ValueError, match="sum to 5"):
        rle_decode({"size": [2, 3], "counts": [2, 3]})
    with pytest.raises(ValueError, match="2-D"):
        rle_encode(np.zeros((2, 2, 3)))


def test_mask_boxes():
    m = xyxy_to_mask((1, 1, 3, 4), 4, 4)
    assert m.sum() == 6
    assert mask_to_xyxy(m) == (1.0, 1.0, 3.0, 4.0)
    with pytest.raises(ValueError, match="empty"):
        mask_to_xyxy(np.zeros((4, 4), bool))
