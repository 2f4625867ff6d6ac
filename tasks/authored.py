"""The human-authored flows' stages before Label Studio: ingest at full resolution (original bytes), and the
model's draft (version 0 of each item) with its automatic checks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.backends.protocols import QuestionWriter
from perceptforge.configs.profile import Authoring
from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.data.schema import (
    AuthoredItem,
    AuthoredLineage,
    BackendRef,
    CheckResult,
    CodisContent,
    MMERealWorldContent,
    OriginalImage,
)
from perceptforge.errors import PerceptforgeError
from perceptforge.logic import authored
from perceptforge.logic.ids import unit_rng
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.store.sources import SourceEntry, resolve_inside
from perceptforge.tasks.ingest import check_size
from perceptforge.tasks.runner import StageRunner, Unit, transient, unit_record


def ingest_original(
    source_dir: Path, entry: SourceEntry, run: RunDir, min_short_side: int | None, max_pixels: int | None = None
) -> OriginalImage:
    """Keep the source file's bytes; refuse an image whose shorter side is below ``min_short_side``, or that is
    above ``max_pixels``."""
    path = resolve_inside(source_dir, entry.file_name)
    rel, digest, width, height = run.store_original(path, max_pixels)
    check_size(entry, width, height)
    if min_short_side and min(width, height) < min_short_side:
        raise ValueError(
            f"{entry.file_name}: {width}x{height} is below the profile's full-resolution threshold "
            f"(shorter side at least {min_short_side} px, authoring.min_short_side)"
        )
    return OriginalImage(
        path=rel,
        sha256=digest,
        width=width,
        height=height,
        source_id=entry.source_id,
        file_name=entry.file_name,
        licence=entry.licence,
        attribution=entry.attribution,
    )


@task(name="ingest-original", cache_policy=NO_CACHE)
def ingest(
    entry: SourceEntry, source_dir: Path, min_short_side: int | None, run_path: Path, max_pixels: int | None = None
) -> OriginalImage | Exception:
    rel = f"sources/{safe_name(entry.source_id)}.json"
    try:
        return unit_record(
            RunDir(run_path),
            rel,
            lambda: ingest_original(source_dir, entry, RunDir(run_path), min_short_side, max_pixels),
            OriginalImage,
        )
    except PerceptforgeError as exc:  # a bad source file (wrong size, a format not kept): quarantined in one line
        return exc


@dataclass(frozen=True)
class DraftUnit:
    benchmark: AuthoredBenchmark
    entry: SourceEntry
    image: OriginalImage
    index: int  # the source's place in id order (CODIS categories go round in turn)


def facts_of(entry: SourceEntry, authoring: Authoring) -> dict:
    """What a drafter knows of a source: caption, labelled things, the object to ask about (the largest thing that
    is neither the main subject nor a face, else the subject) and its side, a small target."""
    things = authored.labelled_things(entry.regions)
    targets = authored.small_targets(entry.regions, entry.width, entry.height, authoring.max_target_fraction)
    objects = [r for r in things if r.get("role") != "subject"]
    main = max(objects or things, key=lambda r: (r["bbox"][2] * r["bbox"][3], str(r.get("id"))), default=None)
    facts: dict = {
        "caption": entry.caption or "(no caption)",
        "objects": ", ".join(sorted({str(r["label"]) for r in things})) or "(none annotated)",
        "width": entry.width,
        "height": entry.height,
        "domain": entry.benchmark_labels.get("domain"),
        "targets": targets,
        "region": next(iter(targets), None),  # the smallest
    }
    if main is not None:
        x, _, w, _ = main["bbox"]
        facts |= {"object": str(main["label"]), "side": authored.side(x + w / 2, entry.width)}
    return facts


def make_draft(unit: DraftUnit, writer: QuestionWriter, seed: int, authoring: Authoring) -> AuthoredItem:
    """Version 0 of the source's item: the writer's draft and its automatic checks. Raises ValueError when the
    source has nothing the drafter can ask about (the unit is quarantined with that reason)."""
    entry, image = unit.entry, unit.image
    facts = facts_of(entry, authoring)
    iid = authored.item_id(entry.source_id, image.sha256, unit.benchmark.name, seed)
    rng = unit_rng(seed, f"{iid}:draft")
    content: CodisContent | MMERealWorldContent
    scaffold = False
    if unit.benchmark.content is CodisContent:
        if entry.synthetic:  # CODIS asks about real scenes: a render has no time of day, owner or custom
            raise ValueError(f"{entry.file_name}: a rendered image, not a photograph")
        if "object" not in facts:
            raise ValueError(f"{entry.file_name}: no labelled object to draft a CODIS question about")
        category = authored.codis_category(
            unit.index, entry.benchmark_labels.get("codis_category"), left_or_right=facts["side"] is not None
        )
        content, prompt = writer.draft_codis(category, facts, rng)
        scaffold = authored.context_decides(prompt)
    else:
        if facts["region"] is None:
            raise ValueError(
                f"{entry.file_name}: no labelled object within {authoring.max_target_fraction:.0%} of the image "
                "to draft an MME-RealWorld question about"
            )
        content, prompt = writer.draft_mme_realworld(facts, rng)
        if entry.benchmark_labels.get("subtask"):
            content = content.model_copy(update={"subtask": entry.benchmark_labels["subtask"]})
    checks = authored.checks_for(content, image.width, image.height, authoring.max_target_fraction)
    if scaffold:
        checks.append(
            CheckResult(
                name="context_decides",
                flagged=True,
                detail="the draft's answers follow from its contexts alone (CODIS needs image and context): "
                "ask about something the picture leaves open",
            )
        )
    return AuthoredItem(
        id=iid,
        version=0,
        status="draft",
        image=image,
        content=content,
        checks=checks,
        lineage=AuthoredLineage(
            source_id=entry.source_id,
            source_sha256=image.sha256,
            benchmark=unit.benchmark.name,
            seed=seed,
            draft_backend=BackendRef(name=writer.name, model_id=getattr(writer, "model_id", "")),
            draft_prompts=[prompt.ref()],
        ),
    )


@task(name="draft", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10, retry_condition_fn=transient)
def draft(
    unit: DraftUnit, writer: ModelSpec, seed: int, authoring: Authoring, run_path: Path
) -> AuthoredItem | Exception:
    rel = f"drafts/{safe_name(unit.entry.source_id)}.json"
    return unit_record(RunDir(run_path), rel, lambda: make_draft(unit, obtain(writer), seed, authoring), AuthoredItem)


def draft_stage(
    runner: StageRunner,
    benchmark: AuthoredBenchmark,
    sources: dict[str, tuple[SourceEntry, OriginalImage]],
    writer: ModelSpec,
    seed: int,
    authoring: Authoring,
) -> list[AuthoredItem]:
    units = [
        Unit(f"{sid}-{benchmark.name}", entry.file_name, DraftUnit(benchmark, entry, image, k))
        for k, (sid, (entry, image)) in enumerate(sorted(sources.items()))
    ]
    return [
        item
        for _, item in runner.map(
            "draft", draft, units, writer=writer, seed=seed, authoring=authoring, models=(writer,)
        )
    ]
