"""The MVP-Bench construction flow (MVP-Bench §4.1): a declarative list of stages over one run directory.

ingest → ground → idea → questions → mask → edit → gates → items, each a Prefect task per unit (or per
batch) run by the shared stage runner (``tasks/runner.py``): resume by files, quarantine with reasons,
progress, model release, artifacts. Categories the profile cannot render are skipped with the reason.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from perceptforge.configs.profile import load_profile
from perceptforge.flows.common import (
    record_run_settings,
    renderable_values,
    select_entries,
    select_templates,
    summarise,
)
from perceptforge.outputs.report import write_report
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import read_source_dir
from perceptforge.tasks import edit, gates, ground, idea, ingest, items, mask, questions
from perceptforge.tasks.runner import StageRunner


@flow(name="mvp", task_runner=ThreadPoolTaskRunner(max_workers=2))  # type: ignore[arg-type]
def mvp_flow(
    source: str,
    profile: str = "local",
    out: str = "runs/mvp",
    seed: int | None = None,
    limit: int | None = None,
    categories: list[str] | None = None,
) -> dict:
    """Build MVP-Bench-style items from a source directory into the run directory ``out``."""
    prof = load_profile(profile)
    seed = prof.seed if seed is None else seed
    all_templates, used = select_templates(categories)
    runtime = prof.runtime()
    mask_editors, editor = prof.build("inpainter", runtime), prof.build("editor", runtime)
    offers, skipped = renderable_values(used, prof, mask_editors, editor)
    run = RunDir(Path(out).resolve())
    record_run_settings(run, prof, used)
    source_dir = Path(source).resolve()
    entries = select_entries(read_source_dir(source_dir, getattr(prof.grounder, "file", "annotations.json")), limit)
    runner = StageRunner(run, release_models=prof.release_models_between_stages)

    sources = ingest.ingest_stage(runner, entries, source_dir)
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
    )
    summary["report"] = write_report(run)
    return summary
