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
from perceptforge.logic.mask_select import jitter_box, random_resize, select_mask
from perceptforge.logic.templates import Template

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Hints:
    """What the grounding already says about a subject's extent: boxes surely inside it (the middle of its
    face) and boxes that belong to the background it stands in (the flag its background value names)."""

    inside: tuple[Box, ...] = ()
    outside: tuple[Box, ...] = ()
    extent: Box | None = None  # the subject's own box: never sure background, wherever a jittered box ends


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


def held_regions(grounding: Grounding) -> list[Region]:
    """The object regions the subject's ``held_object`` attribute names (the helmet of "a space helmet")."""
    held = grounding.attributes.get("held_object", "").strip().lower()
    if not held or held in ("nothing", "none"):
        return []
    return [r for r in grounding.regions if r.role == "object" and r.label.lower() in held]


def protected_regions(grounding: Grounding) -> dict[str, Box]:
    """What a background edit must leave as it was, each as the part of its box that is surely the thing: the
    middle of each face, the body below the face (a person's torso, as wide as the face, down to the subject
    box's bottom), and the middle of each object the subject holds. The mask gate measures them, and GrabCut
    takes them as sure foreground."""
    out: dict[str, Box] = {}
    sx0, sy0, sx1, sy1 = grounding.subject.box.xyxy
    for k, face in enumerate(r for r in grounding.regions if r.role == "face"):
        x0, y0, x1, y1 = face.box.xyxy
        out[f"face {k + 1}" if k else "face"] = _middle((x0, y0, x1, y1))
        if y1 < sy1 and k == 0:
            width = (x1 - x0) / 2
            cx = (x0 + x1) / 2
            out["body"] = (max(sx0, cx - width / 2), y1 + (y1 - y0) / 4, min(sx1, cx + width / 2), sy1)
    for r in held_regions(grounding):
        out[r.label] = _middle(r.box.xyxy)
    return {k: v for k, v in out.items() if v[2] > v[0] and v[3] > v[1]}


def subject_hints(grounding: Grounding, old_background: str) -> Hints:
    """The object regions the old background value names (surely not the subject: its flag, its backdrop), less
    what overlaps a protected region, and the protected regions (surely the subject: the middle of its face, its
    body below the face, what it holds; other objects, a tripod, may stand half outside the subject's outline)."""
    wanted = old_background.lower()
    held = {r.label for r in held_regions(grounding)}
    # what the subject holds is segmented on its own (``edit_mask``): a sure-foreground box would keep its corners
    inside = tuple(box for name, box in protected_regions(grounding).items() if name not in held)
    outside = tuple(r.box.xyxy for r in grounding.regions if r.role == "object" and r.label.lower() in wanted)
    return Hints(inside, outside, grounding.subject.box.xyxy)


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
    objects = [r for r in grounding.regions if r.role == "object" and r.label.lower() in wanted]
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
) -> np.ndarray | None:
    """(H, W) bool, True = region to change; None for whole-image instruction edits."""
    if template.edit_kind.value == "direct_alteration":
        return None
    h, w = image.shape[:2]
    box = target_box(template, grounding, old_value, region)
    if template.edit_kind.value == "background_substitution" or template.target == "background":
        jittered = jitter_box(box, w, h, rng)
        hinted = getattr(segmenter, "hinted_candidates", None)
        hints = subject_hints(grounding, grounding.attributes.get("background", ""))
        candidates = hinted(image, jittered, hints) if hinted else segmenter.candidates(image, jittered)
        keep = random_resize(candidates[select_mask(candidates, box)], rng)
        for held in held_regions(grounding):  # the helmet she holds stays with her, whole
            keep = keep | segmenter.box_mask(image, held.box.xyxy)
        mask = ~keep
    else:
        mask = segmenter.box_mask(image, box)
    if not mask.any():
        raise ValueError(f"source {grounding.source_id}: the edit mask for template {template.id} is empty")
    return mask


def pastes_into_box(template: Template) -> bool:
    """True when the edit fills the target's box (an object, a face), False when it replaces what lies
    around the subject (background substitution)."""
    return template.edit_kind.value == "partial_substitution" and template.target != "background"
