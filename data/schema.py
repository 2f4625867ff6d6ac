"""The records that flow between stages and into splits (pydantic v2).

Every record is frozen and forbids unknown fields, so a typo in a file fails validation with the field's
name. ``data/SCHEMA.md`` documents them; ``data/schema.json`` is the exported JSON Schema
(``perceptforge schema --out data/schema.json`` regenerates it; a test checks it is current).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perceptforge.data import geometry

SHA256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$", description="lower-case hex SHA-256")]
LETTERS = "ABCDE"


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- sources and geometry -------------------------------------------------------------------------


class SourceImage(Record):
    """A photo the pipeline starts from."""

    id: str = Field(min_length=1)
    path: str = Field(min_length=1, description="path relative to the source directory")
    sha256: SHA256
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    licence: str = Field(min_length=1, description="licence name or statement, e.g. 'CC0-1.0'")
    attribution: str = ""


class IngestedSource(SourceImage):
    """A source image after ingest: decoded, upright RGB, stored content-addressed in the run."""

    stored: str = Field(min_length=1, description="the run's copy, e.g. 'images/<sha256>.png'")


class Box(Record):
    """Pixel box, corners ``(x0, y0, x1, y1)``; the one format used inside the project."""

    x0: float = Field(ge=0)
    y0: float = Field(ge=0)
    x1: float
    y1: float

    @model_validator(mode="after")
    def _non_empty(self) -> Box:
        if self.x1 <= self.x0 or self.y1 <= self.y0:
            raise ValueError(f"empty box: need x1 > x0 and y1 > y0, got ({self.x0}, {self.y0}, {self.x1}, {self.y1})")
        return self

    @property
    def xyxy(self) -> geometry.XYXY:
        return (self.x0, self.y0, self.x1, self.y1)

    @classmethod
    def from_xyxy(cls, box) -> Box:
        x0, y0, x1, y1 = geometry.check_xyxy(box)
        return cls(x0=x0, y0=y0, x1=x1, y1=y1)

    @classmethod
    def from_xywh(cls, box) -> Box:
        return cls.from_xyxy(geometry.xywh_to_xyxy(box))

    @classmethod
    def from_norm(cls, box, width: float, height: float) -> Box:
        return cls.from_xyxy(geometry.norm_to_xyxy(box, width, height))

    @classmethod
    def from_ls_percent(cls, value: dict, width: float, height: float) -> Box:
        return cls.from_xyxy(geometry.ls_percent_to_xyxy(value, width, height))

    def to_xywh(self) -> geometry.XYXY:
        return geometry.xyxy_to_xywh(self.xyxy)

    def to_norm(self, width: float, height: float) -> geometry.XYXY:
        return geometry.xyxy_to_norm(self.xyxy, width, height)

    def to_ls_percent(self, width: float, height: float) -> dict[str, float]:
        return geometry.xyxy_to_ls_percent(self.xyxy, width, height)

    def within(self, width: float, height: float) -> bool:
        return self.x1 <= width and self.y1 <= height


class Region(Record):
    """A labelled box in an image (an object, a face, the main subject), with the annotator's outline where one
    was drawn."""

    label: str = Field(min_length=1)
    box: Box
    role: Literal["subject", "object", "occluder", "face", "other"] = "object"
    outline: list[list[float]] | None = Field(
        None,
        description="COCO polygons (each part [x0, y0, x1, y1, ...], pixels): the region's own outline, which "
        "an edit follows where a segmenter would guess",
    )

    @field_validator("outline")
    @classmethod
    def _polygons(cls, parts: list[list[float]] | None) -> list[list[float]] | None:
        for k, part in enumerate(parts or []):
            if len(part) < 6 or len(part) % 2:
                raise ValueError(f"outline part {k}: needs x, y pairs of at least three points ({len(part)} numbers)")
        return parts


class Grounding(Record):
    """What a grounder says about one source image: caption, main subject, regions and attributes."""

    source_id: str
    caption: str = Field(min_length=1)
    subject: Region
    regions: list[Region] = []
    attributes: dict[str, str] = Field(default_factory=dict, description="attribute name → value for the subject")
    backend: str
    model_id: str = ""


# --- ideas and edits --------------------------------------------------------------------------------


class EditKind(str, Enum):
    """The three edit kinds of MVP-Bench §4.1."""

    BACKGROUND = "background_substitution"
    PARTIAL = "partial_substitution"
    DIRECT = "direct_alteration"


class Rendering(Record):
    """One value an edit backend of the profile can put into an image, as it declares it: the phrase
    questions use, what it means at the high level, and how the backend renders it."""

    value: str = Field(min_length=1, description="the attribute's new value as questions name it")
    high: str = Field(min_length=1, description="what it means at the template's high level")
    backend: str = Field(min_length=1, description="the backend that renders it, e.g. 'composite'")
    how: Literal["prompt", "donor", "colour", "filter"] = Field(
        description="prompt: a text-driven model draws the value; donor: a labelled library photo is pasted; "
        "colour: the region is recoloured; filter: a photo filter turns the whole image into it"
    )
    donor: str | None = Field(None, description="donor library entry id (how = donor)")
    colour: str | None = Field(None, pattern=r"^#[0-9a-f]{6}$", description="sRGB target colour (how = colour)")
    region: str | None = Field(
        None, description="label of the annotated region the edit changes, when not the template's target"
    )
    photo_filter: str | None = Field(None, description="the photo filter's name (how = filter)")


class Idea(Record):
    """The manipulation proposed for one source image and category."""

    category: str = Field(min_length=1, description="low-level category id, e.g. 'B1'")
    subject: str = Field(min_length=1, description="the main subject as named in questions, e.g. 'woman'")
    attribute: str = Field(min_length=1, description="what is queried, e.g. 'held_object'")
    old: str = Field(min_length=1, description="the attribute's value in the natural image")
    new: str = Field(min_length=1, description="its value in the manipulated image")
    new_caption: str = Field(min_length=1)
    high_level_value: str = Field("", description="what the change means at the high level, e.g. 'threatening someone'")
    target: Box | None = Field(None, description="region to edit (partial substitution); None for whole-subject edits")
    rendering: Rendering | None = Field(None, description="the declared value the edit renders; new is its value")

    @model_validator(mode="after")
    def _changes(self) -> Idea:
        if self.old.strip().lower() == self.new.strip().lower():
            raise ValueError(f"idea changes nothing: old and new are both {self.old!r}")
        if self.rendering is not None and self.rendering.value != self.new:
            raise ValueError(f"idea's new value {self.new!r} is not the rendered value {self.rendering.value!r}")
        return self


class ImageRef(Record):
    """An image stored content-addressed in a run or split directory."""

    # Only the content-addressed form: a path read from a record can then never leave its directory.
    path: str = Field(pattern=r"^images/[0-9a-f]{64}\.png$", description="'images/<sha256>.png', relative")
    sha256: SHA256
    width: int = Field(gt=0)
    height: int = Field(gt=0)


class Edit(Record):
    """How the manipulated image was made."""

    kind: EditKind
    backend: str
    model_id: str = ""
    prompt: str = ""
    seed: int
    params: dict[str, float | int | str | bool] = Field(default_factory=dict)
    mask_path: str | None = None
    rendered: Rendering | None = Field(None, description="the value put into the image: donor or colour or prompt")


class ImagePair(Record):
    natural: ImageRef
    manipulated: ImageRef
    mask: ImageRef | None = None

    @model_validator(mode="after")
    def _same_size(self) -> ImagePair:
        n, m = self.natural, self.manipulated
        if (n.width, n.height) != (m.width, m.height):
            raise ValueError(
                f"pair images differ in size: natural {n.width}x{n.height}, manipulated {m.width}x{m.height}"
            )
        return self


# --- questions --------------------------------------------------------------------------------------


def _check_options(options: list[str], answer: str) -> None:
    if any(not o.strip() for o in options):
        raise ValueError("options: an option is empty")
    lowered = [o.strip().lower() for o in options]
    if len(set(lowered)) != len(lowered):
        raise ValueError(f"options: duplicates in {options}")
    valid = LETTERS[: len(options)]
    if answer not in valid:
        raise ValueError(f"answer: {answer!r} is not one of the option letters {list(valid)}")


class YesNoPair(Record):
    """One question asked on both images of a pair, with opposite answers (MVP-Bench Yes/No)."""

    kind: Literal["yes_no_pair"] = "yes_no_pair"
    question: str = Field(min_length=1)
    level: Literal["low", "high"]
    answer_natural: Literal["yes", "no"]
    answer_manipulated: Literal["yes", "no"]

    @model_validator(mode="after")
    def _opposite(self) -> YesNoPair:
        if self.answer_natural == self.answer_manipulated:
            raise ValueError(f"answer_manipulated: must be opposite to answer_natural ({self.answer_natural!r})")
        return self


class _MCQ(Record):
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=2, max_length=5)
    answer: str = Field(description="the correct option's letter")

    @model_validator(mode="after")
    def _valid(self):
        _check_options(self.options, self.answer)
        return self

    @property
    def answer_text(self) -> str:
        return self.options[LETTERS.index(self.answer)]


class SingleImageMCQ(_MCQ):
    """MCQ on the manipulated image: correct answer, the natural image's answer, three distractors."""

    kind: Literal["single_mcq"] = "single_mcq"
    level: Literal["low", "high"] = "high"
    image: Literal["natural", "manipulated"] = "manipulated"


class CrossImageMCQ(_MCQ):
    """MCQ over the pair: what changed (low) or which aspect changed (high)."""

    kind: Literal["cross_mcq"] = "cross_mcq"
    level: Literal["low", "high"]


class ContextPair(Record):
    """CODIS: one question, two contexts that lead to different answers."""

    kind: Literal["context_pair"] = "context_pair"
    question: str = Field(min_length=1)
    contexts: tuple[str, str]
    answers: tuple[str, str]

    @model_validator(mode="after")
    def _differ(self) -> ContextPair:
        if any(not c.strip() for c in self.contexts):
            raise ValueError("contexts: a context is empty")
        if any(not a.strip() for a in self.answers):
            raise ValueError("answers: an answer is empty")
        if self.answers[0].strip().lower() == self.answers[1].strip().lower():
            raise ValueError("answers: the two contexts must lead to different answers")
        return self


class AbsentOptionMCQ(_MCQ):
    """MME-RealWorld: five options, (E) says the image does not feature what is asked."""

    kind: Literal["absent_mcq"] = "absent_mcq"
    options: list[str] = Field(min_length=5, max_length=5)

    @field_validator("options")
    @classmethod
    def _e_is_absent(cls, options: list[str]) -> list[str]:
        if not re.search(r"\b(not|no|none|absent)\b", options[4], re.I):
            raise ValueError(
                f"options: option E must state absence (e.g. 'The image does not feature it'), got {options[4]!r}"
            )
        return options


Question = Annotated[
    Union[YesNoPair, SingleImageMCQ, CrossImageMCQ, ContextPair, AbsentOptionMCQ],
    Field(discriminator="kind"),
]


# --- items, lineage, splits -------------------------------------------------------------------------


class PromptRef(Record):
    id: str = Field(description="prompt file id, e.g. 'idea/held_object'")
    version: int = Field(ge=1)
    sha256: SHA256


class BackendRef(Record):
    name: str
    model_id: str = ""


class Lineage(Record):
    """Where an item came from: enough to regenerate it or trace any of its parts."""

    source_id: str
    source_sha256: SHA256
    template_id: str
    template_version: int = Field(ge=1)
    prompts: list[PromptRef] = []
    backends: dict[str, BackendRef] = Field(default_factory=dict, description="stage → backend")
    seed: int
    artifacts: dict[str, str] = Field(
        default_factory=dict, description="name → relative path (grounding, idea, mask …)"
    )
    parent_id: str | None = Field(None, description="the item this one corrects, if any")


class Category(Record):
    high: Literal["behaviour", "role", "identity", "emotion", "scenario"]
    low: str = Field(min_length=1, description="low-level id, e.g. 'B1'")
    name: str = Field(min_length=1, description="e.g. 'Behaviour-Background'")


class BenchmarkItem(Record):
    id: str = Field(min_length=1, description="hash of source image + template + seed (+ question index)")
    version: int = Field(1, ge=1, description="bumped by each human correction")
    category: Category
    question: Question
    pair: ImagePair
    idea: Idea | None = None
    edit: Edit | None = None
    lineage: Lineage
    verified: bool = False


class FileEntry(Record):
    path: str
    sha256: SHA256
    bytes: int = Field(ge=0)


# --- records between the construction stages (one file per unit in the run directory) --------------


class IdeaRecord(Record):
    """The idea stage's output for one unit (source image × template): ``ideas/<unit>.json``."""

    unit: str = Field(min_length=1, description="'<source id>-<template id>'")
    idea: Idea
    instruction: str | None = Field(None, description="the editor's instruction (direct alteration only)")


class QuestionEntry(Record):
    id: str = Field(min_length=1, description="the item id this question becomes")
    question: Question


class Candidate(Record):
    """The questions stage's output: an idea with its questions and lineage, ``candidates/<unit>.json``."""

    unit: str = Field(min_length=1)
    category: Category
    edit_kind: EditKind
    target: str = Field(description="what the edit changes (the template's target)")
    idea: Idea
    questions: list[QuestionEntry] = Field(min_length=1)
    lineage: Lineage
    instruction: str | None = None


class MaskRecord(Record):
    """The mask stage's output, ``masks/<unit>.json``: the region to edit and its gate measurements."""

    unit: str = Field(min_length=1)
    mask: ImageRef | None = Field(None, description="None for whole-image instruction edits")
    segmenter: BackendRef
    measurements: dict[str, float] = Field(
        default_factory=dict, description="gate measurements: mask_area, subject_in_mask (fractions)"
    )
    hair: ImageRef | None = Field(
        None, description="a background edit's: where the kept outline is hair, whose strands the compositor unmixes"
    )


class EditRecord(Record):
    """The edit stage's output, ``edits/<unit>.json``: the image pair and how it was made."""

    unit: str = Field(min_length=1)
    pair: ImagePair
    edit: Edit
    backends: dict[str, BackendRef]


class GateLimit(Record):
    """What a gate allowed one measurement (a measurement ``name:part`` takes the limit of ``name``)."""

    at_most: float | None = None
    at_least: float | None = None


class GateRecord(Record):
    """The gates stage's output, ``gates/<unit>.json``: every measurement, the limits the pair was judged against
    (so report.html can say pass, near or fail), whether it passed, and why not."""

    unit: str = Field(min_length=1)
    measurements: dict[str, float]
    limits: dict[str, GateLimit] = Field(default_factory=dict)
    passed: bool
    reason: str = ""


class SplitManifest(Record):
    name: str
    version: str
    seed: int
    counts: dict[str, int] = Field(description="'<split>/<category>' and '<split>' → number of items")
    files: list[FileEntry]
    profile: dict
    templates: dict[str, int] = Field(description="template id → version")
    prompts: list[PromptRef]
    models: dict[str, list[str]] = Field(
        description="stage → every model id (or backend name, for a backend without a model) that made an item"
    )
    source_commit: str = ""


# --- BLINK-style items (BLINK §3.2): classic vision tasks as MCQs with visual prompts ---------------------


class Mark(Record):
    """A visual prompt drawn on one of the item's images: a circle around a point, or a box."""

    label: str = Field(min_length=1, description="the text beside the mark: 'A', 'B', 'REF' …")
    image: int = Field(ge=0, description="index into the item's images")
    shape: Literal["circle", "box"]
    at: tuple[float, ...] = Field(description="circle: (x, y) of the marked point; box: (x0, y0, x1, y1)")

    @model_validator(mode="after")
    def _arity(self) -> Mark:
        if len(self.at) != (2 if self.shape == "circle" else 4):
            raise ValueError(f"at: a {self.shape} mark needs {2 if self.shape == 'circle' else 4} numbers")
        return self


class PerceptionItem(Record):
    """One BLINK-style question: its images (marks drawn in), choices, answer letter and lineage."""

    id: str = Field(min_length=1, description="hash of the sources + task template + seed + prompt variant")
    version: int = Field(1, ge=1)
    task: str = Field(min_length=1, description="BLINK's task name, e.g. 'Jigsaw', 'Object_Localization'")
    question: str = Field(min_length=1)
    choices: list[str] = Field(min_length=2, max_length=5)
    answer: str = Field(pattern=r"^[A-E]$")
    images: list[ImageRef] = Field(min_length=1, max_length=4)
    marks: list[Mark] = []
    random_choice: float = Field(gt=0, le=100, description="accuracy of a random answer, in %")
    variant: str = Field("default", description="the visual-prompt variant (--prompt-variants)")
    sources: list[str] = Field(min_length=1, description="ids of every source image the item uses")
    lineage: Lineage
    verified: bool = False

    @model_validator(mode="after")
    def _answer_in_choices(self) -> PerceptionItem:
        if LETTERS.index(self.answer) >= len(self.choices):
            raise ValueError(f"answer: {self.answer} is not one of the {len(self.choices)} choices")
        if any(m.image >= len(self.images) for m in self.marks):
            raise ValueError("marks: a mark names an image the item does not have")
        return self


# --- human-authored benchmarks (CODIS, MME-RealWorld) ---------------------------------------------------

CODIS_CATEGORIES = (
    "Location and Orientation",
    "Temporal Information",
    "Cultural Background",
    "Attributes",
    "Relationships",
)
MME_DOMAINS = ("OCR", "Remote Sensing", "Diagram and Table", "Autonomous Driving", "Monitoring")


class OriginalImage(Record):
    """A source image kept with its original bytes (MME-RealWorld is about full resolution): never decoded
    and re-encoded, so the stored file hashes to the source file."""

    path: str = Field(pattern=r"^images/[0-9a-f]{64}\.(png|jpg|webp|tif)$", description="'images/<sha256>.<ext>'")
    sha256: SHA256
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    source_id: str = Field(min_length=1)
    file_name: str = Field(min_length=1, description="the file's name in the source folder")
    licence: str = Field(min_length=1)
    attribution: str = ""


class CodisContent(Record):
    """CODIS §3.3: a question about an ambiguous part of the image, two contexts, the answers they lead to."""

    question: str = Field(min_length=1)
    context_1: str = Field(min_length=1)
    context_2: str = Field(min_length=1)
    answer_1: str = Field(min_length=1)
    answer_2: str = Field(min_length=1)
    category: Literal[CODIS_CATEGORIES]  # type: ignore[valid-type]


class MMERealWorldContent(Record):
    """MME-RealWorld §3.2: a question with four options and the fifth, "(E) The image does not feature the
    <absent_object>."; the target's rectangle on the full-resolution image."""

    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    absent_object: str = Field(min_length=1, description="the object the E option says the image lacks")
    answer: str = Field(pattern=r"^[A-E]$")
    task: Literal["Perception", "Reasoning"] = "Perception"
    domain: Literal[MME_DOMAINS] | None = Field(None, description="None: the annotator chooses")  # type: ignore[valid-type]
    subtask: str = Field(min_length=1, description="the release's Category, e.g. 'position', 'color'")
    language: Literal["en", "cn"] = "en"
    target: Box | None = Field(None, description="the asked-about object's rectangle, in full-resolution pixels")

    @property
    def choices(self) -> list[str]:
        """A–E as the release lists them: the four options, then "The image does not feature the …"."""
        return [*self.options, f"The image does not feature the {self.absent_object}."]


class CheckResult(Record):
    """One automatic check of an item version; ``flagged`` sends the item to review with the reason."""

    name: str
    flagged: bool
    detail: str = ""
    value: float | str | None = None


class Review(Record):
    """One reviewer's answer in the cross-check project."""

    reviewer: str = Field(description="the reviewer's e-mail (or user id when unknown)")
    correct: bool
    distinct: bool
    follows_rules: bool
    comment: str = ""

    @property
    def passed(self) -> bool:
        return self.correct and self.distinct and self.follows_rules


class AuthoredLineage(Record):
    """Where an authored item version came from: its source, the draft, who wrote and who reviewed it."""

    source_id: str
    source_sha256: SHA256
    benchmark: Literal["codis", "mme-realworld"]
    seed: int
    draft_backend: BackendRef
    draft_prompts: list[PromptRef] = []
    parent_id: str | None = Field(None, description="the version this one revises (the draft for version 1)")
    author: str | None = Field(None, description="None: still the model's draft")
    task: dict[str, int | str] = Field(default_factory=dict, description="Label Studio project and task of the version")


class AuthoredItem(Record):
    """One version of a human-authored CODIS or MME-RealWorld item. Version 0 is the model's draft; each
    authoring or revision in Label Studio makes the next version."""

    id: str = Field(min_length=1, description="the item: hash of source image + benchmark + seed")
    version: int = Field(ge=0, description="0: the draft; n: the n-th human authoring or revision")
    status: Literal["draft", "in_review", "revise", "kept"] = "draft"
    image: OriginalImage
    content: CodisContent | MMERealWorldContent
    checks: list[CheckResult] = []
    reviews: list[Review] = []
    lineage: AuthoredLineage

    @property
    def version_id(self) -> str:
        return f"{self.id}.v{self.version}"

    @property
    def flags(self) -> list[CheckResult]:
        return [c for c in self.checks if c.flagged]


SCHEMA_MODELS: tuple[type[BaseModel], ...] = (
    SourceImage,
    IngestedSource,
    Box,
    Region,
    Grounding,
    Idea,
    ImageRef,
    Edit,
    ImagePair,
    YesNoPair,
    SingleImageMCQ,
    CrossImageMCQ,
    ContextPair,
    AbsentOptionMCQ,
    Lineage,
    IdeaRecord,
    Candidate,
    MaskRecord,
    EditRecord,
    BenchmarkItem,
    Mark,
    PerceptionItem,
    OriginalImage,
    CodisContent,
    MMERealWorldContent,
    CheckResult,
    Review,
    AuthoredLineage,
    AuthoredItem,
    SplitManifest,
)


def json_schema() -> dict:
    """One JSON Schema document with every record under ``$defs``."""
    from pydantic.json_schema import models_json_schema

    _, top = models_json_schema([(m, "validation") for m in SCHEMA_MODELS], title="perceptforge records")
    return top
