"""Binary masks and their run-length encoding.

RLE follows COCO's uncompressed form: ``counts`` are alternating run lengths of 0s and 1s over the mask
flattened in column-major (Fortran) order, starting with a run of 0s (possibly of length 0), and
``size`` is ``[height, width]``. So a mask written here opens in pycocotools and vice versa.
"""

from __future__ import annotations

import numpy as np


def rle_encode(mask: np.ndarray) -> dict:
    """``(H, W)`` bool/0-1 array → ``{"size": [H, W], "counts": [...]}``."""
    if mask.ndim != 2:
        raise ValueError(f"mask must be 2-D (H, W), got shape {mask.shape}")
    flat = np.asarray(mask, dtype=bool).ravel(order="F")
    # Positions where the value changes, plus both ends, give the run lengths.
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    bounds = np.concatenate(([0], change, [flat.size]))
    counts = np.diff(bounds).tolist()
    if flat.size and flat[0]:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": [int(c) for c in counts]}


def rle_decode(rle: dict) -> np.ndarray:
    """Inverse of :func:`rle_encode`; raises ``ValueError`` when counts do not cover the size."""
    try:
        height, width = (int(v) for v in rle["size"])
        counts = [int(c) for c in rle["counts"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"RLE needs integer 'size' [H, W] and a list 'counts': {exc}") from None
    if any(c < 0 for c in counts):
        raise ValueError("RLE counts must be non-negative")
    if sum(counts) != height * width:
        raise ValueError(f"RLE counts sum to {sum(counts)}, expected {height}x{width}={height * width}")
    values = np.zeros(len(counts), dtype=bool)
    values[1::2] = True
    flat = np.repeat(values, counts)
    return flat.reshape((height, width), order="F")


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
    out[max(int(np.floor(y0)), 0) : min(int(np.ceil(y1)), height), max(int(np.floor(x0)), 0) : min(int(np.ceil(x1)), width)] = True
    return out
