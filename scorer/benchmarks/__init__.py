"""The benchmarks the scorer knows: name → one module that is the whole benchmark.

A benchmark module defines its readers, ``score(data, predictions, protocol, judge)`` (extraction rules,
metrics, tables) and, if models can be run over it, ``requests(data, images)`` with the paper's prompt
for ``perceptforge predict``. The CLI's help and ``predict`` come from here. An outside package adds one
module through the ``perceptforge.benchmarks`` entry-point group (name = the benchmark's CLI name).
"""

from __future__ import annotations

import traceback
from importlib import import_module
from importlib.metadata import entry_points
from types import ModuleType

from perceptforge.errors import InputError, PerceptforgeError

REGISTRY: dict[str, str] = {
    "mvp-bench": "perceptforge.scorer.benchmarks.mvp_bench",
    "blink": "perceptforge.scorer.benchmarks.blink",
    "codis": "perceptforge.scorer.benchmarks.codis",
    "mme-realworld": "perceptforge.scorer.benchmarks.mme_realworld",
    "perceptforge": "perceptforge.scorer.benchmarks.perceptforge",
}


GROUP = "perceptforge.benchmarks"


def available() -> dict[str, str]:
    found = dict(REGISTRY)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def get(name: str) -> ModuleType:
    if name in REGISTRY:  # a built-in wins over a plug-in of the same name: no need to list the plug-ins
        return import_module(REGISTRY[name])
    modules = available()
    if name not in modules:
        raise PerceptforgeError(f"unknown benchmark {name!r}: choose one of {', '.join(sorted(modules))}")
    return load_plugin(name, modules[name])


def load_plugin(name: str, value: str) -> ModuleType:
    """A plug-in benchmark's module; one that fails to import is one line naming its entry point and the error
    (the plug-in's own line that raised), so only the command that asked for it stops and no traceback shows."""
    try:
        return import_module(value.partition(":")[0])
    except Exception as exc:  # any fault of the plug-in's code while it loads
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
        at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        raise InputError(
            f"{GROUP} entry point {name} = {value}", f"cannot be imported: {type(exc).__name__}: {exc}{at}"
        ) from None


def choices() -> str:
    """The benchmark names as the CLI's help shows them."""
    return " | ".join(available())


def predictable() -> list[str]:
    """The benchmarks ``perceptforge predict`` can run a model over (their module has ``requests``); a plug-in
    that fails to import is left out (asking for it by name gives its line)."""
    names = []
    for name in available():
        try:
            module = get(name)
        except InputError:
            continue
        if hasattr(module, "requests"):
            names.append(name)
    return names
