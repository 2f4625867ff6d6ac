"""What a background edit keeps of a person annotated with a box only, made right where a segmenter's coarse map
goes wrong, from what the referees see (``backends/referees``: the face oval, the pose's ears, shoulders, elbows
and wrists) and the photo's own colours near the outline.

A person segmenter's 256×256 map, refined by GrabCut, cuts what is thin or lit like the backdrop: an ear's rim, a
curl of hair, a sleeve beside a flag of the same red; and the outline's clean-up closes the corner between a jaw and
a collar over a sliver of the old background. Here:

- ``limbs``: the pose's arms and shoulder line as capsules: their cores are surely the subject, and a wider body
  around them is never taken as the old background's, even inside the box of the flag it names;
- ``whole_ears``: each ear the pose sees is kept out to its rim: skin-coloured pixels about it, joined to the head;
- ``grown_hair``: hair past the outline (a curl, a wisp at a temple), inside the annotated hair box, whose colour is
  the kept hair's and not the backdrop's;
- ``trimmed``: pixels along the outline whose colour is clearly the old background's, and not the subject's near
  them, go with the background (a sliver beside a neck), never what is surely the subject.

All are NumPy and OpenCV on arrays, know nothing of a model, and are tested on small drawn images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

from perceptforge.logic import pose as pl
from perceptforge.logic.matting import TEXTURE_HALF, spread, texture

Box = tuple[float, float, float, float]
# the arms' segments and the shoulder line, by pose landmark
LIMBS = (
    (pl.LEFT_SHOULDER, pl.RIGHT_SHOULDER),
    (pl.LEFT_SHOULDER, pl.LEFT_ELBOW),
    (pl.RIGHT_SHOULDER, pl.RIGHT_ELBOW),
    (pl.LEFT_ELBOW, pl.LEFT_WRIST),
    (pl.RIGHT_ELBOW, pl.RIGHT_WRIST),
)
LIMB_VISIBLE = 0.7  # a landmark the pose model is this sure it sees
CORE, BODY = 0.06, 0.16  # a limb's sure core and its body, as shares of the shoulders' width
# an ear's disc: its radius, and how far outwards and up from the pose's ear point its centre lies, as shares of
# the ears' spacing (an ear is about a quarter of a head's width tall, its opening low in it)
EAR_REACH, EAR_OUT, EAR_UP = 0.25, 0.08, 0.06
# and its lobe's, below it: how far down from the disc's centre and in towards the head, and its radius (the lobe
# hangs a quarter of the spacing below the opening, under it: 6-x's, 46 px below on a 179 px spacing, lay past the
# disc and was cut)
LOBE_DOWN, LOBE_IN, LOBE_REACH = 0.22, 0.08, 0.10
EAR_TURNED = 0.15  # an ear point this far (× the ears' spacing) inside the face oval's edge is on a turned face
PROFILE = 0.5  # and one further in is on a face seen from the side
EAR_CLEARLY = 0.7  # an ear's lit rim is less like the face's skin than the face is: a looser test, in its disc only
# where the person segmenter sees less than HAIR_PERSON, hair grows only as thin as a curl and far nearer the hair
HAIR_PERSON, CURL_PX, UNSEEN_CLEARLY = 0.01, 11, 0.3
# the hair falling beside the neck below each seen ear: an ellipse below the ear point, its half-width and
# half-height and how far below the ear its centre lies, as shares of the ears' spacing
SIDE_HALF_W, SIDE_HALF_H, SIDE_DOWN = 0.3, 0.35, 0.3
SIDE_PERSON = 0.3  # the person segmenter's probability from which hair there is never trimmed
CLEARLY = 0.5  # a colour is one side's when it is at most half as far from it as from the other side
SEED_TRIES = 5  # k-means runs from k-means++ seeds for a side's colours, the most compact kept
EDGE_REACH = 0.012  # how far past the cut the body is grown to its edge, as a share of the image's longer side
BODY_SURE = 0.9  # the person segmenter's probability from which a pixel nearer the body's colours is the body's
# hair is told from a blurred backdrop by its strands: where the kept hair is this many times as textured as the
# backdrop beside it, a pixel past the outline is hair from the two textures' geometric mean up
HAIR_TEXTURE_OVER = 2.5
# what the side-hair gate forgives of the strands' outer fringe: the window's reach past them and as far again into
# them, half the backdrop's colour, which a cut may leave to the matte (pairs labelled good by looking lost that much)
HAIR_FRINGE = 3 * TEXTURE_HALF
# ...where the fringe shows: hair this many L* lighter or darker than the backdrop behind it. Before a backdrop as
# dark as the hair (a navy flag) only the window's reach: dark temple hair 4-10 px wide, taken whole, is seen gone
FRINGE_SHOWS_L = 10.0


@dataclass(frozen=True)
class BodyParts:
    """What the referees see of one subject, for its segmentation: ``sure`` (H, W) bool surely the subject (the face
    oval, the limbs' cores), ``body`` (H, W) bool where its body lies (never the old background's, whatever box of
    it), the seen ears' points, the annotated hair box, the face oval (H, W) bool whose skin the ears are, and the
    person segmenter's probability (H, W)."""

    sure: np.ndarray
    body: np.ndarray
    ears: tuple[tuple[float, float], ...] = ()
    ear_span: float = 0.0
    hair: Box | None = None
    face: np.ndarray | None = field(default=None)
    person: np.ndarray | None = field(default=None)  # (H, W) the person segmenter's probability


def capsule(shape: tuple[int, int], p: Sequence[float], q: Sequence[float], radius: float) -> np.ndarray:
    """(H, W) bool: the points within ``radius`` of the segment from ``p`` to ``q``."""
    out = np.zeros(shape, np.uint8)
    r = max(1, int(round(radius)))
    a, b = (int(round(p[0])), int(round(p[1]))), (int(round(q[0])), int(round(q[1])))
    cv2.line(out, a, b, 1, thickness=2 * r + 1)
    cv2.circle(out, a, r, 1, -1)
    cv2.circle(out, b, r, 1, -1)
    return out.astype(bool)


def limbs(pose: pl.Pose, shape: tuple[int, int], person: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(core, body), each (H, W) bool: the capsules along the seen arms and shoulder line, of radius ``CORE`` and
    ``BODY`` × the shoulders' width. A segment counts where both its ends are seen (visible, in the photo) and,
    given the person segmenter's ``person`` probability, both ends and its middle lie on the person (the pose
    model guesses a hidden arm behind a podium)."""
    h, w = shape
    core, body = np.zeros(shape, bool), np.zeros(shape, bool)
    if not (pose.seen(pl.LEFT_SHOULDER, h, w, LIMB_VISIBLE) and pose.seen(pl.RIGHT_SHOULDER, h, w, LIMB_VISIBLE)):
        return core, body
    span = float(np.hypot(*(pose.points[pl.LEFT_SHOULDER] - pose.points[pl.RIGHT_SHOULDER])))
    for i, j in LIMBS:
        if not (pose.seen(i, h, w, LIMB_VISIBLE) and pose.seen(j, h, w, LIMB_VISIBLE)):
            continue
        p, q = pose.points[i], pose.points[j]
        if person is not None:
            ends = (p, q, (p + q) / 2)
            if any(person[min(h - 1, int(y)), min(w - 1, int(x))] < 0.5 for x, y in ends):
                continue
        core |= capsule(shape, p, q, CORE * span)
        body |= capsule(shape, p, q, BODY * span)
    return core, body


def seen_ears(pose: pl.Pose, shape: tuple[int, int]) -> tuple[tuple[tuple[float, float], ...], float]:
    """The ears the pose sees (points in the photo) and the spacing of its two ears (0 with fewer than two)."""
    h, w = shape
    ears = tuple(
        (float(pose.points[i][0]), float(pose.points[i][1]))
        for i in (pl.RIGHT_EAR, pl.LEFT_EAR)
        if pose.seen(i, h, w, LIMB_VISIBLE)
    )
    span = float(np.hypot(*(pose.points[pl.LEFT_EAR] - pose.points[pl.RIGHT_EAR]))) if len(ears) == 2 else 0.0
    return ears, span


def beside_head(ears: Sequence[tuple[float, float]], ear_span: float, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: where hair falls beside the neck below each seen ear (an ellipse below the ear point). White hair
    there is unsure for the person segmenter and may be the colour of a pale backdrop: it is the subject's body, never
    forced to the old background's because the box of a flag or a backdrop the old value names reaches over it;
    GrabCut's colours decide, as along the rest of the outline."""
    zone = np.zeros(shape, np.uint8)
    if ear_span <= 0:
        return zone.astype(bool)
    axes = (max(1, int(round(SIDE_HALF_W * ear_span))), max(1, int(round(SIDE_HALF_H * ear_span))))
    for x, y in ears:
        cv2.ellipse(zone, (int(round(x)), int(round(y + SIDE_DOWN * ear_span))), axes, 0, 0, 360, 1, -1)
    return zone.astype(bool)


def hangs_below_ears(hair: Box | None, ears: Sequence[tuple[float, float]]) -> bool:
    """Whether hair may hang beside the neck: no hair box says where it ends, or it reaches a seen ear's height.
    Short hair ending above the ears hangs nowhere there, and a strip of lit window kept beside a neck as its hair
    was old background down to the collar."""
    return hair is None or any(hair[3] >= y for _, y in ears)


def side_hair_cut(changed: np.ndarray, parts: BodyParts) -> float:
    """The most, over the seen ears, of the share of what the person segmenter sees (at least ``SIDE_PERSON``)
    beside the head below the ear (``beside_head``) that ``changed`` (H, W) bool swaps: the hair there that went
    with the background. 0 where no two ears or no person probability are known."""
    if parts.person is None or parts.ear_span <= 0:
        return 0.0
    shares = []
    for ear in parts.ears:
        zone = _side_zone(parts, (ear,), changed.shape)
        if zone.any():
            shares.append(float((zone & changed).sum() / zone.sum()))
    return max(shares, default=0.0)


def box_short_of_person(
    person: np.ndarray,
    box: Box,
    kept: np.ndarray | None = None,
    frame: float = 2.0,
    sure: float = 0.9,
    share: float = 0.01,
) -> tuple[str, int, int] | None:
    """Where the subject's ``box`` stops short of the photo's frame while the person runs on to it: (the side, how
    many pixels short, on how many rows or columns), the side with the most; None where on no side does. A line
    counts where the person segmenter's ``person`` map is ``sure`` or more all the way from the box's edge to the
    frame (a second person beyond a gap does not count; 0.9, the person cut's sure person: the segmenter's coarse
    map reaches 0.5 on a red flag 8–20 px beside a sleeve), and a side counts with at least ``share`` of the
    photo's side such lines (3 at least). What the edit keeps whole anyway (``kept``: a podium before the speaker,
    which the segmenter takes for him) is no person here. The box is the whole subject for a background edit: what
    lies past it goes."""
    h, w = person.shape
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    seen = (person >= sure) & (~kept if kept is not None else True)
    rows, cols = slice(max(0, y0), min(h, y1)), slice(max(0, x0), min(w, x1))
    strips = {
        "left": (x0 > frame, seen[rows, : max(0, x0) + 1], 1, x0),
        "right": (x1 < w - frame, seen[rows, min(w, x1) - 1 :], 1, w - x1),
        "top": (y0 > frame, seen[: max(0, y0) + 1, cols], 0, y0),
        "bottom": (y1 < h - frame, seen[min(h, y1) - 1 :, cols], 0, h - y1),
    }
    found = []
    for side, (short, strip, axis, gap) in strips.items():
        if short and strip.size:
            lines = int(strip.all(axis=axis).sum())
            if lines >= max(3, share * (h if axis == 1 else w)):
                found.append((lines, side, gap))
    if not found:
        return None
    lines, side, gap = max(found)
    return side, gap, lines


def lab_of(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) float32 CIELAB of an RGB uint8 image, L in [0, 100] (OpenCV's a and b, offset by 128)."""
    return cv2.cvtColor(image, cv2.COLOR_RGB2LAB).astype(np.float32) * np.array([100 / 255, 1, 1], np.float32)


def _centres(samples: np.ndarray, k: int) -> np.ndarray:
    """Up to ``k`` colour centres of (N, 3) samples: the most compact of ``SEED_TRIES`` k-means runs from k-means++
    seeds (seeded: the same pixels give the same centres). One run's random picks moved with any one sample: one pixel
    more of an ear kept moved the centres a sleeve was told by, and flecks of a flag beside it came and went; the best
    of several moves only as the colours do."""
    k = max(1, min(k, len(samples)))
    cv2.setRNGSeed(0)
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 20, 0.5)
    labels = np.zeros((len(samples), 1), np.int32)
    _, _, centres = cv2.kmeans(samples.astype(np.float32), k, labels, criteria, SEED_TRIES, cv2.KMEANS_PP_CENTERS)
    return np.asarray(centres, np.float32)


def _distance(lab: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return np.min(np.linalg.norm(lab[..., None, :] - centres, axis=-1), axis=-1)


def nearer(
    lab: np.ndarray,
    where: np.ndarray,
    ours: np.ndarray,
    theirs: np.ndarray,
    k: int = 4,
    min_samples: int = 20,
    clearly: float | np.ndarray = CLEARLY,
    local: int | None = None,
) -> np.ndarray:
    """(H, W) bool: the pixels of ``where`` whose colour (CIELAB) is clearly that of the ``ours`` samples and not
    of ``theirs`` (at most ``clearly``, a number or (H, W) per pixel, × as far from the nearest of ``k`` centres of
    ours as of theirs); nothing
    when either side has fewer than ``min_samples`` pixels to learn from. With ``local``, theirs are also learnt in
    tiles of that many pixels, from the samples within a tile's width about each (``local_distance``)."""
    out = np.zeros(where.shape, bool)
    if not where.any() or ours.sum() < min_samples or theirs.sum() < min_samples:
        return out
    d_ours = _distance(lab[where], _centres(lab[ours], k))
    d_theirs = _distance(lab[where], _centres(lab[theirs], k))
    if local is not None:
        d_theirs = np.minimum(d_theirs, local_distance(lab, where, theirs, k, local, min_samples)[where])
    out[where] = d_ours <= (clearly[where] if isinstance(clearly, np.ndarray) else clearly) * d_theirs
    return out


def local_distance(
    lab: np.ndarray, where: np.ndarray, samples: np.ndarray, k: int, tile: int, min_samples: int
) -> np.ndarray:
    """(H, W) float32: each pixel of ``where``'s distance to the nearest of ``k`` colour centres of the ``samples``
    within a ``tile`` of its own tile; inf elsewhere, and where too few lie there. A busy backdrop's few centres over
    the whole outline miss the one colour beside a pixel: a flag's dark canton beside a dark sleeve was nearer the
    sleeve than any of them, and grown onto it, lumps of the old flag on the new scene."""
    out = np.full(where.shape, np.inf, np.float32)
    h, w = where.shape
    for y0 in range(0, h, tile):
        for x0 in range(0, w, tile):
            cell = where[y0 : y0 + tile, x0 : x0 + tile]
            ya, xa = max(0, y0 - tile), max(0, x0 - tile)
            near = samples[ya : y0 + 2 * tile, xa : x0 + 2 * tile]
            if cell.any() and near.sum() >= min_samples:
                centres = _centres(lab[ya : y0 + 2 * tile, xa : x0 + 2 * tile][near], k)
                block = out[y0 : y0 + tile, x0 : x0 + tile]
                block[cell] = _distance(lab[y0 : y0 + tile, x0 : x0 + tile][cell], centres)
    return out


def boxes_mask(boxes: Sequence[tuple[float, float, float, float]], shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the union of the boxes ``(x0, y0, x1, y1)``."""
    out = np.zeros(shape, bool)
    for x0, y0, x1, y1 in boxes:
        out[max(0, round(y0)) : max(0, round(y1)), max(0, round(x0)) : max(0, round(x1))] = True
    return out


def joined(keep: np.ndarray, added: np.ndarray, connectivity: int = 8) -> np.ndarray:
    """The pixels of ``added`` in pieces that touch ``keep`` (``connectivity``: 8 or 4)."""
    if not added.any():
        return added
    n, labels = cv2.connectedComponents((keep | added).astype(np.uint8), connectivity=connectivity)
    touching = np.unique(labels[keep])
    return added & np.isin(labels, touching[touching > 0])


def _disc(shape: tuple[int, int], centre: Sequence[float], radius: float) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    cv2.circle(out, (int(round(centre[0])), int(round(centre[1]))), max(1, int(round(radius))), 1, -1)
    return out.astype(bool)


def out_to_oval(
    points: np.ndarray | Sequence[Sequence[float]], face: np.ndarray | None, turned: float = EAR_TURNED
) -> list[tuple[float, float]]:
    """Each ear point moved out, along its row, to the face oval's edge on its side when the oval reaches further
    by more than ``turned`` × the points' spacing: on a face turned a little, the landmarks put the ears inside the
    cheeks (30 px in on a speaker whose ear stands 30 px out: 25% of their spacing), and a disc about the point
    missed the ear it was to keep or judge. On faces seen from the front the point is within 2–13% of the edge,
    and moving it took the window behind an ear for ear. Past ``PROFILE`` × the spacing the points are not a
    little turned (a profile, whose ears are close together): they stay. Each point's side is taken from the
    oval's middle."""
    pts = [(float(x), float(y)) for x, y in points]
    if face is None or not face.any() or len(pts) != 2:
        return pts
    span = float(np.hypot(pts[1][0] - pts[0][0], pts[1][1] - pts[0][1]))
    cols = np.flatnonzero(face.any(axis=0))
    middle = (cols[0] + cols[-1]) / 2
    out = []
    for x, y in pts:
        row = np.flatnonzero(face[int(np.clip(round(y), 0, face.shape[0] - 1))])
        edge = float(row[-1] if x > middle else row[0]) if row.size else x
        gap = (edge - x) if x > middle else (x - edge)
        out.append((edge if turned * span < gap <= PROFILE * span else x, y))
    return out


def ear_reach(parts: BodyParts) -> tuple[list[tuple[float, float]], float]:
    """Each seen ear's disc, as its centres and their radius: the pose's ear point is the ear's opening, at the
    cheek's edge (``out_to_oval``), and the ear reaches outwards and up from it, in proportion to the head's width
    there (the ears' spacing once at the cheeks' edges: the pose's own spacing shrinks as the face turns)."""
    if parts.ear_span <= 0:
        return [], 0.0
    ears = out_to_oval(parts.ears, parts.face)
    middle = float(np.mean([x for x, _ in ears]))
    span = max(parts.ear_span, float(np.hypot(ears[1][0] - ears[0][0], ears[1][1] - ears[0][1])))
    centres = [(x + (EAR_OUT if x > middle else -EAR_OUT) * span, y - EAR_UP * span) for x, y in ears]
    return centres, EAR_REACH * span


def ear_discs(parts: BodyParts, shape: tuple[int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each seen ear's place, (H, W) bool: its disc and its lobe's below it; and what lies about it (out to 2.5 ×
    the disc's radius), where the old background beside it is learnt."""
    centres, radius = ear_reach(parts)
    span = radius / EAR_REACH if radius > 0 else 0.0
    middle = float(np.mean([x for x, _ in centres])) if centres else 0.0
    out = []
    for x, y in centres:
        lobe = (x - float(np.sign(x - middle)) * LOBE_IN * span, y + LOBE_DOWN * span)
        ear = _disc(shape, (x, y), radius) | _disc(shape, lobe, LOBE_REACH * span)
        about = _disc(shape, (x, y), 2.5 * radius) | _disc(shape, lobe, 2.5 * LOBE_REACH * span)
        out.append((ear, about & ~ear))
    return out


def ear_zone(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the seen ears' discs."""
    zone = np.zeros(shape, bool)
    centres, radius = ear_reach(parts)
    for centre in centres:
        zone |= _disc(shape, centre, radius)
    return zone


def whole_ears(image: np.ndarray, keep: np.ndarray, parts: BodyParts) -> np.ndarray:
    """``keep`` with each seen ear kept out to its rim: the pixels of its disc and its lobe's (``ear_discs``) whose
    colour is clearly the face's skin and not the old background's about the ear, joined to what is kept."""
    if parts.face is None or not parts.face.any() or parts.ear_span <= 0:
        return keep
    lab = lab_of(image)
    face = cv2.erode(parts.face.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    # its skin: less the oval's darkest tenth (eyebrows, nostrils, the mouth), whose centre a dark red shadow beside
    # an ear's rim, over a curtain, was nearest: kept, it came out dark dots on the new scene
    if face.any():
        face &= lab[..., 0] >= np.percentile(lab[face][:, 0], 10)
    out = keep.copy()
    _, radius = ear_reach(parts)
    for disc, about in ear_discs(parts, keep.shape):
        around = about & ~keep
        skin = joined(out, nearer(lab, disc & ~out, face, around, k=3, clearly=EAR_CLEARLY))
        # less what sticks out one pixel thin: a shadow's two pixels past an ear's rim, over a curtain, came out a
        # red-brown nub on the new scene (a rounded rim's own tip rests on three pixels, and stays)
        squared = in_squares(out | skin)
        resting = cv2.filter2D(squared.astype(np.uint8), -1, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT)
        out |= skin & (squared | (resting >= 3))
        # the shadowed hollow inside the rim is the ear's too: the disc's kept part closed, and its holes filled,
        # but for what is clearly the backdrop's colour (the corner between the ear and the head)
        side = max(3, int(radius / 3) | 1)
        ear = cv2.morphologyEx((out & disc).astype(np.uint8), cv2.MORPH_CLOSE, np.ones((side, side), np.uint8))
        hollow = _filled(ear.astype(bool)) & disc & ~out
        out |= hollow & ~nearer(lab, hollow, around, face, k=3)
    return out


def in_squares(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool: the pixels of ``mask`` in some 2×2 square of it (its opening by a 2×2 square, unshifted)."""
    full = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), bool)  # full[y, x]: the square with corner (y-1, x-1)
    full[1:-1, 1:-1] = mask[:-1, :-1] & mask[1:, :-1] & mask[:-1, 1:] & mask[1:, 1:]
    return mask & (full[:-1, :-1] | full[1:, :-1] | full[:-1, 1:] | full[1:, 1:])


def _filled(mask: np.ndarray) -> np.ndarray:
    """``mask`` with its holes (what the outside cannot reach) filled."""
    padded = np.pad(mask, 1).astype(np.uint8)
    flood = padded.copy()
    cv2.floodFill(flood, None, (0, 0), 1)
    return mask | (flood[1:-1, 1:-1] == 0)


def disc_kernel(radius: int) -> np.ndarray:
    """An elliptical structuring element reaching ``radius`` pixels from its centre."""
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def _ring(k8: np.ndarray, lo: int, hi: int, grow: bool) -> np.ndarray:
    """(H, W) bool: the band ``lo`` to ``hi`` pixels outside (``grow``) or inside the outline of ``k8``."""
    op = cv2.dilate if grow else cv2.erode
    near, far = (op(k8, disc_kernel(r)).astype(bool) for r in (lo, hi))
    return far & ~near if grow else near & ~far


def _below_ears(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the rows from the lowest seen ear down (all of them where no ear is seen)."""
    out = np.zeros(shape, bool)
    out[int(max(y for _, y in parts.ears)) if parts.ears else 0 :] = True
    return out


def _side_zone(parts: BodyParts, ears: Sequence[tuple[float, float]], shape: tuple[int, int]) -> np.ndarray:
    """``beside_head`` of ``ears``, where the person segmenter (if known) sees a person (``SIDE_PERSON``)."""
    zone = beside_head(ears, parts.ear_span, shape)
    return zone & (parts.person >= SIDE_PERSON) if parts.person is not None else zone


def grown_hair(image: np.ndarray, keep: np.ndarray, parts: BodyParts, reach: float = 0.15) -> np.ndarray:
    """``keep`` with the hair past its outline: pixels in the annotated hair box (a little wider: a curl's tip
    leaves it), below the seen ears, within ``reach`` × the box's longer side of the outline, whose colour is
    clearly the kept hair's (what is kept in the box near the outline, off the face) and not the old background's
    beside it, joined to what is kept."""
    if parts.hair is None:
        return keep
    h, w = keep.shape
    x0, y0, x1, y1 = parts.hair
    side = max(x1 - x0, y1 - y0)
    box = _hair_box(parts, (h, w))
    r = max(2, int(round(reach * side)))
    k8 = keep.astype(np.uint8)
    kernel = disc_kernel(r)
    near_out = cv2.dilate(k8, kernel).astype(bool) & ~keep
    near_in = keep & ~cv2.erode(k8, kernel).astype(bool)
    # the old background is learnt farther out than the hair may reach: the curls themselves lie near the outline
    far = disc_kernel(2 * r)
    around = np.zeros((h, w), bool)  # the box and as far again about it: a window's frame beside it is learnt too
    around[max(0, int(y0 - 2 * r)) : min(h, int(y1 + 2 * r)), max(0, int(x0 - 2 * r)) : min(w, int(x1 + 2 * r))] = True
    backdrop = cv2.dilate(k8, far).astype(bool) & ~cv2.dilate(k8, kernel).astype(bool) & around
    face = _near_face(parts, (h, w))
    hair = near_in & box & ~face & ~parts.sure
    # only hair that falls loose below the ears (a curl on a shoulder): above them the head's outline is short hair
    # the segmenter follows, and what lies past it there is the backdrop's (a window's blur beside a temple)
    loose = _below_ears(parts, (h, w))
    lab = lab_of(image)
    grown = nearer(lab, near_out & box & loose, hair, backdrop)
    if parts.person is not None:
        # a dark window's blur beside short dark hair is nearly hair-coloured, but no person's: where the person
        # segmenter sees none, only what is far more the hair's colour, and as thin as a curl, is grown (its coarse
        # map misses a curl, not a block)
        unseen = grown & (parts.person < HAIR_PERSON)
        grown &= ~unseen | nearer(lab, unseen, hair, backdrop, clearly=UNSEEN_CLEARLY)
        # how thick it is, judged on all of it in the box, not only on the band within reach of the outline
        alike = nearer(lab, box & ~keep & (parts.person < HAIR_PERSON), hair, backdrop, clearly=UNSEEN_CLEARLY)
        thick = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (CURL_PX, CURL_PX))
        blocks = cv2.dilate(cv2.morphologyEx(alike.astype(np.uint8), cv2.MORPH_OPEN, thick), thick).astype(bool)
        grown &= ~(blocks & (parts.person < HAIR_PERSON))
    return keep | joined(keep, grown)


def trimmed(image: np.ndarray, keep: np.ndarray, parts: BodyParts, band: int = 5, passes: int = 2) -> np.ndarray:
    """``keep`` less the pixels within ``band`` of its outline whose colour is clearly the old background's beside
    them (outside the outline, ``band`` to 5 × ``band`` away) and not the subject's (inside, 3 to 6 × ``band`` in,
    past where a sliver reaches): a strip of a window kept between a jaw and a collar, peeled ``passes`` times, each
    time only what touches the outside. What is surely the subject, the face oval, the ears (but what in their discs
    is paler than the face's lit skin) and the annotated hair box (and its margin below it) stay."""
    face = parts.face if parts.face is not None else np.zeros(keep.shape, bool)
    ears = ear_zone(parts, keep.shape)
    # nor the hair: grey hair against a lit window is the window's colour at its tips, and the matte decides there;
    # in the drawn box, and below it as far as ``textured_hair`` grows strands: a sideburn's strands grown just below
    # the drawn box were peeled again, a bite of the new scene in 9-x's temple (past the box's sides, white hair's
    # fringe before a pale painting, grown by texture, stays the trim's: left, its edge came out notched)
    hair = np.zeros(keep.shape, bool)
    if parts.hair is not None:
        x0, y0, x1, y1 = parts.hair
        hair[max(0, int(y0)) : int(np.ceil(y1)), max(0, int(x0)) : int(np.ceil(x1))] = True
        hair |= _hair_box(parts, keep.shape) & ~boxes_mask([(0, 0, keep.shape[1], y1)], keep.shape)
    # nor white hair below the ears, as pale as a flag's white stripe beside it (where the person segmenter sees some
    # person: not a strip of the backdrop), where hair may hang there
    if hangs_below_ears(parts.hair, parts.ears):
        hair |= _side_zone(parts, parts.ears, keep.shape)
    lab = lab_of(image)
    # an ear's dark groove beside a red curtain is still the ear; what is paler than the face's lit skin in an ear's
    # disc, and nearer the backdrop about the ear than the face's skin, may be the window between a lobe and the jaw
    # (9-B1's pale wedge under the lobe); a lit ear before a white flag is the face's colour, and stays
    if face.any():
        pale = ears & (lab[..., 0] > np.percentile(lab[face][:, 0], 90))
        about = np.logical_or.reduce([np.zeros(keep.shape, bool), *(a for _, a in ear_discs(parts, keep.shape))])
        ears &= ~(pale & ~nearer(lab, pale, face, about & ~keep, k=3, clearly=1.0))
    out = keep.copy()
    for _ in range(passes):
        k8 = out.astype(np.uint8)
        rim = out & ~cv2.erode(k8, disc_kernel(band)).astype(bool)
        rim &= ~parts.sure & ~face & ~ears & ~hair
        if not rim.any():
            break
        old = nearer(lab, rim, _ring(k8, band, 5 * band, True), _ring(k8, 3 * band, 6 * band, False))
        # peeled from the outside in: a pocket behind a kept rim (a dark jacket's, under its own dark edge line)
        # is no sliver, and taken out it was a hole the new scene showed through, a grey nick in the shoulder
        old = joined(~out, old)
        if not old.any():
            break
        out &= ~old
    return out


def grown_body(image: np.ndarray, keep: np.ndarray, parts: BodyParts, reach: float = EDGE_REACH) -> np.ndarray:
    """``keep`` grown out to the body's own edge below the ears: pixels within ``reach`` × the image's longer side
    of the outline, where the person segmenter sees some person, whose colour is clearly that of what is kept
    near the outline and not the old background's beyond (nearer it is enough where the segmenter is sure of the
    person, ``BODY_SURE``), joined to what is kept through pixels sharing an edge. The segmenter's coarse map
    and Eq. 1's shrink leave the cut a few pixels inside a sleeve; past the matte's band the sleeve was cut, a
    ragged edge with the flag's colours taken out of it (teal flecks along a dark sleeve). Above the ears the
    head's outline is hair the segmenter follows and what lies past it is the backdrop's: left as it is."""
    if not parts.ears or parts.person is None:
        return keep
    h, w = keep.shape
    r = max(2, int(round(reach * max(h, w))))
    k8 = keep.astype(np.uint8)
    below = _below_ears(parts, (h, w))
    face = parts.face if parts.face is not None else np.zeros((h, w), bool)
    where = _ring(k8, 0, r, True) & below & (parts.person >= SIDE_PERSON)
    inner = _ring(k8, r, 3 * r, False) & below & ~face
    # where the person segmenter is sure of the person, nearer the subject's colours is enough: a suit's lit edge,
    # paler than the navy within, was not clearly the suit's, and left 4 px outside the cut, the matte held it at
    # alpha 0.8 (9-S1's shoulders, soft and see-through over a wall)
    clearly = np.where(parts.person >= BODY_SURE, 1.0, CLEARLY)
    theirs = _ring(k8, 2 * r, 5 * r, True) & below
    found = nearer(lab_of(image), where, inner, theirs, clearly=clearly, local=4 * r)
    # through pixels sharing an edge: where sleeve and backdrop are near in colour (a navy suit before a flag's
    # navy canton) the pixels found scatter, flecks touching only at their corners, and the outline's closing
    # (``edit_region.subject_only``) made a chain of them a solid bump of the old flag beside 9-S1's sleeve
    return keep | joined(keep, found, connectivity=4)


def textured_hair(
    image: np.ndarray, keep: np.ndarray, parts: BodyParts, reach: float | None = 0.15, forgiving: bool = False
) -> np.ndarray:
    """``keep`` with the hair above the ears it left out where colour cannot tell it from the backdrop (white side
    hair before a pink-grey painting: GrabCut gave 35 px of it to the painting): pixels in the annotated hair box,
    above the lowest seen ear, off the face, where the person segmenter sees a person, whose texture is the
    strands' and not the backdrop's, joined to what is kept. Only where the kept hair near the outline is
    ``HAIR_TEXTURE_OVER`` × as textured as the backdrop beyond it (a sharp flag or curtain beside the head
    gives no growth). ``reach``: how far past the outline, × the hair box's longer side (None: as far as the
    strands go; the backdrop is learnt 0.3 to 0.6 of it out). The strands' outer 4 px (the texture window's reach
    past them) are left to the matte, which unmixes them (``matting.strand_share``); ``forgiving`` (the side-hair
    gate) leaves ``HAIR_FRINGE`` where the fringe shows (``FRINGE_SHOWS_L``)."""
    if parts.hair is None or parts.person is None or not parts.ears:
        return keep
    h, w = keep.shape
    box = _side_hair_box(parts, (h, w))
    x0, y0, x1, y1 = parts.hair
    side = max(x1 - x0, y1 - y0)
    face = _near_face(parts, (h, w))
    r = max(2, int(round((reach or 0.15) * side)))
    tex = texture(image)
    # distances, not dilations by discs up to 220 px wide (1.7 s where this takes 32 ms on an 800×800 photo)
    inside, outside = _distance_to(~keep), _distance_to(keep)
    hair = keep & (inside <= r) & box & ~face
    backdrop = (outside > 2 * r) & (outside <= 4 * r) & ~_below_ears(parts, (h, w))
    backdrop &= boxes_mask([(x0 - 4 * r, y0 - 4 * r, x1 + 4 * r, y1)], (h, w))
    if hair.sum() < 50 or backdrop.sum() < 50:
        return keep
    ours, theirs = float(np.median(tex[hair])), float(np.percentile(tex[backdrop], 75))
    if ours < HAIR_TEXTURE_OVER * max(theirs, 1e-3):
        return keep
    found = ~keep & box & ~face & (parts.person >= 0.05) & (tex >= np.sqrt(ours * theirs))
    # the texture is measured over 9×9: the backdrop within 4 px of the strands reads as textured. Leaving the
    # strands' 12 px fringe to the matte everywhere kept a dark-haired crown 6 px short of its strands, the matte's
    # band ending where they did: a soft grey haze over the new scene where the hair was
    beyond = ~(keep | found)
    fringe: np.ndarray | float = TEXTURE_HALF
    if forgiving:
        fringe = np.where(_lightness_apart(image, beyond, hair, box, float(2 * HAIR_FRINGE)), HAIR_FRINGE, TEXTURE_HALF)
    found &= _distance_to(beyond) > fringe
    if reach is not None:
        found &= outside <= r
    return keep | joined(keep, found)


def _lightness_apart(
    image: np.ndarray, beyond: np.ndarray, hair: np.ndarray, box: np.ndarray, sigma: float
) -> np.ndarray:
    """(H, W) bool, within ``box``: where the lightness of what lies ``beyond`` (its Gaussian-weighted mean) is at
    least ``FRINGE_SHOWS_L`` off the median of ``hair``'s. Worked on ``box`` and four sigmas round it, the reach of
    the blur's kernel: the same values as over the whole photo, at a fraction of the cost."""
    out = np.zeros(beyond.shape, bool)
    ys, xs = np.nonzero(box)
    if not len(ys):
        return out
    h, w = beyond.shape
    pad = int(np.ceil(4 * sigma)) + 1
    y0, y1 = max(0, ys.min() - pad), min(h, ys.max() + 1 + pad)
    x0, x1 = max(0, xs.min() - pad), min(w, xs.max() + 1 + pad)
    lightness = lab_of(np.ascontiguousarray(image[y0:y1, x0:x1]))[..., 0]
    behind = spread(lightness, beyond[y0:y1, x0:x1], sigma)
    ours = float(np.median(lightness[hair[y0:y1, x0:x1]]))
    out[y0:y1, x0:x1] = np.abs(behind - ours) >= FRINGE_SHOWS_L
    return out & box


def _distance_to(region: np.ndarray) -> np.ndarray:
    """(H, W) float32: each pixel's distance to the nearest pixel of ``region`` (0 on it; far where it is empty)."""
    if not region.any():
        return np.full(region.shape, np.float32(max(region.shape) * 2))
    return cv2.distanceTransform((~region).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)


def _hair_box(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the annotated hair box, 5% of its longer side wider all round (a curl's tip leaves it)."""
    assert parts.hair is not None
    h, w = shape
    x0, y0, x1, y1 = parts.hair
    pad = 0.05 * max(x1 - x0, y1 - y0)
    box = np.zeros(shape, bool)
    box[max(0, int(y0 - pad)) : min(h, int(np.ceil(y1 + pad))), max(0, int(x0 - pad)) : min(w, int(x1 + pad) + 1)] = (
        True
    )
    return box


def _side_hair_box(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: ``_hair_box`` above the lowest seen ear."""
    return _hair_box(parts, shape) & ~_below_ears(parts, shape)


def hair_zone(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: where the subject's outline is hair: the annotated hair box above the lowest seen ear, off the
    face (nothing without a hair box or a seen ear)."""
    if parts.hair is None or not parts.ears:
        return np.zeros(shape, bool)
    return _side_hair_box(parts, shape) & ~_near_face(parts, shape)


def _near_face(parts: BodyParts, shape: tuple[int, int]) -> np.ndarray:
    """(H, W) bool: the face oval and 4 px about it, where hair is never looked for."""
    face = parts.face if parts.face is not None else np.zeros(shape, bool)
    return cv2.dilate(face.astype(np.uint8), np.ones((9, 9), np.uint8)).astype(bool)


def lost_side_hair(natural: np.ndarray, keep: np.ndarray, parts: BodyParts) -> np.ndarray:
    """(H, W) bool: hair above the ears by its strands (``textured_hair``, as far as they go, less their fringe)
    that a background edit took (not in ``keep``): white side hair swapped with the painting behind it. Nothing
    where nothing is known of the hair or the ears."""
    return textured_hair(natural, keep, parts, reach=None, forgiving=True) & ~keep


def hair_texture_cut(lost: np.ndarray, parts: BodyParts) -> float:
    """The share of the hair box above the ears (``_side_hair_box``) that ``lost_side_hair`` found taken."""
    if parts.hair is None or not lost.any():
        return 0.0
    return round(float(lost.sum() / max(1, _side_hair_box(parts, lost.shape).sum())), 6)


def grown(image: np.ndarray, keep: np.ndarray, parts: BodyParts) -> np.ndarray:
    """What a background edit keeps of a box-annotated person, made whole along its outline: its sure parts, its
    ears to their rims, its body to its edge, its hair past the outline (``trimmed`` then takes the slivers of old
    background off, once the outline is cleaned)."""
    kept = grown_hair(image, grown_body(image, whole_ears(image, keep | parts.sure, parts), parts), parts)
    return textured_hair(image, kept, parts)


def between_curls(keep: np.ndarray, hair: Box, subject: Box, share: float = 0.07) -> np.ndarray:
    """(H, W) bool: what closing the kept subject's outline with a disc ``share`` of the subject box's shorter side
    (``logic/gates.ragged_outline``'s) would add inside the annotated hair box: the backdrop between a curl and the
    shoulder below it, a gap a person sees in hair, not a bite a segmenter took out of the subject."""
    h, w = keep.shape
    x0, y0, x1, y1 = subject
    side = max(3, round(share * min(x1 - x0, y1 - y0)) | 1)
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (side, side))
    closed = cv2.morphologyEx(keep.astype(np.uint8), cv2.MORPH_CLOSE, disc).astype(bool)
    box = np.zeros((h, w), bool)
    hx0, hy0, hx1, hy1 = hair
    box[max(0, int(hy0)) : min(h, int(np.ceil(hy1))), max(0, int(hx0)) : min(w, int(np.ceil(hx1)))] = True
    return closed & ~keep & box
