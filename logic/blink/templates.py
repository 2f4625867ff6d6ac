"""BLINK-style task templates: one YAML file per task, found by discovery.

A template declares what its sources must give (``needs``, checked against ``logic/blink/needs``), which
builder draws the answer and its distractors (``builder``: a name among the builders the caller passes, which
``logic/blink/build.builders`` gathers), the question's prompt file, its number of choices and the style of
its visual prompts. Its random-choice accuracy follows from its choices. ``include: <task id>`` takes every field
of another task but its ``id`` and ``version`` (``marks`` and ``params`` merged key by key), so a variant writes
only what it changes. Nothing else names a task: the flow reads what the template declares.

Where task folders come from, in order (a later one may not reuse an id), as for MVP categories:
1. the bundled folder ``flows/blink_templates/``;
2. the ``folders`` a caller names;
3. folders named in ``PERCEPTFORGE_BLINK_TASKS`` (``os.pathsep``-separated);
4. the ``perceptforge.blink_tasks`` entry-point group (each entry point names a folder or a package).

A task folder may carry its prompts beside its templates, ``<folder>/prompts/<stage>/<name>.vN.txt``; the
loader adds that folder to the prompt library's roots before it checks the templates' prompts.

A broken file is one line naming it (``TaskFiles.broken``): a run that asks for its task stops on that line, any
other run warns and goes on (``flows/blink.plan_blink``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from perceptforge.errors import InputError, PerceptforgeError, describe_validation_error, load_entry_point
from perceptforge.fileio import read_yaml
from perceptforge.logic.blink.needs import check_needs
from perceptforge.prompts.library import load_prompt, register_prompt_root

ENV = "PERCEPTFORGE_BLINK_TASKS"
ENTRY_POINTS = "perceptforge.blink_tasks"
BUILDER_ENTRY_POINTS = "perceptforge.blink_builders"
NOT_INHERITED = ("id", "version")  # a variant is a task of its own
MERGED = ("marks", "params")  # a variant changes one mark setting or parameter without restating the rest


@dataclass(frozen=True)
class Answer:
    """What a builder's answer is (``means``: "the point closer to the camera") and the words of a question that
    asks for something else (``opposite``: "farther"), which a task's question may not use: its every answer
    would be wrong."""

    means: str
    opposite: tuple[str, ...] = ()

    def contradicted_by(self, question: str) -> str | None:
        """The first ``opposite`` word ``question`` uses (whole words, any case), or None."""
        for word in self.opposite:
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", question, re.IGNORECASE):
                return word
        return None


def answer_of(builder: Callable[..., Any]) -> Answer | None:
    """What a builder declared its answer means (``logic/blink/build.answers``), if it did."""
    declared = getattr(builder, "answer", None)
    return declared if isinstance(declared, Answer) else None


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
    builder: str = Field(description="the builder's name: a built-in of logic/blink/build or an entry point")
    needs: list[str] = Field(["image"], description="names from logic/blink/needs.TABLE")
    prompt: str = Field(description="prompt file id of the question, e.g. 'blink/jigsaw'")
    choices: int = Field(ge=2, le=5)
    # derived from choices; a file that still writes it must agree (it could only ever be wrong)
    random_choice: float = Field(0.0, description="% a random answer gets right: 100 / choices, to 0.01")
    marks: MarkSettings = MarkSettings()
    params: dict[str, float | int | str | list[float]] = {}

    @field_validator("needs")
    @classmethod
    def _known_needs(cls, needs: list[str]) -> list[str]:
        problems = check_needs(needs)
        if problems:
            raise ValueError("; ".join(problems))
        return needs

    @model_validator(mode="before")
    @classmethod
    def _derived_random_choice(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "random_choice" not in raw and isinstance(raw.get("choices"), int):
            return {**raw, "random_choice": round(100 / raw["choices"], 2)}
        return raw

    @field_validator("random_choice")
    @classmethod
    def _consistent(cls, value: float, info: ValidationInfo) -> float:
        choices = info.data.get("choices")
        if isinstance(choices, int) and abs(value - 100 / choices) > 0.01:
            raise ValueError(
                f"{choices} choices give {100 / choices:.2f}% (leave the field out: it is derived from choices)"
            )
        return value


def bundled_folder() -> Path:
    return Path(str(resources.files("perceptforge.flows").joinpath("blink_templates")))


def task_dirs(folders: Sequence[str | Path] = (), unloadable: list[InputError] | None = None) -> list[Path]:
    """Every task folder, in discovery order, each once; an entry point that fails to load is left out, its one
    line added to ``unloadable`` (raised when no list is given)."""
    dirs = [bundled_folder(), *map(Path, folders)]
    dirs += [Path(p) for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    for ep in entry_points(group=ENTRY_POINTS):
        try:
            target = load_entry_point(ep, ENTRY_POINTS)
        except InputError as exc:  # its tasks are unknown: a run that asks for one stops on it, others warn
            if unloadable is None:
                raise
            unloadable.append(exc)
            continue
        dirs.append(Path(target if isinstance(target, (str, os.PathLike)) else Path(target.__file__).parent))
    unique: dict[Path, Path] = {}
    for folder in dirs:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


@dataclass
class TaskFiles:
    """Every task found: the templates that load, each broken task's one line by its id, and the lines of the
    files no task id can be taken from (not YAML, no id, an id already defined; a task folder's entry point that
    fails to load)."""

    templates: dict[str, PerceptionTemplate] = field(default_factory=dict)
    broken: dict[str, InputError] = field(default_factory=dict)
    unreadable: list[InputError] = field(default_factory=list)

    def problems(self) -> list[InputError]:
        return [*self.unreadable, *self.broken.values()]


def _read_raw(path: Path) -> dict:
    raw = read_yaml(path)  # strict: a key given twice, bytes that are not UTF-8 are one line naming the line
    if not isinstance(raw, dict):
        raise InputError(str(path), f"not a mapping of fields: {type(raw).__name__}")
    return raw


def _merged(base: dict, own: dict) -> dict:
    out = {k: v for k, v in base.items() if k not in NOT_INHERITED}
    for key, value in own.items():
        if key in MERGED and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def read_tasks(folders: Sequence[str | Path] = (), *, builders: Mapping[str, Callable[..., Any]]) -> TaskFiles:
    """Every task template from every task folder; a broken file is kept as its one line, not raised.
    ``builders``: name → builder (``logic/blink/build.builders()``), which a template's ``builder`` must name
    and whose declared answer its question may not contradict."""
    found = TaskFiles()
    raws: dict[str, tuple[Path, dict]] = {}
    for folder in task_dirs(folders, found.unreadable):
        if not folder.is_dir():
            raise InputError(str(folder), "BLINK task folder not found")
        if (folder / "prompts").is_dir():
            register_prompt_root(folder / "prompts")
        for path in sorted(folder.glob("*.yaml")):
            try:
                raw = _read_raw(path)
            except InputError as exc:
                found.unreadable.append(exc)
                continue
            tid = raw.get("id")
            if not isinstance(tid, str):
                found.unreadable.append(InputError(str(path), "id: Field required (a task id such as 'my_task')"))
            elif tid in raws:
                where = raws[tid][0]
                found.unreadable.append(InputError(str(path), f"template id {tid!r} is already defined in {where}"))
            else:
                raws[tid] = (path, raw)
    for tid, (path, _) in raws.items():
        try:
            found.templates[tid] = check_template(path, _resolved_raw(tid, raws, ()), builders)
        except InputError as exc:
            found.broken[tid] = exc
    for tid in list(found.templates):  # a variant of a broken task is broken with it
        base = raws[tid][1].get("include")
        while base in raws and base not in found.broken:
            base = raws[base][1].get("include")
        if base in found.broken:
            del found.templates[tid]
            found.broken[tid] = InputError(str(raws[tid][0]), f"include: task {base!r} is broken (its line says why)")
    named: dict[str, str] = {}
    for tid in [t for t in raws if t in found.templates]:  # in the order read: a built-in task keeps its name
        # two task ids under one BLINK task name would be scored and exported as one task
        name = found.templates[tid].task
        if name in named:
            del found.templates[tid]
            found.broken[tid] = InputError(
                str(raws[tid][0]), f"task: {name!r} is already the task name of {raws[named[name]][0]}; give it its own"
            )
        else:
            named[name] = tid
    return found


def _resolved_raw(tid: str, raws: Mapping[str, tuple[Path, dict]], chain: tuple[str, ...]) -> dict:
    """``tid``'s fields with its includes resolved: the included task's, then its own over them."""
    path, raw = raws[tid]
    raw = dict(raw)
    base = raw.pop("include", None)
    if base is None:
        return raw
    if not isinstance(base, str) or base not in raws:
        raise InputError(str(path), f"include: unknown task {base!r}; known: {', '.join(sorted(raws))}")
    if base == tid or base in chain:
        raise InputError(str(path), f"include: {' → '.join([*chain, tid, base])} includes itself")
    return _merged(_resolved_raw(base, raws, (*chain, tid)), raw)


def check_template(path: Path, raw: dict, builders: Mapping[str, Callable[..., Any]]) -> PerceptionTemplate:
    """One template's fields, its builder and its prompts checked (an unknown prompt file is an error now, not
    mid-run), and its question checked against what its builder answers."""
    try:
        template = PerceptionTemplate.model_validate(raw)
    except ValidationError as exc:
        raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
    failed = getattr(builders.get(template.builder), "error", None)
    if isinstance(failed, InputError):  # its plug-in failed to load (``build.Unloadable``)
        raise InputError(str(path), f"builder {template.builder!r}: {failed}")
    if template.builder not in builders:
        raise InputError(
            str(path),
            f"builder: unknown builder {template.builder!r}; known: {', '.join(sorted(builders))} (a builder of "
            f"your own: a function (template, sources, ctx, style) -> Built under the {BUILDER_ENTRY_POINTS} "
            "entry-point group)",
        )
    prompts = [template.prompt]
    if "generation_prompt" in template.params:
        prompts.append(str(template.params["generation_prompt"]))
    for prompt_id in prompts:
        try:
            load_prompt(prompt_id)
        except PerceptforgeError as exc:
            raise InputError(str(path), str(exc)) from None
    answer = answer_of(builders[template.builder])
    if answer is not None:
        word = answer.contradicted_by(load_prompt(template.prompt).text)
        if word is not None:
            raise InputError(
                str(path),
                f"prompt {template.prompt!r} asks for {word!r}, but builder {template.builder!r} answers "
                f"{answer.means!r}: every answer would be wrong (ask for {answer.means}, or use a builder that "
                "answers what you ask)",
            )
    return template


def load_perception_templates(
    folders: Sequence[str | Path] = (), *, builders: Mapping[str, Callable[..., Any]]
) -> dict[str, PerceptionTemplate]:
    """Every task template by id; the first broken file raises its one line (``read_tasks`` keeps them all)."""
    found = read_tasks(folders, builders=builders)
    if found.problems():
        raise found.problems()[0]
    return found.templates
