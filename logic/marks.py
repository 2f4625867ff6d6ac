"""Visual prompts for BLINK-style items (BLINK §3.2, §4.3): circles (the default) and boxes, with a
label ("A", "B", …) beside each mark.

Placement is pure geometry and refuses rather than cheats: a mark never covers the point it marks (a
circle is a ring around it), marks and labels stay inside the image, and two marks never overlap. A label
sits outside every mark (never inside another box), nearer its own mark than any other by at least the
label gap, and is at least ``MIN_LABEL_PX`` tall whatever the image's size. When they cannot, ``MarkPlacementError``
says why, and the unit is quarantined with that reason (or its builder draws again).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from PIL import Image, ImageDraw, ImageFont

RGB = tuple[int, int, int]
Box = tuple[float, float, float, float]  # x0, y0, x1, y1
REFERENCE_HEIGHT = 1024  # BLINK's sizes are given at this image height
# A label's ink (outline included) is at least this tall in pixels: scaled to a 303 px image, BLINK's 28 px font
# gave 6 px letters no one could read.
MIN_LABEL_PX = 14


class MarkPlacementError(ValueError):
    """The marks cannot be drawn as the rules require (off the image, overlapping, no room for a label)."""


@dataclass(frozen=True)
class MarkStyle:
    shape: Literal["circle", "box"] = "circle"
    colour: RGB = (255, 0, 0)
    radius: float = 10.0  # at REFERENCE_HEIGHT; BLINK's ablation compares 5, 10 and 15
    line_width: float = 3.0
    font_size: float = 28.0
    gap: float = 4.0  # between a mark and its label


@dataclass(frozen=True)
class Mark:
    label: str
    point: tuple[float, float] | None = None  # circle marks
    box: Box | None = None  # box marks


@dataclass(frozen=True)
class PlacedMark:
    label: str
    shape: str
    bounds: Box  # what the mark's ink covers
    label_box: Box  # where the label's text (with its outline) goes
    centre: tuple[float, float] = (0.0, 0.0)
    radius: float = 0.0
    box: Box | None = None


def scaled(value: float, height: int) -> float:
    """A size given at 1024 px image height, at this image's height (at least 1 px)."""
    return max(1.0, value * height / REFERENCE_HEIGHT)


def ring_radius(style: MarkStyle, height: int) -> float:
    """The circle's radius: the template's, but always wide enough that the ring (with its halo) leaves
    the marked point itself uncovered."""
    return max(scaled(style.radius, height), scaled(style.line_width, height) + 3)


def inside(box: Box, size: tuple[int, int]) -> bool:
    return box[0] >= 0 and box[1] >= 0 and box[2] <= size[0] and box[3] <= size[1]


def overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def label_candidates(bounds: Box, text_size: tuple[float, float], gap: float) -> list[Box]:
    """Places beside a mark, in order of preference: right, left, above, below, the diagonals, then along the
    edges by the corners (where a box's label still reads as its own when another box covers its middle)."""
    x0, y0, x1, y1 = bounds
    w, h = text_size
    cy, cx = (y0 + y1) / 2, (x0 + x1) / 2
    spots = [
        (x1 + gap, cy - h / 2),
        (x0 - gap - w, cy - h / 2),
        (cx - w / 2, y0 - gap - h),
        (cx - w / 2, y1 + gap),
        (x1 + gap, y0 - gap - h),
        (x0 - gap - w, y0 - gap - h),
        (x1 + gap, y1 + gap),
        (x0 - gap - w, y1 + gap),
        (x0, y0 - gap - h),
        (x1 - w, y0 - gap - h),
        (x0, y1 + gap),
        (x1 - w, y1 + gap),
        (x0 - gap - w, y0),
        (x1 + gap, y0),
        (x0 - gap - w, y1 - h),
        (x1 + gap, y1 - h),
    ]
    return [(x, y, x + w, y + h) for x, y in spots]


def distance(a: Box, b: Box) -> float:
    """The gap between two rectangles (0 when they touch or overlap)."""
    dx = max(0.0, b[0] - a[2], a[0] - b[2])
    dy = max(0.0, b[1] - a[3], a[1] - b[3])
    return float(np.hypot(dx, dy))


def place_marks(
    marks: Sequence[Mark],
    size: tuple[int, int],
    style: MarkStyle,
    text_size: tuple[float, float],
    allow_overlap: bool = False,
) -> list[PlacedMark]:
    """Where each mark and its label go; ``text_size`` is one label's (width, height) in pixels.
    ``allow_overlap``: marks that must overlap by design (BLINK's two candidate boxes of one object). Either way a
    label never overlaps a mark (its own or another's: a label inside the other box reads as that box's) nor
    another label, and its nearest other mark is at least the label gap further than its own."""
    height = size[1]
    r, lw, gap = ring_radius(style, height), scaled(style.line_width, height), scaled(style.gap, height)
    shapes: list[PlacedMark] = []
    for mark in marks:
        if style.shape == "circle":
            if mark.point is None:
                raise MarkPlacementError(f"mark {mark.label}: a circle needs a point")
            x, y = mark.point
            outer = r + lw  # the ring's outer edge, its outline included
            bounds = (x - outer, y - outer, x + outer, y + outer)
            placed = PlacedMark(mark.label, "circle", bounds, bounds, centre=(x, y), radius=r)
        else:
            if mark.box is None:
                raise MarkPlacementError(f"mark {mark.label}: a box mark needs a box")
            bounds = mark.box  # a box's outline (and halo) is drawn inward from its edges
            placed = PlacedMark(mark.label, "box", bounds, bounds, box=mark.box)
        if not inside(bounds, size):
            raise MarkPlacementError(
                f"mark {mark.label} at {tuple(round(v) for v in bounds)} would leave the {size} image"
            )
        for other in [] if allow_overlap else shapes:
            if overlaps(bounds, other.bounds) and not (
                placed.shape == other.shape == "circle" and circles_apart(placed, other, lw)
            ):
                raise MarkPlacementError(f"marks {other.label} and {mark.label} overlap")
        shapes.append(placed)
    result: list[PlacedMark] = []
    labels: list[Box] = []
    for placed in shapes:
        others = [s.bounds for s in shapes if s is not placed]
        clear = [
            c
            for c in label_candidates(placed.bounds, text_size, gap)
            if inside(c, size)
            and not any(overlaps(c, other) for other in labels)
            and not any(overlaps(c, s.bounds) for s in shapes)
            and all(distance(c, o) >= distance(c, placed.bounds) + gap for o in others)
        ]
        if not clear:
            raise MarkPlacementError(
                f"no room for label {placed.label} outside every mark and nearer its own than any other"
            )
        spot = clear[0]
        labels.append(spot)
        result.append(
            PlacedMark(placed.label, placed.shape, placed.bounds, spot, placed.centre, placed.radius, placed.box)
        )
    return result


def circles_apart(a: PlacedMark, b: PlacedMark, line_width: float) -> bool:
    """Two rings do not touch (their bounding squares may still overlap diagonally)."""
    distance = float(np.hypot(a.centre[0] - b.centre[0], a.centre[1] - b.centre[1]))
    return distance > a.radius + b.radius + 2 * line_width


def halo_for(image: Image.Image, bounds: Box) -> RGB:
    """Black or white, whichever contrasts with the image around a mark, drawn under the ink."""
    x0, y0, x1, y1 = (int(round(v)) for v in bounds)
    patch = np.asarray(image.convert("L").crop((x0, y0, max(x1, x0 + 1), max(y1, y0 + 1))), np.float32)
    return (0, 0, 0) if float(patch.mean()) > 110 else (255, 255, 255)


def label_font(style: MarkStyle, height: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """The style's font size at this image height, grown until a capital's ink (outline included) is at least
    ``MIN_LABEL_PX`` tall."""
    size = round(scaled(style.font_size, height))
    while True:
        font = ImageFont.load_default(size=size)
        top, bottom = font.getbbox("A", stroke_width=stroke_width(style, height))[1::2]
        if bottom - top >= MIN_LABEL_PX or size >= 4 * MIN_LABEL_PX:
            return font
        size += 1


def text_extent(style: MarkStyle, height: int, labels: Sequence[str]) -> tuple[float, float]:
    """The largest label's size with its outline, so every label fits the same room."""
    font, stroke = label_font(style, height), stroke_width(style, height)
    boxes = [font.getbbox(text, stroke_width=stroke) for text in labels] or [(0, 0, 0, 0)]
    return max(b[2] - b[0] for b in boxes), max(b[3] - b[1] for b in boxes)


def stroke_width(style: MarkStyle, height: int) -> int:
    return max(1, round(scaled(style.line_width, height) / 2))


def draw_marks(
    image: Image.Image, marks: Sequence[Mark], style: MarkStyle, allow_overlap: bool = False
) -> tuple[Image.Image, list[PlacedMark]]:
    """A copy of ``image`` with the marks and their labels drawn, and where they went."""
    out = image.convert("RGB")
    height = out.height
    extent = text_extent(style, height, [m.label for m in marks])
    placed = place_marks(marks, out.size, style, extent, allow_overlap)
    draw = ImageDraw.Draw(out)
    lw = scaled(style.line_width, height)
    font, stroke = label_font(style, height), stroke_width(style, height)
    for p in placed:
        halo = halo_for(image, p.bounds)
        if p.shape == "circle":
            x, y = p.centre
            ring = (x - p.radius, y - p.radius, x + p.radius, y + p.radius)
            draw.ellipse(ring, outline=halo, width=max(1, round(lw + 2)))
            draw.ellipse(ring, outline=style.colour, width=max(1, round(lw)))
        else:
            assert p.box is not None
            draw.rectangle(p.box, outline=halo, width=max(1, round(lw + 2)))
            draw.rectangle(p.box, outline=style.colour, width=max(1, round(lw)))
        lx0, ly0, _, _ = p.label_box
        left, top, _, _ = font.getbbox(p.label, stroke_width=stroke)
        draw.text(
            (lx0 - left, ly0 - top),
            p.label,
            fill=style.colour,
            font=font,
            stroke_width=stroke,
            stroke_fill=halo_for(image, p.label_box),
        )
    return out, placed
