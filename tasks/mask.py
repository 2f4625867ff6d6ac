"""Mask: for each unit, the region its edit changes (Eq. 1 for background substitution, the target's
mask for partial substitution, none for direct alteration) and, for compositing, the donor photo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.devices import device_lock
from perceptforge.backends.protocols import Segmenter
from perceptforge.data.schema import BackendRef, Candidate, Grounding, IngestedSource, MaskRecord
from perceptforge.logic.edit_region import edit_mask
from perceptforge.logic.ids import unit_rng
from perceptforge.logic.templates import Template
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.tasks.runner import StageRunner, Unit


def make_mask(
    template: Template,
    candidate: Candidate,
    source: IngestedSource,
    grounding: Grounding,
    run: RunDir,
    segmenter: Segmenter,
    donors: list[str],
    seed: int,
    device: str = "cpu",
) -> MaskRecord:
    # One generator for the mask's jitter and resize, then the donor: the order the edit always drew them in.
    rng = unit_rng(seed, candidate.unit + ":edit")
    image = np.asarray(load_rgb(run.sub(source.stored)))
    with device_lock(device):
        mask = edit_mask(template, grounding, image, candidate.idea.old, segmenter, rng)
    ref = run.store_mask(mask) if mask is not None else None
    donor = donors[int(rng.integers(0, len(donors)))] if mask is not None and donors else None
    return MaskRecord(
        unit=candidate.unit,
        mask=ref,
        donor=donor,
        segmenter=BackendRef(name=segmenter.name, model_id=segmenter.model_id),
    )


@task(name="mask", cache_policy=NO_CACHE)
def mask(
    unit: tuple[Template, Candidate, IngestedSource, Grounding],
    segmenter: Segmenter,
    donors: list[str],
    seed: int,
    device: str,
    run_path: Path,
) -> MaskRecord:
    template, candidate, source, grounding = unit
    run = RunDir(run_path)
    record = run.once(
        f"masks/{safe_name(candidate.unit)}.json",
        lambda: make_mask(template, candidate, source, grounding, run, segmenter, donors, seed, device).model_dump(
            mode="json"
        ),
    )
    return MaskRecord.model_validate(record)


def mask_stage(
    runner: StageRunner,
    candidates: list[tuple[Unit, Candidate]],
    templates: dict[str, Template],
    sources: dict[str, IngestedSource],
    groundings: dict[str, Grounding],
    segmenter: Segmenter,
    donors: list[str],
    seed: int,
    device: str,
) -> list[tuple[Unit, MaskRecord]]:
    units = []
    for u, c in candidates:
        sid = c.lineage.source_id
        units.append(Unit(u.name, u.file, (templates[c.lineage.template_id], c, sources[sid], groundings[sid])))
    return runner.map("mask", mask, units, segmenter, donors, seed, device, models=[segmenter])
