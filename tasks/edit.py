"""Edit: the manipulated image of each unit, one batched backend call per planned batch of units.

Batches are planned from the whole list of units (by backend, then image size, then unit id), never from
what is left to do, so a resumed run feeds the model exactly the batches an uninterrupted run did and
writes the same bytes. One seeded generator per unit keeps an item's pixels independent of its batch mates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.devices import call_lock
from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.backends.protocols import EditRequest, ImageEditor
from perceptforge.data.schema import BackendRef, Candidate, EditRecord, IngestedSource, MaskRecord
from perceptforge.logic.edit_region import pastes_into_box
from perceptforge.logic.ids import edit_seed
from perceptforge.logic.templates import Template
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.tasks.engine import MODEL_STAGE
from perceptforge.tasks.mask import DRAWN
from perceptforge.tasks.runner import StageRunner, Unit


@dataclass(frozen=True)
class EditUnit:
    """What one unit's edit needs, all of it serialisable (it crosses process boundaries under Dask)."""

    template: Template
    candidate: Candidate
    source: IngestedSource
    mask: MaskRecord

    @property
    def name(self) -> str:
        return self.candidate.unit

    @property
    def backend(self) -> str:
        """The name of the backend that declared the unit's value (its idea's rendering)."""
        rendering = self.candidate.idea.rendering
        if rendering is None:
            raise ValueError(f"{self.name}: the idea names no rendering (a run made before renderings existed?)")
        return rendering.backend


def plan_batches(units: list[EditUnit], batch_size: Callable[[EditUnit], int]) -> list[list[EditUnit]]:
    """Chunks of at most ``batch_size(unit)`` units (asked once per backend and image size) that share a
    backend and an image size (one pipeline call takes one size), in a fixed order that depends only on
    the units and those sizes."""

    def key(u: EditUnit) -> tuple[str, int, int, str]:
        return (u.backend, u.source.width, u.source.height, u.name)

    batches: list[list[EditUnit]] = []
    for u in sorted(units, key=key):
        last = batches[-1] if batches else None
        if last and key(last[0])[:3] == key(u)[:3] and len(last) < batch_size(last[0]):
            last.append(u)
        else:
            batches.append([u])
    return batches


def edit_request(unit: EditUnit, run: RunDir, seed: int) -> EditRequest:
    image = load_rgb(run.sub(unit.source.stored))
    mask = run.load_mask(unit.mask.mask.path) if unit.mask.mask else None
    rendering = unit.candidate.idea.rendering
    if mask is None:
        return EditRequest(
            image=image,
            mask=None,
            prompt=unit.candidate.instruction or "",
            seed=edit_seed(seed, unit.name),
            rendering=rendering,
        )
    return EditRequest(
        image=image,
        mask=mask,
        prompt=unit.candidate.idea.new_caption,
        seed=edit_seed(seed, unit.name),
        partial=pastes_into_box(unit.template),
        rendering=rendering,
        drawn=unit.mask.segmenter == DRAWN,
        hair=run.load_mask(unit.mask.hair.path) if unit.mask.hair else None,
    )


def store_edit(
    unit: EditUnit, request: EditRequest, manipulated: Image.Image, run: RunDir, backend: ImageEditor
) -> EditRecord:
    """Store the pair content-addressed; the unit's edit record."""
    editor = BackendRef(name=backend.name, model_id=backend.model_id)
    return EditRecord.model_validate(
        {
            "unit": unit.name,
            "pair": {
                "natural": run.store_image(request.image),
                "manipulated": run.store_image(manipulated),
                "mask": unit.mask.mask,
            },
            "edit": {
                "kind": unit.template.edit_kind,
                "backend": backend.name,
                "model_id": backend.model_id,
                "prompt": request.prompt,
                "seed": request.seed,
                "params": {"partial": request.partial},
                "mask_path": unit.mask.mask.path if unit.mask.mask else None,
                "rendered": unit.candidate.idea.rendering,
            },
            "backends": {"segmenter": unit.mask.segmenter, "editor": editor},
        }
    )


def edit_batch(
    batch: list[EditUnit], run: RunDir, backends: dict[str, Any], seed: int, device: str = "cpu"
) -> list[EditRecord | Exception]:
    """Edit one planned batch: one result per unit, a record or the exception that unit raised.

    The backend is called once for the whole batch (under its call lock: one model stage per GPU, one call at a
    time per model on the CPU); if that call fails, each unit is retried alone so only the unit at fault is lost."""
    backend = backends[batch[0].backend]
    results: list[EditRecord | Exception] = [RuntimeError("not edited")] * len(batch)
    prepared: list[tuple[int, EditRequest]] = []
    for i, unit in enumerate(batch):
        try:
            prepared.append((i, edit_request(unit, run, seed)))
        except Exception as exc:
            results[i] = exc
    if prepared:
        with call_lock(device, backend):
            try:
                outputs: list[Image.Image | Exception] = list(backend.edit([req for _, req in prepared]))
            except Exception:
                outputs = []
                for _, req in prepared:
                    try:
                        outputs.append(backend.edit([req])[0])
                    except Exception as exc:
                        outputs.append(exc)
        for (i, req), out in zip(prepared, outputs):
            results[i] = out if isinstance(out, Exception) else store_edit(batch[i], req, out, run, backend)
    return results


@task(name="edit", cache_policy=NO_CACHE)
def edit(
    batch: list[EditUnit], backends: dict[str, ModelSpec], seed: int, run_path: Path
) -> list[EditRecord | Exception]:
    """One planned batch; finished units are read back, and a partly written batch is redone whole (same
    batch, same bytes) with only its missing files written. ``backends``: name → the spec of each edit backend,
    loaded once per process on first use."""
    run = RunDir(run_path)
    rels = [f"edits/{safe_name(u.name)}.json" for u in batch]
    done = [run.read_record(rel) for rel in rels]
    if all(r is not None for r in done):
        return [EditRecord.model_validate(r) for r in done]
    spec = backends[batch[0].backend]
    fresh = edit_batch(batch, run, {batch[0].backend: obtain(spec)}, seed, spec.runtime.device)
    out: list[EditRecord | Exception] = []
    for rel, old, new in zip(rels, done, fresh):
        if old is None and isinstance(new, EditRecord):
            try:
                run.write_record(rel, new.model_dump(mode="json"))
            except OSError as exc:  # a full disk: the runner stops the run with one line
                new = exc
        out.append(EditRecord.model_validate(old) if old is not None else new)
    return out


def batch_sizes(backends: dict[str, ModelSpec], run: RunDir, seed: int) -> Callable[[EditUnit], int]:
    """Units per batch for a unit's backend and image size: the backend's setting, or what it chooses for
    that size (``batch_size: auto`` measures once, on the first such unit's real request, with the model loaded
    in the flow's process: the batch plan must be known before any batch is submitted)."""
    chosen: dict[tuple[str, int, int], int] = {}

    def size(u: EditUnit) -> int:
        key = (u.backend, u.source.width, u.source.height)
        if key not in chosen:
            spec = backends[u.backend]
            setting = getattr(spec.settings, "batch_size", 1)
            if setting == "auto":
                chosen[key] = obtain(spec).choose_batch_size(edit_request(u, run, seed))
            else:
                chosen[key] = int(setting)
        return chosen[key]

    return size


def edit_stage(
    runner: StageRunner,
    masks: list[tuple[Unit, MaskRecord]],
    candidates: dict[str, Candidate],
    templates: dict[str, Template],
    sources: dict[str, IngestedSource],
    backends: dict[str, ModelSpec],
    seed: int,
) -> list[tuple[Unit, EditRecord]]:
    units = {}
    for u, m in masks:
        c = candidates[u.name]
        units[u.name] = (u, EditUnit(templates[c.lineage.template_id], c, sources[c.lineage.source_id], m))
    batches = plan_batches([eu for _, eu in units.values()], batch_sizes(backends, runner.run, seed))
    planned = [[Unit(eu.name, units[eu.name][0].file, eu) for eu in batch] for batch in batches]
    return runner.map_batches(
        "edit", edit, planned, backends=backends, seed=seed, models=backends.values(), resources=MODEL_STAGE
    )
