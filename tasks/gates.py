"""Gates: checks a pair must pass before annotators see it (``logic/gates.py`` holds the measurements).
Every measurement is written to ``gates/<unit>.json``, passed or not; a failing pair is quarantined with
its reason and measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.configs.profile import Gates
from perceptforge.data.schema import Candidate, EditRecord, GateLimit, GateRecord, Rendering
from perceptforge.logic.body_mask import BodyParts, boxes_mask, hair_texture_cut, lost_side_hair
from perceptforge.logic.face_mesh import FaceParts
from perceptforge.logic.gates import (
    distinct_edits,
    hamming,
    near_duplicates,
    pair_measurements,
    pair_verdict,
    phash,
)
from perceptforge.logic.pose_gates import body_changed, body_part_masks, body_verdict
from perceptforge.logic.referee_gates import (
    body_part_measurements,
    changed_pixels,
    cut_pixels,
    failing_region,
    first_failure,
    hair_spill_measurements,
    kept_measurements,
    old_patch,
    old_rim,
    outlined_pair,
    person_measurements,
    polygon_mask,
    referee_verdict,
    seam,
)
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.tasks.engine import CPU_STAGE, MODEL_STAGE
from perceptforge.tasks.runner import StageRunner, Unit


class QualityGate(ValueError):
    """The unit failed a quality gate; the message says which and by how much, ``measurements`` all of them."""

    def __init__(
        self, reason: str, measurements: dict[str, float] | None = None, evidence: dict[str, str] | None = None
    ):
        super().__init__(reason)
        self.measurements = measurements or {}
        self.evidence = evidence or {}
        self.evidence_mask: np.ndarray | None = None  # a rejected mask not yet stored (the mask stage stores it)


class NearDuplicate(QualityGate):
    """The pair's change nearly duplicates another unit's."""


def edited_region(image: Image.Image, mask: np.ndarray | None) -> Image.Image:
    """The mask's bounding box of ``image`` (the whole image for whole-image edits): what CLIP judges."""
    if mask is None or not mask.any():
        return image
    ys, xs = np.nonzero(mask)
    return image.crop((int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1))


Box = tuple[float, float, float, float]


class GateUnit(NamedTuple):
    edit: EditRecord
    candidate: Candidate
    subject_box: Box | None = None  # where the referees look for the subject's face
    kept: dict[str, Box] | None = None  # what a background edit keeps with the subject: held, in front of it
    worn: dict[str, Box] | None = None  # the objects on the subject (a pin, glasses), which stay with it
    hair: Box | None = None  # the annotated hair box, where side hair is looked for


def referee_limits(gates: Gates, hair: bool, masked: bool) -> dict[str, float]:
    """The referee gates' limits, each the most a measurement may be: a hair edit's, or a background edit's (the
    cut's own checks only with a mask that replaced part of the image)."""
    if hair:
        return {
            "changed_on_face": gates.max_hair_on_face,
            "face_skin_changed": gates.max_hair_skin_changed,
            "eyebrows_changed": gates.max_hair_on_eyebrows,
            "ear_painted": gates.max_ear_changed,
            "changed_in_background": gates.max_hair_in_background,
        }
    limits = {
        "face_oval_changed": gates.max_face_changed,
        "ear_changed": gates.max_ear_changed,
        "person_cut": gates.max_person_cut,
        "kept_changed": gates.max_kept_changed,
        "kept_replaced": gates.max_kept_replaced,
        "hair_texture_cut": gates.max_hair_texture_cut,
    }
    if masked:
        limits |= {
            "old_rim": gates.max_old_rim,
            "old_patch": gates.max_old_patch,
            "background_kept": gates.max_background_kept,
            "seam": gates.max_seam,
        }
    return limits


def pose_check(
    natural: np.ndarray, manipulated: np.ndarray, candidate: Candidate, gates: Gates, subject_box: Box | None
) -> tuple[dict[str, float], str | None, np.ndarray | None]:
    """The pose referee's gate on one pair (``logic/pose_gates``): a background edit keeps the body parts the pose
    referee sees on the person (shoulder line, arms, hands) unchanged. Its measurements, its verdict and, on a
    failure, the pair with the failing part outlined; nothing for other edits or where no pose is seen."""
    if not gates.referees or candidate.edit_kind.value != "background_substitution":
        return {}, None, None
    from perceptforge.backends.referees import person_probability, pose_referee

    pose = pose_referee().subject_pose(natural, subject_box)
    if pose is None:
        return {"referee_pose": 0.0}, None, None
    parts = body_part_masks(pose, natural.shape[:2], person_probability(natural))
    measured = {"referee_pose": 1.0} | body_changed(changed_pixels(natural, manipulated), parts)
    reason = body_verdict(measured, gates.max_body_changed)
    if reason is None:
        return measured, None, None
    worst = max((k for k in measured if k.startswith("body_changed:")), key=lambda k: measured[k])
    return measured, reason, outlined_pair(natural, manipulated, parts[worst.split(":", 1)[1]])


def pair_limits(gates: Gates, candidate: Candidate, rendered: Rendering | None, masked: bool) -> dict[str, GateLimit]:
    """Every limit a pair is judged against, by measurement name: what ``gates/<unit>.json`` records beside the
    measurements, so a page can say how near each came to failing."""
    limits = {
        "inside_change": GateLimit(at_least=gates.min_inside_change),
        "outside_change": GateLimit(at_most=gates.max_outside_change),
    }
    if rendered is not None and rendered.how == "colour":
        limits["region_changed"] = GateLimit(at_least=gates.min_region_changed)
    hair = rendered is not None and rendered.region == "hair"
    if gates.referees and (hair or candidate.edit_kind.value == "background_substitution"):
        limits |= {k: GateLimit(at_most=v) for k, v in referee_limits(gates, hair, masked).items()}
    if gates.referees and candidate.edit_kind.value == "background_substitution":
        limits["body_changed"] = GateLimit(at_most=gates.max_body_changed)
    return limits


def side_hair_parts(face: FaceParts, hair_box: Box, person: np.ndarray) -> BodyParts:
    """What ``lost_side_hair`` looks with, from the face referee: the ears' roots (side hair is looked for above
    them), the face oval (never hair) and the person segmenter's map."""
    none = np.zeros(person.shape, bool)
    ears = tuple((float(x), float(y)) for x, y in face.ears)
    span = float(np.linalg.norm(face.ears[0] - face.ears[1]))
    return BodyParts(none, none, ears, span, hair_box, polygon_mask(face.oval, person.shape), person)


def referee_check(
    natural: np.ndarray,
    manipulated: np.ndarray,
    candidate: Candidate,
    rendered_region: str | None,
    gates: Gates,
    subject_box: Box | None = None,
    mask: np.ndarray | None = None,
    kept: dict[str, Box] | None = None,
    worn: dict[str, Box] | None = None,
    hair_box: Box | None = None,
) -> tuple[dict[str, float], str | None, np.ndarray | None]:
    """The referee gates' measurements and verdict for one pair (whatever backend made it): a hair edit must not
    paint the face's skin, the eyebrows, a frontal face's ears or the background; a background edit must not cut
    the face oval, a frontal face's ears, the person the segmenter is sure of (``person_cut``) or what it ``kept``
    (label → box: what the subject holds, what stands in front of it), and (with its ``mask``, True where the
    background was replaced) leave no rim of the old background along the cut (``old_rim``), no patch of it in or
    beside the subject (``old_patch``; ``background_kept``: what the segmenter is sure is background) and no seam
    (``seam``), nor take the side hair above the ears in the annotated ``hair_box`` (``hair_texture_cut``). Other
    edits are not judged here, nor, where no face is seen, the face, person and hair checks (the measurement
    ``referee_face`` says whether a face was seen). The third value is, on a failure, the natural and
    manipulated images side by side with the failing region outlined."""
    hair = rendered_region == "hair"
    background = candidate.edit_kind.value == "background_substitution"
    if not gates.referees or not (hair or background):
        return {}, None, None
    from perceptforge.backends.referees import face_referee, person_probability

    face = face_referee().subject_face(natural, subject_box)
    changed = changed_pixels(natural, manipulated)
    measured: dict[str, float] = {"referee_face": 0.0 if face is None else 1.0}
    person, lost_hair = None, None
    if hair:
        # the person segmenter knows people the face referee sees (near, facing the camera); where no face is seen
        # (a drawn test portrait, a head turned away) its "background" may be the whole head: not judged
        if face is not None:
            person = person_probability(natural)
            measured |= hair_spill_measurements(changed, natural, face.oval, face.eyebrows, person, ears=face.ears)
    else:
        oval, ears = (None, None) if face is None else (face.oval, face.ears)
        # a body part is cut where its colour moved far (the new scene shows), not where a matte blended its rim
        changed = cut_pixels(natural, manipulated)
        measured |= body_part_measurements(changed, oval, ears, natural)
        # what it holds, what stands in front of it and what it wears stay (``worn``: judged here only: the old
        # background seen through a pair of glasses is still looked for)
        measured |= kept_measurements(changed, (kept or {}) | (worn or {}), mask)
        keep = None if mask is None or not mask.any() or mask.all() else ~mask
        # what the subject holds or has in front of it may be the old background's colour (a grey camera against a
        # grey sky) or not a person's: its box is not looked at for old background
        held = boxes_mask(list((kept or {}).values()), natural.shape[:2])
        if face is not None:
            # the person segmenter knows the people the face referee sees: the person it is sure of stays whole
            # and what it is sure is background goes, whatever the annotation's boxes say
            person = person_probability(natural)
            measured |= person_measurements(changed, person, keep, held)
            if hair_box is not None:
                parts = side_hair_parts(face, hair_box, person)
                lost_hair = lost_side_hair(natural, keep if keep is not None else ~changed, parts)
                measured["hair_texture_cut"] = hair_texture_cut(lost_hair, parts)
        if keep is not None:
            measured["old_rim"] = old_rim(natural, manipulated, keep)
            measured["old_patch"] = old_patch(natural, keep, held)
            measured["seam"] = seam(manipulated, keep)
    limits = referee_limits(gates, hair, mask is not None and bool(mask.any()) and not bool(mask.all()))
    failed = first_failure(measured, limits)
    if failed is None:
        return measured, None, None
    region = failing_region(
        failed,
        changed,
        natural,
        manipulated,
        oval=None if face is None else face.oval,
        eyebrows=() if face is None else face.eyebrows,
        ears=None if face is None else face.ears,
        person=person,
        keep=None if mask is None else ~mask,
        kept=(kept or {}) | (worn or {}),
        lost_hair=lost_hair,
    )
    return measured, referee_verdict(measured, limits), outlined_pair(natural, manipulated, region)


@task(name="gate", cache_policy=NO_CACHE)
def gate(unit: GateUnit, gates: Gates, clip: ModelSpec | Any, run_path: Path) -> int | Exception:
    """The perceptual hash of what the edit changed, if the pair passes; else QualityGate with the reason. ``clip``:
    the faithfulness gate's model (its spec, loaded once per process; or a loaded scorer), or None."""
    try:
        return judge_pair(unit, gates, obtain(clip), run_path)
    except OSError as exc:  # a full disk: the runner stops the run with one line
        return exc


def pair_gates(
    natural: Image.Image,
    manipulated: Image.Image,
    mask: np.ndarray | None,
    candidate: Candidate,
    rendered: Rendering | None,
    gates: Gates,
    clip: Any = None,
    subject_box: Box | None = None,
    kept: dict[str, Box] | None = None,
    worn: dict[str, Box] | None = None,
    hair: Box | None = None,
) -> tuple[dict[str, float], str | None, np.ndarray | None, bool]:
    """Every gate on one pair, without the run's files: the measurements, the first failure's reason (None when
    the pair passes), the pair with the failing region outlined where a referee failed it, and whether it was a
    referee. ``kept``: label → box of what a background edit keeps with the subject (``logic/edit_region.
    kept_objects``: what it holds, what stands in front of it); ``worn``: the objects on it (``worn_objects``: a pin,
    glasses); ``hair``: the annotated hair box. The run's gate stage and the gate corpus
    (``benchmarks/``) judge pairs through this one function."""
    measured = pair_measurements(natural, manipulated, mask)
    if clip is not None:
        measured |= clip.measure(edited_region(manipulated, mask), candidate.idea.new, candidate.idea.old)
    recoloured = rendered is not None and rendered.how == "colour"
    reason = pair_verdict(
        measured,
        gates.min_inside_change,
        gates.max_outside_change,
        gates.clip.margin if gates.clip else None,
        gates.min_region_changed if recoloured else None,
    )
    refereed, referee_reason, outlined = referee_check(
        np.asarray(natural),
        np.asarray(manipulated),
        candidate,
        rendered.region if rendered is not None else None,
        gates,
        subject_box,
        mask,
        kept,
        worn,
        hair,
    )
    measured |= refereed
    if referee_reason is None:  # the pose referee's body parts (logic/pose_gates), after the face's
        posed, referee_reason, outlined = pose_check(
            np.asarray(natural), np.asarray(manipulated), candidate, gates, subject_box
        )
        measured |= posed
    return measured, reason or referee_reason, outlined, reason is None and referee_reason is not None


def judge_pair(unit: GateUnit, gates: Gates, clip: Any, run_path: Path) -> int | QualityGate:
    edit, candidate, subject_box, kept, worn, hair = GateUnit(*unit)  # a plain (edit, candidate) pair: no boxes
    run = RunDir(run_path)
    natural, manipulated = (load_rgb(run.sub(ref.path)) for ref in (edit.pair.natural, edit.pair.manipulated))
    if natural.size != manipulated.size:
        return QualityGate(f"sizes differ: natural {natural.size}, manipulated {manipulated.size}")
    mask = run.load_mask(edit.pair.mask.path) if edit.pair.mask else None
    measured, reason, outlined, referee_failed = pair_gates(
        natural, manipulated, mask, candidate, edit.edit.rendered, gates, clip, subject_box, kept, worn, hair
    )
    masked = mask is not None and bool(mask.any()) and not bool(mask.all())
    record = GateRecord(
        unit=edit.unit,
        measurements=measured,
        limits=pair_limits(gates, candidate, edit.edit.rendered, masked),
        passed=reason is None,
        reason=reason or "",
    )
    run.write_record(f"gates/{safe_name(edit.unit)}.json", record.model_dump(mode="json"))
    if reason:
        evidence = {}
        if outlined is not None and referee_failed:  # the pair, its failing region outlined
            evidence = {"natural": edit.pair.natural.path, "outlined": run.store_image(Image.fromarray(outlined)).path}
        return QualityGate(reason, measured, evidence)
    # Hash what the edit changed: whole-image hashes of small edits on one photo all look alike.
    change = np.abs(np.asarray(manipulated, np.int16) - np.asarray(natural, np.int16)).astype(np.uint8)
    return phash(Image.fromarray(change))


def gates_stage(
    runner: StageRunner,
    edits: list[tuple[Unit, EditRecord]],
    candidates: dict[str, Candidate],
    gates: Gates,
    clip: ModelSpec | None = None,
    subject_boxes: dict[str, Box] | None = None,
    kept_boxes: dict[str, dict[str, Box]] | None = None,
    worn_boxes: dict[str, dict[str, Box]] | None = None,
    hair_boxes: dict[str, Box | None] | None = None,
) -> list[tuple[Unit, EditRecord]]:
    """The edits that pass every gate, in unit order; the others are quarantined with the gate's reason.
    ``subject_boxes``: source id → the subject's box, where the referees look for its face; ``kept_boxes``: source
    id → label → box of what a background edit keeps with the subject; ``worn_boxes``: of the objects on it;
    ``hair_boxes``: source id → the annotated hair box."""
    boxes, kept, worn, hair = subject_boxes or {}, kept_boxes or {}, worn_boxes or {}, hair_boxes or {}
    units = []
    for u, e in edits:
        source = candidates[u.name].lineage.source_id
        unit = GateUnit(e, candidates[u.name], boxes.get(source), kept.get(source), worn.get(source), hair.get(source))
        units.append(Unit(u.name, u.file, unit))
    resources = CPU_STAGE if clip is None else MODEL_STAGE
    passed = runner.map("gates", gate, units, gates=gates, clip=clip, models=[clip], resources=resources)
    hashes = dict((u.name, h) for u, h in passed)
    by_name = {u.name: u.value for u, _ in passed}

    def alike(unit: str, other: str) -> bool:
        # two edits of one photo change the same pixels: their images, not the hashes of the change, decide
        first, second = by_name[unit], by_name[other]
        if first.candidate.lineage.source_id != second.candidate.lineage.source_id:
            return True
        natural, a, b = (
            np.asarray(load_rgb(runner.run.sub(ref.path)))
            for ref in (first.edit.pair.natural, first.edit.pair.manipulated, second.edit.pair.manipulated)
        )
        return not distinct_edits(natural, a, b)  # the pair gate let through only images of the photo's size

    dupes = near_duplicates(list(hashes.items()), gates.min_phash_distance, alike)
    for u, _ in passed:
        if u.name in dupes:
            twin = dupes[u.name]
            rel = f"gates/{safe_name(u.name)}.json"
            record = GateRecord.model_validate(runner.run.read_record(rel))
            measured = record.measurements | {"phash_distance": float(hamming(hashes[u.name], hashes[twin]))}
            failure = NearDuplicate(f"manipulated image nearly duplicates {twin}'s", measured)
            runner.run.write_record(
                rel,
                record.model_copy(
                    update={"measurements": measured, "passed": False, "reason": str(failure)}
                ).model_dump(mode="json"),
            )
            runner.quarantine("gates", u, failure)
    return [(u, u.value[0]) for u, _ in passed if u.name not in dupes]
