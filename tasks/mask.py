"""Mask: for each unit, the region its edit changes (Eq. 1 for background substitution, the target's
mask for partial substitution, none for direct alteration), measured and gated before any pixel is edited:
a mask too small to show the change, so large the pair is two unrelated images, or swallowing the subject
is quarantined here with its measurements."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.devices import call_lock
from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.backends.protocols import Segmenter
from perceptforge.configs.profile import Gates
from perceptforge.data.schema import BackendRef, Candidate, Grounding, IngestedSource, MaskRecord
from perceptforge.logic.body_mask import (
    BodyParts,
    beside_head,
    between_curls,
    box_short_of_person,
    boxes_mask,
    hair_zone,
    hangs_below_ears,
    limbs,
    seen_ears,
    side_hair_cut,
)
from perceptforge.logic.edit_region import edit_mask, kept_objects, protected_regions, region_mask, standing_objects
from perceptforge.logic.gates import mask_measurements, mask_verdict, ragged_outline
from perceptforge.logic.ids import unit_rng
from perceptforge.logic.referee_gates import hair_without_face
from perceptforge.logic.templates import Template
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.tasks.engine import MODEL_STAGE
from perceptforge.tasks.gates import QualityGate
from perceptforge.tasks.runner import StageRunner, Unit, unit_record

DRAWN = BackendRef(name="annotations", model_id="drawn-outline")


def gate_mask(
    template: Template,
    mask: np.ndarray,
    grounding: Grounding,
    old_value: str,
    gates: Gates,
    objects: dict[str, np.ndarray] | None = None,
    image: np.ndarray | None = None,
) -> dict[str, float]:
    """The mask's measurements; QualityGate (carrying them) when the mask is degenerate for its edit kind."""
    kind = template.edit_kind.value
    # What a substituted background names (its flag, its shuttle model) must go with it. edit_mask already
    # drops kept parts joined to no protected region, so on its masks old_kept is 0: a backstop, not a check
    # that fires on the bundled photos.
    old_boxes = (
        [r.box.xyxy for r in grounding.regions if r.role == "object" and r.label.lower() in old_value.lower()]
        if kind == "background_substitution"
        else []
    )
    protected = protected_regions(grounding) if kind == "background_substitution" else {}
    measured = mask_measurements(mask, grounding.subject.box.xyxy, old_boxes, protected, objects, image)
    hair = hair_box(grounding)
    if "ragged_outline" in measured and hair is not None and not grounding.subject.outline:
        # the backdrop between a curl and the shoulder below it is a gap in hair, not a bite out of the subject
        keep = ~mask
        curls = between_curls(keep, hair, grounding.subject.box.xyxy)
        measured["ragged_outline"] = ragged_outline(keep | curls, grounding.subject.box.xyxy)
    span = gates.mask_area.get(kind)
    reason = mask_verdict(
        measured,
        (span.min, span.max) if span else None,
        gates.max_subject_in_mask.get(kind),
        gates.max_old_kept,
        gates.max_protected_in_mask,
        gates.max_object_cut,
        # the bites this gate looks for are a segmenter's; a drawn outline's gaps (between a tripod's legs) are meant
        1.0 if grounding.subject.outline else gates.max_ragged_outline,
        gates.max_object_replaced,
    )
    if reason:
        raise QualityGate(reason, measured)
    return measured


def side_hair_gate(mask: np.ndarray, parts: BodyParts, limit: float) -> dict[str, float]:
    """A boxes-only background edit's cut of the hair below the ears (``logic/body_mask.side_hair_cut``); QualityGate
    where it swapped more than ``limit`` (``Gates.max_side_hair_cut``) of what the person segmenter sees there: the
    segmentation could not tell white hair from a backdrop as pale, and the pair would show her hair cut."""
    cut = side_hair_cut(mask, parts)
    measured = {"side_hair_cut": cut}
    if cut > limit:
        raise QualityGate(
            f"the side of the head below an ear (its hair, jaw or neck) went with the background: {cut:.1%} of what"
            f" the person segmenter sees there was swapped (at most {limit:.1%}); white hair or a lit jaw"
            " as pale as the backdrop beside it, which the segmentation cannot tell apart: annotate the subject's"
            " outline",
            measured,
        )
    return measured


def face_not_hair(image: np.ndarray, grounding: Grounding) -> np.ndarray:
    """(H, W) bool: what the face referee sees of the subject's face that is never hair (its skin inside the face
    oval, its eyebrows; ``logic/referee_gates.not_hair``): a drawn or colour-found hair region that reaches onto
    a temple or an eyebrow's tip loses it. Nothing where no face is seen."""
    from perceptforge.backends.referees import face_referee
    from perceptforge.logic.referee_gates import not_hair

    face = face_referee().subject_face(image, grounding.subject.box.xyxy)
    if face is None:
        return np.zeros(image.shape[:2], bool)
    return not_hair(image, face.oval, face.eyebrows)


def referee_sure(
    image: np.ndarray, grounding: Grounding
) -> tuple[list[tuple[float, float, float, float]], np.ndarray | None]:
    """What the face referee says is surely the subject: boxes for the segmentation to start from
    (``logic/referee_gates.sure_boxes``: the inside of its face oval, the ears it sees) and the face oval itself;
    none where it sees no face."""
    from perceptforge.backends.referees import face_referee
    from perceptforge.logic.referee_gates import ear_skin, frontal, polygon_mask, sure_boxes

    face = face_referee().subject_face(image, grounding.subject.box.xyxy)
    if face is None:
        return [], None
    ears = ear_skin(image, face.oval, face.ears) if frontal(face.ears, face.oval) else ()
    return sure_boxes(face.oval, ears, image.shape[:2]), polygon_mask(face.oval, image.shape[:2])


def hair_box(grounding: Grounding) -> tuple[float, float, float, float] | None:
    """The box of the region labelled hair, if the annotation has one."""
    return next((r.box.xyxy for r in grounding.regions if r.label.strip().lower() == "hair"), None)


def body_parts(image: np.ndarray, grounding: Grounding, face: np.ndarray | None) -> BodyParts:
    """What the referees see of the subject's body for its segmentation (``logic/body_mask``): the cores of the arms
    and shoulder line the pose referee sees on the person (``limbs``), the body about them, its seen ears, the
    annotated hair box and the face oval (``face``, from ``referee_sure``)."""
    from perceptforge.backends.referees import person_probability, pose_referee

    shape = image.shape[:2]
    pose = pose_referee().subject_pose(image, grounding.subject.box.xyxy)
    hair = hair_box(grounding)
    if pose is None:
        nothing = np.zeros(shape, bool)
        return BodyParts(nothing, nothing, hair=hair, face=face, person=person_probability(image))
    person = person_probability(image)
    core, body = limbs(pose, shape, person)
    ears, span = seen_ears(pose, shape)
    # white hair below the ears is the body's too: the flag's box beside it does not force it to the background
    if hangs_below_ears(hair, ears):
        body = body | beside_head(ears, span, shape)
    return BodyParts(core, body, ears, span, hair, face, person)


def named_region(
    template: Template, grounding: Grounding, image: np.ndarray, old_value: str, region: str, gates: Gates
) -> tuple[np.ndarray, dict[str, float]]:
    """The mask of a value that names a region (hair) and its measurements, as this stage makes and gates it:
    ``region_mask`` (refusing a black-and-white photo, hair as pale as the skin, no hair found), less what the face
    referee sees is never hair (the face's skin, its eyebrows), then ``gate_mask`` (too little of it to show a
    change). Raises ValueError with the quarantine's words (QualityGate for the gate, carrying the rejected mask as
    ``evidence_mask``). The run's mask stage and ``sources check`` (``region_refusal``) both call this one function,
    so the check promises what the run does."""
    mask = region_mask(template, grounding, image, region)
    if region == "hair" and gates.referees:  # the face's skin and eyebrows are never hair
        mask = hair_without_face(mask, face_not_hair(image, grounding))
    try:
        return mask, gate_mask(template, mask, grounding, old_value, gates, {}, image)
    except QualityGate as exc:
        exc.evidence_mask = mask
        raise


def short_box_refusal(person: np.ndarray, grounding: Grounding) -> tuple[str, float] | None:
    """Why a boxes-only background edit is refused before segmenting, and how many lines say so, where the subject's
    box stops short of the frame while the person segmenter (``person``: its map of the photo) sees the person run on
    to it (``logic/body_mask.box_short_of_person``, less what is kept whole); None: it is not. The run's mask stage
    and ``sources check`` both ask it."""
    held = boxes_mask([r.box.xyxy for r in kept_objects(grounding)], person.shape)
    short = box_short_of_person(person, grounding.subject.box.xyxy, held)
    if short is None:
        return None
    side, gap, lines = short
    # the box is the whole subject: what lies past it goes with the old background, the person cut straight
    why = (
        f"the subject's box stops {gap} px short of the photo's {side} edge, where the person segmenter sees the "
        f"person run on to it ({lines} {'rows' if side in ('left', 'right') else 'columns'}): a background edit "
        "would cut the person there; extend the subject's box to the frame"
    )
    return why, float(lines)


def region_refusal(
    template: Template, grounding: Grounding, image: np.ndarray, old_value: str, region: str, gates: Gates
) -> str | None:
    """Why this stage refuses a value that names a region (hair) on this photo, in the words of its quarantine
    (``named_region``'s). ``sources check`` asks it before a run; None: the stage takes the value."""
    try:
        named_region(template, grounding, image, old_value, region, gates)
    except ValueError as exc:
        return str(exc)
    return None


def make_mask(
    template: Template,
    candidate: Candidate,
    source: IngestedSource,
    grounding: Grounding,
    run: RunDir,
    segmenter: Segmenter,
    gates: Gates,
    seed: int,
    device: str = "cpu",
) -> MaskRecord:
    rng = unit_rng(seed, candidate.unit + ":edit")
    image = np.asarray(load_rgb(run.sub(source.stored)))
    rendering = candidate.idea.rendering
    background = template.edit_kind.value == "background_substitution"
    region = rendering.region if rendering is not None else None
    if region is not None and not background and template.target != "background":
        # a value that names a region (a hair colour): made and refused as ``sources check`` promises
        try:
            named, measured = named_region(template, grounding, image, candidate.idea.old, region, gates)
        except QualityGate as exc:  # keep the rejected mask so the report can show it
            assert exc.evidence_mask is not None
            exc.evidence = {"natural": source.stored, "mask": run.store_mask(exc.evidence_mask).path}
            raise
        used = BackendRef(name=segmenter.name, model_id=segmenter.model_id)
        return MaskRecord(unit=candidate.unit, mask=run.store_mask(named), segmenter=used, measurements=measured)
    drawn = bool(grounding.subject.outline)
    # whether a standing object (a tripod) is cut in two is measured on a segmenter's guess of it; an annotator's
    # outline of the subject already says what of it stays
    with call_lock(device, segmenter):
        objects = (
            {r.label: segmenter.box_mask(image, r.box.xyxy) for r in standing_objects(grounding)}
            if background and not drawn
            else {}
        )
    # Eq. 1 draws one jitter of the subject's box; segmentation around another may be clean where this one bit
    # into a sleeve: the next seeded draws are tried, in order, so the same seed gives the same mask (a drawn
    # outline is not jittered: one try)
    attempts = gates.mask_attempts if background and not drawn else 1
    # what the face referee sees of the subject's face (its oval, its ears) is surely the subject: a segmenter's
    # coarse map cut ears and jaws that the gates then refused
    sure, face = referee_sure(image, grounding) if background and not drawn and gates.referees else ([], None)
    # and what the pose referee sees of its body: its arms and shoulders seed the segmentation, its ears and hair
    # are kept to their rims and tips (a segmenter's coarse map cut them), slivers of the old background trimmed
    parts = body_parts(image, grounding, face) if background and not drawn and gates.referees else None
    if parts is not None and parts.person is not None:
        short = short_box_refusal(parts.person, grounding)
        if short is not None:
            raise QualityGate(short[0], {"box_short": short[1]}, {"natural": source.stored})
    for attempt in range(1, attempts + 1):
        tried = {"attempts": float(attempt)} if attempt > 1 else {}
        with call_lock(device, segmenter):
            mask = edit_mask(template, grounding, image, candidate.idea.old, segmenter, rng, region, sure, face, parts)
        try:
            measured = (
                gate_mask(template, mask, grounding, candidate.idea.old, gates, objects, image)
                if mask is not None
                else {}
            )
            if parts is not None and mask is not None:
                measured |= side_hair_gate(mask, parts, gates.max_side_hair_cut)
        except QualityGate as exc:
            if attempt < attempts:
                continue
            assert mask is not None  # keep the rejected mask so the report can show it
            exc.evidence = {"natural": source.stored, "mask": run.store_mask(mask).path}
            exc.measurements = exc.measurements | tried
            raise
        measured |= tried
        break
    hair = hair_zone(parts, (image.shape[0], image.shape[1])) if parts is not None and mask is not None else None
    return MaskRecord(
        unit=candidate.unit,
        mask=run.store_mask(mask) if mask is not None else None,
        hair=run.store_mask(hair) if hair is not None and hair.any() else None,
        # a drawn outline is the subject itself: lineage says the annotation made the mask, not the model
        segmenter=(DRAWN if background and drawn else BackendRef(name=segmenter.name, model_id=segmenter.model_id)),
        measurements=measured,
    )


class MaskUnit(NamedTuple):
    template: Template
    candidate: Candidate
    source: IngestedSource
    grounding: Grounding


@task(name="mask", cache_policy=NO_CACHE)
def mask(
    unit: MaskUnit,
    segmenter: ModelSpec,
    gates: Gates,
    seed: int,
    run_path: Path,
) -> MaskRecord | Exception:
    template, candidate, source, grounding = unit
    run = RunDir(run_path)
    device = segmenter.runtime.device if isinstance(segmenter, ModelSpec) else "cpu"
    return unit_record(
        run,
        f"masks/{safe_name(candidate.unit)}.json",
        lambda: make_mask(template, candidate, source, grounding, run, obtain(segmenter), gates, seed, device),
        MaskRecord,
    )


def mask_stage(
    runner: StageRunner,
    candidates: list[tuple[Unit, Candidate]],
    templates: dict[str, Template],
    sources: dict[str, IngestedSource],
    groundings: dict[str, Grounding],
    segmenter: ModelSpec,
    gates: Gates,
    seed: int,
) -> list[tuple[Unit, MaskRecord]]:
    units = []
    for u, c in candidates:
        sid = c.lineage.source_id
        units.append(Unit(u.name, u.file, MaskUnit(templates[c.lineage.template_id], c, sources[sid], groundings[sid])))
    return runner.map(
        "mask", mask, units, segmenter=segmenter, gates=gates, seed=seed, models=[segmenter], resources=MODEL_STAGE
    )
