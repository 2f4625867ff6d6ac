"""The benchmark families, by name: the built-in ones and those other packages register under the entry-point
group ``perceptforge.families`` (each entry point names a ``Family`` instance or class). Everything that
works on a run (the CLI's run, export, annotate, audit; the deployments) finds its family here, by the name
the run recorded in ``run.json``."""

from __future__ import annotations

import json
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.flows.family import Family

BUILT_IN = (
    "perceptforge.flows.mvp",
    "perceptforge.flows.blink",
    "perceptforge.flows.codis",
    "perceptforge.flows.mme_realworld",
)


@cache
def families() -> dict[str, Family]:
    """name → family; a plug-in may not take a built-in family's name."""
    import importlib

    found: dict[str, Family] = {}
    for module in BUILT_IN:
        fam = importlib.import_module(module).FAMILY
        found[fam.name] = fam
    for ep in entry_points(group="perceptforge.families"):
        target = ep.load()
        fam = target() if isinstance(target, type) else target
        if not isinstance(fam, Family):
            raise InputError(f"entry point {ep.name} = {ep.value}", "is not a perceptforge Family")
        if fam.name in found:
            raise InputError(f"entry point {ep.name} = {ep.value}", f"family {fam.name!r} is already registered")
        found[fam.name] = fam
    return found


def family(name: str) -> Family:
    known = families()
    if name not in known:
        raise InputError("family", f"unknown family {name!r}; known: {', '.join(known)}")
    return known[name]


def family_of_run(run_dir: Path) -> Family:
    """The family that made the run directory (``run.json``'s flow)."""
    marker = Path(run_dir) / "run.json"
    if not marker.is_file():
        raise InputError(str(run_dir), "no run.json: is this a run directory?")
    try:
        name = json.loads(marker.read_text()).get("flow")
    except json.JSONDecodeError as exc:
        raise InputError(str(marker), f"not JSON: {exc.msg} (line {exc.lineno})") from None
    return family(str(name))
