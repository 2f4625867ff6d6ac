"""An annotated outline (COCO polygons) as a mask, and a hole joined to the outline around it as COCO draws one.

A segmenter guesses a subject's outline from colour and shape, and misses where the photo gives no cue (an orange
sleeve against a red stripe, a white cap against a pale wall). Where the annotator drew the subject's outline, a
background edit keeps exactly what was drawn (the composite's matte softens the line); a drawn region (hair) is
recoloured exactly as drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Point = tuple[float, float]


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
        # a horizontal edge crosses no row (low == high above); dividing by 1 instead of its zero height keeps its
        # unused crossing finite, where 0/0 and inf * 0 would warn ("invalid value encountered")
        rise = y1 - y0
        t = (centres_y[:, None] - y0[None]) / np.where(rise == 0, 1.0, rise)[None]
        at = x0[None] + t * (x1 - x0)[None]
        for row in np.flatnonzero(crosses.any(axis=1)):
            xs = np.sort(at[row, crosses[row]])
            inside = np.searchsorted(xs, centres_x, side="right") % 2 == 1
            out[row] |= inside
    return out


def inside(point: Point, ring: Sequence[Point]) -> bool:
    """Whether ``point`` lies inside the polygon ``ring``, by the even-odd rule ``outline_mask`` rasterises with."""
    x, y = point
    crossings = 0
    for (x0, y0), (x1, y1) in zip(ring, [*ring[1:], ring[0]], strict=True):
        if (y0 > y) != (y1 > y) and x < x0 + (y - y0) * (x1 - x0) / (y1 - y0):
            crossings += 1
    return crossings % 2 == 1


def bridged(ring: list[Point], hole: list[Point]) -> list[Point]:
    """``ring`` with ``hole`` cut out of it: from the ring's vertex nearest the hole, a zero-width bridge to the
    hole, round the hole, and back along the bridge (the even-odd rule counts the bridge's two edges twice)."""
    i, j = min(
        ((a, b) for a in range(len(ring)) for b in range(len(hole))),
        key=lambda ab: (ring[ab[0]][0] - hole[ab[1]][0]) ** 2 + (ring[ab[0]][1] - hole[ab[1]][1]) ** 2,
    )
    return ring[: i + 1] + hole[j:] + hole[: j + 1] + ring[i:]


def with_holes(outlines: Sequence[Sequence[Point]], holes: Sequence[Sequence[Point]]) -> list[list[float]]:
    """COCO polygons (flat ``[x0, y0, x1, y1, …]``): each outline with the holes that lie inside it bridged in.
    Raises ValueError for a hole inside no outline."""
    rings = [list(o) for o in outlines]
    for hole in holes:
        home = next((k for k in range(len(rings)) if all(inside(p, outlines[k]) for p in hole)), None)
        if home is None:
            raise ValueError(f"a hole at {hole[0]} lies inside no outline")
        rings[home] = bridged(rings[home], list(hole))
    return [[v for point in ring for v in point] for ring in rings]
