"""Box geometry, named by box format.

Formats:
- ``xyxy``: pixel corners ``(x0, y0, x1, y1)``, ``x1 > x0``, ``y1 > y0``; the project's one internal format.
- ``xywh``: pixel ``(x, y, width, height)`` as COCO stores it.
- ``norm``: ``xyxy`` divided by image width/height, in ``[0, 1]`` (Shikra prints it with three decimals).
- ``grid1000``: ``xyxy`` on a 0–1000 grid (Qwen-VL's ``<|box_start|>(x0,y0),(x1,y1)<|box_end|>``).
- ``ls_percent``: Label Studio's rectangle ``{x, y, width, height}`` in percent of the image size.

Conversions go through :class:`fractions.Fraction`, so a value that is exact in decimal (``0.125`` of 640 px)
converts to the exact float, and the float returned is the one nearest to the exact result.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

XYXY = tuple[float, float, float, float]


def _check_size(width: float, height: float) -> None:
    if not (width > 0 and height > 0):
        raise ValueError(f"image size must be positive, got {width}x{height}")


def numbers_only(values: Sequence[object]) -> None:
    """A box read from a file holds numbers: ``true`` or ``"12"`` would pass ``float()`` and mean nothing."""
    for v in values:
        if isinstance(v, (bool, str, bytes)) or v is None:
            raise ValueError(f"a box holds numbers, not {type(v).__name__} {v!r}: {list(values)}")


def check_xyxy(box: Sequence[float]) -> XYXY:
    """Return ``box`` as a float tuple, or raise ``ValueError`` saying what is wrong with it."""
    if len(box) != 4:
        raise ValueError(f"a box has 4 numbers (x0, y0, x1, y1), got {len(box)}: {list(box)}")
    numbers_only(box)
    x0, y0, x1, y1 = (float(v) for v in box)
    if any(v != v for v in (x0, y0, x1, y1)):
        raise ValueError(f"box has NaN: {list(box)}")
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"empty box: need x1 > x0 and y1 > y0, got {list(box)}")
    return x0, y0, x1, y1


def _scale(values: Sequence[float], factors: Sequence[Fraction]) -> XYXY:
    return tuple(float(Fraction(v) * f) for v, f in zip(values, factors))  # type: ignore[return-value]


def xyxy_to_xywh(box: Sequence[float]) -> XYXY:
    x0, y0, x1, y1 = check_xyxy(box)
    return x0, y0, x1 - x0, y1 - y0


def xywh_to_xyxy(box: Sequence[float]) -> XYXY:
    if len(box) != 4:
        raise ValueError(f"an xywh box has 4 numbers, got {len(box)}: {list(box)}")
    numbers_only(box)
    x, y, w, h = (float(v) for v in box)
    return check_xyxy((x, y, x + w, y + h))


def xyxy_to_norm(box: Sequence[float], width: float, height: float) -> XYXY:
    """Pixel xyxy → normalised ``[0, 1]`` xyxy."""
    _check_size(width, height)
    x0, y0, x1, y1 = check_xyxy(box)
    fw, fh = 1 / Fraction(width), 1 / Fraction(height)
    return _scale((x0, y0, x1, y1), (fw, fh, fw, fh))


def norm_to_xyxy(box: Sequence[float], width: float, height: float) -> XYXY:
    """Normalised ``[0, 1]`` xyxy (e.g. Shikra's ``[0.120,0.300,0.580,0.910]``) → pixel xyxy."""
    _check_size(width, height)
    vals = check_xyxy(box)
    if any(v < 0 or v > 1 for v in vals):
        raise ValueError(f"normalised box must lie in [0, 1], got {list(box)}")
    # Fraction(str(v)) keeps the printed decimal exact: 0.12 means 12/100, not the nearest binary float.
    fw, fh = Fraction(width), Fraction(height)
    return tuple(float(Fraction(repr(v)) * f) for v, f in zip(vals, (fw, fh, fw, fh)))  # type: ignore[return-value]


def grid1000_to_xyxy(box: Sequence[float], width: float, height: float) -> XYXY:
    """Qwen-VL's 0–1000 grid → pixel xyxy."""
    _check_size(width, height)
    vals = check_xyxy(box)
    if any(v < 0 or v > 1000 for v in vals):
        raise ValueError(f"0-1000 grid box out of range: {list(box)}")
    fw, fh = Fraction(width) / 1000, Fraction(height) / 1000
    return _scale(vals, (fw, fh, fw, fh))


def xyxy_to_ls_percent(box: Sequence[float], width: float, height: float) -> dict[str, float]:
    """Pixel xyxy → Label Studio rectangle value ``{x, y, width, height}`` in percent."""
    _check_size(width, height)
    x0, y0, x1, y1 = check_xyxy(box)
    pw, ph = Fraction(100) / Fraction(width), Fraction(100) / Fraction(height)
    return {
        "x": float(Fraction(x0) * pw),
        "y": float(Fraction(y0) * ph),
        "width": float((Fraction(x1) - Fraction(x0)) * pw),
        "height": float((Fraction(y1) - Fraction(y0)) * ph),
    }


def ls_percent_to_xyxy(value: dict[str, float], width: float, height: float) -> XYXY:
    """Label Studio rectangle value (percent, ``rotation`` must be 0) → pixel xyxy."""
    _check_size(width, height)
    missing = {"x", "y", "width", "height"} - set(value)
    if missing:
        raise ValueError(f"Label Studio rectangle lacks {sorted(missing)}: {value}")
    if float(value.get("rotation", 0) or 0) != 0:
        raise ValueError(f"rotated Label Studio rectangles are not supported: {value}")
    fw, fh = Fraction(width) / 100, Fraction(height) / 100
    x, y = Fraction(value["x"]), Fraction(value["y"])
    w, h = Fraction(value["width"]), Fraction(value["height"])
    return check_xyxy((float(x * fw), float(y * fh), float((x + w) * fw), float((y + h) * fh)))


def clip_xyxy(box: Sequence[float], width: float, height: float) -> XYXY:
    """Clip a box to the image; raise if nothing of it is left inside."""
    x0, y0, x1, y1 = check_xyxy(box)
    clipped = (min(max(x0, 0.0), width), min(max(y0, 0.0), height), min(max(x1, 0.0), width), min(max(y1, 0.0), height))
    if clipped[2] <= clipped[0] or clipped[3] <= clipped[1]:
        raise ValueError(f"box {list(box)} lies outside the {width}x{height} image")
    return clipped
