"""Mask selection for background substitution (MVP-Bench Eq. 1) and the seeded variations the paper uses.

- :func:`select_mask`: ``argmax_i Overlap(M_i, C_sub)``, the overlap area (pixels) between each candidate
  mask and the subject box; ties go to the lower index (the order the segmenter returned), so the choice
  is deterministic.
- :func:`jitter_box`: randomly translate and rescale ``C_sub``, kept inside the image.
- :func:`resize_mask`: grow (dilate) or shrink (erode) the chosen mask by a seeded number of pixels.

Defaults (:class:`JitterParams`): shift up to 10% of the box size in each direction, scale in [0.9, 1.1],
mask resize in [-4, +8] pixels. All randomness comes from the generator passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from perceptforge.data import geometry


def box_cells(box: Sequence[float], height: int, width: int) -> tuple[slice, slice]:
    """The rows and columns of an image that a pixel box covers (edges rounded outwards, clipped to the image)."""
    x0, y0, x1, y1 = box
    rows = slice(max(0, int(np.floor(y0))), min(height, int(np.ceil(y1))))
    return rows, slice(max(0, int(np.floor(x0))), min(width, int(np.ceil(x1))))


def mask_box_overlap(mask: np.ndarray, box: Sequence[float]) -> int:
    """Pixels of ``mask`` (H, W bool) inside the pixel box (edges rounded outwards, clipped)."""
    if mask.ndim != 2:
        raise ValueError(f"mask must be 2-D (H, W), got shape {mask.shape}")
    return int(np.count_nonzero(mask[box_cells(geometry.check_xyxy(box), *mask.shape)]))


def select_mask(masks: Sequence[np.ndarray], subject_box: Sequence[float]) -> int:
    """Index of the mask with the greatest overlap with the subject box (Eq. 1); first one on ties."""
    if not masks:
        raise ValueError("no candidate masks to choose from")
    shapes = {m.shape for m in masks}
    if len(shapes) != 1:
        raise ValueError(f"candidate masks differ in shape: {sorted(shapes)}")
    overlaps = [mask_box_overlap(m, subject_box) for m in masks]
    best = int(np.argmax(overlaps))  # argmax returns the first maximum
    if overlaps[best] == 0:
        raise ValueError("no candidate mask overlaps the subject box")
    return best


@dataclass(frozen=True)
class JitterParams:
    max_shift: float = 0.10  # fraction of the box width / height
    scale_range: tuple[float, float] = (0.9, 1.1)
    resize_px: tuple[int, int] = (-4, 8)  # erode (negative) or dilate (positive)


def jitter_box(
    box: Sequence[float], width: int, height: int, rng: np.random.Generator, params: JitterParams = JitterParams()
) -> tuple[float, float, float, float]:
    """Translate and rescale the box about its centre; the result stays inside the image and non-empty."""
    x0, y0, x1, y1 = geometry.check_xyxy(box)
    bw, bh = x1 - x0, y1 - y0
    scale = float(rng.uniform(*params.scale_range))
    dx, dy = (float(v) for v in rng.uniform(-params.max_shift, params.max_shift, size=2))
    cx, cy = (x0 + x1) / 2 + dx * bw, (y0 + y1) / 2 + dy * bh
    nw, nh = min(bw * scale, width), min(bh * scale, height)
    # Shift back inside rather than clip, so the box keeps its size.
    nx0 = min(max(cx - nw / 2, 0.0), width - nw)
    ny0 = min(max(cy - nh / 2, 0.0), height - nh)
    return nx0, ny0, nx0 + nw, ny0 + nh


def resize_mask(mask: np.ndarray, pixels: int) -> np.ndarray:
    """Dilate (``pixels`` > 0) or erode (< 0) with a square kernel; never returns an empty mask from a non-empty one."""
    if pixels == 0 or not mask.any():
        return mask.astype(bool)
    kernel = np.ones((2 * abs(pixels) + 1, 2 * abs(pixels) + 1), np.uint8)
    op = cv2.dilate if pixels > 0 else cv2.erode
    out = op(mask.astype(np.uint8), kernel).astype(bool)
    return out if out.any() else mask.astype(bool)


def random_resize(mask: np.ndarray, rng: np.random.Generator, params: JitterParams = JitterParams()) -> np.ndarray:
    lo, hi = params.resize_px
    return resize_mask(mask, int(rng.integers(lo, hi + 1)))
