"""The benchmarks the scorer knows: name → module with ``score(data, predictions, protocol, …)``.

An outside package can add one through the ``perceptforge.benchmarks`` entry-point group.
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
    modules = available()
    if name not in modules:
        raise PerceptforgeError(f"unknown benchmark {name!r}: choose one of {', '.join(sorted(modules))}")
    return import_module(modules[name])
