"""An annotated outline (COCO polygons) as a mask.

A segmenter guesses a subject's outline from colour and shape, and misses where the photo gives no cue (an orange
sleeve against a red stripe, a white cap against a pale wall). Where the annotator drew the subject's outline, a
background edit keeps exactly what was drawn (the composite's matte softens the line); a drawn region (hair) is
recoloured exactly as drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def outline_mask(parts: Sequence[Sequence[float]], height: int, width: int) -> np.ndarray:
    """(H, W) bool: the pixels whose centres lie inside any of the polygons (COCO ``segmentation``, pixel
    coordinates with (0, 0) the top-left corner of the top-left pixel); the parts are a union. Inside is by the
    even-odd rule, so a hole joined to its ring by a zero-width bridge (COCO's way to draw one) stays open."""
    out = np.zeros((height, width), bool)
    centres_y = np.arange(height) + 0.5
    centres_x = np.arange(width) + 0.5
    for part in parts:
        points = np.asarray(part, np.float64).reshape(-1, 2)
        x0, y0 = points[:, 0], points[:, 1]
        x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
        # each edge crosses the rows whose centre lies in [min y, max y): no row counts a vertex twice
        low, high = np.minimum(y0, y1), np.maximum(y0, y1)
        crosses = (centres_y[:, None] >= low[None]) & (centres_y[:, None] < high[None])  # (rows, edges)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (centres_y[:, None] - y0[None]) / (y1 - y0)[None]
        at = x0[None] + t * (x1 - x0)[None]
        for row in np.flatnonzero(crosses.any(axis=1)):
            xs = np.sort(at[row, crosses[row]])
            inside = np.searchsorted(xs, centres_x, side="right") % 2 == 1
            out[row] |= inside
    return out
