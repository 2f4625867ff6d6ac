"""Category templates: one declarative YAML file per low-level category, found by discovery.

Where templates come from, in order (a later one may not reuse an id):
1. the bundled folder ``flows/templates/``;
2. folders named in ``PERCEPTFORGE_TEMPLATES`` (``os.pathsep``-separated);
3. the ``perceptforge.templates`` entry-point group (each entry point names a folder or a package).

Nothing dispatches on names: the flow reads what a template declares.
"""

from __future__ import annotations

import os
import string
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from perceptforge.data.schema import Category, EditKind
from perceptforge.errors import InputError, describe_validation_error, load_entry_point
from perceptforge.fileio import read_yaml
from perceptforge.logic.questions import high_options
from perceptforge.prompts.library import load_prompt

# Values a template's prompts may name; the question and idea stages fill them (logic/context.py).
CONTEXT_KEYS = frozenset(
    {
        "main_subject",
        "original_caption",
        "attribute_name",
        "high_level",
        "original_value",
        "new_value",
        "new_caption",
        "original_behaviour",
        "original_background",
        "original_object",
        "original_emotion",
        "original_facial",
        "new_background",
        "new_object",
        "new_facial",
    }
)


class Alternative(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: str = Field(min_length=1, description="a new value of the attribute")
    high: str = Field(min_length=1, description="what it means at the high level (behaviour, role, emotion, …)")
    colour: str | None = Field(
        None, pattern=r"^#[0-9a-f]{6}$", description="sRGB colour: a recolour editor can render this value"
    )
    region: str | None = Field(
        None, description="label of the annotated region this value changes, when not the template's target"
    )
    photo_filter: Literal["sepia", "pencil_sketch", "watercolour"] | None = Field(
        None, description="a whole-image photo filter renders this value (a filter editor: the embedded default's)"
    )
    confusable: list[str] = Field(
        default_factory=list,
        description="other values a careful annotator could also call this one when it is rendered (an oil painting "
        "for a watercolour filter): never offered beside it in one question, whichever of the two is the answer, "
        "and never drawn for a photo whose own value is one of them (a pencil sketch of a black-and-white photo)",
    )
    cross_high: bool = Field(
        True,
        description="false: this value does not change what the category's high level names, as a careful annotator "
        "reads it (bright blue hair does not change who someone is), so no cross-image high-level question is asked "
        "of an edit to it",
    )


class Writer(BaseModel):
    """Wording for the embedded template writer (the `template` LLM backend)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    yes_no_low: str
    yes_no_high: str
    mcq: str
    alternatives: list[Alternative] = Field(
        min_length=5, description="at least 5: a new value plus 3 distractors, the old value apart"
    )

    @field_validator("yes_no_low", "yes_no_high", "mcq")
    @classmethod
    def _question(cls, text: str) -> str:
        if not text.rstrip().endswith("?"):
            raise ValueError(f"a question must end with '?': {text!r}")
        names = {n for _, n, _, _ in string.Formatter().parse(text) if n}
        if not names <= {"subject", "value", "high"}:
            raise ValueError(f"placeholders may be {{subject}}, {{value}}, {{high}}; got {sorted(names)}")
        return text


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[A-Z][A-Za-z0-9_]*$")
    version: int = Field(ge=1)
    name: str
    high: Literal["identity", "emotion", "scenario", "role", "behaviour"]
    edit_kind: EditKind
    attribute: str = Field(description="grounding attribute queried, e.g. held_object")
    attribute_name: str = Field(description="how prompts and questions name it")
    target: Literal["subject", "face", "object", "background", "whole"] = Field(
        description="what the edit changes: the subject's region, its face, an object region named by the attribute, "
        "everything but the subject, or the whole image"
    )
    grounding_prompts: list[str]
    idea_prompt: str
    yes_no_prompt: str
    high_prompt: str
    cross_description: str = Field(min_length=1, description="the release's wording for cross-image MCQs")
    cross_low_exclude: list[str] = Field(
        default_factory=list,
        description="ids of the templates whose cross_description a careful annotator could also pick for this "
        "category's edit (a photo turned into a cartoon: 'Substitute the main subject with virtual character'): "
        "never among the cross-image low-level options",
    )
    cross_high_exclude: list[Literal["identity", "emotion", "scenario", "role", "behaviour"]] = Field(
        default_factory=list,
        description="high levels this category's edit changes as well, or that another category calls the same "
        "change (B1 calls a new background behaviour): left out of the cross-image high-level options so that one "
        "answer is right (``option_clashes`` checks the second at load)",
    )
    cross_high: bool = Field(
        True,
        description="ask the cross-image high-level MCQ ('Which aspect … has been altered?'); false where the "
        "edit changes its high level only through another one (a background says where someone is first)",
    )
    cross_high_prompt: str = Field(
        "questions/cross_high",
        description="the cross-image high-level question: 'Which aspect of the {main_subject} has been altered …?', or "
        "for a change to the whole scene (a new scene, a photo filter) the release's own wording without the "
        "subject ('Which aspect has been altered …?'), since the person is not what changed",
    )
    donor_kind: Literal["scene", "object", "group"] | None = Field(
        None, description="which donor-library entries a compositing editor may paste for this category"
    )
    natural_high: Literal["inferred", "annotated"] = Field(
        "inferred",
        description="how the natural image answers the high-level Yes/No question: 'inferred' (no: its own value "
        "means something else, as a studio backdrop is not a launch site) or 'annotated' (the photo cannot show it — "
        "is this hair dyed? — so the question is asked only of a source whose attributes give `<attribute>_high`, the "
        "high-level meaning of its own value, other than the new one's)",
    )
    writer: Writer

    def confusable(self, value: str) -> set[str]:
        """The values (lower case) a careful annotator could also call ``value``, or that they could call by
        ``value``'s name: an alternative's ``confusable`` list, read both ways."""
        key = value.strip().lower()
        out: set[str] = set()
        for a in self.writer.alternatives:
            named = {c.strip().lower() for c in a.confusable}
            if a.value.strip().lower() == key:
                out |= named
            elif key in named:
                out.add(a.value.strip().lower())
        return out

    def asks_cross_high(self, value: str) -> bool:
        """Whether an edit to ``value`` gets the cross-image high-level question: the template asks it and the
        value (when it is one of the template's own) does not opt out (``Alternative.cross_high``)."""
        key = value.strip().lower()
        own = [a for a in self.writer.alternatives if a.value.strip().lower() == key]
        return self.cross_high and all(a.cross_high for a in own)

    def category(self) -> Category:
        return Category(high=self.high, low=self.id, name=self.name)

    def prompt_ids(self) -> list[str]:
        return [
            *self.grounding_prompts,
            self.idea_prompt,
            self.yes_no_prompt,
            self.high_prompt,
            "questions/mcq_question",
            "questions/mcq_distractors",
            "questions/conflicting_caption",
            self.instruction_prompt,
            *([self.cross_high_prompt] if self.cross_high else []),
        ]

    @property
    def instruction_prompt(self) -> str:
        """The editor's instruction: a change to the subject names the subject; a change to the whole image
        (a photo turned into a sketch) names the image, or it would read "the man's a photograph"."""
        return "editing/instruction_whole" if self.target == "whole" else "editing/instruction"


def template_dirs() -> list[Path]:
    dirs = [Path(str(resources.files("perceptforge.flows").joinpath("templates")))]
    dirs += [Path(p) for p in os.environ.get("PERCEPTFORGE_TEMPLATES", "").split(os.pathsep) if p]
    for ep in entry_points(group="perceptforge.templates"):
        target = load_entry_point(ep, "perceptforge.templates")
        dirs.append(Path(target if isinstance(target, (str, os.PathLike)) else Path(target.__file__).parent))
    return dirs


def load_template(path: Path) -> Template:
    raw = read_yaml(path)  # strict: a key given twice, bytes that are not UTF-8 are one line naming the line
    try:
        return Template.model_validate(raw)
    except ValidationError as exc:
        raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None


def discover() -> dict[str, tuple[Template, Path]]:
    """id → (template, file), sorted by id; a duplicate id is an error naming both files."""
    found: dict[str, tuple[Template, Path]] = {}
    for folder in template_dirs():
        if not folder.is_dir():
            raise InputError(str(folder), "template folder not found")
        for path in sorted(folder.glob("*.yaml")):
            template = load_template(path)
            if template.id in found:
                raise InputError(str(path), f"template id {template.id} is already defined in {found[template.id][1]}")
            found[template.id] = (template, path)
    for template, path in found.values():
        unknown = sorted(set(template.cross_low_exclude) - set(found))
        if unknown:
            raise InputError(str(path), f"cross_low_exclude names {unknown[0]!r}, which is no template's id")
    clashes = option_clashes({k: t for k, (t, _) in found.items()})
    if clashes:
        # the file found last of the two (a folder's or a plug-in's beside the bundled ones) is the one to change
        pair, problem = clashes[0]
        order = list(found)
        raise InputError(str(found[max(pair, key=order.index)][1]), problem)
    return dict(sorted(found.items()))


def option_clashes(found: dict[str, Template]) -> list[tuple[tuple[str, str], str]]:
    """((template id, other template id), problem) for each cross-image high-level MCQ with two defensible options:
    the other template makes the same kind of change (the same ``attribute``: a new background) and calls it
    another high level, which is among the options too. S1 (a new background: scenario) beside B1 (a new
    background: behaviour) must leave behaviour out, or an annotator rightly picks either."""
    problems = []
    for tid, template in sorted(found.items()):
        if not template.cross_high:
            continue
        options = high_options(template.cross_high_exclude)
        for other_id, other in sorted(found.items()):
            if other.attribute == template.attribute and other.high != template.high and other.high in options:
                problems.append(
                    (
                        (tid, other_id),
                        f"template {tid}'s cross-image high-level options hold both {template.high!r} and "
                        f"{other.high!r}, and template {other_id} calls the same change ({template.attribute}) "
                        f"{other.high!r}: add {other.high!r} to {tid}'s cross_high_exclude",
                    )
                )
    return problems


def templates() -> dict[str, Template]:
    return {k: t for k, (t, _) in discover().items()}


def check(template: Template) -> list[str]:
    """Problems with a template's prompts: unknown prompt ids, placeholders no stage can fill."""
    problems = []
    for prompt_id in template.prompt_ids():
        try:
            prompt = load_prompt(prompt_id)
        except Exception as exc:  # the loader's own message names the prompt
            problems.append(str(exc))
            continue
        unknown = prompt.placeholders - CONTEXT_KEYS - {"question", "correct_answer", "old", "new"}
        if unknown:
            problems.append(f"prompt {prompt_id}: placeholders {sorted(unknown)} cannot be filled")
    return problems


SCAFFOLD = """\
# {name}: a new low-level category. Copy this file into a template folder (flows/templates/ or a folder
# in PERCEPTFORGE_TEMPLATES), edit it, and run `perceptforge templates check`. No code changes.
id: {id}
version: 1
name: {name}
high: behaviour                   # identity | emotion | scenario | role | behaviour
edit_kind: partial_substitution   # background_substitution | partial_substitution | direct_alteration
attribute: held_object            # the grounding attribute this category changes
attribute_name: held object       # how prompts and questions name it
target: object                    # subject | face | object | background | whole
grounding_prompts: [grounding/attribute]
idea_prompt: idea/attribute_substitution
yes_no_prompt: questions/yes_no_attribute
high_prompt: questions/yes_no_high
cross_description: Replace the object held by the main subject.
writer:                           # wording for the embedded template writer
  yes_no_low: Is the {{subject}} holding {{value}}?
  yes_no_high: Is the {{subject}} {{high}}?
  mcq: What is the {{subject}} holding?
  alternatives:                   # at least five
  - {{value: an umbrella, high: sheltering from rain}}
  - {{value: a trophy, high: celebrating a win}}
  - {{value: a camera, high: taking photographs}}
  - {{value: a map, high: finding the way}}
  - {{value: a shovel, high: digging}}
"""


def scaffold(template_id: str, name: str) -> str:
    return SCAFFOLD.format(id=template_id, name=name)
