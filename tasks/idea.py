"""Idea: for one unit (a source image × a category template), the manipulation to make — old value, new
value, new caption, what it means at the high level — from the writer (LLM or embedded template writer)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.backends.protocols import QuestionWriter
from perceptforge.data.schema import EditKind, Grounding, IdeaRecord, Rendering
from perceptforge.logic import category_needs, context, renderings
from perceptforge.logic.ids import unit_id, unit_rng
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.store.sources import SourceEntry
from perceptforge.tasks.runner import StageRunner, Unit, transient, unit_record


def make_idea(
    template: Template, grounding: Grounding, writer: QuestionWriter, offered: list[Rendering], seed: int
) -> IdeaRecord:
    """The idea, its new value one of those the profile's edit backends ``offered`` for the template, and
    for direct alteration the editor's instruction (MVP-Bench Appendix D). Raises ValueError with a reason
    when the grounding lacks what the template changes."""
    unit = unit_id(grounding.source_id, template)
    choices = category_needs.servable(
        renderings.choices(
            offered,
            context.original_value(template, grounding),
            grounding.attributes.get(f"{template.attribute}_high", ""),
            template.confusable,
        ),
        grounding,
    )
    if not choices:
        raise ValueError(f"{unit}: {category_needs.unmet(template, grounding, offered)}")
    idea = writer.idea(template, grounding, choices, unit_rng(seed, unit))
    instruction = None
    if template.edit_kind == EditKind.DIRECT:
        values = {"old": idea.old, "new": idea.new}
        if template.target != "whole":
            values["main_subject"] = idea.subject
        instruction = load_prompt(template.instruction_prompt).render(**values)
    return IdeaRecord(unit=unit, idea=idea, instruction=instruction)


class IdeaUnit(NamedTuple):
    template: Template
    grounding: Grounding
    offered: list[Rendering]  # the values the profile's edit backends can render


@task(name="idea", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10, retry_condition_fn=transient)
def idea(unit: IdeaUnit, writer: ModelSpec, seed: int, run_path: Path) -> IdeaRecord | Exception:
    template, grounding, offered = unit
    rel = f"ideas/{safe_name(unit_id(grounding.source_id, template))}.json"
    return unit_record(
        RunDir(run_path), rel, lambda: make_idea(template, grounding, obtain(writer), offered, seed), IdeaRecord
    )


def idea_stage(
    runner: StageRunner,
    entries: dict[str, SourceEntry],
    groundings: dict[str, Grounding],
    templates: list[Template],
    offers: dict[str, list[Rendering]],
    writer: ModelSpec,
    seed: int,
    skip: Collection[str] = (),
) -> list[tuple[Unit, IdeaRecord]]:
    """One unit per source × template, less those the plan skips (``skip``: unit ids, with their reasons
    reported by the flow)."""
    units = [
        Unit(unit_id(sid, t), entries[sid].file_name, IdeaUnit(t, g, offers[t.id]))
        for sid, g in groundings.items()
        for t in templates
        if unit_id(sid, t) not in skip
    ]
    return runner.map("idea", idea, units, writer=writer, seed=seed, models=[writer])
