"""The build stage of the BLINK-style flow: one item per unit (a source image × a task template), built by
the template's builder from the unit's own generator, its images stored content-addressed.

A unit is records only; the profile's models reach the task as one named input (``profile_models``: name →
model, by the names ``logic/blink/needs`` gives them), and each unit's builder gets those its task's needs
use."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.data.schema import LETTERS, BackendRef, IngestedSource, Lineage, PerceptionItem
from perceptforge.logic.blink.build import BuildContext, SourceView, build
from perceptforge.logic.blink.needs import models_used
from perceptforge.logic.blink.templates import PerceptionTemplate
from perceptforge.logic.ids import unit_rng
from perceptforge.logic.marks import MarkStyle
from perceptforge.prompts.library import load_prompt
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry, resolve_inside
from perceptforge.tasks.engine import CPU_STAGE, MODEL_STAGE
from perceptforge.tasks.runner import StageRunner, Unit, unit_record

BACKEND_NAMES = {
    "similarity": "clip",
    "depth": "transformers-depth",
    "generator": "sd-text2image",
    "counter": "grounder",
}  # role → the backend that decided


def backend_name(role: str, models: Mapping[str, Any]) -> str:
    # the model that decided names itself (the embedder or the CLIP gate; the grounder that counted)
    model = {"similarity": models.get("embedder"), "counter": models.get("detector")}.get(role)
    return getattr(model, "name", BACKEND_NAMES[role])


@dataclass(frozen=True)
class PerceptionUnit:
    name: str  # <source id>-<template id>[-<variant>]
    template: PerceptionTemplate
    sources: tuple[tuple[SourceEntry, IngestedSource], ...]  # the first is the unit's own source
    variant: str  # visual-prompt variant name
    style: MarkStyle
    source_dir: Path  # where per-task extras (a disparity map) are read
    draw: int = 0  # which of the template's items_per_source this unit is


def uses_sources(template: PerceptionTemplate) -> bool:
    """Whether the task's items come from its sources' pictures (the IQ Test's puzzles need none)."""
    return bool(template.needs)


def item_id(unit: PerceptionUnit, seed: int) -> str:
    """A hash of what the item is made of: its sources (ids and bytes: copies of one photo under two ids make two
    items, never one file written twice), the template, the seed and the variant."""
    shas = ",".join(f"{s.id}={s.sha256}" for _, s in unit.sources)
    key = f"{shas}:{unit.template.id}:v{unit.template.version}:{seed}:{unit.variant}"
    if unit.draw:  # the first draw keeps the id it had before items_per_source existed
        key += f":draw{unit.draw}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def source_view(
    run: RunDir, source_dir: Path, entry: SourceEntry, ingested: IngestedSource, depth: Any = None
) -> SourceView:
    """What a builder sees: the stored image, the labelled boxes (``isthing: 0`` marks stuff such as hair or a
    backdrop: COCO panoptic's convention), and the disparity map when the source names one."""
    boxes = []
    for region in entry.regions:
        if "bbox" in region and region.get("label"):
            x, y, w, h = (float(v) for v in region["bbox"])
            boxes.append((str(region["label"]), (x, y, x + w, y + h), region.get("isthing", 1) != 0))
    disparity = None
    if "disparity" in entry.extras:
        # KITTI's convention: 16-bit PNG of disparity × 256, 0 where unknown
        raw = np.asarray(Image.open(resolve_inside(source_dir, entry.extras["disparity"])), np.float64)
        if raw.shape != (ingested.height, ingested.width):
            size = f"{raw.shape[1]}x{raw.shape[0]}"
            raise ValueError(f"{entry.extras['disparity']}: {size}, the image is {ingested.width}x{ingested.height}")
        disparity = raw / 256.0
    yaw = entry.pose["yaw"] if entry.pose else None
    image = load_rgb(run.sub(ingested.stored))
    nearness = depth.nearness(image) if depth is not None and disparity is None else None
    model = getattr(depth, "model_id", "") if nearness is not None else ""
    return SourceView(
        entry.source_id,
        image,
        tuple(boxes),
        disparity=disparity,
        yaw=yaw,
        caption=entry.caption,
        nearness=nearness,
        depth_model=model,
        style=entry.style,
        count_labels=tuple(entry.count_labels),
        complete_labels=tuple(entry.complete_labels),
        keypoints=tuple(
            (str(r.get("label")), {n: (float(p[0]), float(p[1])) for n, p in sorted(r["keypoints"].items())})
            for r in entry.regions
            if r.get("keypoints")
        ),
        functional=tuple(
            (str(r.get("label")), action, {n: (float(p[0]), float(p[1])) for n, p in sorted(parts.items())})
            for r in entry.regions
            for action, parts in sorted((r.get("functional_keypoints") or {}).items())
        ),
        reflectance=tuple((j["a"], j["b"], j["darker"]) for j in entry.reflectance),
    )


def build_item(unit: PerceptionUnit, seed: int, run: RunDir, models: Mapping[str, Any] | None = None) -> PerceptionItem:
    """The unit's item; ``models`` (name → model) are the profile's, of which the builder gets those its task's
    needs use (a perceptual embedding, a depth model, a text-to-image generator, an open-vocabulary detector)."""
    t = unit.template
    used = models_used(t.needs)
    given = {name: m for name, m in (models or {}).items() if name in used}
    embedder, generator, detector = given.get("embedder"), given.get("generator"), given.get("detector")
    # The draw does not depend on the variant, so the variants of one unit differ only in their marks.
    draw_key = "" if unit.draw == 0 else f"#{unit.draw}"
    # a task that uses nothing of its source's picture (the IQ Test) draws from the source's bytes, as its id is
    # made: photos of another folder give other puzzles, the same photo under another id the same item
    owner = unit.sources[0][0].source_id if uses_sources(t) else unit.sources[0][1].sha256
    rng = unit_rng(seed, f"{owner}-{t.id}{draw_key}:build")
    ctx = BuildContext(
        rng,
        index=unit.draw,
        embed=embedder.image_embeddings if embedder is not None else None,
        embed_model=getattr(embedder, "model_id", ""),
        detect=detector.detect if detector is not None else None,
        detector_model=getattr(detector, "model_id", ""),
        generate=generator.generate if generator is not None else None,
        generator_model=getattr(generator, "model_id", ""),
    )
    depth = given.get("depth")
    built = build(t, [source_view(run, unit.source_dir, e, i, depth) for e, i in unit.sources], ctx, unit.style)
    prompt = load_prompt(t.prompt)
    own_entry, own = unit.sources[0]
    return PerceptionItem(
        id=item_id(unit, seed),
        task=t.task,
        question=prompt.render(**built.values),
        choices=built.choices,
        answer=LETTERS[built.answer],
        images=[run.store_image(im) for im in built.images],
        marks=built.marks,
        random_choice=t.random_choice,
        variant=unit.variant,
        sources=built.sources,
        lineage=Lineage(
            source_id=own_entry.source_id,
            source_sha256=own.sha256,
            template_id=t.id,
            template_version=t.version,
            prompts=[prompt.ref()],
            backends={role: BackendRef(name=backend_name(role, given), model_id=m) for role, m in built.models.items()},
            seed=seed,
        ),
    )


@task(name="build", cache_policy=NO_CACHE)
def build_unit(
    unit: PerceptionUnit, seed: int, run_path: Path, profile_models: Mapping[str, ModelSpec] | None = None
) -> PerceptionItem | Exception:
    """One unit's item; of ``profile_models`` (name → spec) only those the unit's task uses are loaded, once per
    process."""
    run = RunDir(run_path)
    used = models_used(unit.template.needs)

    def compute() -> PerceptionItem:
        models = {name: obtain(spec) for name, spec in (profile_models or {}).items() if name in used}
        return build_item(unit, seed, run, models)

    return unit_record(run, f"perception/{unit.name}.json", compute, PerceptionItem)


def build_stage(
    runner: StageRunner, units: list[PerceptionUnit], seed: int, models: Mapping[str, ModelSpec] | None = None
) -> list[PerceptionItem]:
    """Every unit's item, also written as ``items/<id>.json``; ``models`` (name → the spec of the profile's model)
    reach the task by name, load on the worker that first needs them and are freed after the stage when the
    profile says so."""
    models = dict(models or {})
    asked = {name for u in units for name in models_used(u.template.needs)} & set(models)
    done = runner.map(
        "build",
        build_unit,
        [Unit(u.name, u.sources[0][0].file_name, u) for u in units],
        models=tuple(models.values()),
        resources=MODEL_STAGE if asked else CPU_STAGE,
        seed=seed,
        profile_models={name: models[name] for name in sorted(asked)},
    )
    items = [item for _, item in done]
    for item in items:
        runner.run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
    return items
