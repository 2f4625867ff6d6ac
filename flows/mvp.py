"""The MVP-Bench construction flow (MVP-Bench §4.1): a declarative list of stages over one run directory.

ingest → ground → idea → questions → mask → edit → gates → items, each a Prefect task per unit (or per
batch) run by the shared stage runner (``tasks/runner.py``): resume by files, quarantine with reasons,
progress, model release, artifacts. Categories the profile cannot render are skipped with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from perceptforge.configs.profile import Profile
from perceptforge.errors import InputError
from perceptforge.flows.common import (
    prepare_run,
    profile_and_seed,
    record_run_settings,
    renderable_values,
    run_identity,
    select_entries,
    select_templates,
    sources_digest,
    summarise,
)
from perceptforge.logic.templates import Template
from perceptforge.outputs.report import write_report
from perceptforge.store.sources import SourceEntry, read_source_dir
from perceptforge.tasks import edit, gates, ground, idea, ingest, items, mask, questions
from perceptforge.tasks.runner import StageRunner


@dataclass(frozen=True)
class MvpPlan:
    profile: Profile
    seed: int
    all_templates: dict[str, Template]
    used: dict[str, Template]
    source_dir: Path
    entries: list[SourceEntry]
    out: Path
    identity: dict[str, Any]


def plan_mvp(
    source: str | Path,
    profile: str,
    out: str | Path,
    seed: int | None = None,
    limit: int | None = None,
    categories: list[str] | None = None,
    fresh: bool = False,
) -> MvpPlan:
    """Everything a run is decided by, read and checked before any stage: the profile, the templates, the
    source directory and its annotation file, and the run directory's identity. Each problem is one
    line (an InputError naming the file or option); nothing is written."""
    prof, seed = profile_and_seed(profile, seed)
    all_templates, used = select_templates(categories)
    source_dir = Path(source).resolve()
    annotation_file = getattr(prof.grounder, "file", "annotations.json")
    entries = read_source_dir(source_dir, annotation_file)
    if not entries:
        raise InputError(str(source_dir / annotation_file), "lists no images")
    digest = sources_digest(source_dir, annotation_file, entries)
    identity = run_identity("mvp", prof, seed, used, digest, limit)
    prepare_run(Path(out), identity, fresh, check_only=True)
    return MvpPlan(prof, seed, all_templates, used, source_dir, select_entries(entries, limit), Path(out), identity)


@flow(name="mvp", task_runner=ThreadPoolTaskRunner(max_workers=2))  # type: ignore[arg-type]
def mvp_flow(
    source: str,
    profile: str = "local",
    out: str = "runs/mvp",
    seed: int | None = None,
    limit: int | None = None,
    categories: list[str] | None = None,
    fresh: bool = False,
) -> dict:
    """Build MVP-Bench-style items from a source directory into the run directory ``out``."""
    plan = plan_mvp(source, profile, out, seed, limit, categories, fresh)
    prof, seed, all_templates, used, source_dir, entries = (
        plan.profile,
        plan.seed,
        plan.all_templates,
        plan.used,
        plan.source_dir,
        plan.entries,
    )
    run = prepare_run(plan.out, plan.identity, fresh)
    record_run_settings(run, prof, used)
    runtime = prof.runtime(cache_dir=run.path / "cache")
    mask_editors, editor = prof.build("inpainter", runtime), prof.build("editor", runtime)
    offers, skipped = renderable_values(used, prof, mask_editors, editor)
    runner = StageRunner(run, release_models=prof.release_models_between_stages)

    sources = ingest.ingest_stage(runner, entries, source_dir, max_pixels=prof.ingest.max_pixels)
    ingested = {sid: record for sid, (_, record) in sources.items()}
    grounder = prof.build("grounder", runtime).load()
    groundings = ground.ground_stage(runner, sources, grounder, list(used.values()))
    writer = prof.build("llm", runtime).load()
    renderable = [t for t in used.values() if t.id in offers]
    entries_by_id = {sid: e for sid, (e, _) in sources.items()}
    ideas = idea.idea_stage(runner, entries_by_id, groundings, renderable, offers, writer, seed)
    candidates = questions.questions_stage(runner, ideas, ingested, writer, all_templates, seed)
    by_unit = {u.name: c for u, c in candidates}
    segmenter = prof.build("segmenter", runtime).load()
    masks = mask.mask_stage(
        runner, candidates, all_templates, ingested, groundings, segmenter, prof.gates, seed, runtime.device
    )
    backends = {b.name: b.load() for b in mask_editors} | ({editor.name: editor} if editor else {})
    edits = edit.edit_stage(runner, masks, by_unit, all_templates, ingested, backends, seed, runtime.device)
    passed = gates.gates_stage(runner, edits, by_unit, prof.gates, prof.build_clip_gate(runtime))
    made = items.items_stage(runner, passed, by_unit)

    summary = summarise(
        "mvp",
        prof,
        seed,
        runner,
        skipped,
        {
            "sources": len(entries),
            "ingested": len(sources),
            "grounded": len(groundings),
            "ideas": len(ideas),
            "candidates": len(candidates),
            "masked": len(masks),
            "edited": len(edits),
            "pairs": len(passed),
            "items": len(made),
        },
        made,
        candidates,
        {"grounder": grounder, "llm": writer},
        {"segmenter": segmenter} | backends,
    )
    summary["report"] = write_report(run)
    return summary
