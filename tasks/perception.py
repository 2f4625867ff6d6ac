"""The build stage of the BLINK-style flow: one item per unit (a source image × a task template), built by
the template's builder from the unit's own generator, its images stored content-addressed."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.data.schema import LETTERS, BackendRef, IngestedSource, Lineage, PerceptionItem
from perceptforge.logic.ids import unit_rng
from perceptforge.logic.marks import MarkStyle
from perceptforge.logic.perception_build import Draw, SourceView, build
from perceptforge.logic.perception_templates import PerceptionTemplate
from perceptforge.prompts.library import load_prompt
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry, resolve_inside
from perceptforge.tasks.runner import StageRunner, Unit, unit_record

BACKEND_NAMES = {
    "similarity": "clip",
    "depth": "transformers-depth",
    "generator": "sd-text2image",
    "counter": "grounder",
}  # role → the backend that decided


def backend_name(role: str, unit: PerceptionUnit) -> str:
    # the model that decided names itself (the embedder or the CLIP gate; the grounder that counted)
    model = {"similarity": unit.embedder, "counter": unit.detector}.get(role)
    return getattr(model, "name", BACKEND_NAMES[role])


@dataclass(frozen=True)
class PerceptionUnit:
    name: str  # <source id>-<template id>[-<variant>]
    template: PerceptionTemplate
    sources: tuple[tuple[SourceEntry, IngestedSource], ...]  # the first is the unit's own source
    variant: str  # visual-prompt variant name
    style: MarkStyle
    source_dir: Path  # where per-task extras (a disparity map) are read
    index: int = 0  # the unit's source's place among the sources that serve its task
    embedder: Any = None  # a perceptual embedding model (ClipScorer), when the profile names one
    depth: Any = None  # a depth model (backends/depth), when the profile names one
    generator: Any = None  # a text-to-image model (backends/text_to_image), when the profile names one
    draw: int = 0  # which of the template's items_per_source this unit is
    detector: Any = None  # an open-vocabulary detector (the profile's grounder, when it can), for Counting only


def item_id(unit: PerceptionUnit, seed: int) -> str:
    shas = ",".join(s.sha256 for _, s in unit.sources)
    key = f"{shas}:{unit.template.id}:v{unit.template.version}:{seed}:{unit.variant}"
    if unit.draw:  # the first draw keeps the id it had before items_per_source existed
        key += f":draw{unit.draw}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def view(run: RunDir, source_dir: Path, entry: SourceEntry, ingested: IngestedSource, depth: Any = None) -> SourceView:
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


def build_item(unit: PerceptionUnit, seed: int, run: RunDir) -> PerceptionItem:
    t = unit.template
    # The draw does not depend on the variant, so the variants of one unit differ only in their marks.
    draw_key = "" if unit.draw == 0 else f"#{unit.draw}"
    rng = unit_rng(seed, f"{unit.sources[0][0].source_id}-{t.id}{draw_key}:build")
    embed = unit.embedder.image_embeddings if unit.embedder is not None else None
    generate = unit.generator.generate if unit.generator is not None else None
    draw = Draw(
        rng,
        unit.index,
        seed,
        draw=unit.draw,
        embed=embed,
        embed_model=getattr(unit.embedder, "model_id", ""),
        detect=unit.detector.detect if unit.detector is not None else None,
        detector_model=getattr(unit.detector, "model_id", ""),
        generate=generate,
        generator_model=getattr(unit.generator, "model_id", ""),
    )
    depth = unit.depth if "disparity" in t.needs else None  # only Relative Depth asks the model
    built = build(t, [view(run, unit.source_dir, e, i, depth) for e, i in unit.sources], draw, unit.style)
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
            backends={role: BackendRef(name=backend_name(role, unit), model_id=m) for role, m in built.models.items()},
            seed=seed,
        ),
    )


@task(name="build", cache_policy=NO_CACHE)
def build_unit(unit: PerceptionUnit, seed: int, run_path: Path) -> PerceptionItem | Exception:
    run = RunDir(run_path)
    return unit_record(run, f"perception/{unit.name}.json", lambda: build_item(unit, seed, run), PerceptionItem)


def build_stage(
    runner: StageRunner, units: list[PerceptionUnit], seed: int, models: tuple = ()
) -> list[PerceptionItem]:
    """Every unit's item, also written as ``items/<id>.json``; ``models`` are freed after the stage when the
    profile says so."""
    done = runner.map(
        "build", build_unit, [Unit(u.name, u.sources[0][0].file_name, u) for u in units], seed=seed, models=models
    )
    items = [item for _, item in done]
    for item in items:
        runner.run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
    return items
