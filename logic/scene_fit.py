"""Where a donor scene sits behind a subject: a window of the scene at the image's aspect (never stretched),
slid along the scene's longer side so that the part which makes its label true shows beside the subject."""

from __future__ import annotations

import numpy as np

Box = tuple[int, int, int, int]


def scene_window(scene_wh: tuple[int, int], image_wh: tuple[int, int], shown: np.ndarray, focus: Box | None) -> Box:
    """The ``(x0, y0, x1, y1)`` window of a ``scene_wh`` scene that covers an ``image_wh`` image at its aspect.

    ``shown`` is the image's ``(H, W)`` bool mask of the pixels the scene will fill. Along the free axis the
    window shows as much of ``focus`` (a box in scene pixels, the part its label names) there as it can; ties
    and a scene without a focus keep the window centred.
    """
    sw, sh = scene_wh
    w, h = image_wh
    if sw * h >= sh * w:  # the scene is wider than the image: slide across
        size, span, along = round(sh * w / h), sw, 0
    else:
        size, span, along = round(sw * h / w), sh, 1
    size = max(1, min(size, span))
    centre = (span - size) // 2

    def window(offset: int) -> Box:
        return (offset, 0, offset + size, sh) if along == 0 else (0, offset, sw, offset + size)

    if focus is None:
        return window(centre)
    table = _table(shown)
    best, best_count = centre, -1
    # nearest the centre first, so that of equal showings the centred one stands
    for offset in sorted(range(span - size + 1), key=lambda o: (abs(o - centre), o)):
        count = _count(table, _in_image(focus, window(offset), image_wh))
        if count > best_count:
            best, best_count = offset, count
    return window(best)


def focus_shown(window: Box, image_wh: tuple[int, int], shown: np.ndarray, focus: Box) -> float:
    """The share of ``focus`` (scene pixels) that lands on ``shown`` pixels once ``window`` fills the image."""
    box = _in_image(focus, window, image_wh)
    return _count(_table(shown), box) / max(1, (box[2] - box[0]) * (box[3] - box[1]))


def _in_image(focus: Box, window: Box, image_wh: tuple[int, int]) -> Box:
    """``focus`` in image pixels once ``window`` (scene pixels) is resized onto the image."""
    x0, y0, x1, y1 = window
    sx, sy = image_wh[0] / (x1 - x0), image_wh[1] / (y1 - y0)
    return (
        round((focus[0] - x0) * sx),
        round((focus[1] - y0) * sy),
        round((focus[2] - x0) * sx),
        round((focus[3] - y0) * sy),
    )


def _table(mask: np.ndarray) -> np.ndarray:
    return np.pad(mask.astype(np.int64).cumsum(0).cumsum(1), ((1, 0), (1, 0)))


def _count(table: np.ndarray, box: Box) -> int:
    """Pixels set inside ``box`` (clipped to the image) from a padded summed-area table."""
    h, w = table.shape[0] - 1, table.shape[1] - 1
    x0, y0, x1, y1 = max(0, box[0]), max(0, box[1]), min(w, box[2]), min(h, box[3])
    if x1 <= x0 or y1 <= y0:
        return 0
    return int(table[y1, x1] - table[y0, x1] - table[y1, x0] + table[y0, x0])
