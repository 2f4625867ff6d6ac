"""The MVP-Bench family (MVP-Bench §4.1): a declarative list of stages over one run directory.

ingest → ground → idea → questions → mask → edit → gates → items, each a Prefect task per unit (or per
batch) run by the shared stage runner (``tasks/runner.py``): resume by files, quarantine with reasons,
progress, model release, artifacts. Categories the profile cannot render are skipped with the reason.
Verified in Label Studio by two annotators per item (``annotation/sync``); exported as JSONL, Parquet,
VLMEvalKit TSVs and an lmms-eval task (``outputs/export``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perceptforge.backends.registry import Runtime
from perceptforge.data.schema import Grounding, Rendering
from perceptforge.flows.common import record_run_settings, renderable_values, select_templates
from perceptforge.flows.family import (
    Exported,
    ExportOptions,
    Family,
    RunPlan,
    RunRequest,
    SourceCheck,
    StagesResult,
    plan_inputs,
)
from perceptforge.logic import category_needs
from perceptforge.logic.edit_region import kept_objects, worn_objects
from perceptforge.logic.ids import unit_id
from perceptforge.logic.templates import Template
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry

if TYPE_CHECKING:
    from perceptforge.configs.profile import Gates
    from perceptforge.store.sources import SourceEntry
    from perceptforge.tasks.runner import StageRunner


def skipped_units(
    groundings: dict[str, Grounding], templates: list[Template], offers: dict[str, list[Rendering]]
) -> dict[str, str]:
    """unit → why its source cannot serve its category (``logic/category_needs``): skipped before any stage."""
    out = {}
    for sid, grounding in groundings.items():
        for t in templates:
            why = category_needs.unmet(t, grounding, offers[t.id])
            if why:
                out[unit_id(sid, t)] = why
    return out


def read_photo(source_dir: Path, entry: SourceEntry, max_pixels: int | None) -> np.ndarray | str:
    """The photo as ingest stores it, or why ingest would quarantine it (the reason for any value that reads it)."""
    from perceptforge.errors import PerceptforgeError
    from perceptforge.store.images import load_rgb
    from perceptforge.store.sources import resolve_inside
    from perceptforge.tasks.ingest import check_size

    try:
        image = load_rgb(resolve_inside(source_dir, entry.file_name), max_pixels)
        check_size(entry, image.width, image.height)
    except (PerceptforgeError, OSError, ValueError) as exc:
        return str(exc)
    return np.asarray(image)


def photo_refusal(
    read: Callable[[], np.ndarray | str], template: Template, grounding: Grounding, gates: Gates, old: str, region: str
) -> str | None:
    """The mask stage's refusal of ``region`` on the photo ``read`` gives (``tasks/mask.region_refusal``)."""
    from perceptforge.tasks.mask import region_refusal

    image = read()
    return image if isinstance(image, str) else region_refusal(template, grounding, image, old, region, gates)


def short_box(read: Callable[[], np.ndarray | str], grounding: Grounding) -> str | None:
    """The mask stage's refusal of a boxes-only background edit whose subject box stops short of the frame
    (``tasks/mask.short_box_refusal``), on the photo ``read`` gives."""
    from perceptforge.backends.referees import person_probability
    from perceptforge.tasks.mask import short_box_refusal

    image = read()
    if isinstance(image, str):
        return image
    found = short_box_refusal(person_probability(image), grounding)
    return None if found is None else found[0]


def group_by_reason(reasons: dict[str, str]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for key, why in sorted(reasons.items()):
        grouped.setdefault(why, []).append(key)
    return grouped


@dataclass(frozen=True)
class MvpDetails:
    all_templates: dict[str, Template]
    used: dict[str, Template]


class MvpFamily(Family[MvpDetails]):
    name = "mvp"
    title = "MVP-Bench"
    summary = "Build MVP-Bench-style items (MVP-Bench §4.1) from SOURCE into the run directory OUT."
    select_option = "--categories"
    audit_benchmark = "perceptforge"
    scorer_benchmark = "perceptforge"
    next_step = "`perceptforge annotate push {out}`: two annotators verify every item"
    export_options = frozenset({"formats", "only_verified", "seed", "val_fraction", "license"})

    def plan(self, request: RunRequest) -> RunPlan[MvpDetails]:
        """Everything a run is decided by, read and checked before any stage: the profile, the templates, the
        source directory and its annotation file, and the run directory's identity. Each problem is one line
        (an InputError naming the file or option); nothing is written."""
        all_templates, used = select_templates(request.select)
        inputs = plan_inputs(request, self)
        identity = inputs.identity(self.name, sorted(used))
        return RunPlan(self.name, inputs, identity, request.fresh, MvpDetails(all_templates, used))

    def counts_toward_limit(self, entry: SourceEntry) -> bool:
        """Images with a main subject: a donor scene makes no unit, it serves the background edits of any other
        (so every donor comes along: ``Family.comes_along``'s default)."""
        return bool(entry.subject)

    def stages(self, plan: RunPlan[MvpDetails], run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        # the stages (Prefect tasks) load with the run, not with the CLI: `perceptforge --help` stays quick
        from perceptforge.tasks import edit, gates, ground, idea, ingest, items, mask, questions

        prof, seed, entries = plan.inputs.profile, plan.inputs.seed, plan.inputs.entries
        all_templates, used = plan.details.all_templates, plan.details.used
        record_run_settings(run, prof, used)
        # Built, not loaded: the flow asks them what they can render; the tasks get the models by their settings
        # and each worker process loads them once (backends/loaded).
        mask_editors, editor = prof.build("inpainter", runtime), prof.build("editor", runtime)
        offers, skipped = renderable_values(used, prof, mask_editors, editor)
        editor_specs = prof.spec("inpainter", runtime) + ([prof.spec("editor", runtime)] if editor else [])
        backends = {b.name: s for b, s in zip([*mask_editors, *([editor] if editor else [])], editor_specs)}

        sources = ingest.ingest_stage(runner, entries, plan.inputs.source_dir, max_pixels=prof.ingest.max_pixels)
        ingested = {sid: record for sid, (_, record) in sources.items()}
        grounder, writer = prof.spec("grounder", runtime), prof.spec("llm", runtime)
        groundings = ground.ground_stage(runner, sources, grounder, list(used.values()))
        renderable = [t for t in used.values() if t.id in offers]
        entries_by_id = {sid: e for sid, (e, _) in sources.items()}
        unserved = skipped_units(groundings, renderable, offers)
        for reason, units in group_by_reason(unserved).items():
            runner.console.print(f"[dim]skipping {len(units)} unit(s) up front ({reason}): {', '.join(units)}[/]")
        ideas = idea.idea_stage(runner, entries_by_id, groundings, renderable, offers, writer, seed, skip=unserved)
        candidates = questions.questions_stage(runner, ideas, ingested, writer, all_templates, seed)
        by_unit = {u.name: c for u, c in candidates}
        segmenter = prof.spec("segmenter", runtime)
        masks = mask.mask_stage(runner, candidates, all_templates, ingested, groundings, segmenter, prof.gates, seed)
        edits = edit.edit_stage(runner, masks, by_unit, all_templates, ingested, backends, seed)
        boxes = {sid: g.subject.box.xyxy for sid, g in groundings.items()}
        kept = {sid: {r.label: r.box.xyxy for r in kept_objects(g)} for sid, g in groundings.items()}
        worn = {sid: {r.label: r.box.xyxy for r in worn_objects(g)} for sid, g in groundings.items()}
        hair = {sid: mask.hair_box(g) for sid, g in groundings.items()}
        clip = prof.clip_gate_spec(runtime)
        passed = gates.gates_stage(runner, edits, by_unit, prof.gates, clip, boxes, kept, worn, hair)
        made = items.items_stage(runner, passed, by_unit)

        per_level = dict(sorted(Counter(f"{i.category.low}/{getattr(i.question, 'level', '')}" for i in made).items()))
        reports = runner.model_reports()
        usage = {
            role: reports.get(spec.label, {}).get("usage") for role, spec in (("grounder", grounder), ("llm", writer))
        }
        models: dict[str, Any] = {"segmenter": segmenter} | backends
        figures = {
            "backends": prof.backend_names(),
            "items_per_category_level": per_level,
            "candidates_per_category": dict(sorted(Counter(c.category.low for _, c in candidates).items())),
            "skipped_categories": skipped,
            "skipped_units": dict(sorted(unserved.items())),  # a source without what its category needs
            "token_use": {n: u for n, u in usage.items() if u is not None},
            # what the model backends report of their work (every worker's, merged): encoder runs spared, batch
            # sizes chosen, precision
            "backend_stats": {
                n: reports[s.label]["stats"] for n, s in models.items() if "stats" in reports.get(s.label, {})
            },
        }
        counts = {
            "sources": len(entries),
            "ingested": len(sources),
            "grounded": len(groundings),
            "ideas": len(ideas),
            "candidates": len(candidates),
            "masked": len(masks),
            "edited": len(edits),
            "pairs": len(passed),
            "items": len(made),
        }
        return StagesResult(counts, per_level, figures)

    def write_report(self, run: RunDir) -> Path:
        from perceptforge.outputs.report import write_report

        return Path(write_report(run))

    def notes(self, summary: dict) -> list[str]:
        units = group_by_reason(summary.get("skipped_units", {}))
        return [f"[dim]skipped {c}: {why}[/]" for c, why in summary.get("skipped_categories", {}).items()] + [
            f"[dim]skipped {len(us)} unit(s), {why}: {', '.join(us)}[/]" for why, us in units.items()
        ]

    def source_check(self, plan: RunPlan[MvpDetails]) -> SourceCheck:
        """Per category, why each source cannot serve it on this profile, from the annotation file (the grounding a
        run starts from when the profile's grounder is the file; a VLM grounder may find more) and, for a value that
        names a region (hair) or a boxes-only background edit (a box short of the frame), from the photo itself, as
        the mask stage would refuse it."""
        from perceptforge.store.sources import grounding_from_entry

        prof = plan.inputs.profile
        runtime = prof.runtime()
        editors = prof.build("inpainter", runtime), prof.build("editor", runtime)
        offers, skipped = renderable_values(plan.details.used, prof, *editors)
        used = {tid: t for tid, t in sorted(plan.details.used.items()) if tid in offers}
        verdicts: dict[str, dict[str, str | None]] = {tid: {} for tid in used}
        for entry in (e for e in plan.inputs.entries if e.subject):
            grounding = grounding_from_entry(entry)
            # decoded once, and only for a category whose value names a region (hair) or a boxes-only background edit
            # (a box short of the frame: the person model, 10 ms): the rest read no pixels
            read = cache(partial(read_photo, plan.inputs.source_dir, entry, prof.ingest.max_pixels))
            boxed = prof.gates.referees and not grounding.subject.outline
            for tid, t in used.items():
                refusal = partial(photo_refusal, read, t, grounding, prof.gates)
                why = category_needs.unmet(t, grounding, offers[tid], refusal)
                if why is None and boxed and t.edit_kind.value == "background_substitution":
                    why = short_box(read, grounding)
                verdicts[tid][entry.source_id] = why
        donors = {e.source_id: "no main subject: a donor image" for e in plan.inputs.entries if not e.subject}
        return SourceCheck(verdicts, skipped, donors)

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> Exported:
        from perceptforge.outputs.export import export_split

        manifest = export_split(
            run_dir,
            out,
            options.formats,
            options.seed,
            options.val_fraction,
            options.only_verified,
            license=options.license,
        )
        empty = [s for s in ("val", "test") if not manifest.counts.get(s)]
        warnings = (
            [
                f"{' and '.join(empty)} split is empty: whole source images go to one side, and this run has too "
                "few of them for both"
            ]
            if empty
            else []
        )
        return Exported(
            f"val {manifest.counts.get('val', 0)} · test {manifest.counts.get('test', 0)} items → [bold]{out}[/] "
            f"({len(manifest.files)} files)",
            [out] if "jsonl" in options.formats else [],
            warnings,
        )

    def push(self, run_dir: Path, ls: Any, document_root: Path, checks: Any = None) -> dict:
        from perceptforge.annotation.sync import push

        return push(run_dir, ls, document_root)

    def pull(self, run_dir: Path, ls: Any, checks: Any = None) -> dict:
        from perceptforge.annotation.sync import pull

        return pull(run_dir, ls)

    def strata(self, run_dir: Path) -> dict[str, list[str]]:
        """By category (B1, I1, …): MVP-Bench reports each."""
        from perceptforge.outputs.export import load_items

        by: dict[str, list[str]] = {}
        for item in load_items(run_dir):
            by.setdefault(item.category.low, []).append(item.id)
        return by


FAMILY = MvpFamily()
