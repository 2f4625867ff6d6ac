"""Backends as plug-ins: (role, name) → the backend's settings model and its class.

A backend module registers itself with :func:`register`; the built-in modules are imported on first
use, and so is every module named in the ``perceptforge.backends`` entry-point group, so a backend can
live in another package and be selected from a profile by its name alone::

    # my_package/fancy.py, listed in my_package's pyproject.toml:
    #   [project.entry-points."perceptforge.backends"]
    #   fancy = "my_package.fancy"
    class FancySettings(BackendSettings):
        backend: Literal["fancy"]

    @register("segmenter", "fancy", FancySettings)
    class FancySegmenter:
        @classmethod
        def from_settings(cls, settings: FancySettings, runtime: Runtime) -> "FancySegmenter": ...

The profile's per-role unions are built from what is registered here (``configs/profile.py``).
"""

from __future__ import annotations

import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from perceptforge.errors import PerceptforgeError

ROLES = ("grounder", "segmenter", "inpainter", "editor", "llm", "depth", "generator", "embedder")
OPTIONAL_ROLES = ("editor", "depth", "generator", "embedder")  # a profile may leave these out (None)
ENTRY_POINT_GROUP = "perceptforge.backends"
BUILTIN_MODULES = (
    "perceptforge.backends.grounders",
    "perceptforge.backends.segmenters",
    "perceptforge.backends.selfie",
    "perceptforge.backends.sam",
    "perceptforge.backends.inpainters",
    "perceptforge.backends.recolour",
    "perceptforge.backends.editors",
    "perceptforge.backends.filters",
    "perceptforge.backends.writers",
    "perceptforge.backends.depth",
    "perceptforge.backends.text_to_image",
    "perceptforge.backends.embeddings",
)


class BackendSettings(BaseModel):
    """A backend's settings: a profile section, with ``backend`` naming the registered backend."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: str


@dataclass(frozen=True)
class Runtime:
    """What every backend gets beside its own settings: the resolved device, the dtype name, where it may
    keep what it computed for reuse by later units and resumed runs (a run's ``cache/``; None: memory only), and
    the intra-op threads of a model on the CPU (its pixels depend on them)."""

    device: str = "cpu"
    dtype: str = "float32"
    cache_dir: Path | None = None
    cpu_threads: int = 1


@dataclass(frozen=True)
class Registered:
    role: str
    name: str
    settings: type[BackendSettings]
    cls: Any  # has ``from_settings(settings, runtime)``


_REGISTRY: dict[str, dict[str, Registered]] = {role: {} for role in ROLES}
_LOADED = False
_LOCK = threading.RLock()
T = TypeVar("T")


def register(role: str, name: str, settings: type[BackendSettings]) -> Callable[[T], T]:
    """Class decorator: the class serves ``role`` under ``name`` and is built from ``settings``."""
    if role not in ROLES:
        raise ValueError(f"unknown backend role {role!r}: one of {', '.join(ROLES)}")
    tag = typing.get_args(settings.model_fields["backend"].annotation)
    if tag != (name,):
        raise ValueError(f"{settings.__name__}.backend must be Literal[{name!r}], got {tag}")

    def decorate(cls: T) -> T:
        if not hasattr(cls, "from_settings"):
            raise TypeError(f"backend {name!r}: {cls!r} needs a from_settings(settings, runtime) classmethod")
        with _LOCK:
            known = _REGISTRY[role].get(name)
            if known and _qualified(known.cls) != _qualified(cls):
                raise ValueError(f"{role} backend {name!r} is already registered by {known.cls!r}")
            _REGISTRY[role][name] = Registered(role, name, settings, cls)
        return cls

    return decorate


def _qualified(cls: Any) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def load_all() -> None:
    """Import the built-in backend modules and every entry point of the group (once per process)."""
    global _LOADED
    with _LOCK:
        if _LOADED:
            return
        for module in BUILTIN_MODULES:
            import_module(module)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as exc:
                raise PerceptforgeError(f"backend plug-in {ep.name} ({ep.value}) failed to import: {exc}") from exc
        _LOADED = True


def registered(role: str) -> dict[str, Registered]:
    load_all()
    return dict(sorted(_REGISTRY[role].items()))


def settings_models(role: str) -> list[type[BackendSettings]]:
    return [r.settings for r in registered(role).values()]


def build(role: str, settings: BackendSettings, runtime: Runtime) -> Any:
    """An unloaded backend for ``settings``; nothing heavy happens until its ``load()``."""
    found = registered(role).get(settings.backend)
    if found is None:
        raise PerceptforgeError(f"unknown {role} backend {settings.backend!r}: one of {', '.join(registered(role))}")
    return found.cls.from_settings(settings, runtime)
