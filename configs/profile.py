"""Typed profiles: which backend serves each stage, with its settings.

A profile is a YAML file validated once at load. Unknown keys and bad values fail with one line that
names the file and the dotted key. Secrets never live in a profile: an endpoint names the environment
variable that holds its key (``api_key_env``), read only when a client is built.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from perceptforge.backends import registry
from perceptforge.backends.chat import EndpointSettings
from perceptforge.backends.devices import resolve_device
from perceptforge.backends.registry import BackendSettings, Runtime
from perceptforge.errors import InputError, describe_validation_error


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gates(Section):
    """Quality gates applied before annotators see a pair."""

    min_inside_change: float = Field(
        12.0, ge=0, description="mean absolute pixel change (0-255) inside the edit region"
    )
    max_outside_change: float = Field(6.0, ge=0, description="mean absolute pixel change outside the edit region")
    min_phash_distance: int = Field(4, ge=0, le=64, description="pairs closer than this (Hamming) are near-duplicates")


class Runner(Section):
    kind: Literal["threads", "dask"] = "threads"
    max_workers: int = Field(2, ge=1)
    dask_address: str | None = None


class Profile(Section):
    """A run's profile. The backend sections are typed here by their common base; ``profile_model()``
    narrows each to the union of the settings models registered for its role."""

    name: str
    description: str = ""
    device: Literal["cpu", "cuda", "auto"] = "cpu"
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"
    release_models_between_stages: bool = Field(False, description="free each stage's models when the stage ends")
    seed: int = Field(0, description="the run's seed when the command line gives none")
    grounder: BackendSettings
    segmenter: BackendSettings
    inpainter: BackendSettings
    editor: BackendSettings | None = Field(None, description="None: direct-alteration categories are skipped")
    llm: BackendSettings
    gates: Gates = Gates()
    runner: Runner = Runner()

    def backend_names(self) -> dict[str, str]:
        return {
            "grounder": self.grounder.backend,
            "segmenter": self.segmenter.backend,
            "inpainter": self.inpainter.backend,
            "editor": self.editor.backend if self.editor else "none",
            "llm": self.llm.backend,
        }

    def runtime(self) -> Runtime:
        """The device every backend of this profile runs on (``auto`` resolved, CPU fallback warned once)."""
        return Runtime(device=resolve_device(self.device), dtype=self.dtype)

    def build(self, role: str, runtime: Runtime | None = None) -> Any:
        """The backend serving ``role`` (None for an absent optional role), built but not loaded."""
        settings = getattr(self, role)
        return None if settings is None else registry.build(role, settings, runtime or self.runtime())

    def thread_workers(self) -> int:
        """Threads for the threads runner: enough for every endpoint's allowed requests in flight (each
        client enforces its own limit); model stages take the device's lock, so extra threads cost no memory."""
        endpoints = [s.concurrency for s in (self.grounder, self.llm) if isinstance(s, EndpointSettings)]  # type: ignore[attr-defined]
        return max([self.runner.max_workers, *endpoints])


def _role_type(role: str) -> Any:
    models = tuple(registry.settings_models(role))
    if len(models) == 1:
        return models[0]
    return Annotated[Union[models], Field(discriminator="backend")]


def profile_model() -> type[Profile]:
    """``Profile`` with each backend section validated against the backends registered for its role."""
    fields: dict[str, Any] = {role: (_role_type(role), ...) for role in registry.ROLES if role != "editor"}
    fields["editor"] = (
        Optional[_role_type("editor")],
        Field(None, description="None: direct-alteration categories are skipped"),
    )
    return create_model("Profile", __base__=Profile, **fields)


BUNDLED = ("local", "gpu")


def resolve_profile_path(name_or_path: str | os.PathLike) -> Path:
    """A bundled profile name (``local``) or a path to a YAML file."""
    text = str(name_or_path)
    if text in BUNDLED:
        return Path(str(resources.files("perceptforge.configs").joinpath(f"{text}.yaml")))
    return Path(text)


def load_profile(name_or_path: str | os.PathLike) -> Profile:
    path = resolve_profile_path(name_or_path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(str(path), f"profile not found (bundled profiles: {', '.join(BUNDLED)})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise InputError(where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(raw, dict):
        raise InputError(str(path), "a profile is a YAML mapping of settings")
    try:
        return profile_model().model_validate(raw)
    except ValidationError as exc:
        raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
