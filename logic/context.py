"""The named values prompts and question wordings are filled from (see templates.CONTEXT_KEYS)."""

from __future__ import annotations

from perceptforge.data.schema import Grounding, Idea
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import Prompt

# Grounding attribute keys under the names the paper's prompts use.
_ORIGINAL = {
    "behaviour": "original_behaviour",
    "background": "original_background",
    "held_object": "original_object",
    "emotion": "original_emotion",
    "facial_expression": "original_facial",
}
_NEW = {"background": "new_background", "held_object": "new_object", "facial_expression": "new_facial"}


def original_value(template: Template, grounding: Grounding) -> str:
    value = grounding.attributes.get(template.attribute, "").strip()
    if not value or value.lower() in ("nothing", "none"):
        raise ValueError(
            f"grounding of source {grounding.source_id} has no '{template.attribute}' for the {grounding.subject.label}"
        )
    return value


def build(template: Template, grounding: Grounding, idea: Idea | None = None) -> dict[str, str]:
    ctx = {
        "main_subject": grounding.subject.label,
        "original_caption": grounding.caption,
        "attribute_name": template.attribute_name,
        "high_level": template.high,
        "original_value": original_value(template, grounding),
    }
    ctx |= {name: grounding.attributes[key] for key, name in _ORIGINAL.items() if grounding.attributes.get(key)}
    if idea is not None:
        ctx |= {"new_value": idea.new, "new_caption": idea.new_caption}
        if template.attribute in _NEW:
            ctx[_NEW[template.attribute]] = idea.new
    return ctx


def render(prompt: Prompt, ctx: dict[str, str], **extra: str) -> str:
    """Fill a prompt from the context; a value the prompt needs and the context lacks is a clear error."""
    values = ctx | extra
    missing = prompt.placeholders - set(values)
    if missing:
        raise ValueError(f"prompt {prompt.id} needs {sorted(missing)}, which the grounding does not provide")
    return prompt.render(**{k: values[k] for k in prompt.placeholders})
