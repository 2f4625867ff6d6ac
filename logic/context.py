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


def subject_name(grounding: Grounding) -> str:
    """The subject as questions and prompts name it: its label, or, where another region of the photo bears the
    same label (two men side by side), its label with its place ("man on the left"), so that "the man" means one
    person. Raises ValueError where the place does not tell them apart (one stands behind the other)."""
    label = grounding.subject.label
    same = label.strip().lower()
    others = [r.box.xyxy for r in grounding.regions if r.role != "subject" and r.label.strip().lower() == same]
    if not others:
        return label
    x0, _, x1, _ = grounding.subject.box.xyxy
    centre = (x0 + x1) / 2
    # beside every other one: the subject's middle lies past the others' middles and outside their boxes
    if all(centre < ox0 and centre < (ox0 + ox1) / 2 for ox0, _, ox1, _ in others):
        return f"{label} on the left"
    if all(centre > ox1 and centre > (ox0 + ox1) / 2 for ox0, _, ox1, _ in others):
        return f"{label} on the right"
    if all(centre < ox0 or centre > ox1 for ox0, _, ox1, _ in others) and len(others) == 2:
        if any(centre < ox0 for ox0, *_ in others) and any(centre > ox1 for _, _, ox1, _ in others):
            return f"{label} in the middle"
    raise ValueError(
        f"source {grounding.source_id}: {len(others) + 1} regions are labelled {label!r} and the subject does not "
        f"stand clearly beside the others: a question about the {label} would not say which one is meant; give the "
        f"subject a label of its own (e.g. '{label} in the grey suit')"
    )


def build(template: Template, grounding: Grounding, idea: Idea | None = None) -> dict[str, str]:
    ctx = {
        "main_subject": subject_name(grounding),
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
