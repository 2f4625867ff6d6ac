"""Gates that stop degenerate edits: mask area and subject kept (mask stage), change inside/outside and
CLIP faithfulness (pair stage), with every measurement recorded, quarantined units included."""

import json

import numpy as np
import pytest
from helpers import candidate_for, undrawn
from PIL import Image

from perceptforge.backends.writers import TemplateWriter
from perceptforge.configs.profile import ClipGate, Gates
from perceptforge.data.schema import Candidate
from perceptforge.logic.gates import mask_measurements, mask_verdict, pair_measurements, pair_verdict
from perceptforge.logic.templates import templates
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import grounding_from_entry, read_source_dir
from perceptforge.tasks.gates import QualityGate, gate
from perceptforge.tasks.ingest import ingest_entry
from perceptforge.tasks.mask import make_mask, mask_stage
from perceptforge.tasks.runner import StageRunner, Unit


def test_mask_measurements_on_tiny_masks():
    mask = np.zeros((10, 10), bool)
    mask[:, :5] = True
    m = mask_measurements(mask, (0, 0, 10, 4), old_boxes=[(0, 0, 2, 10), (8, 0, 10, 10)])
    # the kept right half is one part, the subject's: the old box inside it is covered by the subject
    assert m == {"mask_area": 0.5, "subject_in_mask": 0.5, "old_kept": 0.0, "ragged_outline": 0.0}
    # x = 5..7 stays with the face; the strip x = 9 is a fragment of the old background left in view
    mask[:, 8] = True
    m = mask_measurements(mask, (0, 0, 10, 4), old_boxes=[(8, 0, 10, 10)], protected={"face": (6, 2, 8, 4)})
    assert m["old_kept"] == 0.5 and m["in_mask:face"] == 0.0 and m["protected_in_mask"] == 0.0
    assert "50.0% of what the old value names" in mask_verdict(m, None, None, 0.3)
    held = mask_measurements(mask, (0, 0, 10, 4), protected={"helmet": (0, 0, 4, 4), "face": (6, 2, 8, 4)})
    assert held["in_mask:helmet"] == 1.0 and held["protected_in_mask"] == 1.0
    assert mask_verdict(held, None, None, 1.0, 0.1) == (
        "mask covers 100% of the helmet (at most 10%): the edit would change it"
    )
    mask = np.zeros((10, 10), bool)
    mask[:, :5] = True
    m = mask_measurements(mask, (0, 0, 10, 4), old_boxes=[(0, 0, 2, 10), (8, 0, 10, 10)])
    m["old_kept"] = 0.5
    assert mask_verdict(m, (0.1, 0.9), 0.6, 0.6) is None
    assert "outside 60.0%–90.0%" in mask_verdict(m, (0.6, 0.9), None, 1.0)
    assert "covers 50% of the subject's box" in mask_verdict(m, None, 0.4, 1.0)
    assert "50.0% of what the old value names stays in view" in mask_verdict(m, None, None, 0.3)


def test_a_bite_out_of_the_subject_makes_its_outline_ragged():
    """A disc of a subject with a notch bitten out of its side: closing the outline adds the notch back."""
    from perceptforge.logic.gates import ragged_outline

    yy, xx = np.mgrid[0:500, 0:500]
    subject = np.hypot(yy - 250, xx - 250) < 200
    assert ragged_outline(subject, (50, 50, 450, 450)) < 0.002
    bitten = subject & ~((yy > 238) & (yy < 262) & (xx < 150))  # a bite 23 px wide, 100 px deep
    assert ragged_outline(bitten, (50, 50, 450, 450)) > 0.015
    m = mask_measurements(~bitten, (50, 50, 450, 450), protected={"face": (200, 200, 300, 300)})
    assert "the subject's outline is ragged" in mask_verdict(m, None, None, 1.0, 1.0, 0.5, 0.015)


def test_pair_verdict_reads_change_and_clip():
    a = Image.new("RGB", (4, 4), (0, 0, 0))
    b = Image.new("RGB", (4, 4), (30, 30, 30))
    inside = np.zeros((4, 4), bool)
    inside[:2] = True
    m = pair_measurements(a, b, inside)
    assert m == {"inside_change": 30.0, "outside_change": 30.0, "region_changed": 1.0}
    assert "too much change outside" in pair_verdict(m, 12, 6, None)
    assert pair_measurements(a, b, None)["outside_change"] == 0.0
    clip = {"inside_change": 30.0, "outside_change": 0.0, "clip_new": 0.2, "clip_old": 0.25}
    assert "does not match the new value" in pair_verdict(clip, 12, 6, 0.0)
    assert pair_verdict(clip, 12, 6, -0.1) is None


class FixedMask:
    """A segmenter that returns a hand-built mask: the gate, not segmentation, is under test here."""

    name, model_id = "fixed", "fixed"

    def __init__(self, mask):
        self.mask = mask

    def box_mask(self, image, box):
        return self.mask

    def candidates(self, image, box):
        return [self.mask]


@pytest.fixture(scope="module")
def astronaut_unit(sample_dir, tmp_path_factory):
    run = RunDir(tmp_path_factory.mktemp("run"))
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    source, grounding = ingest_entry(sample_dir, entry, run), undrawn(grounding_from_entry(entry))
    b3 = templates()["B3"]  # replaces the helmet she holds: a partial edit, its mask the segmenter's
    candidate = Candidate.model_validate(candidate_for(b3, grounding, source.sha256, TemplateWriter(), templates(), 0))
    return run, b3, candidate, source, grounding


def hand_built(share: float) -> np.ndarray:
    mask = np.zeros((512, 512), bool)
    mask.flat[: round(share * mask.size)] = True
    return mask


@pytest.mark.parametrize("share", [0.001, 1.0])
def test_masks_of_a_thousandth_and_of_the_whole_image_are_stopped_by_area(astronaut_unit, share):
    run, template, candidate, source, grounding = astronaut_unit
    with pytest.raises(QualityGate, match="mask area") as exc:
        make_mask(template, candidate, source, grounding, run, FixedMask(hand_built(share)), Gates(), 0)
    assert exc.value.measurements["mask_area"] == pytest.approx(share, abs=1e-5)
    assert (run.path / exc.value.evidence["mask"]).exists()  # the rejected mask is kept for the report


def test_a_degenerate_mask_is_quarantined_with_its_measurements(prefect_api, astronaut_unit, caplog):
    import logging

    from prefect import flow

    run, template, candidate, source, grounding = astronaut_unit
    runner = StageRunner(run)

    @flow
    def masks():
        units = [(Unit(candidate.unit, "images/astronaut.jpg", None), candidate)]
        return mask_stage(
            runner,
            units,
            {template.id: template},
            {"1": source},
            {"1": grounding},
            FixedMask(hand_built(1.0)),
            Gates(),
            0,
        )

    with caplog.at_level(logging.INFO):
        assert masks() == []
    # an expected quarantine is one warning line, never an error with a traceback
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"mask: {candidate.unit} quarantined: QualityGate: mask area 100.0% is outside 0.5%–50.0% for this edit kind"
    ]
    record = json.loads(run.sub("quarantine", f"{candidate.unit}.json").read_text())
    assert record["stage"] == "mask" and record["reason"] == "QualityGate"
    assert "mask area 100.0% is outside 0.5%–50.0%" in record["detail"]
    assert record["measurements"]["mask_area"] == 1.0 and record["mask"].startswith("images/")


def test_a_mask_that_swallows_the_subject_is_stopped(astronaut_unit):
    run, template, candidate, source, grounding = astronaut_unit
    x0, y0, x1, y1 = (int(v) for v in grounding.subject.box.xyxy)
    keep = np.zeros((512, 512), bool)
    keep[y0:y1, x0 : x0 + (x1 - x0) * 3 // 10] = True  # the segmenter kept a strip of the subject: the rest goes
    b1 = templates()["B1"]
    b1_candidate = Candidate.model_validate(
        candidate_for(b1, grounding, source.sha256, TemplateWriter(), templates(), 0)
    )
    # the face, the arms and the shoulder line the referees see are kept whatever the segmenter says, and the strip,
    # joined to none of her, goes: most of her box is still replaced
    with pytest.raises(QualityGate, match="mask covers [0-9]+% of the subject's box"):
        make_mask(b1, b1_candidate, source, grounding, run, FixedMask(keep), Gates(), 0)
    without_referees = Gates(referees=False)  # the strip alone: most of the subject's box goes
    with pytest.raises(QualityGate, match="of the subject's box"):
        make_mask(b1, b1_candidate, source, grounding, run, FixedMask(keep), without_referees, 0)


def test_clip_gate_measures_new_against_old_and_stops_an_unfaithful_edit(tmp_path, astronaut_unit):
    from tiny_models import save_tiny_clip

    from perceptforge.backends.clip_gate import ClipScorer

    run, template, candidate, source, grounding = astronaut_unit
    scorer = ClipScorer(str(save_tiny_clip(tmp_path / "clip"))).load()
    natural = Image.open(run.sub(source.stored))
    sims = scorer.similarities(natural, ["bright green hair", "short brown hair"])
    assert len(sims) == 2 and all(-1 <= s <= 1 for s in sims) and sims[0] != sims[1]
    assert scorer.similarities(natural, ["bright green hair"])[0] == pytest.approx(sims[0], abs=1e-5)

    mask = make_mask(template, candidate, source, grounding, run, FixedMask(hand_built(0.1)), Gates(), 0)
    manipulated = Image.fromarray(np.asarray(natural)[:, ::-1].copy())  # a change, inside and out
    edit = {
        "unit": candidate.unit,
        "pair": {"natural": run.store_image(natural), "manipulated": run.store_image(manipulated), "mask": mask.mask},
        "edit": {"kind": "partial_substitution", "backend": "recolour", "seed": 0},
        "backends": {},
    }
    from perceptforge.data.schema import EditRecord

    record = EditRecord.model_validate(edit)
    strict = Gates(min_inside_change=0, max_outside_change=255, clip=ClipGate(model="x", margin=2.0))
    verdict = gate.fn((record, candidate), strict, scorer, run.path)
    assert isinstance(verdict, QualityGate) and "does not match the new value" in str(verdict)
    saved = json.loads(run.sub("gates", f"{candidate.unit}.json").read_text())
    assert not saved["passed"] and {"clip_new", "clip_old", "inside_change"} <= set(saved["measurements"])
    lenient = Gates(min_inside_change=0, max_outside_change=255, clip=ClipGate(model="x", margin=-2.0))
    assert isinstance(gate.fn((record, candidate), lenient, scorer, run.path), int)
    assert json.loads(run.sub("gates", f"{candidate.unit}.json").read_text())["passed"]


def test_an_object_standing_before_the_old_background_is_kept_never_replaced():
    """A tripod before the subject, half of it under the new scene, would stand on nothing; replaced whole, it left
    the camera on a pole stub (a podium replaced whole, a man cut straight at the waist): both are refused with the
    share replaced and what the annotation should say; kept whole, it passes."""
    from perceptforge.logic.gates import mask_measurements, mask_verdict

    tripod = np.zeros((20, 20), bool)
    tripod[10:20, 8:10] = True
    for rows, share, why in (
        (slice(15, 20), 0.5, "cuts the tripod in two (50% of it replaced"),
        (slice(0, 0), 0.0, None),
        (
            slice(0, 20),
            1.0,
            "would replace 100% of the tripod, which overlaps the subject (at most 5%): give it role 'occluder'",
        ),
    ):
        mask = np.zeros((20, 20), bool)
        mask[rows] = True
        measured = mask_measurements(mask, (0, 0, 10, 10), objects={"tripod": tripod})
        assert measured["replaced:tripod"] == share
        verdict = mask_verdict(measured, None, None, 1.0, 1.0, 0.05, 1.0, 0.05)
        assert (verdict is None) == (why is None)
        if why:
            assert why in verdict
    # the replaced-whole rule is its own limit: a profile that lets objects go keeps the cut-in-two rule alone
    assert (
        mask_verdict({"mask_area": 0.5, "subject_in_mask": 0, "replaced:tripod": 1.0}, None, None, 1, 1, 0.05) is None
    )


def test_an_outline_through_no_edge_of_the_photo_is_measured():
    """A red disc on a grey wall: a cut along the disc's edge separates two colours everywhere; a cut a ring of
    wall wider than the matte outside it (a strip of the old scene kept) or through the disc runs through one."""
    from perceptforge.logic.gates import unedged_outline, unedged_outline_pixels

    h = w = 120
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot(yy - 60, xx - 60)
    image = np.where((r <= 30)[..., None], np.array([200, 30, 30], np.uint8), np.array([128, 128, 128], np.uint8))
    assert unedged_outline(image, r <= 30) == 0.0
    assert unedged_outline(image, r <= 42) > 0.9  # a ring of wall kept all round
    half = (r <= 30) | ((r <= 42) & (xx > 60))  # a strip kept on one side only
    assert 0.3 < unedged_outline(image, half) < 0.8
    points = unedged_outline_pixels(image, half)
    assert points[:, 61:].any() and not points[:, :55].any()
