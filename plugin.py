"""The one import surface for extensions: what an author of a benchmark family, a BLINK-style task builder or
an MVP category's package needs, from one module (``from perceptforge.plugin import ...``). The names keep
their homes (ARCHITECTURE.md's folders); nothing inside perceptforge imports this module, so it may sit above
every folder. ``examples/perceptforge-example`` uses each of them.

A family (entry-point group ``perceptforge.families``):
    ``Family`` (or ``BlinkShapedFamily``, whose items BLINK's report, export, verification and scorer serve),
    ``RunRequest``, ``RunPlan``, ``StagesResult``, ``plan_inputs``, ``ExportOptions``, ``Exported``; its stages
    over ``StageRunner`` with ``Unit`` and ``unit_record`` (resume and quarantine per unit), ``ingest_stage``;
    its records ``PerceptionItem`` and ``Lineage``, written through ``RunDir``; ``unit_rng`` (a unit's own
    generator, so reruns are byte-identical), ``load_rgb``, ``load_prompt`` and ``register_prompt_root``.
A BLINK-style builder (entry-point group ``perceptforge.blink_builders``): a function
    ``(template: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built``
    (``ctx``: the unit's generator, which of the source's items this is, the profile's models),
    declared with ``@answers(...)``; ``NotApplicable`` when a source lacks what it needs; ``Mark``, ``marked``
    and ``LETTERS`` to draw visual prompts.
A task or a category is a YAML file in a folder (entry-point groups ``perceptforge.blink_tasks``,
    ``perceptforge.templates``): no Python at all.
Every input problem is an ``InputError(where, what)``: one line.

Each name is imported on first use (PEP 562): every CLI command loads the registered plug-ins, and a family that
imports ``Family`` alone should not pay for Prefect's task machinery (``ingest_stage``, ``StageRunner``: ~3.7 s
on the 2-core build machine) before a run needs it.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

HOMES = {
    "perceptforge.data.schema": ("LETTERS", "Lineage", "PerceptionItem"),
    "perceptforge.errors": ("InputError",),
    "perceptforge.flows.blink": ("BlinkShapedFamily",),
    "perceptforge.flows.family": (
        "ExportOptions",
        "Exported",
        "Family",
        "RunPlan",
        "RunRequest",
        "SourceCheck",
        "StagesResult",
        "plan_inputs",
    ),
    "perceptforge.logic.ids": ("unit_rng",),
    "perceptforge.logic.marks": ("Mark", "MarkStyle"),
    "perceptforge.logic.blink.build": ("BuildContext", "Built", "NotApplicable", "SourceView", "answers", "marked"),
    "perceptforge.logic.blink.templates": ("PerceptionTemplate",),
    "perceptforge.prompts.library": ("load_prompt", "register_prompt_root"),
    "perceptforge.store.images": ("load_rgb",),
    "perceptforge.store.rundir": ("RunDir",),
    "perceptforge.tasks.ingest": ("ingest_stage",),
    "perceptforge.tasks.runner": ("StageRunner", "Unit", "unit_record"),
}
HOME = {name: module for module, names in HOMES.items() for name in names}
__all__ = sorted(HOME)
# names an extension may still import from before a rename: they keep working, with a warning saying the new one
RENAMED = {"Draw": "BuildContext"}


def __getattr__(name: str) -> Any:
    if name in RENAMED:
        warnings.warn(f"perceptforge.plugin.{name} is now {RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return __getattr__(RENAMED[name])
    if name not in HOME:
        raise AttributeError(f"perceptforge.plugin has no {name!r}; it offers {', '.join(__all__)}")
    value = getattr(importlib.import_module(HOME[name]), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return __all__
