"""One unit of work (a source image × a category template) → an idea and its questions, with lineage.

The candidate record is what later stages (mask, edit, quality gates, annotation) turn into items.
"""

from __future__ import annotations

import hashlib

import numpy as np
from perceptforge.data.schema import Grounding, PromptRef
from perceptforge.prompts.library import load_prompt
from perceptforge.tasks import context, questions
from perceptforge.tasks.llm import QuestionWriter
from perceptforge.tasks.templates import Template


def unit_id(source_id: str, template: Template) -> str:
    return f"{source_id}-{template.id}"


def unit_rng(seed: int, unit: str) -> np.random.Generator:
    """The unit's own generator: independent of scheduling order, so reruns and resumes give the same draws."""
    digest = int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "big")
    return np.random.default_rng([seed, digest])


def question_id(source_sha256: str, template: Template, seed: int, index: int) -> str:
    key = f"{source_sha256}:{template.id}:v{template.version}:{seed}:{index}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def _refs(prompt_ids: list[str]) -> list[dict]:
    return [PromptRef(**load_prompt(p).ref()).model_dump() for p in sorted(set(prompt_ids))]


def make_candidate(template: Template, grounding: Grounding, source_sha256: str, writer: QuestionWriter,
                   all_templates: dict[str, Template], seed: int) -> dict:
    """Idea + Yes/No (low, high) + single-image MCQ + cross-image MCQs (low, high). Raises ValueError with a reason."""
    unit = unit_id(grounding.source_id, template)
    rng = unit_rng(seed, unit)
    idea = writer.idea(template, grounding, rng)
    ctx = context.build(template, grounding, idea)
    subject = ctx["main_subject"]
    descriptions = [t.cross_description for t in all_templates.values()]
    built = [
        questions.yes_no_pair(writer.yes_no(template, ctx, "low", idea.high_level_value), "low"),
        questions.yes_no_pair(writer.yes_no(template, ctx, "high", idea.high_level_value), "high"),
        questions.single_mcq(writer.mcq_question(template, ctx), idea.new, idea.old, writer.distractors(template, ctx, rng), rng),
        questions.cross_mcq_low(load_prompt("questions/cross_low").render(), template.cross_description, descriptions, rng),
        questions.cross_mcq_high(load_prompt("questions/cross_high").render(main_subject=subject), template.high, rng),
    ]
    used_prompts = ["questions/cross_low", "questions/cross_high"]
    if writer.name != "template":
        used_prompts += [template.idea_prompt, template.yes_no_prompt, template.high_prompt, "questions/mcq_question", "questions/mcq_distractors"]
    record = {
        "unit": unit,
        "category": template.category().model_dump(),
        "edit_kind": template.edit_kind.value,
        "target": template.target,
        "idea": idea.model_dump(mode="json"),
        "questions": [{"id": question_id(source_sha256, template, seed, k), "question": q.model_dump(mode="json")} for k, q in enumerate(built)],
        "lineage": {
            "source_id": grounding.source_id, "source_sha256": source_sha256, "template_id": template.id,
            "template_version": template.version, "prompts": _refs(used_prompts), "seed": seed,
            "backends": {"grounder": {"name": grounding.backend, "model_id": grounding.model_id},
                         "llm": {"name": writer.name, "model_id": writer.model_id}},
            "artifacts": {"grounding": f"groundings/{grounding.source_id}.json"},
        },
    }
    if template.edit_kind.value == "direct_alteration":
        record["instruction"] = load_prompt("editing/instruction").render(main_subject=subject, old=idea.old, new=idea.new)
    return record
