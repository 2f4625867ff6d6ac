"""Synthetic defects drawn into good pairs: what a careful annotator rejects, made where the photo's *annotation*
(its face, hair, subject and object boxes) says the part is, never where the referee models see it, so a gate
that looks at the wrong place misses it.

Each defect takes a good pair (natural, manipulated, the edit's mask: True where the edit changed the image) and
a seeded generator, and returns the defective manipulated image, the mask the faulty edit would have had, and the
region drawn (for the contact sheet). A defect that the pair cannot show (no face box, no background left beside
the subject) raises ``NotApplicable``, and the corpus leaves that pair out.

- ``ear_removed``: a background edit whose cut took an ear: the ear's place (beside the face box, at the height
  of the eyes and nose) shows the new scene, copied from beside it.
- ``halo``: a rim of the old background a few pixels wide left along the kept outline (part of it or all).
- ``seam``: a dotted line of dark and light pixels along part of the kept outline.
- ``old_patch``: a patch of the old background left beside or enclosed by the subject (between an arm and the
  body, under an elbow): a concavity of the outline, else a disc touching it.
- ``occluder_removed``: an object in front of the subject (its box overlaps the subject's box) replaced by the
  new scene.
- ``spill_forehead``, ``spill_skin``, ``spill_eyebrows``, ``spill_background``: a hair recolour whose colour
  also went onto the forehead, a temple, the eyebrows, or the background in the hair box's top corners.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
from scipy import ndimage

from perceptforge.backends.recolour import recolour

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels


class NotApplicable(ValueError):
    """The pair cannot show this defect (the part is not annotated, or not in view)."""


@dataclass(frozen=True)
class Base:
    """A good pair and the annotation's boxes: what a defect is drawn from."""

    natural: np.ndarray  # (H, W, 3) uint8
    manipulated: np.ndarray  # (H, W, 3) uint8
    mask: np.ndarray | None  # (H, W) bool, True where the edit changed the image; None: a whole-image edit
    subject: Box
    faces: Sequence[Box] = ()
    hair: Sequence[Box] = ()
    objects: Sequence[Box] = field(default_factory=tuple)  # objects whose box overlaps the subject's
    colour: str | None = None  # a recolour's target colour (#rrggbb)


@dataclass(frozen=True)
class Drawn:
    manipulated: np.ndarray
    mask: np.ndarray
    region: np.ndarray  # (H, W) bool: where the defect is


def _ellipse(shape: tuple[int, int], centre: tuple[float, float], axes: tuple[float, float]) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    cv2.ellipse(
        out, (round(centre[0]), round(centre[1])), (max(1, round(axes[0])), max(1, round(axes[1]))), 0, 0, 360, 1, -1
    )
    return out.astype(bool)


def _box_mask(shape: tuple[int, int], box: Box) -> np.ndarray:
    out = np.zeros(shape, bool)
    x0, y0, x1, y1 = (round(v) for v in box)
    out[max(0, y0) : max(0, y1), max(0, x0) : max(0, x1)] = True
    return out


def _background_mask(base: Base) -> np.ndarray:
    if base.mask is None or not base.mask.any() or base.mask.all():
        raise NotApplicable("a background defect needs a pair whose edit replaced the background around a subject")
    return base.mask


def _largest_face(base: Base) -> Box:
    if not base.faces:
        raise NotApplicable("no face box in the annotation")
    return max(base.faces, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))


def _fill_from_background(image: np.ndarray, region: np.ndarray, background: np.ndarray, outward: int) -> np.ndarray:
    """``image`` with ``region``'s pixels taken from the new background: the same shape shifted ``outward`` pixels
    (signed, along x) where it lands on background, else each pixel's nearest background pixel."""
    out = image.copy()
    ys, xs = np.nonzero(region)
    sx = np.clip(xs + outward, 0, image.shape[1] - 1)
    shifted_ok = background[ys, sx]
    _, (iy, ix) = ndimage.distance_transform_edt(~background, return_indices=True)
    out[ys, xs] = np.where(shifted_ok[:, None], image[ys, sx], image[iy[ys, xs], ix[ys, xs]])
    return out


def ear_removed(base: Base, rng: np.random.Generator) -> Drawn:
    """The ear's place beside the face box (the side drawn by ``rng``), at the eyes' and nose's height, shows the
    new scene where the subject was kept."""
    background = _background_mask(base)
    x0, y0, x1, y1 = _largest_face(base)
    w, h = x1 - x0, y1 - y0
    side = int(rng.integers(2))
    kept = ~background
    for s in (side, 1 - side):  # the other side when this one shows no kept pixels there (a profile)
        edge = x1 if s == 0 else x0
        sign = 1 if s == 0 else -1
        ear = _ellipse(background.shape, (edge + sign * 0.02 * w, y0 + 0.52 * h), (0.13 * w, 0.17 * h))
        region = ear & kept
        if region.sum() >= 0.3 * ear.sum():
            manipulated = _fill_from_background(base.manipulated, region, background, int(sign * 0.32 * w))
            return Drawn(manipulated, background | region, region)
    raise NotApplicable("no kept pixels at either ear's place")


def _outline_band(kept: np.ndarray, width: int) -> np.ndarray:
    """The background pixels within ``width`` of the kept region."""
    k = 2 * width + 1
    grown = cv2.dilate(kept.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))).astype(bool)
    return grown & ~kept


def _arc(band: np.ndarray, subject: Box, rng: np.random.Generator, share: float) -> np.ndarray:
    """The part of ``band`` within an angular sector of ``share`` of a full turn around the subject box's centre
    (a random start)."""
    if share >= 1:
        return band
    ys, xs = np.nonzero(band)
    cx, cy = (subject[0] + subject[2]) / 2, (subject[1] + subject[3]) / 2
    angle = (np.arctan2(ys - cy, xs - cx) / (2 * np.pi)) % 1.0
    start = float(rng.random())
    inside = ((angle - start) % 1.0) < share
    out = np.zeros_like(band)
    out[ys[inside], xs[inside]] = True
    return out


def _scale(base: Base) -> float:
    return max(base.natural.shape[:2]) / 512


def halo(base: Base, rng: np.random.Generator) -> Drawn:
    """A rim of the old background, 3–6 px at 512 px, left along half of the kept outline or all of it."""
    background = _background_mask(base)
    width = max(2, round(int(rng.integers(3, 7)) * _scale(base)))
    share = float(rng.choice([0.5, 0.75, 1.0]))
    region = _arc(_outline_band(~background, width), base.subject, rng, share)
    if not region.any():
        raise NotApplicable("no outline to leave a rim along")
    manipulated = base.manipulated.copy()
    manipulated[region] = base.natural[region]
    return Drawn(manipulated, background & ~region, region)


def seam(base: Base, rng: np.random.Generator) -> Drawn:
    """A dotted line (2 px, dark and light dashes of 3 px) along a third to a half of the kept outline."""
    background = _background_mask(base)
    line = _outline_band(~background, max(1, round(2 * _scale(base))))
    region = _arc(line, base.subject, rng, float(rng.uniform(0.33, 0.5)))
    if not region.any():
        raise NotApplicable("no outline to draw a seam along")
    ys, xs = np.nonzero(region)
    dark = ((xs + ys) // 3) % 2 == 0
    manipulated = base.manipulated.copy()
    manipulated[ys, xs] = np.where(dark[:, None], 25, 230).astype(np.uint8)
    return Drawn(manipulated, background, region)


def old_patch(base: Base, rng: np.random.Generator) -> Drawn:
    """The old background left in a concavity of the kept outline (inside its convex hull: between an arm and
    the body) of at least 0.3% of the image; else in a disc of 3–5% of the subject box's diagonal touching the
    outline on its lower two thirds."""
    background = _background_mask(base)
    kept = ~background
    h, w = kept.shape
    # the kept subject only: the largest connected part (a stray kept fleck must not stretch the hull)
    labels, n = ndimage.label(kept)
    if n == 0:
        raise NotApplicable("nothing kept")
    sizes = ndimage.sum(kept, labels, range(1, n + 1))
    subject = labels == 1 + int(np.argmax(sizes))
    hull = np.zeros((h, w), np.uint8)
    points = cv2.findNonZero(subject.astype(np.uint8))
    cv2.fillConvexPoly(hull, cv2.convexHull(points), 1)
    pockets, m = ndimage.label(hull.astype(bool) & background)
    candidates = [i for i in range(1, m + 1) if (pockets == i).sum() >= 0.003 * h * w]
    if candidates:
        pocket = pockets == candidates[int(rng.integers(len(candidates)))]
        # a pocket's part nearest the subject: a patch the cut left, not the whole gap under an arm
        dist = ndimage.distance_transform_edt(~subject)
        limit = max(4.0, float(np.percentile(dist[pocket], 60)))
        region = pocket & (dist <= limit)
    else:
        x0, y0, x1, y1 = base.subject
        radius = float(rng.uniform(0.03, 0.05)) * float(np.hypot(x1 - x0, y1 - y0))
        band = _outline_band(subject, max(1, round(radius)))
        ys, xs = np.nonzero(band & (np.arange(h)[:, None] > y0 + (y1 - y0) / 3))
        if not len(ys):
            raise NotApplicable("no background beside the subject's lower two thirds")
        pick = int(rng.integers(len(ys)))
        region = _ellipse((h, w), (xs[pick], ys[pick]), (radius, radius)) & background
    manipulated = base.manipulated.copy()
    manipulated[region] = base.natural[region]
    return Drawn(manipulated, background & ~region, region)


def occluder_removed(base: Base, rng: np.random.Generator) -> Drawn:
    """An object whose box overlaps the subject's (drawn by ``rng`` among them) replaced where it was kept, its
    place showing the new scene copied from beside the subject."""
    background = _background_mask(base)
    if not base.objects:
        raise NotApplicable("no object box overlapping the subject")
    box = base.objects[int(rng.integers(len(base.objects)))]
    region = _box_mask(background.shape, box) & ~background
    if not region.any():
        raise NotApplicable("the object was not kept")
    # shift by the box's width towards the nearer image side: the scene beside the subject
    cx = (box[0] + box[2]) / 2
    shift = -(box[2] - box[0]) if cx < background.shape[1] / 2 else box[2] - box[0]
    manipulated = _fill_from_background(base.manipulated, region, background, int(shift))
    return Drawn(manipulated, background | region, region)


def _spill(base: Base, region: np.ndarray) -> Drawn:
    if base.mask is None or base.colour is None:
        raise NotApplicable("a spill needs a recolour pair (its mask and colour)")
    outside = region & ~base.mask
    if not outside.any() or outside.sum() < 0.25 * region.sum():
        raise NotApplicable("the spill's place is already inside the recoloured region")
    manipulated = base.manipulated.copy()
    painted = recolour(base.natural, outside, base.colour, tolerance=None, feather_px=0)
    manipulated[outside] = painted[outside]
    return Drawn(manipulated, base.mask | outside, outside)


def spill_forehead(base: Base, rng: np.random.Generator) -> Drawn:
    """The hair's new colour across the forehead: from a twentieth to a quarter of the face box's height below the
    hairline, over its middle 60% (a stripe of a seeded depth)."""
    x0, y0, x1, y1 = _largest_face(base)
    w, h = x1 - x0, y1 - y0
    depth = float(rng.uniform(0.18, 0.26))
    box = (x0 + 0.2 * w, y0 + 0.05 * h, x1 - 0.2 * w, y0 + depth * h)
    return _spill(base, _box_mask(base.natural.shape[:2], box))


def spill_skin(base: Base, rng: np.random.Generator) -> Drawn:
    """The hair's new colour on a temple: a disc at the face box's side (drawn by ``rng``), a fifth of its height
    down."""
    x0, y0, x1, y1 = _largest_face(base)
    w, h = x1 - x0, y1 - y0
    cx = x0 + 0.14 * w if rng.integers(2) else x1 - 0.14 * w
    return _spill(base, _ellipse(base.natural.shape[:2], (cx, y0 + 0.28 * h), (0.09 * w, 0.09 * h)))


def spill_eyebrows(base: Base, rng: np.random.Generator) -> Drawn:
    """The hair's new colour on both eyebrows: where a face box from hairline to chin has them, a third of its
    height down, between a sixth and 45% of its width from either side."""
    x0, y0, x1, y1 = _largest_face(base)
    w, h = x1 - x0, y1 - y0
    shape = base.natural.shape[:2]
    lift = float(rng.uniform(-0.02, 0.02))
    brows = _ellipse(shape, (x0 + 0.3 * w, y0 + (0.36 + lift) * h), (0.14 * w, 0.045 * h))
    brows |= _ellipse(shape, (x0 + 0.7 * w, y0 + (0.36 + lift) * h), (0.14 * w, 0.045 * h))
    return _spill(base, brows)


def spill_background(base: Base, rng: np.random.Generator) -> Drawn:
    """The hair's new colour in the hair box's two top corners (a fifth to a quarter of its width and height each)
    where the subject's box has background, not hair (outside the recoloured region)."""
    if not base.hair:
        raise NotApplicable("no hair box in the annotation")
    x0, y0, x1, y1 = max(base.hair, key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
    share = float(rng.uniform(0.2, 0.25))
    w, h = x1 - x0, y1 - y0
    shape = base.natural.shape[:2]
    corners = _box_mask(shape, (x0, y0, x0 + share * w, y0 + share * h))
    corners |= _box_mask(shape, (x1 - share * w, y0, x1, y0 + share * h))
    return _spill(base, corners)


DEFECTS: dict[str, Callable[[Base, np.random.Generator], Drawn]] = {
    "ear_removed": ear_removed,
    "halo": halo,
    "seam": seam,
    "old_patch": old_patch,
    "occluder_removed": occluder_removed,
    "spill_forehead": spill_forehead,
    "spill_skin": spill_skin,
    "spill_eyebrows": spill_eyebrows,
    "spill_background": spill_background,
}
# which pairs each defect is drawn into: background edits (a kept subject) or hair recolours
BACKGROUND_DEFECTS = ("ear_removed", "halo", "seam", "old_patch", "occluder_removed")
HAIR_DEFECTS = ("spill_forehead", "spill_skin", "spill_eyebrows", "spill_background")


def draw(kind: str, base: Base, seed: int) -> Drawn:
    """The defect ``kind`` drawn into ``base`` with the generator of ``seed`` (the same seed, the same pair)."""
    if kind not in DEFECTS:
        raise ValueError(f"unknown defect {kind!r}; known: {', '.join(DEFECTS)}")
    return DEFECTS[kind](base, np.random.default_rng(seed))
