"""Binary masks, ``(H, W)`` bool arrays (True = in the mask), and their boxes (pixel xyxy)."""

from __future__ import annotations

import numpy as np


def mask_area(mask: np.ndarray) -> int:
    return int(np.count_nonzero(mask))


def mask_to_xyxy(mask: np.ndarray) -> tuple[float, float, float, float]:
    """Tight pixel box around the mask's pixels (x1/y1 exclusive); raises on an empty mask."""
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        raise ValueError("mask is empty: no box")
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


def xyxy_to_mask(box, height: int, width: int) -> np.ndarray:
    """Filled rectangle mask of the box, pixel edges rounded outwards, clipped to the image."""
    x0, y0, x1, y1 = box
    out = np.zeros((height, width), dtype=bool)
    out[
        max(int(np.floor(y0)), 0) : min(int(np.ceil(y1)), height),
        max(int(np.floor(x0)), 0) : min(int(np.ceil(x1)), width),
    ] = True
    return out
