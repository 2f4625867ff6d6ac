"""Questions: from an idea, the unit's Yes/No pairs (low, high), single-image MCQ and cross-image MCQs
(low, high), each with its item id, plus the lineage every item of the unit inherits."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.backends.protocols import QuestionWriter
from perceptforge.data.schema import Candidate, Grounding, IdeaRecord, IngestedSource, PromptRef
from perceptforge.logic import context, questions
from perceptforge.logic.ids import question_id, unit_rng
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.tasks.runner import StageRunner, Unit, transient, unit_record


def _refs(prompt_ids: list[str]) -> list[PromptRef]:
    return [PromptRef(**load_prompt(p).ref()) for p in sorted(set(prompt_ids))]


def make_candidate(
    template: Template,
    grounding: Grounding,
    source_sha256: str,
    idea: IdeaRecord,
    writer: QuestionWriter,
    cross_descriptions: dict[str, str],
    seed: int,
) -> Candidate:
    """Raises ValueError with a reason when a question cannot be made sound (e.g. too few distractors)."""
    # Its own stream, apart from the idea's: rewriting questions never changes the idea or the edit.
    rng = unit_rng(seed, idea.unit + ":questions")
    ctx = context.build(template, grounding, idea.idea)
    subject, new, old = ctx["main_subject"], idea.idea.new, idea.idea.old
    high = idea.idea.high_level_value
    high_pair = questions.natural_high_known(template.natural_high, template.attribute, grounding.attributes, high)
    distractors = writer.distractors(template, ctx, rng)
    # whatever writer drew them: a distractor a careful annotator could also call right makes two answers
    questions.check_not_confusable(new, distractors, template.confusable(new))
    built = [
        questions.yes_no_pair(writer.yes_no(template, ctx, "low", high), "low"),
        *([questions.yes_no_pair(writer.yes_no(template, ctx, "high", high), "high")] if high_pair else []),
        questions.single_mcq(writer.mcq_question(template, ctx), new, old, distractors, rng),
        questions.cross_mcq_low(
            load_prompt("questions/cross_low").render(),
            template.cross_description,
            [d for tid, d in sorted(cross_descriptions.items()) if tid not in template.cross_low_exclude],
            rng,
        ),
    ]
    used_prompts = ["questions/cross_low"]
    if template.asks_cross_high(new):
        prompt = load_prompt(template.cross_high_prompt)
        # the release's wording for a change to the whole scene names no subject: render only what it names
        named = {k: v for k, v in {"main_subject": subject}.items() if k in prompt.placeholders}
        built.append(questions.cross_mcq_high(prompt.render(**named), template.high, rng, template.cross_high_exclude))
        used_prompts.append(template.cross_high_prompt)
    if writer.name != "template":
        used_prompts += [
            template.idea_prompt,
            "idea/choose_value",
            template.yes_no_prompt,
            template.high_prompt,
            "questions/mcq_question",
            "questions/mcq_distractors",
        ]
    return Candidate.model_validate(
        {
            "unit": idea.unit,
            "category": template.category(),
            "edit_kind": template.edit_kind,
            "target": template.target,
            "idea": idea.idea,
            "instruction": idea.instruction,
            "questions": [
                {"id": question_id(grounding.source_id, source_sha256, template, seed, k), "question": q}
                for k, q in enumerate(built)
            ],
            "lineage": {
                "source_id": grounding.source_id,
                "source_sha256": source_sha256,
                "template_id": template.id,
                "template_version": template.version,
                "prompts": _refs(used_prompts),
                "seed": seed,
                "backends": {
                    "grounder": {"name": grounding.backend, "model_id": grounding.model_id},
                    "llm": {"name": writer.name, "model_id": writer.model_id},
                },
                "artifacts": {"grounding": f"groundings/{grounding.source_id}.json", "idea": f"ideas/{idea.unit}.json"},
            },
        }
    )


class QuestionsUnit(NamedTuple):
    template: Template
    grounding: Grounding
    source: IngestedSource
    idea: IdeaRecord


@task(name="questions", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10, retry_condition_fn=transient)
def write_questions(
    unit: QuestionsUnit,
    writer: ModelSpec,
    cross_descriptions: dict[str, str],
    seed: int,
    run_path: Path,
) -> Candidate | Exception:
    template, grounding, source, idea = unit
    return unit_record(
        RunDir(run_path),
        f"candidates/{safe_name(idea.unit)}.json",
        lambda: make_candidate(template, grounding, source.sha256, idea, obtain(writer), cross_descriptions, seed),
        Candidate,
    )


def questions_stage(
    runner: StageRunner,
    ideas: list[tuple[Unit, IdeaRecord]],
    sources: dict[str, IngestedSource],
    writer: ModelSpec,
    all_templates: dict[str, Template],
    seed: int,
) -> list[tuple[Unit, Candidate]]:
    units = [
        Unit(u.name, u.file, QuestionsUnit(i.template, i.grounding, sources[i.grounding.source_id], rec))
        for u, rec in ideas
        for i in (u.value,)
    ]
    descriptions = {tid: t.cross_description for tid, t in all_templates.items()}
    return runner.map(
        "questions",
        write_questions,
        units,
        writer=writer,
        cross_descriptions=descriptions,
        seed=seed,
        models=[writer],
    )
