"""Quality gates before annotators see a pair: real change inside the edit region, little outside it,
matching sizes, and no two pairs whose manipulated images are near-duplicates (perceptual hash)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image

from perceptforge.logic.edit_region import subject_parts
from perceptforge.logic.hash_index import HashIndex, hamming, hash_int  # noqa: F401  (the gates' distance)

# RGB levels: two edits of one photo at least this far apart on average, where either changed it, are distinct
DISTINCT = 12.0

Box = tuple[float, float, float, float]


def lab_of(image: np.ndarray) -> np.ndarray:
    """An RGB image (0-255) in CIELAB, float32: colour differences as a person sees them (ΔE)."""
    import cv2

    return np.asarray(cv2.cvtColor(image.astype(np.float32) / 255, cv2.COLOR_RGB2LAB), np.float32)


def local_mean(lab: np.ndarray, region: np.ndarray, reach: int) -> tuple[np.ndarray, np.ndarray]:
    """The mean colour of ``region``'s pixels within ``reach`` of each pixel (a square window), and how many
    there are."""
    import cv2

    window = (2 * reach + 1, 2 * reach + 1)
    weight = region.astype(np.float32)
    count = cv2.boxFilter(weight, -1, window, normalize=False)
    total = np.stack([cv2.boxFilter(lab[..., c] * weight, -1, window, normalize=False) for c in range(3)], -1)
    return total / np.maximum(count, 1e-6)[..., None], count


def _box_pixels(mask: np.ndarray, box: Box) -> np.ndarray:
    h, w = mask.shape
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    return mask[max(0, y0) : min(h, y1), max(0, x0) : min(w, x1)]


def mask_measurements(
    mask: np.ndarray,
    subject_box: Box,
    old_boxes: Sequence[Box] = (),
    protected: dict[str, Box] | None = None,
    objects: dict[str, np.ndarray] | None = None,
    image: np.ndarray | None = None,
) -> dict[str, float]:
    """``mask_area``: the share of the image the mask covers; ``subject_in_mask``: the share of the subject's
    box it covers (the subject must stay recognisable); with the ``protected`` regions (the middle of a face,
    the body below it, a held object: what the edit must leave), ``in_mask:<name>`` for each and
    ``protected_in_mask``, the largest; with the boxes of what the old value names (the flag of "a flag and a
    backdrop"), ``old_kept``: the share of them left in view as fragments apart from the subject (a flag box
    reaching behind the subject's shoulder is not left in view where the subject covers it); with the pixels of
    objects standing before the old background (a tripod), ``replaced:<name>``: the share of each the mask covers;
    with the photo, for a background edit, ``unedged_outline`` (where the cut runs through no edge of the photo,
    what report.html marks for annotators to look at closely)."""
    inside = _box_pixels(mask, subject_box)
    measured = {
        "mask_area": round(float(mask.mean()), 6),
        "subject_in_mask": round(float(inside.mean()) if inside.size else 0.0, 6),
    }
    for name, box in (protected or {}).items():
        covered = _box_pixels(mask, box)
        measured[f"in_mask:{name}"] = round(float(covered.mean()) if covered.size else 0.0, 6)
    if protected:
        measured["protected_in_mask"] = max(measured[f"in_mask:{n}"] for n in protected)
    if old_boxes or protected:  # a background edit: how ragged the kept subject's outline is
        measured["ragged_outline"] = ragged_outline(~mask, subject_box)
        if image is not None:
            measured["unedged_outline"] = unedged_outline(image, ~mask)
    for name, pixels in (objects or {}).items():
        measured[f"replaced:{name}"] = round(float(mask[pixels].mean()) if pixels.any() else 0.0, 6)
    if old_boxes:
        named = np.zeros_like(mask)
        for box in old_boxes:
            _box_pixels(named, box)[...] = True
        stray = ~mask & ~subject_parts(~mask, list((protected or {}).values()))
        measured["old_kept"] = round(float((named & stray).sum() / max(1, named.sum())), 6)
    return measured


def ragged_outline(keep: np.ndarray, subject_box: Box, share: float = 0.07) -> float:
    """The share of the kept subject that closing its outline with a disc ``share`` of the subject box's shorter
    side would add: the bites segmentation takes out of a sleeve or a collar ring, and the holes it leaves in a
    strap, which show the new scene through the subject. A clean outline adds little (its armpits, its neck)."""
    import cv2

    x0, y0, x1, y1 = subject_box
    side = max(3, round(share * min(x1 - x0, y1 - y0)) | 1)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (side, side))
    closed = cv2.morphologyEx(keep.astype(np.uint8), cv2.MORPH_CLOSE, disc).astype(bool)
    return round(float((closed & ~keep).sum() / max(1, keep.sum())), 6)


def unedged_outline_pixels(
    image: np.ndarray, keep: np.ndarray, gap: int = 4, reach: int = 6, min_contrast: float = 10.0
) -> np.ndarray:
    """(H, W) bool: the points of the kept subject's outline (away from the image's edge) where the photo has no
    edge: the mean colours of its two sides, each sampled ``gap`` or more pixels from the cut and within ``reach``
    of the point, lie within ``min_contrast`` (CIELAB ΔE) of each other. A cut that follows the subject's edge
    separates two colours; one through a strip of backdrop kept beside a shoulder, through the black stand kept
    beside a black helmet, or through a helmet's latch or a cap's crown left out, has the same colour on both
    sides. The ``gap`` skips the few pixels of rim the matte decides."""
    import cv2

    keep8 = keep.astype(np.uint8)
    lab = lab_of(image)
    inner, n_in = local_mean(lab, cv2.distanceTransform(keep8, cv2.DIST_L2, 3) >= gap, reach)
    outer, n_out = local_mean(lab, cv2.distanceTransform(1 - keep8, cv2.DIST_L2, 3) >= gap, reach)
    outline = inner_outline(keep, reach) & (n_in > 2) & (n_out > 2)
    return outline & (np.linalg.norm(inner - outer, axis=-1) < min_contrast)


def inner_outline(keep: np.ndarray, margin: int) -> np.ndarray:
    """(H, W) bool: the kept pixels with a neighbour outside (8-connected), at least ``margin`` pixels from the
    image's edge (where the frame, not a cut, ends the subject)."""
    import cv2

    outline = keep & ~cv2.erode(keep.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    away = np.zeros_like(outline)
    away[margin:-margin, margin:-margin] = True
    return outline & away


def unedged_outline(image: np.ndarray, keep: np.ndarray, reach: int = 6) -> float:
    """The share of the kept subject's outline (away from the image's edge) that runs where the photo has no edge
    (``unedged_outline_pixels``): 0 for a cut that follows the subject everywhere."""
    unedged = unedged_outline_pixels(image, keep, reach=reach)
    return round(float(unedged.sum() / max(1, inner_outline(keep, reach).sum())), 6)


def mask_verdict(
    measured: dict[str, float],
    area: tuple[float, float] | None,
    max_subject: float | None,
    max_old_kept: float,
    max_protected: float = 1.0,
    max_cut: float = 0.5,
    max_ragged: float = 1.0,
    max_replaced: float = 1.0,
) -> str | None:
    """Why a mask is degenerate for its edit kind (too small to show the change, so large it is a new image,
    swallowing the subject or what it holds, cutting an object that overlaps the subject in two or replacing more
    than ``max_replaced`` of it, or leaving the old value in view), or None."""
    a = measured["mask_area"]
    if area is not None and not area[0] <= a <= area[1]:
        return f"mask area {a:.1%} is outside {area[0]:.1%}–{area[1]:.1%} for this edit kind"
    if max_subject is not None and measured["subject_in_mask"] > max_subject:
        return f"mask covers {measured['subject_in_mask']:.0%} of the subject's box (at most {max_subject:.0%})"
    worst = max(((v, k[8:]) for k, v in measured.items() if k.startswith("in_mask:")), default=None)
    if worst is not None and worst[0] > max_protected:
        return f"mask covers {worst[0]:.0%} of the {worst[1]} (at most {max_protected:.0%}): the edit would change it"
    for key, share in sorted(measured.items()):
        if key.startswith("replaced:") and max_cut < share < 1 - max_cut:
            return (
                f"the new background's outline cuts the {key[9:]} in two ({share:.0%} of it replaced; an object is "
                f"kept or replaced whole, at most {max_cut:.0%} of it either way)"
            )
        if key.startswith("replaced:") and share > max_replaced:
            # a podium replaced whole left a man cut straight at the waist over the new scene: an object that
            # overlaps the subject goes only where the annotation says it is old background
            return (
                f"the new background would replace {share:.0%} of the {key[9:]}, which overlaps the subject (at most "
                f"{max_replaced:.0%}): give it role 'occluder' if it stands in front of the subject (it stays), or "
                "name it in the 'background' attribute if it is part of the old background (it goes)"
            )
    if measured.get("ragged_outline", 0.0) > max_ragged:
        return (
            f"the subject's outline is ragged: closing it would add {measured['ragged_outline']:.1%} of it (at most "
            f"{max_ragged:.1%}); the new scene would show through bites and holes in the subject"
        )
    if measured.get("old_kept", 0.0) > max_old_kept:
        return f"{measured['old_kept']:.1%} of what the old value names stays in view (at most {max_old_kept:.1%})"
    return None


def phash(image: Image.Image) -> int:
    """64-bit perceptual hash (``imagehash.phash``: DCT of a 32x32 grayscale, the low 8x8 frequencies against
    their median) as an integer, the form ``logic/hash_index`` bands. It replaced a hand-written DCT hash whose
    near-duplicate verdicts it repeats on the bundled photos, the synthetic scenes, their variants and the demo's
    changes (``tests/test_perceptual_hash.py``)."""
    import imagehash

    return hash_int(imagehash.phash(image).hash)


def pair_measurements(natural: Image.Image, manipulated: Image.Image, mask: np.ndarray | None) -> dict[str, float]:
    """``inside_change`` and ``outside_change``: mean absolute pixel change in and out of the edit region
    (a whole-image edit has no outside); ``region_changed``: the share of the region's pixels that changed by
    more than 8 (of 255), what a recoloured region must nearly all be."""
    a, b = np.asarray(natural), np.asarray(manipulated)
    whole = mask is None
    region = np.ones(a.shape[:2], bool) if mask is None else mask
    diff = np.abs(a.astype(np.float32) - b.astype(np.float32)).mean(axis=2)
    inside = float(diff[region].mean()) if region.any() else 0.0
    outside = float(diff[~region].mean()) if (~region).any() else 0.0
    changed = diff > 8
    return {
        "inside_change": round(inside, 3),
        "outside_change": 0.0 if whole else round(outside, 3),
        "region_changed": round(float(changed[region].mean()) if region.any() else 0.0, 6),
    }


def pair_verdict(
    measured: dict[str, float],
    min_inside: float,
    max_outside: float,
    clip_margin: float | None,
    min_region_changed: float | None = None,
) -> str | None:
    """Why a pair fails: too little change where the edit was, too much elsewhere, a region only partly changed
    (``min_region_changed``: a recoloured region, of which what stays as it was keeps the old value true), or
    (with the CLIP gate) an edited region that does not look more like the new value than the old one; None if
    it passes."""
    if measured["inside_change"] < min_inside:
        return f"too little change inside the edit region: {measured['inside_change']:.1f} < {min_inside}"
    if min_region_changed is not None and measured["region_changed"] < min_region_changed:
        return f"only {measured['region_changed']:.0%} of the region changed (at least {min_region_changed:.0%})"
    if measured["outside_change"] > max_outside:
        return f"too much change outside the edit region: {measured['outside_change']:.1f} > {max_outside}"
    if clip_margin is not None and measured["clip_new"] - measured["clip_old"] < clip_margin:
        return (
            f"the edited region does not match the new value: CLIP {measured['clip_new']:.3f} (new) vs "
            f"{measured['clip_old']:.3f} (old), margin {clip_margin}"
        )
    return None


def near_duplicates(
    hashes: list[tuple[str, int]], min_distance: int, alike: Callable[[str, str], bool] | None = None
) -> dict[str, str]:
    """unit → the earliest kept unit whose manipulated image it nearly duplicates (units in the order given; a
    duplicate is not kept), looked up in a band index (``logic/hash_index``) rather than against every kept unit.
    ``alike(unit, kept unit)``, where given, has the last word on each pair the hashes bring up."""
    dupes: dict[str, str] = {}
    if min_distance <= 0:
        return dupes
    index = HashIndex(min_distance - 1)
    kept: list[str] = []
    for unit, h in hashes:
        near = [kept[k] for k in index.near(h)]
        twins = [other for other in near if alike is None or alike(unit, other)]
        if twins:
            dupes[unit] = twins[0]
        else:
            index.add(h)
            kept.append(unit)
    return dupes


def distinct_edits(natural: np.ndarray, first: np.ndarray, second: np.ndarray, min_gap: float = DISTINCT) -> bool:
    """True when two edits of one photo made different images: where either changed it, they differ by ``min_gap``
    or more on average (RGB levels). Two background swaps of one portrait change the same pixels, and the hash of
    what changed is the subject's silhouette in both: a launch pad and deep space behind her hashed 2 apart."""
    changed = (np.abs(first.astype(np.int16) - natural).max(axis=-1) > 0) | (
        np.abs(second.astype(np.int16) - natural).max(axis=-1) > 0
    )
    if not changed.any():
        return False
    return float(np.abs(first.astype(np.int16) - second)[changed].mean()) >= min_gap
