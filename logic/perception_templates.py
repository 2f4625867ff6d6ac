"""BLINK-style task templates: one YAML file per task in ``flows/blink_templates/``, found by discovery.

A template declares what its sources must give (``needs``), which builder draws the answer and its
distractors (``builder``, a function of ``logic/perception_build``), the question's prompt file, its
number of choices and random-choice accuracy, and the style of its visual prompts. Nothing else names
a task: the flow reads what the template declares.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from perceptforge.errors import InputError, describe_validation_error
from perceptforge.prompts.library import load_prompt

BUILDERS = (
    "jigsaw",
    "object_localization",
    "counting",
    "visual_correspondence",
    "spatial_relation",
    "visual_similarity",
    "iq_test",
    "relative_depth",
    "multi_view",
    "forensic_detection",
    "art_style",
    "semantic_correspondence",
    "functional_correspondence",
    "relative_reflectance",
)
# What a source can give: an image, COCO-style labelled boxes, a second source image, a disparity map, a
# camera pose within a sequence of views of one scene, a caption, being a real photograph (not rendered), an
# art style label, keypoints, functional keypoints, reflectance judgements; and what the profile must give: a
# text-to-image generator.
NEEDS = (
    "image",
    "labelled_boxes",
    "second_image",
    "disparity",
    "pose",
    "caption",
    "photograph",
    "generator",
    "style",
    "keypoints",
    "functional_keypoints",
    "reflectance",
    "countable",
)


class MarkSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    shape: Literal["circle", "box"] = "circle"
    colour: tuple[int, int, int] = (255, 0, 0)
    radius: float = Field(10.0, gt=0, description="px at 1024 px image height (BLINK §4.3: 10)")
    line_width: float = Field(3.0, gt=0)


class PerceptionTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z_]+$")
    version: int = Field(ge=1)
    task: str = Field(pattern=r"^[A-Za-z_-]+$", description="BLINK's task name, as in its idx: val_<task>_<n>")
    builder: Literal[BUILDERS]  # type: ignore[valid-type]
    needs: list[Literal[NEEDS]] = ["image"]  # type: ignore[valid-type]
    prompt: str = Field(description="prompt file id of the question, e.g. 'blink/jigsaw'")
    choices: int = Field(ge=2, le=5)
    random_choice: float = Field(gt=0, le=100, description="% a random answer gets right")
    marks: MarkSettings = MarkSettings()
    params: dict[str, float | int | str | list[float]] = {}

    @model_validator(mode="after")
    def _consistent(self) -> PerceptionTemplate:
        if abs(self.random_choice - 100 / self.choices) > 0.01:
            raise ValueError(f"random_choice: {self.choices} choices give {100 / self.choices:.2f}%")
        return self


def bundled_folder() -> Path:
    return Path(str(resources.files("perceptforge.flows").joinpath("blink_templates")))


def load_perception_templates(folder: Path | None = None) -> dict[str, PerceptionTemplate]:
    """Every task template by id; each problem is one line naming the file."""
    templates: dict[str, PerceptionTemplate] = {}
    for path in sorted((folder or bundled_folder()).glob("*.yaml")):
        try:
            template = PerceptionTemplate.model_validate(yaml.safe_load(path.read_text()))
        except ValidationError as exc:
            raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
        except yaml.YAMLError as exc:
            raise InputError(str(path), f"not YAML: {str(exc).splitlines()[0]}") from None
        load_prompt(template.prompt)  # an unknown prompt file is an error now, not mid-run
        if "generation_prompt" in template.params:
            load_prompt(str(template.params["generation_prompt"]))
        if template.id in templates:
            raise InputError(str(path), f"template id {template.id!r} is used twice")
        templates[template.id] = template
    return templates
