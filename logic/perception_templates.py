"""BLINK-style task templates: one YAML file per task, found by discovery.

A template declares what its sources must give (``needs``, checked against ``logic/perception_needs``), which
builder draws the answer and its distractors (``builder``: a name ``logic/perception_build.builders`` knows),
the question's prompt file, its number of choices and random-choice accuracy, and the style of its visual
prompts. Nothing else names a task: the flow reads what the template declares.

Where task folders come from, in order (a later one may not reuse an id), as for MVP categories:
1. the bundled folder ``flows/blink_templates/``;
2. the ``folders`` a caller names;
3. folders named in ``PERCEPTFORGE_BLINK_TASKS`` (``os.pathsep``-separated);
4. the ``perceptforge.blink_tasks`` entry-point group (each entry point names a folder or a package).

A task folder may carry its prompts beside its templates, ``<folder>/prompts/<stage>/<name>.vN.txt``; the
loader adds that folder to the prompt library's roots before it checks the templates' prompts.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from perceptforge.errors import InputError, PerceptforgeError, describe_validation_error
from perceptforge.fileio import read_yaml
from perceptforge.logic.perception_needs import check_needs
from perceptforge.prompts.library import load_prompt, register_prompt_root

ENV = "PERCEPTFORGE_BLINK_TASKS"
ENTRY_POINTS = "perceptforge.blink_tasks"


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
    builder: str = Field(description="the builder's name: a built-in of logic/perception_build or an entry point")
    needs: list[str] = Field(["image"], description="names from logic/perception_needs.TABLE")
    prompt: str = Field(description="prompt file id of the question, e.g. 'blink/jigsaw'")
    choices: int = Field(ge=2, le=5)
    random_choice: float = Field(gt=0, le=100, description="% a random answer gets right")
    marks: MarkSettings = MarkSettings()
    params: dict[str, float | int | str | list[float]] = {}

    @field_validator("needs")
    @classmethod
    def _known_needs(cls, needs: list[str]) -> list[str]:
        problems = check_needs(needs)
        if problems:
            raise ValueError("; ".join(problems))
        return needs

    @field_validator("builder")
    @classmethod
    def _known_builder(cls, name: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("builders")
        if known is None:
            from perceptforge.logic.perception_build import builders  # it imports this module

            known = builders()
        if name not in known:
            raise ValueError(f"unknown builder {name!r}; known: {', '.join(sorted(known))}")
        return name

    @model_validator(mode="after")
    def _consistent(self) -> PerceptionTemplate:
        if abs(self.random_choice - 100 / self.choices) > 0.01:
            raise ValueError(f"random_choice: {self.choices} choices give {100 / self.choices:.2f}%")
        return self


def bundled_folder() -> Path:
    return Path(str(resources.files("perceptforge.flows").joinpath("blink_templates")))


def task_dirs(folders: Sequence[str | Path] = ()) -> list[Path]:
    """Every task folder, in discovery order, each once."""
    dirs = [bundled_folder(), *map(Path, folders)]
    dirs += [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    for ep in entry_points(group=ENTRY_POINTS):
        target = ep.load()
        dirs.append(Path(target if isinstance(target, (str, os.PathLike)) else Path(target.__file__).parent))
    unique: dict[Path, Path] = {}
    for folder in dirs:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


def load_perception_templates(folders: Sequence[str | Path] = ()) -> dict[str, PerceptionTemplate]:
    """Every task template by id, from every task folder; each problem is one line naming the file."""
    from perceptforge.logic.perception_build import builders  # it imports this module

    known = builders()
    templates: dict[str, PerceptionTemplate] = {}
    where: dict[str, Path] = {}
    for folder in task_dirs(folders):
        if not folder.is_dir():
            raise InputError(str(folder), "BLINK task folder not found")
        if (folder / "prompts").is_dir():
            register_prompt_root(folder / "prompts")
        for path in sorted(folder.glob("*.yaml")):
            template = load_template(path, known)
            if template.id in templates:
                raise InputError(str(path), f"template id {template.id!r} is already defined in {where[template.id]}")
            templates[template.id], where[template.id] = template, path
    return templates


def load_template(path: Path, builders: Collection[str] | None = None) -> PerceptionTemplate:
    """One template file, its prompts checked (an unknown prompt file is an error now, not mid-run)."""
    raw = read_yaml(path)  # strict: a key given twice, bytes that are not UTF-8 are one line naming the line
    try:
        context = {"builders": builders} if builders is not None else None
        template = PerceptionTemplate.model_validate(raw, context=context)
    except ValidationError as exc:
        raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
    prompts = [template.prompt]
    if "generation_prompt" in template.params:
        prompts.append(str(template.params["generation_prompt"]))
    for prompt_id in prompts:
        try:
            load_prompt(prompt_id)
        except PerceptforgeError as exc:
            raise InputError(str(path), str(exc)) from None
    return template
