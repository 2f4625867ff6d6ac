"""The benchmarks the scorer knows: name → one module that is the whole benchmark.

A benchmark module defines its readers, ``score(data, predictions, protocol, judge)`` (extraction rules,
metrics, tables) and, if models can be run over it, ``requests(data, images)`` with the paper's prompt
for ``perceptforge predict``. The CLI's help and ``predict`` come from here. An outside package adds one
module through the ``perceptforge.benchmarks`` entry-point group (name = the benchmark's CLI name).
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from types import ModuleType

from perceptforge.errors import PerceptforgeError

REGISTRY: dict[str, str] = {
    "mvp-bench": "perceptforge.scorer.benchmarks.mvp_bench",
    "blink": "perceptforge.scorer.benchmarks.blink",
    "codis": "perceptforge.scorer.benchmarks.codis",
    "mme-realworld": "perceptforge.scorer.benchmarks.mme_realworld",
    "perceptforge": "perceptforge.scorer.benchmarks.perceptforge",
}


def available() -> dict[str, str]:
    found = dict(REGISTRY)
    for ep in entry_points(group="perceptforge.benchmarks"):
        found.setdefault(ep.name, ep.value)
    return found


def get(name: str) -> ModuleType:
    if name in REGISTRY:  # a built-in wins over a plug-in of the same name: no need to list the plug-ins
        return import_module(REGISTRY[name])
    modules = available()
    if name not in modules:
        raise PerceptforgeError(f"unknown benchmark {name!r}: choose one of {', '.join(sorted(modules))}")
    return import_module(modules[name])


def choices() -> str:
    """The benchmark names as the CLI's help shows them."""
    return " | ".join(available())


def predictable() -> list[str]:
    """The benchmarks ``perceptforge predict`` can run a model over (their module has ``requests``)."""
    return [name for name in available() if hasattr(get(name), "requests")]
