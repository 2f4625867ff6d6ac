"""Gates that look where an annotator looks, from what the referee models see of the natural photo (the face
oval up to the hairline, the eyebrows, the ears' places, the background): a hair recolour that paints skin or
background, and a background edit that cuts the face or an ear, are measured here and judged by a threshold.

The functions take the referees' answers (polygons, points, a probability map) as plain arrays, so a test draws
them on a tiny image; ``tasks/gates.py`` runs the models and calls these. Measurements are shares in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from perceptforge.logic.body_mask import boxes_mask, out_to_oval
from perceptforge.logic.gates import lab_of, local_mean

# a change of more than this (of 255, mean over the channels) is a changed pixel: what ``pair_measurements``
# counts in ``region_changed``, above JPEG noise and a matte's faint rim
CHANGED = 8.0
# below this person probability (the selfie segmenter's) a pixel is background: the hair's soft tips stay above it
BACKGROUND = 0.2
# a background edit cuts a pixel of the subject when the pixel's colour moves this far (CIELAB ΔE): a matte blending
# a jaw's or an ear's rim into a dark new scene moves it less (an issue-41 portrait's jaw, 2.8% of its oval moved
# past the 8 of CHANGED, 1.6% past this, and the annotator saw it whole), an ear filled with the new scene far more
CUT = 20.0
# the person the selfie segmenter is sure of (the map at least SURE_PERSON, shrunk by SURE_MARGIN of the image's
# shorter side past its uncertain rim: at a hundredth, the sky between the bundled cameraman's face and camera, which
# the map smooths over, was 0.8% of it) must not be cut; what it is sure is background (below SURE_BACKGROUND,
# SURE_INSIDE pixels inside the cut, past a matte's rim) must not be kept with the subject, counted in blobs a disc
# of PATCH_SIZE of the shorter side fits in and away from the frame (a tripod's thin legs the segmenter does not
# know, and a coat cut by the frame's edge where it is least sure, are not patches of backdrop)
SURE_PERSON = 0.9
SURE_MARGIN = 0.02
SURE_BACKGROUND = 0.05
SURE_INSIDE = 3
PATCH_SIZE = 0.01
# a seam's pixels lie off the blends at least this many times as far as the subject's and the new scene's own
# pixels beside it do: white hair at a temple, or a star beside the cut, is the texture there, not a line
SEAM_TEXTURE = 2.5
# an ear's disc: its radius is this share of the distance between the two ears' roots, its centre half a radius
# out from the root, so it covers the ear's inner two thirds. A twelfth, centred a radius out, reached past the
# ear's rim into the backdrop: the bundled Grace Hopper's kept ears showed 10–40% of it changed
EAR_RADIUS = 1 / 16
EAR_OFFSET = 0.5
# a pixel of the face oval is skin when its CIELAB colour lies within this of the face's median (ΔE): the oval's
# top reaches the hairline, where a fringe is hair, and hair is 20-33 ΔE from skin on the bundled portrait
# (quartiles) while her painted temple was within 10
SKIN_DELTA = 15.0
# an ear's disc is judged by its skin: its pixels within this of the face's median colour (CIELAB ΔE; an ear is
# redder and darker than a cheek), and only where at least EAR_SEEN of the disc is skin: hair over the ear, or a
# disc that falls beside a turned head onto the backdrop (a bearded man's, 34% "changed" by a clean swap), shows
# no ear to cut or paint
EAR_SKIN_DELTA = 25.0
EAR_SEEN = 0.25
# the ears are looked at only on a face seen nearly from the front: ear-to-ear at least this share of the oval's
# height (a face in profile shows one ear, where the mesh's two outermost points are not ears; 0.58 on the bundled
# cameraman's profile, 0.88 and 0.91 on the two frontal portraits)
FRONTAL = 0.7


def _check_shape(name: str, array: np.ndarray, shape: tuple[int, int]) -> None:
    if array.shape != shape:
        raise ValueError(f"{name} is {array.shape}, the image is {shape}")


def changed_pixels(natural: np.ndarray, manipulated: np.ndarray, threshold: float = CHANGED) -> np.ndarray:
    """(H, W) bool: pixels whose mean absolute change over the channels exceeds ``threshold``."""
    if natural.shape != manipulated.shape or natural.ndim != 3:
        raise ValueError(f"a pair's images must be (H, W, 3) of one size, got {natural.shape} and {manipulated.shape}")
    diff = np.abs(natural.astype(np.float32) - manipulated.astype(np.float32)).mean(axis=2)
    return diff > threshold


def cut_pixels(natural: np.ndarray, manipulated: np.ndarray, delta: float = CUT) -> np.ndarray:
    """(H, W) bool: pixels whose colour moved ``delta`` or more (CIELAB ΔE): what a background edit took from the
    subject, where a matte's faint blend along the rim is not counted."""
    if natural.shape != manipulated.shape or natural.ndim != 3:
        raise ValueError(f"a pair's images must be (H, W, 3) of one size, got {natural.shape} and {manipulated.shape}")
    return np.linalg.norm(lab_of(natural) - lab_of(manipulated), axis=-1) >= delta


def person_measurements(
    cut: np.ndarray, person: np.ndarray, keep: np.ndarray | None = None, ignore: np.ndarray | None = None
) -> dict[str, float]:
    """What a background edit did to the person the selfie segmenter sees on the natural photo (``person``: its
    probability map), whatever the annotation says: ``person_cut``, the share of the sure person (``SURE_PERSON``,
    shrunk by ``SURE_MARGIN`` of the shorter side) that the edit ``cut`` (a chest and a lei painted out with the
    new scene, a man cut at the waist where a podium was, an ear); with the kept subject ``keep`` (True where the
    edit kept the photo), ``background_kept``, the share of it that is surely background (``SURE_BACKGROUND``,
    ``SURE_INSIDE`` pixels or more inside the cut, outside ``ignore``: what the subject holds or has in front of
    it), in blobs away from the frame (``background_kept_pixels``): a strip of window frame beside a head, the
    curtain beside a shoulder."""
    _check_shape("the person map", person, cut.shape)
    margin = max(1, round(SURE_MARGIN * min(cut.shape)))
    kernel = np.ones((2 * margin + 1, 2 * margin + 1), np.uint8)
    sure = cv2.erode((person >= SURE_PERSON).astype(np.uint8), kernel).astype(bool)
    measured = {"person_cut": _share(cut, sure)}
    if keep is not None:
        measured["background_kept"] = round(
            float(background_kept_pixels(person, keep, ignore).sum() / max(1, keep.sum())), 6
        )
    return measured


def background_kept_pixels(person: np.ndarray, keep: np.ndarray, ignore: np.ndarray | None = None) -> np.ndarray:
    """(H, W) bool: the kept subject's pixels the selfie segmenter is sure are background, in blobs a disc of
    ``PATCH_SIZE`` of the shorter side fits in, not touching the frame (``person_measurements``)."""
    _check_shape("the kept subject", keep, person.shape)
    inner = cv2.erode(keep.astype(np.uint8), np.ones((2 * SURE_INSIDE + 1,) * 2, np.uint8)).astype(bool)
    found = inner & (person < SURE_BACKGROUND)
    if ignore is not None:
        found &= ~ignore
    radius = max(1, round(PATCH_SIZE * min(keep.shape)))
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    blobs = cv2.morphologyEx(found.astype(np.uint8), cv2.MORPH_OPEN, disc)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(blobs, connectivity=8)
    h, w = blobs.shape
    x, y, bw, bh = (stats[:, k] for k in (cv2.CC_STAT_LEFT, cv2.CC_STAT_TOP, cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT))
    away = [k for k in range(1, count) if x[k] > 0 and y[k] > 0 and x[k] + bw[k] < w and y[k] + bh[k] < h]
    return np.isin(labels, away)


def polygon_mask(points: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the inside of a closed polygon of (N ≥ 3, 2) points ``(x, y)`` in pixels."""
    points = np.asarray(points, np.float64)
    if points.ndim != 2 or points.shape[1] != 2 or len(points) < 3:
        raise ValueError(f"a polygon is (N >= 3, 2) points, got {points.shape}")
    out = np.zeros(shape, np.uint8)
    cv2.fillPoly(out, [np.round(points).astype(np.int32)], 1)
    return out.astype(bool)


def ear_discs(
    ears: np.ndarray, shape: tuple[int, int], share: float = EAR_RADIUS, offset: float = EAR_OFFSET
) -> tuple[np.ndarray, ...]:
    """One (H, W) bool disc per ear, of radius ``share`` × ear-to-ear, centred ``offset`` radii outwards from each
    ear's root (where it joins the head): the ear's part nearest the head, where a cut bites first and no
    backdrop lies. ``ears``: (2, 2), right then left."""
    ears = np.asarray(ears, np.float64)
    if ears.shape != (2, 2):
        raise ValueError(f"ears are (2, 2) points, got {ears.shape}")
    span = float(np.linalg.norm(ears[1] - ears[0]))
    if span <= 0:
        raise ValueError("the two ears are at one point")
    radius = share * span
    outward = (ears[0] - ears[1]) / span  # from the left ear towards the right one
    discs = []
    for root, direction in ((ears[0], outward), (ears[1], -outward)):
        centre = root + offset * radius * direction
        disc = np.zeros(shape, np.uint8)
        cv2.circle(disc, (int(round(centre[0])), int(round(centre[1]))), max(1, int(round(radius))), 1, -1)
        discs.append(disc.astype(bool))
    return tuple(discs)


def frontal(ears: np.ndarray, oval: np.ndarray, min_ratio: float = FRONTAL) -> bool:
    """Whether a face is seen nearly from the front: its ear-to-ear distance (the ears taken at the oval's edges
    where the face is turned a little, ``out_to_oval``) is at least ``min_ratio`` of its oval's height."""
    oval, ears = np.asarray(oval, np.float64), np.clip(np.asarray(ears, np.float64), 0, None)
    height = float(np.ptp(oval[:, 1]))
    if height <= 0:
        return False
    corner = np.ceil(np.maximum(oval.max(axis=0), ears.max(axis=0))).astype(int) + 2
    roots: np.ndarray = np.array(out_to_oval(ears, polygon_mask(oval, (int(corner[1]), int(corner[0])))), np.float64)
    return float(np.linalg.norm(roots[1] - roots[0])) >= min_ratio * height


def skin(
    image: np.ndarray, oval: np.ndarray, exclude: np.ndarray | None = None, delta: float = SKIN_DELTA
) -> np.ndarray:
    """(H, W) bool: the face oval's pixels whose colour is the face's own: within ``delta`` (CIELAB ΔE) of the
    median colour of the oval's pixels outside ``exclude`` (a pair's changed pixels: the median is the unchanged
    face's). A fringe of hair inside the oval's top is not skin; a painted forehead was."""
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"skin needs an (H, W, 3) RGB image, got {image.shape}")
    face = polygon_mask(oval, image.shape[:2])
    if exclude is not None:
        _check_shape("the excluded pixels", exclude, image.shape[:2])
    source = face & ~exclude if exclude is not None and (face & ~exclude).any() else face
    if not source.any():
        return face
    lab = lab_of(image)
    median = np.median(lab[source], axis=0)
    return face & (np.linalg.norm(lab - median, axis=-1) < delta)


def not_hair(image: np.ndarray, oval: np.ndarray, eyebrows: Sequence[np.ndarray] = (), grow: int = 2) -> np.ndarray:
    """(H, W) bool: what a hair region must never hold: the face's skin (``skin``) and the eyebrows, grown by
    ``grow`` pixels (a recolour's soft edge)."""
    out = skin(image, oval)
    for b in eyebrows:
        out |= polygon_mask(b, image.shape[:2])
    if grow > 0:
        out = cv2.dilate(out.astype(np.uint8), np.ones((2 * grow + 1, 2 * grow + 1), np.uint8)).astype(bool)
    return out


def hair_without_face(hair: np.ndarray, never_hair: np.ndarray) -> np.ndarray:
    """(H, W) bool: ``hair`` less what is never hair (``not_hair``), but a patch that hair closes in on every side
    stays: a fringe's shadowed strands share the skin's colour, and cutting them out left unrecoloured holes in
    the middle of dyed hair; skin on a temple or a forehead meets the rest of the face, so it is not enclosed."""
    from scipy.ndimage import binary_fill_holes

    kept = hair & ~never_hair
    return kept | (binary_fill_holes(kept) & hair)


def _box_mask(box: tuple[float, float, float, float], shape: tuple[int, int], keep: float = 0.5) -> np.ndarray:
    """(H, W) bool: the middle ``keep`` of a box in each direction, surely the thing it boxes (a podium's wood, not
    the floor its box caught)."""
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * (1 - keep) / 2, (y1 - y0) * (1 - keep) / 2
    out = np.zeros(shape, bool)
    out[max(0, round(y0 + dy)) : max(0, round(y1 - dy)), max(0, round(x0 + dx)) : max(0, round(x1 - dx))] = True
    return out


def kept_measurements(
    changed: np.ndarray, kept: dict[str, tuple[float, float, float, float]], mask: np.ndarray | None = None
) -> dict[str, float]:
    """``kept_changed:<label>``: the share of the middle of each object a background edit keeps (what the subject
    holds, what stands in front of it) that changed, of its pixels the ``mask`` does not replace (all of them
    without one): a podium painted over by an inpainter, a microphone removed, whatever backend made the pair.
    ``kept_replaced:<label>``: the share of that middle the ``mask`` itself replaced (an edit whose mask took the
    podium with the old background: the changed pixels outside the mask cannot show it)."""
    measured: dict[str, float] = {}
    for label, box in kept.items():
        middle = _box_mask(box, changed.shape)
        if mask is not None and middle.any():
            measured[f"kept_replaced:{label}"] = _share(mask, middle)
            middle &= ~mask
        if middle.any():
            measured[f"kept_changed:{label}"] = _share(changed, middle)
    return measured


def _share(part: np.ndarray, of: np.ndarray) -> float:
    return round(float((part & of).sum() / of.sum()), 6) if of.any() else 0.0


def hair_spill_measurements(
    changed: np.ndarray,
    natural: np.ndarray,
    oval: np.ndarray | None,
    eyebrows: Sequence[np.ndarray] = (),
    person: np.ndarray | None = None,
    background: float = BACKGROUND,
    ears: np.ndarray | None = None,
) -> dict[str, float]:
    """What a hair recolour changed that is not hair. ``changed``: (H, W) bool; ``natural``: the photo before;
    ``oval``: the face oval's polygon (None: no face seen); ``eyebrows``: their polygons; ``person``: the person
    probability map (None: not measured). ``changed_on_face``: the share of changed pixels on the face's skin
    (``skin``: inside the oval, the face's colour), what a spill that paints a forehead while the hair stays
    shows; ``face_skin_changed``: the share of the face's skin changed, what a narrow stripe on a forehead beside
    a large head of hair shows; ``face_oval_changed``: the share of the oval repainted, fringe included;
    ``eyebrows_changed``: of the eyebrows; ``ear_painted:right`` / ``ear_painted:left`` (with the ``ears``, on a
    frontal face): the share of each ear's skin changed (``ear_skin``); ``changed_in_background``: the share of
    changed pixels where the person probability is below ``background``."""
    shape = changed.shape
    _check_shape("the natural image", natural[..., 0], shape)
    measured: dict[str, float] = {}
    if oval is not None:
        face_skin = skin(natural, oval, changed)
        measured["changed_on_face"] = _share(face_skin, changed)
        measured["face_skin_changed"] = _share(changed, face_skin)
        measured["face_oval_changed"] = _share(changed, polygon_mask(oval, shape))
        if eyebrows:
            brows = np.zeros(shape, bool)
            for b in eyebrows:
                brows |= polygon_mask(b, shape)
            measured["eyebrows_changed"] = _share(changed, brows)
        if ears is not None and frontal(ears, oval):
            # an ear (and its earring's skin) painted with the hair beside it: the ear's skin, not the hair over it
            for side, part in zip(("right", "left"), ear_skin(natural, oval, ears)):
                if part is not None:
                    measured[f"ear_painted:{side}"] = _share(changed, part)
    if person is not None:
        _check_shape("the person map", person, shape)
        measured["changed_in_background"] = _share(person < background, changed)
    return measured


def ear_skin(
    natural: np.ndarray, oval: np.ndarray, ears: np.ndarray, delta: float = EAR_SKIN_DELTA, seen: float = EAR_SEEN
) -> tuple[np.ndarray | None, ...]:
    """Each ear's disc (``ear_discs``: right, left) less the face oval and what is not skin (within ``delta`` of the
    oval's median colour): the ear itself, where a cut bites or a spilt recolour paints; None for an ear not seen
    (less than ``seen`` of its disc skin)."""
    shape = natural.shape[:2]
    face = polygon_mask(oval, shape)
    if not face.any():
        return (None, None)
    lab = lab_of(natural)
    # the ear lies outside the oval (the cheek inside it is the face oval's own gate's); a pixel blended with the
    # backdrop beside a cheek's edge is not an ear's: skin is taken one pixel in from what is not skin
    tone = np.linalg.norm(lab - np.median(lab[face], axis=0), axis=-1) < delta
    tone = cv2.erode(tone.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool) & ~face
    # on a face turned a little the ear stands out past where its landmark is, at the oval's edge
    roots: np.ndarray = np.array(out_to_oval(ears, face), np.float64)
    return tuple(ear if (ear := disc & tone).sum() >= seen * disc.sum() else None for disc in ear_discs(roots, shape))


def inner(part: np.ndarray | None) -> np.ndarray | None:
    """An ear's skin (``ear_skin``) less its outermost pixel where anything is left: the matte blends the new
    scene a pixel or two into a kept ear's rim (a whole ear's lit rim on a painting, 10.4% of its disc's skin moved
    20 ΔE), which is not a cut; a cut takes the ear's inside as well."""
    if part is None:
        return None
    core = cv2.erode(part.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    return core if core.any() else part


def body_part_measurements(
    changed: np.ndarray, oval: np.ndarray | None, ears: np.ndarray | None = None, natural: np.ndarray | None = None
) -> dict[str, float]:
    """What a background edit changed of the body the referees see: ``face_oval_changed`` (the share of the face
    oval changed) and, on a face seen from the front, ``ear_changed:right`` / ``ear_changed:left`` (the share of
    each ear's disc, ``ear_discs``; with the ``natural`` photo, of the disc's skin, ``ear_skin``, and only for an
    ear it shows, less its outermost pixel: ``inner``)."""
    shape = changed.shape
    measured: dict[str, float] = {}
    if oval is None:
        return measured
    measured["face_oval_changed"] = _share(changed, polygon_mask(oval, shape))
    if ears is not None and frontal(ears, oval):
        parts = ear_discs(ears, shape) if natural is None else tuple(map(inner, ear_skin(natural, oval, ears)))
        for side, part in zip(("right", "left"), parts):
            if part is not None:
                measured[f"ear_changed:{side}"] = _share(changed, part)
    return measured


def referee_verdict(measured: dict[str, float], limits: dict[str, float]) -> str | None:
    """Why a pair fails a referee gate: the first measurement (in ``limits``' order; ``ear_changed`` covers both
    ears) above its limit, said with both numbers; None if none is."""
    words = {
        "changed_on_face": "of the changed pixels lie on the face's skin (inside the face oval, not hair)",
        "face_skin_changed": "of the face's skin changed (inside the face oval, the face's colour)",
        "face_oval_changed": "of the face oval changed",
        "eyebrows_changed": "of the eyebrows changed",
        "changed_in_background": "of the changed pixels lie in the background",
        "ear_changed": "of an ear's place changed (the ear is cut or painted)",
        "old_rim": "of the kept outline keeps a rim of the old background",
        "hair_texture_cut": "of the hair box above the ears is side hair (by its strands) swapped with the background",
        "ear_painted": "of an ear's skin painted with the hair",
        "old_patch": "of the kept subject is old background left in or beside it",
        "seam": "of the kept outline shows a seam (a dotted, light or dark line along the cut)",
        "person_cut": "of the person (as the person segmenter sees it) cut away by the edit",
        "background_kept": "of the kept subject is what the person segmenter sees as background",
        "kept_changed": "of what stands in front of the subject, or what it holds, changed",
        "kept_replaced": "of what stands in front of the subject, or what it holds, replaced with the background",
    }
    failed = first_failure(measured, limits)
    if failed is None:
        return None
    key = failed.split(":")[0]
    return f"{measured[failed]:.1%} {words.get(key, key)} (at most {limits[key]:.1%})"


def first_failure(measured: dict[str, float], limits: dict[str, float]) -> str | None:
    """The measurement's key (``ear_changed:left``) of the first limit (in ``limits``' order) a measurement exceeds,
    the worse side first; None if none does."""
    for key, limit in limits.items():
        values = sorted(((v, k) for k, v in measured.items() if k == key or k.startswith(key + ":")), reverse=True)
        if values and values[0][0] > limit:
            return values[0][1]
    return None


def failing_region(
    key: str,
    changed: np.ndarray,
    natural: np.ndarray,
    manipulated: np.ndarray,
    oval: np.ndarray | None = None,
    eyebrows: Sequence[np.ndarray] = (),
    ears: np.ndarray | None = None,
    person: np.ndarray | None = None,
    keep: np.ndarray | None = None,
    kept: dict[str, tuple[float, float, float, float]] | None = None,
    lost_hair: np.ndarray | None = None,
) -> np.ndarray:
    """(H, W) bool: where the failure a measurement's ``key`` names lies, for report.html to outline (the face's
    painted skin, the changed eyebrows, the painted background, the changed oval, the cut or painted ear's disc, the
    rim left along the cut, the old background's patches, the seam, the changed part of a kept object's middle, the
    side hair taken: ``lost_hair``); empty for a key it does not know or a part not given."""
    shape = changed.shape
    out = np.zeros(shape, bool)
    name, _, side = key.partition(":")
    if name in ("changed_on_face", "face_skin_changed") and oval is not None:
        out = changed & skin(natural, oval, changed)
    elif name == "face_oval_changed" and oval is not None:
        out = changed & polygon_mask(oval, shape)
    elif name == "eyebrows_changed":
        for b in eyebrows:
            out |= changed & polygon_mask(b, shape)
    elif name == "changed_in_background" and person is not None:
        out = changed & (person < BACKGROUND)
    elif name in ("ear_changed", "ear_painted") and ears is not None:
        out = ear_discs(ears, shape)[0 if side == "right" else 1]
    elif name == "old_patch" and keep is not None:
        out = old_patch_pixels(natural, keep, ignore=boxes_mask(list((kept or {}).values()), shape))
    elif name == "seam" and keep is not None:
        out = cv2.dilate(seam_pixels(manipulated, keep).astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    elif name in ("kept_changed", "kept_replaced") and side in (kept or {}):
        out = changed & _box_mask((kept or {})[side], shape)
    elif name == "person_cut" and person is not None:
        out = changed & (person >= SURE_PERSON)
    elif name == "background_kept" and person is not None and keep is not None:
        out = background_kept_pixels(person, keep, boxes_mask(list((kept or {}).values()), shape))
    elif name == "hair_texture_cut" and lost_hair is not None:
        out = lost_hair
    elif name == "old_rim" and keep is not None:
        out = cv2.dilate(old_rim_pixels(natural, manipulated, keep).astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    return out


def outlined_pair(natural: np.ndarray, manipulated: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The natural and the manipulated image side by side, the ``region`` outlined in magenta on both (and, where it
    is a scatter of pixels, tinted): the picture report.html shows of a referee gate's failure."""
    _check_shape("the region", region, natural.shape[:2])
    outline = region & ~cv2.erode(region.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    outline = cv2.dilate(outline.astype(np.uint8), np.ones((2, 2), np.uint8)).astype(bool)
    sides = []
    for image in (natural, manipulated):
        shown = image.copy()
        shown[region] = (shown[region] * 0.6 + np.array([255, 0, 255]) * 0.4).astype(np.uint8)
        shown[outline] = (255, 0, 255)
        sides.append(shown)
    return np.hstack(sides)


def _band(region: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The pixels of ``region`` at a distance in [lo, hi] from its edge (8-neighbour distance transform)."""
    depth = cv2.distanceTransform(region.astype(np.uint8), cv2.DIST_L2, 3)
    return region & (depth >= lo) & (depth <= hi)


def old_rim_pixels(
    natural: np.ndarray,
    manipulated: np.ndarray,
    keep: np.ndarray,
    band: int = 3,
    reach: int = 6,
    min_contrast: float = 15.0,
) -> np.ndarray:
    """(H, W) bool: the points of the kept subject's outline (away from the image's edge) where a rim of the old
    background stays along the cut. Around each point (within ``reach``), on the manipulated image: the rim (kept
    pixels up to ``band`` from the cut), the subject (kept pixels beyond it) and the new background (outside the
    cut); on the natural image, the old background outside the cut. A point is flagged where the rim's colour is
    nearer the old background than both the subject and the new one (CIELAB ΔE), and the old background differs
    from each of them by ``min_contrast`` or more (a backdrop the subject's colour, or a new scene like the old
    one, leaves nothing to see). A matte's soft rim blends the subject with the new background: not flagged."""
    if natural.shape != manipulated.shape or natural.ndim != 3:
        raise ValueError(f"a pair's images must be (H, W, 3) of one size, got {natural.shape} and {manipulated.shape}")
    _check_shape("the kept subject", keep, natural.shape[:2])

    before, after = lab_of(natural), lab_of(manipulated)
    outside = ~keep
    rim, n_rim = local_mean(after, _band(keep, 0, band), reach)
    subject, n_subject = local_mean(after, _band(keep, band + 2, band + 2 + reach), reach)
    near = _band(outside, 0, reach)
    old, n_old = local_mean(before, near, reach)
    new, n_new = local_mean(after, near, reach)

    def gap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.linalg.norm(a - b, axis=-1)

    outline = keep & ~cv2.erode(keep.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    away = np.zeros_like(outline)
    away[reach:-reach, reach:-reach] = True
    seen = outline & away & (n_rim > 2) & (n_subject > 2) & (n_old > 2) & (n_new > 2)
    # a matte mixes the subject's and the new scene's colours as light does, in RGB: the mix nearest the rim there
    rgb = manipulated.astype(np.float32)
    mixes = [local_mean(rgb, _band(keep, *span), reach)[0] for span in ((0, band), (band + 2, band + 2 + reach))]
    mix = blend_of(mixes[0], mixes[1], local_mean(rgb, near, reach)[0])
    to_old = gap(rim, old)
    return (
        seen
        & (to_old < gap(lab_of(mixes[0]), lab_of(mix)))
        & (gap(old, subject) >= min_contrast)
        & (gap(old, new) >= min_contrast)
    )


def blend_of(colour: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(..., 3): the mix of ``a`` and ``b`` (a point of the segment between them) nearest ``colour``."""
    d = a - b
    t = np.clip(np.sum((colour - b) * d, axis=-1) / np.maximum(np.sum(d * d, axis=-1), 1e-9), 0.0, 1.0)
    return b + t[..., None] * d


def old_rim(natural: np.ndarray, manipulated: np.ndarray, keep: np.ndarray) -> float:
    """The share of the kept subject's outline (away from the image's edge) along which a rim of the old
    background stays (``old_rim_pixels``): 0 for a cut that follows the subject."""
    flagged = old_rim_pixels(natural, manipulated, keep)
    outline = keep & ~cv2.erode(keep.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    return round(float(flagged.sum() / max(1, outline.sum())), 6)


def old_patch_pixels(
    natural: np.ndarray,
    keep: np.ndarray,
    reach: int = 20,
    deep: int = 8,
    skip: int = 2,
    near: float = 10.0,
    min_area: float = 0.0006,
    ignore: np.ndarray | None = None,
) -> np.ndarray:
    """(H, W) bool: patches of the old background a background edit kept with the subject: a strip of backdrop
    beside a shoulder, the sky enclosed between a face, a camera and the hands, the grass under an elbow. A kept
    pixel (``skip`` or more from the cut, past a matte's blend; not in ``ignore``, what the subject holds or has in
    front of it) is old background where, on the natural photo, its colour lies within ``near`` (CIELAB ΔE) of the
    old background beside it (the replaced pixels' mean within ``reach``) and at least twice as far from the
    subject beside it (the mean of the kept pixels ``deep`` or more from the cut, within ``reach``); such pixels,
    opened by a 3×3 square, count where they join into a patch of at least ``min_area`` of the image. A suit the
    colour of the curtain behind it is as near the subject: not a patch."""
    _check_shape("the kept subject", keep, natural.shape[:2])
    keep8 = keep.astype(np.uint8)
    inside = cv2.distanceTransform(keep8, cv2.DIST_L2, 3)
    lab = lab_of(natural)
    old, n_old = local_mean(lab, ~keep, reach)
    subject, n_subject = local_mean(lab, keep & (inside >= deep), reach)
    to_old = np.linalg.norm(lab - old, axis=-1)
    to_subject = np.where(n_subject > 2, np.linalg.norm(lab - subject, axis=-1), np.inf)
    found = keep & (inside >= skip) & (n_old > 2) & (to_old < near) & (2 * to_old < to_subject)
    if ignore is not None:
        found &= ~ignore
    found = cv2.morphologyEx(found.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(found, connectivity=8)
    big = [k for k in range(1, count) if stats[k, cv2.CC_STAT_AREA] >= min_area * keep.size]
    return np.isin(labels, big)


def old_patch(natural: np.ndarray, keep: np.ndarray, ignore: np.ndarray | None = None) -> float:
    """The share of the kept subject that is old background left in or beside it (``old_patch_pixels``, outside
    ``ignore``): 0 for a cut that keeps only the subject."""
    return round(float(old_patch_pixels(natural, keep, ignore=ignore).sum() / max(1, keep.sum())), 6)


def seam_pixels(
    manipulated: np.ndarray, keep: np.ndarray, reach: int = 6, gap: int = 3, min_contrast: float = 20.0
) -> np.ndarray:
    """(H, W) bool: the points of the kept subject's outline (away from the image's edge) where the composite shows
    a seam: a line along the cut, one pixel on the kept side or two on the new side, whose pixels lie on average
    ``min_contrast`` (CIELAB ΔE) or more from every blend of the subject beside it and the new background beside it
    (each sampled ``gap`` to ``gap + reach`` pixels from the cut). Each pixel is judged on its own before they are
    averaged: a dotted dark and light line averages to a grey that a blend of a dark suit and a pale sky can match,
    and a one-pixel light edge of the old backdrop is diluted by the pixels beside it, but each of their pixels lies
    off every blend; and they lie off the blends ``SEAM_TEXTURE`` times as far as the sides' own pixels do (white hair
    at a temple beside a dark cap is the subject's texture). A matte's blend lies between the two sides."""
    _check_shape("the kept subject", keep, manipulated.shape[:2])
    lab = lab_of(manipulated)

    keep8 = keep.astype(np.uint8)
    inside = cv2.distanceTransform(keep8, cv2.DIST_L2, 3)
    outside = cv2.distanceTransform(1 - keep8, cv2.DIST_L2, 3)
    subject, n_subject = local_mean(lab, keep & (inside >= gap) & (inside <= gap + reach), reach)
    new, n_new = local_mean(lab, ~keep & (outside >= gap) & (outside <= gap + reach), reach)
    # each pixel's distance from the segment between the two sides' colours near it
    span = new - subject
    t = np.clip(((lab - subject) * span).sum(-1) / np.maximum((span * span).sum(-1), 1e-6), 0, 1)
    off = np.repeat(np.linalg.norm(lab - (subject + t[..., None] * span), axis=-1)[..., None], 3, axis=-1)
    near = max(1, reach // 2)
    kept_line, n_kept = local_mean(off, keep & (inside <= 1), near)
    new_line, n_new_line = local_mean(off, ~keep & (outside <= 2), near)
    line = np.maximum(kept_line[..., 0], new_line[..., 0])
    # the sides' own pixels off the same blends: the texture a line must stand out from
    subject_off, _ = local_mean(off, keep & (inside >= gap) & (inside <= gap + reach), reach)
    new_off, _ = local_mean(off, ~keep & (outside >= gap) & (outside <= gap + reach), reach)
    texture = np.maximum(subject_off[..., 0], new_off[..., 0])
    outline = keep & ~cv2.erode(keep8, np.ones((3, 3), np.uint8)).astype(bool)
    away = np.zeros_like(outline)
    margin = gap + reach
    away[margin:-margin, margin:-margin] = True
    seen = outline & away & (n_subject > 2) & (n_new > 2) & (n_kept > 0) & (n_new_line > 0)
    return seen & (line >= min_contrast) & (line >= SEAM_TEXTURE * texture)


def seam(manipulated: np.ndarray, keep: np.ndarray) -> float:
    """The share of the kept subject's outline (away from the image's edge) along which a seam shows
    (``seam_pixels``): 0 for a cut blended into the new scene."""
    flagged = seam_pixels(manipulated, keep)
    outline = keep & ~cv2.erode(keep.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    away = np.zeros_like(outline)
    away[9:-9, 9:-9] = True  # seam_pixels' margin: gap + reach
    return round(float(flagged.sum() / max(1, (outline & away).sum())), 6)


def sure_boxes(
    oval: np.ndarray, ears: Sequence[np.ndarray | None], shape: tuple[int, int], bands: int = 12, margin: int = 3
) -> list[tuple[float, float, float, float]]:
    """Boxes surely inside the subject, for a background edit's segmentation to start from (GrabCut's sure
    foreground): horizontal bands of the face oval shrunk by ``margin`` pixels, each as wide as its narrowest row
    (so no box reaches past the oval), and the largest square inside each seen ear's skin (``ear_skin``). A
    segmenter that cut an ear or a jaw from its coarse map keeps them, and the colour model grows the rest of the
    ear from its inner part."""
    out: list[tuple[float, float, float, float]] = []
    face = cv2.erode(polygon_mask(oval, shape).astype(np.uint8), np.ones((2 * margin + 1,) * 2, np.uint8)) > 0
    rows = np.nonzero(face.any(axis=1))[0]
    if len(rows):
        for band in np.array_split(rows, min(bands, len(rows))):
            lo, hi = 0, shape[1]
            for y in band:
                xs = np.nonzero(face[y])[0]
                lo, hi = max(lo, int(xs.min())), min(hi, int(xs.max()) + 1)
            if hi > lo:
                out.append((float(lo), float(band[0]), float(hi), float(band[-1] + 1)))
    for ear in ears:
        if ear is None:
            continue
        # the largest square about the ear's deepest pixel that holds only its skin: surely ear, whatever its shape
        depth = cv2.distanceTransform(np.pad(ear, 1).astype(np.uint8), cv2.DIST_C, 3)[1:-1, 1:-1]
        if depth.max() < 1:
            continue
        y, x = np.unravel_index(int(np.argmax(depth)), ear.shape)
        r = int(depth[y, x]) - 1
        out.append((float(x - r), float(y - r), float(x + r + 1), float(y + r + 1)))
    return out
