"""Which region a unit's edit changes (from the template's target), and its mask.

Background substitution follows Eq. 1: segment around a seeded jitter of the subject box, keep the mask
that overlaps the subject box most, resize it by a seeded few pixels, and regenerate everything else.
Partial substitution edits the target's mask; direct alteration has no mask (the editor changes the image).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from perceptforge.data.schema import Grounding, Region
from perceptforge.logic import backdrop, body_mask
from perceptforge.logic.body_mask import BodyParts
from perceptforge.logic.mask_select import JitterParams, box_cells, jitter_box, random_resize, select_mask
from perceptforge.logic.outline import outline_mask
from perceptforge.logic.templates import Template

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Hints:
    """What the grounding already says about a subject's extent: boxes surely inside it (the middle of its
    face) and boxes that belong to the background it stands in (the flag its background value names)."""

    inside: tuple[Box, ...] = ()
    outside: tuple[Box, ...] = ()
    extent: Box | None = None  # the subject's own box: never sure background, wherever a jittered box ends
    # (H, W) bool, from the referees (``logic/body_mask.BodyParts``): pixels surely the subject (its limbs' cores),
    # and where its body lies, never the old background's even inside an ``outside`` box (a sleeve beside a flag)
    sure_mask: np.ndarray | None = None
    body_mask: np.ndarray | None = None


class MaskSegmenter(Protocol):
    """The mask calls a segmenter offers; ``backends.protocols.Segmenter`` adds name, model id and loading.
    A segmenter may also offer ``hinted_candidates(image, box, hints)``, used for background substitution."""

    def box_mask(self, image: np.ndarray, box: Sequence[float]) -> np.ndarray: ...

    def candidates(self, image: np.ndarray, box: Sequence[float]) -> list[np.ndarray]: ...


def _middle(box: Box, keep: float = 0.5) -> Box:
    """The middle ``keep`` of a box in each direction: surely the thing itself, not the background its box caught."""
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * (1 - keep) / 2, (y1 - y0) * (1 - keep) / 2
    return (x0 + dx, y0 + dy, x1 - dx, y1 - dy)


# the roles of a thing that is not the subject: an ``occluder`` is an object in front of the subject that stays there
OBJECT_ROLES = ("object", "occluder")


def held_regions(grounding: Grounding) -> list[Region]:
    """The object regions the subject's ``held_object`` attribute names (the helmet of "a space helmet")."""
    held = grounding.attributes.get("held_object", "").strip().lower()
    if not held or held in ("nothing", "none"):
        return []
    return [r for r in grounding.regions if r.role in OBJECT_ROLES and r.label.lower() in held]


def kept_objects(grounding: Grounding) -> list[Region]:
    """What a background edit keeps whole with the subject, each segmented on its own: what the subject holds and
    what stands in front of it (role ``occluder``: a podium, a microphone, a tripod), which the new scene goes
    behind."""
    held = held_regions(grounding)
    return held + [r for r in grounding.regions if r.role == "occluder" and r not in held]


def protected_regions(grounding: Grounding) -> dict[str, Box]:
    """What a background edit must leave as it was, each as the part of its box that is surely the thing: the
    middle of each face, the chest below it (half as wide as the face, one face height below the chin: lower down
    a crouching person's body may be anywhere), and the middle of each object the subject holds. The mask gate
    measures them, and GrabCut takes them as sure foreground. A subject with a drawn outline has no chest guess."""
    out: dict[str, Box] = {}
    sx0, sy0, sx1, sy1 = grounding.subject.box.xyxy
    for k, face in enumerate(r for r in grounding.regions if r.role == "face"):
        x0, y0, x1, y1 = face.box.xyxy
        out[f"face {k + 1}" if k else "face"] = _middle((x0, y0, x1, y1))
        # the chest: one face height below the chin, whatever pose the rest is in; a drawn outline says where
        # the body is instead (a crouching man's chest box holds the grass below his elbow)
        if y1 < sy1 and k == 0 and not grounding.subject.outline:
            width = (x1 - x0) / 2
            cx = (x0 + x1) / 2
            out["body"] = (
                max(sx0, cx - width / 2),
                y1 + (y1 - y0) / 4,
                min(sx1, cx + width / 2),
                min(sy1, y1 + (y1 - y0)),
            )
    for r in kept_objects(grounding):
        out[r.label] = _middle(r.box.xyxy)
    return {k: v for k, v in out.items() if v[2] > v[0] and v[3] > v[1]}


def _objects_by_share_inside(grounding: Grounding) -> list[tuple[Region, float]]:
    """Each object a background edit neither keeps on its own (what the subject holds; an ``occluder`` is not an
    ``object``) nor replaces with the old background (named by it), with the share of its box inside the
    subject's."""
    sx0, sy0, sx1, sy1 = grounding.subject.box.xyxy
    background = grounding.attributes.get("background", "").lower()
    held = {r.label for r in held_regions(grounding)}
    out = []
    for r in grounding.regions:
        if r.role != "object" or r.label in held or r.label.lower() in background:
            continue
        x0, y0, x1, y1 = r.box.xyxy
        overlap = max(0.0, min(x1, sx1) - max(x0, sx0)) * max(0.0, min(y1, sy1) - max(y0, sy0))
        out.append((r, overlap / max(1e-9, (x1 - x0) * (y1 - y0))))
    return out


def standing_objects(grounding: Grounding) -> list[Region]:
    """The objects a background edit must not replace: each overlaps the subject's box and reaches out of it (a
    tripod before the subject, a podium), and is neither held nor an ``occluder`` (both kept whole) nor named by
    the old background (replaced with it). What lies within the subject's box is on the subject (a patch, glasses)
    and stays with it (``worn_objects``). Whether such an object stands in front of the subject or behind it only
    the annotation can say: replacing it is refused until it says so."""
    return [r for r, inside in _objects_by_share_inside(grounding) if 0 < inside < 0.9]


def worn_objects(grounding: Grounding) -> list[Region]:
    """The objects on the subject (their box nine tenths or more inside the subject's: a lapel pin, glasses, a name
    tag), neither held nor named by the old background: a background edit leaves them as they are, with the
    subject, and the gate on what it keeps judges them too (a pin the mask gave to the background and the new scene
    painted over)."""
    return [r for r, inside in _objects_by_share_inside(grounding) if inside >= 0.9]


def subject_hints(grounding: Grounding, old_background: str) -> Hints:
    """The object regions the old background value names (surely not the subject: its flag, its backdrop), less
    what overlaps a protected region, and the protected regions (surely the subject: the middle of its face, its
    body below the face, what it holds; other objects, a tripod, may stand half outside the subject's outline)."""
    wanted = old_background.lower()
    held = {r.label for r in kept_objects(grounding)}
    # what the subject holds, and what stands in front of it, is segmented on its own (``edit_mask``): a
    # sure-foreground box would keep its corners
    inside = tuple(box for name, box in protected_regions(grounding).items() if name not in held)
    outside = tuple(r.box.xyxy for r in grounding.regions if r.role == "object" and r.label.lower() in wanted)
    return Hints(inside, outside, grounding.subject.box.xyxy)


def subject_parts(kept: np.ndarray, protected: Sequence[Box]) -> np.ndarray:
    """The kept pixels connected to a protected region (the subject's face, body, what it holds), or the largest
    kept part when none is given: what stays because it is the subject, not a fragment of the old background."""
    import cv2

    count, labels = cv2.connectedComponents(kept.astype(np.uint8), connectivity=8)
    if count <= 1:
        return kept
    touching: set[int] = set()
    for box in protected:
        touching |= set(np.unique(labels[box_cells(box, *labels.shape)]).tolist())
    touching.discard(0)
    if not touching:
        sizes = np.bincount(labels.ravel())[1:]
        touching = {int(np.argmax(sizes)) + 1}
    return np.isin(labels, sorted(touching))


def fill_holes(mask: np.ndarray, max_area: float | None = None) -> np.ndarray:
    """``mask`` with the holes it encloses filled: the parts outside it that the image's border cannot reach
    without crossing it (4-connected), each of at most ``max_area`` pixels when given."""
    import cv2

    count, labels, stats, _ = cv2.connectedComponentsWithStats((~mask).astype(np.uint8), connectivity=4)
    border = set(np.unique(np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])).tolist())
    holes = [
        k for k in range(1, count) if k not in border and (max_area is None or stats[k, cv2.CC_STAT_AREA] <= max_area)
    ]
    return mask | np.isin(labels, holes)


def two_colours(lab: np.ndarray, iterations: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Two-means of ``(N, 3)`` CIELAB pixels, started from the darkest and the lightest tenth: (centres (2, 3),
    each pixel's cluster). Deterministic: no random start."""
    order = np.argsort(lab[:, 0])
    tenth = max(1, len(order) // 10)
    centres = np.stack([lab[order[:tenth]].mean(axis=0), lab[order[-tenth:]].mean(axis=0)])
    for _ in range(iterations):
        nearest = np.argmin(np.linalg.norm(lab[:, None, :] - centres[None], axis=2), axis=1)
        centres = np.stack([lab[nearest == k].mean(axis=0) if (nearest == k).any() else centres[k] for k in (0, 1)])
    return centres, nearest


def black_and_white(lab: np.ndarray, max_chroma: float = 4.0) -> bool:
    """True when CIELAB pixels (any shape ending in 3, as ``cv2`` gives them from float RGB in [0, 1]) have almost
    no colour: the median of |a| + |b| under ``max_chroma``. A black-and-white photo, or a region of one."""
    return float(np.median(np.abs(lab.reshape(-1, 3)[:, 1:]).sum(axis=1))) < max_chroma


# brown hair is 31–33 from the face's middle in the bundled and scikit-image astronaut; grey hair beside a temple 6–15
MIN_REGION_SKIN_CONTRAST = 20.0


def colour_region(image: np.ndarray, box: Box, faces: Sequence[Box] = (), tolerance: float = 30.0) -> np.ndarray:
    """The pixels of a region annotated by its box (hair) as they are in the photo. The box's pixels, less the
    face below its hairline (the face box's top quarter stays: hair may cover the forehead), fall in two colours:
    the region's and what the box also caught (sky, a wall); the region's is the one just above the face, or the
    more common one without a face. The region is every pixel nearer that colour than the other (and than the
    skin), within ``tolerance``, connected to such pixels in the box; beside the face it reaches below the box,
    down to three quarters of the face's height (hair falling beside it), never into the face."""
    import cv2

    h, w = image.shape[:2]
    lab = np.asarray(cv2.cvtColor(image.astype(np.float32) / 255, cv2.COLOR_RGB2LAB), np.float32)

    in_box, skin, hairline = np.zeros((h, w), bool), np.zeros((h, w), bool), np.zeros((h, w), bool)
    in_box[box_cells(box, h, w)] = True
    for fx0, fy0, fx1, fy1 in faces:  # surely skin: the face's middle below its hairline and below the hair's box
        # below the face's top quarter the middle is forehead, whatever the hair's box says (a fringe reaching
        # further is left as it is: a recoloured forehead is worse than a fringe's tip kept)
        top = fy0 + (fy1 - fy0) / 4
        skin[box_cells((fx0 + (fx1 - fx0) / 6, top, fx1 - (fx1 - fx0) / 6, fy1), h, w)] = True
        hairline[
            box_cells(
                (fx0 + (fx1 - fx0) / 4, fy0 - (fy1 - fy0) / 8, fx1 - (fx1 - fx0) / 4, fy0 + (fy1 - fy0) / 8), h, w
            )
        ] = True
    core = in_box & ~skin
    if core.sum() < 2:
        return in_box
    centres, nearest = two_colours(lab[core])
    probe = (hairline & core)[core]
    votes = np.bincount(nearest[probe] if probe.any() else nearest, minlength=2)
    region_colour, other = centres[int(np.argmax(votes))], centres[1 - int(np.argmax(votes))]
    near = np.linalg.norm(lab - region_colour, axis=2)
    similar = (near < tolerance) & (near < np.linalg.norm(lab - other, axis=2))
    skin_like = np.zeros((h, w), bool)
    if skin.any():
        skin_like = np.linalg.norm(lab - np.median(lab[skin], axis=0), axis=2) <= near
        similar &= ~skin_like
    if faces and black_and_white(lab[core]):
        # in a black-and-white photo the shadowed side of a face is as near the hair as the hair is
        raise ValueError("a black-and-white photo: its hair cannot be told from the skin beside it by colour")
    reach = in_box.copy()
    for fx0, fy0, fx1, fy1 in faces:  # beside the face, below the box: no wider than the face and a little
        margin = (fx1 - fx0) / 8
        reach[
            box_cells((max(box[0], fx0 - margin), box[1], min(box[2], fx1 + margin), fy0 + (fy1 - fy0) * 3 / 4), h, w)
        ] = True
    _, labels = cv2.connectedComponents((similar & reach & ~skin).astype(np.uint8), connectivity=8)
    seeds = set(np.unique(labels[similar & core]).tolist()) - {0}
    region = np.isin(labels, sorted(seeds)) & (labels > 0)
    if not region.any():
        return similar & core
    if skin.any():
        apart = float(np.linalg.norm(np.median(lab[region], axis=0) - np.median(lab[skin], axis=0)))
        if apart < MIN_REGION_SKIN_CONTRAST:
            # grey hair beside a pale temple: what the colours give is mostly skin, and recolouring it paints the face
            raise ValueError(
                f"the region found by colour is as skin-coloured as the face (CIELAB distance {apart:.1f}, at least "
                f"{MIN_REGION_SKIN_CONTRAST:.0f} needed): its hair cannot be told from the skin beside it"
            )
    # its highlights and strands of the other colour are the region too: close small gaps, fill the holes it
    # encloses (what the image's border cannot reach without crossing it)
    # (a highlight at the crown opens to the light wall behind through a gap as wide as a tenth of the region)
    side = max(11, round(0.2 * min(box[2] - box[0], box[3] - box[1])) | 1)
    closed = cv2.morphologyEx(region.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((side, side), np.uint8)).astype(bool)
    # what closing and filling add on the face (a forehead below a fringe, a cheek in shadow) is skin where it
    # looks more like skin; above the face a highlight of the hair may look so too, and stays
    face_area = np.zeros((h, w), bool)
    for fx0, fy0, fx1, fy1 in faces:
        margin = (fx1 - fx0) / 8
        face_area[box_cells((fx0 - margin, fy0 + (fy1 - fy0) / 8, fx1 + margin, fy1), h, w)] = True
    found = fill_holes(closed) & reach & ~skin & ~(skin_like & face_area & ~region)
    # a fringe's light tips, skin-like by colour, are specks the region surrounds: they stay hair; and the
    # outline's pixels, half hair and half wall, take the new colour too (else an olive rim stays round it)
    found = fill_holes(found, 0.0005 * h * w)
    rim = cv2.dilate(found.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool) & ~(skin_like & face_area)
    return (found | rim) & reach & ~skin


SHRINK_ONLY = JitterParams(resize_px=(-3, 0))


def inscribed_ellipse(box: Box, height: int, width: int, frame: float = 2.0) -> np.ndarray:
    """(H, W) bool: the ellipse inscribed in ``box``. A held thing (a helmet, a cup, a camera) is roughly round
    in its box; what its box's corners hold is the background beside it. A side of the box within ``frame``
    pixels of the image's edge is where the frame cuts the thing, not where it ends: the ellipse is that of the
    box continued past it by half its size (else the helmet's lower rim and latch, cut by the photo's bottom
    edge, would fall outside the ellipse and go with the old background)."""
    x0, y0, x1, y1 = box
    bw, bh = x1 - x0, y1 - y0
    x0, x1 = (x0 - bw / 2 if x0 <= frame else x0), (x1 + bw / 2 if x1 >= width - frame else x1)
    y0, y1 = (y0 - bh / 2 if y0 <= frame else y0), (y1 + bh / 2 if y1 >= height - frame else y1)
    yy, xx = np.mgrid[0:height, 0:width]
    cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, max((x1 - x0) / 2, 0.5), max((y1 - y0) / 2, 0.5)
    return ((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2 <= 1.0


def spans_frame(box: Box, height: int, width: int, frame: float = 2.0) -> bool:
    """True when the image's frame cuts ``box`` on two opposite sides (a podium across the whole photo's width)."""
    x0, y0, x1, y1 = box
    return (x0 <= frame and x1 >= width - frame) or (y0 <= frame and y1 >= height - frame)


def kept_object(segmenter: MaskSegmenter, image: np.ndarray, box: Box) -> np.ndarray:
    """(H, W) bool: an object a background edit keeps whole (what the subject holds, what stands in front of it):
    what the segmenter finds in its box within the ellipse inscribed in it; or, when the frame cuts it on two
    opposite sides, its whole box. Such a box is a band across the photo with no corners of background beside
    the thing, and the segmenter splits it: a podium's lit top and bottom mouldings went with the old background,
    a ragged strip along the speaker's waist."""
    h, w = image.shape[:2]
    if spans_frame(box, h, w):
        out = np.zeros((h, w), bool)
        out[box_cells(box, h, w)] = True
        return out
    return segmenter.box_mask(image, box) & inscribed_ellipse(box, h, w)


def subject_only(keep: np.ndarray, boxes: Sequence[Box], max_hole: float = 0.03) -> np.ndarray:
    """What a background edit keeps, cleaned as a person would: nothing outside the subject's box and what it
    holds (the annotated box is the whole subject: a flag's stripes left at the edge are old background), the
    notches segmentation bites out of the outline closed (a collar ring, an elbow: up to 8 px), and the holes it
    leaves inside the subject filled (a name tag, a ribbon bar taken for background; at most ``max_hole`` of the
    image each); larger enclosed gaps, between an arm and the body, stay background."""
    import cv2

    h, w = keep.shape
    inside = np.zeros((h, w), bool)
    for box in boxes:
        inside[box_cells(box, h, w)] = True
    # notches GrabCut bites out of the outline (a collar ring, an elbow) closed, never past the boxes
    kept = cv2.morphologyEx((keep & inside).astype(np.uint8), cv2.MORPH_CLOSE, np.ones((9, 9), np.uint8)).astype(bool)
    return fill_holes(kept & inside, max_hole * h * w)


def target_box(
    template: Template, grounding: Grounding, old_value: str, region: str | None = None
) -> tuple[float, float, float, float]:
    """The box of what the template edits: the subject, its face, or the object its attribute names; or,
    when the rendered value names one (``region``, e.g. "hair"), the annotated region of that label."""
    if region is not None:
        named = [r for r in grounding.regions if r.label.lower() == region.lower()]
        if not named:
            raise ValueError(
                f"source {grounding.source_id}: template {template.id} changes the {region}, but no {region!r} "
                "region is annotated"
            )
        return named[0].box.xyxy
    if template.target in ("subject", "background", "whole"):
        return grounding.subject.box.xyxy
    if template.target == "face":
        faces = [r for r in grounding.regions if r.role == "face"]
        if not faces:
            raise ValueError(
                f"source {grounding.source_id}: template {template.id} edits the face, but no face region is annotated"
            )
        return faces[0].box.xyxy
    wanted = old_value.lower()
    objects = [r for r in grounding.regions if r.role in OBJECT_ROLES and r.label.lower() in wanted]
    if not objects:
        raise ValueError(
            f"source {grounding.source_id}: no object region matches {old_value!r} for template {template.id}"
        )
    return max(objects, key=lambda r: len(r.label)).box.xyxy


def edit_mask(
    template: Template,
    grounding: Grounding,
    image: np.ndarray,
    old_value: str,
    segmenter: MaskSegmenter,
    rng: np.random.Generator,
    region: str | None = None,
    sure: Sequence[Box] = (),
    face: np.ndarray | None = None,
    parts: BodyParts | None = None,
) -> np.ndarray | None:
    """(H, W) bool, True = region to change; None for whole-image instruction edits. ``sure``: boxes a background
    edit's segmentation takes as surely the subject besides the grounding's (the face oval's inside and the ears
    the face referee sees: ``logic/referee_gates.sure_boxes``); ``face``: (H, W) bool, the face oval the referee
    sees, which a background edit keeps whatever the segmentation and Eq. 1's shrinking say; ``parts``: what the
    referees see of the body (``logic/body_mask``): its limbs seed the segmentation, its ears and hair are kept to
    their rims and tips, and slivers of the old background along the outline are trimmed."""
    if template.edit_kind.value == "direct_alteration":
        return None
    h, w = image.shape[:2]
    box = target_box(template, grounding, old_value, region)
    held = kept_objects(grounding)  # what it holds and what stands in front of it: kept whole with the subject
    background = template.edit_kind.value == "background_substitution" or template.target == "background"
    if background and grounding.subject.outline:
        # the annotator drew what stays (what the subject holds may have its own outline): nothing is guessed, so
        # nothing is jittered; the composite's matting softens the drawn line on the photo's own edge
        mask = ~drawn_outlines([grounding.subject, *held], h, w)
    elif background:
        jittered = jitter_box(box, w, h, rng)
        hinted = getattr(segmenter, "hinted_candidates", None)
        hints = subject_hints(grounding, grounding.attributes.get("background", ""))
        hints = Hints(
            hints.inside + tuple(sure),
            hints.outside,
            hints.extent,
            None if parts is None else parts.sure,
            None if parts is None else parts.body,
        )
        candidates = hinted(image, jittered, hints) if hinted else segmenter.candidates(image, jittered)
        # Eq. 1's seeded resize, shrinking only: a grown mask keeps a rim of the old background, a halo around
        # the subject in the new scene
        keep = random_resize(candidates[select_mask(candidates, box)], rng, SHRINK_ONLY)
        if face is not None:  # the shrink takes pixels off the outline, never off the face
            keep = keep | face
        if parts is not None:  # its limbs, its ears to their rims, its hair to its tips
            keep = body_mask.grown(image, keep, parts)
        # the helmet she holds (the podium before him) stays with her, whole; its box's corners are not it
        for region_ in held:
            keep = keep | kept_object(segmenter, image, region_.box.xyxy)
        kept = subject_only(keep, [box, *(r.box.xyxy for r in held)])
        # a star of the flag GrabCut kept beside her head is not her: only what is joined to her face, body or
        # what she holds stays
        kept = subject_parts(kept, list(protected_regions(grounding).values()))
        if parts is not None:  # the outline's clean-up closed corners over slivers of the old background
            held_boxes = [r.box.xyxy for r in held]
            kept = cleaned_outline(image, kept, parts, held_boxes, list(protected_regions(grounding).values()))
        mask = ~kept
    elif region is not None:
        mask = region_mask(template, grounding, image, region)
    else:
        mask = segmenter.box_mask(image, box)
    if not mask.any():
        raise ValueError(f"source {grounding.source_id}: the edit mask for template {template.id} is empty")
    return mask


def cleaned_outline(
    image: np.ndarray, kept: np.ndarray, parts: BodyParts, held: Sequence[Box], protected: Sequence[Box]
) -> np.ndarray:
    """A boxes-only subject's kept pixels with their outline cleaned: slivers of the old background trimmed
    (``body_mask.trimmed``); on a plain backdrop a curl past the cut kept and the backdrop seen through a lens taken
    out, never in what the subject holds (``backdrop.see_through``); and what that cut off the subject dropped
    (``subject_parts``): a sleeve's corner peeled from a fragment beside it left a dark dash on the new scene."""
    h, w = kept.shape
    kept = body_mask.trimmed(image, kept, parts)
    hair = body_mask.hair_zone(parts, (h, w))
    kept = backdrop.see_through(image, kept, protect=body_mask.boxes_mask(list(held), (h, w)), hair=hair)
    return subject_parts(kept, protected)


def region_mask(template: Template, grounding: Grounding, image: np.ndarray, region: str) -> np.ndarray:
    """The pixels of the regions labelled ``region`` (hair, perhaps on both sides of a cap): each its drawn outline,
    or its own colour (at least one is annotated: ``target_box`` says so first). Raises ValueError where the photo
    cannot give them (a black-and-white photo, hair as pale as the skin, no such pixels): the mask stage
    quarantines the unit, and ``sources check`` says so before a run."""
    faces = [r.box.xyxy for r in grounding.regions if r.role == "face"]
    named = [r for r in grounding.regions if r.label.lower() == region.lower()]
    mask = np.logical_or.reduce([drawn_region(image, r, faces) for r in named])
    if not mask.any():
        raise ValueError(f"source {grounding.source_id}: the edit mask for template {template.id} is empty")
    return mask


def drawn_outlines(regions: Sequence[Region], height: int, width: int) -> np.ndarray:
    """The union of the regions' drawn outlines (those without one add nothing)."""
    return np.logical_or.reduce(
        [np.zeros((height, width), bool), *(outline_mask(r.outline, height, width) for r in regions if r.outline)]
    )


def drawn_region(image: np.ndarray, region: Region, faces: Sequence[Box]) -> np.ndarray:
    """A region named by its label (hair): exactly its drawn outline where the annotator drew one, as a drawn
    subject is; else found by its own colour (``colour_region``). Colour held to a drawn line lost the ends a
    colour does not reach (a fringe's dark tips) and kept skin in shadow beside them."""
    h, w = image.shape[:2]
    if region.outline:
        return outline_mask(region.outline, h, w)
    return colour_region(image, region.box.xyxy, faces)


def pastes_into_box(template: Template) -> bool:
    """True when the edit fills the target's box (an object, a face), False when it replaces what lies
    around the subject (background substitution)."""
    return template.edit_kind.value == "partial_substitution" and template.target != "background"
