import numpy as np
import pytest

from perceptforge.logic.masks import mask_to_xyxy, xyxy_to_mask


def test_mask_boxes():
    m = xyxy_to_mask((1, 1, 3, 4), 4, 4)
    assert m.sum() == 6
    assert mask_to_xyxy(m) == (1.0, 1.0, 3.0, 4.0)
    with pytest.raises(ValueError, match="empty"):
        mask_to_xyxy(np.zeros((4, 4), bool))
