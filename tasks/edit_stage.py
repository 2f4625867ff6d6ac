"""Step two over many candidates: masks per unit, then one batched backend call per batch of units.

Batches are planned from the whole list of candidates (by backend, then image size, then unit id), never
from what is left to do, so a resumed run feeds the model exactly the batches an uninterrupted run did and
writes the same bytes. One seeded generator per unit keeps an item's pixels independent of its batch mates.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from perceptforge.data.schema import Grounding
from perceptforge.tasks.candidates import unit_rng
from perceptforge.tasks.devices import device_lock
from perceptforge.tasks.editing import edit_mask, edit_request
from perceptforge.tasks.editors import EditRequest
from perceptforge.tasks.images import load_rgb
from perceptforge.tasks.rundir import RunDir
from perceptforge.tasks.templates import Template
from PIL import Image


@dataclass(frozen=True)
class EditUnit:
    """What one unit's edit needs, all of it serialisable (it crosses process boundaries under Dask)."""

    template: Template
    candidate: dict
    source: dict
    grounding: dict

    @property
    def name(self) -> str:
        return self.candidate["unit"]

    @property
    def backend_role(self) -> str:
        """``editor`` for whole-image instruction edits, ``inpainter`` for everything with a mask."""
        return "editor" if self.template.edit_kind.value == "direct_alteration" else "inpainter"


def edit_seed(seed: int, unit: str) -> int:
    """The seed of the unit's diffusion generator, recorded in its lineage so the edit can be redone alone."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{unit}:edit".encode()).digest()[:4], "big") >> 1


def plan_batches(units: list[EditUnit], batch_sizes: dict[str, int]) -> list[list[EditUnit]]:
    """Chunks of at most ``batch_sizes[role]`` units that share a backend and an image size (one pipeline
    call takes one size), in a fixed order that depends only on the units."""
    def key(u: EditUnit):
        return (u.backend_role, u.source["width"], u.source["height"], u.name)

    batches: list[list[EditUnit]] = []
    for u in sorted(units, key=key):
        last = batches[-1] if batches else None
        if last and key(last[0])[:3] == key(u)[:3] and len(last) < batch_sizes.get(u.backend_role, 1):
            last.append(u)
        else:
            batches.append([u])
    return batches


def prepare_edit(unit: EditUnit, run: RunDir, segmenter, donors: list[str], seed: int) -> tuple[EditRequest, np.ndarray | None]:
    """The unit's mask (None for instruction edits) and the request its backend gets."""
    rng = unit_rng(seed, unit.name + ":edit")
    image = load_rgb(run.sub(unit.source["stored"]))
    idea = unit.candidate["idea"]
    mask = edit_mask(unit.template, Grounding.model_validate(unit.grounding), np.asarray(image), idea["old"], segmenter, rng)
    if mask is None:
        return edit_request(unit.template, image, None, unit.candidate["instruction"], edit_seed(seed, unit.name), None), None
    donor = load_rgb(run.sub(donors[int(rng.integers(0, len(donors)))])) if donors else None
    return edit_request(unit.template, image, mask, idea["new_caption"], edit_seed(seed, unit.name), donor), mask


def store_edit(unit: EditUnit, request: EditRequest, mask: np.ndarray | None, manipulated: Image.Image, run: RunDir,
               segmenter, backend) -> dict:
    """Store the pair and mask content-addressed; returns the unit's edit record."""
    natural_ref = run.store_image(request.image)
    manipulated_ref = run.store_image(manipulated)
    mask_ref = run.store_image(Image.fromarray(mask.astype(np.uint8) * 255)) if mask is not None else None
    return {
        "unit": unit.name,
        "pair": {"natural": natural_ref.model_dump(), "manipulated": manipulated_ref.model_dump(),
                 "mask": mask_ref.model_dump() if mask_ref else None},
        "edit": {"kind": unit.template.edit_kind.value, "backend": backend.name, "model_id": backend.model_id,
                 "prompt": request.prompt, "seed": request.seed, "params": {"partial": request.partial},
                 "mask_path": mask_ref.path if mask_ref else None},
        "backends": {"segmenter": {"name": segmenter.name, "model_id": segmenter.model_id},
                     "editor": {"name": backend.name, "model_id": backend.model_id}},
    }


def edit_batch(batch: list[EditUnit], run: RunDir, models: dict, donors: list[str], seed: int,
               device: str = "cpu") -> list[dict | Exception]:
    """Edit one planned batch: one result per unit, a record or the exception that unit raised.

    The backend is called once for the whole batch (under the device's lock: one model stage per GPU);
    if that call fails, each unit is retried alone so only the unit at fault is lost."""
    segmenter, backend = models["segmenter"], models[batch[0].backend_role]
    results: list[dict | Exception] = [None] * len(batch)  # type: ignore[list-item]
    prepared: list[tuple[int, EditRequest, np.ndarray | None]] = []
    for i, unit in enumerate(batch):
        try:
            prepared.append((i, *prepare_edit(unit, run, segmenter, donors, seed)))
        except Exception as exc:
            results[i] = exc
    if not prepared:
        return results
    with device_lock(device):
        try:
            outputs: list = backend.edit([req for _, req, _ in prepared])
        except Exception:
            outputs = []
            for _, req, _ in prepared:
                try:
                    outputs.append(backend.edit([req])[0])
                except Exception as exc:
                    outputs.append(exc)
    for (i, req, mask), out in zip(prepared, outputs):
        results[i] = out if isinstance(out, Exception) else store_edit(batch[i], req, mask, out, run, segmenter, backend)
    return results
