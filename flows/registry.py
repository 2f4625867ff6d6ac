"""The benchmark families, by name: the built-in ones and those other packages register under the entry-point
group ``perceptforge.families`` (each entry point names a ``Family`` instance or class). Everything that
works on a run (the CLI's run, export, annotate, audit; the deployments) finds its family here, by the name
the run recorded in ``run.json``.

Registration instantiates and checks each plug-in (``flows/family.check_family``). One that cannot be loaded,
lacks a method every family implements, or takes a name already registered is *refused*: one line naming its
entry point and package and what is wrong, kept in ``Registered.refused``, while every other family works."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from perceptforge.errors import InputError, entry_point_place, failed_at
from perceptforge.flows.family import Family, IncompleteFamily, check_family

GROUP = "perceptforge.families"
BUILT_IN = (
    "perceptforge.flows.mvp",
    "perceptforge.flows.blink",
    "perceptforge.flows.codis",
    "perceptforge.flows.mme_realworld",
)


@dataclass(frozen=True)
class Refusal:
    """A plug-in family that was not registered: the name it asked for (its entry point's, when it could not be
    read) and the one-line error saying why."""

    name: str
    error: InputError


@dataclass(frozen=True)
class Registered:
    families: dict[str, Family] = field(default_factory=dict)
    refused: list[Refusal] = field(default_factory=list)


def load_family(ep: EntryPoint) -> Family | Refusal:
    """The entry point's family, made and checked, or its refusal naming the entry point and what is wrong."""
    place = entry_point_place(ep, GROUP)
    try:
        target = ep.load()
        fam = target() if isinstance(target, type) and issubclass(target, Family) else target
    except IncompleteFamily as exc:  # the plug-in's module made its FAMILY, or we made it from its class
        return Refusal(exc.family_name or ep.name, InputError(place, f"refused: {exc}"))
    except Exception as exc:  # a plug-in's fault must not stop the families that work: its one line instead
        why = f"refused: cannot be loaded: {type(exc).__name__}: {exc}{failed_at(exc)}"
        return Refusal(ep.name, InputError(place, why))
    if not isinstance(fam, Family):
        why = f"refused: {type(fam).__name__} is not a perceptforge Family (a subclass or an instance)"
        return Refusal(ep.name, InputError(place, why))
    problems = check_family(fam)
    if problems:
        what = f"refused: {type(fam).__module__}.{type(fam).__qualname__}: {'; '.join(problems)}"
        name = getattr(fam, "name", None)
        return Refusal(name if isinstance(name, str) else ep.name, InputError(place, what))
    return fam


@cache
def registered() -> Registered:
    """The built-in families and the plug-ins that pass their checks; the others, refused with why. A plug-in may
    not take a name already registered (a built-in's, or an earlier plug-in's)."""
    out = Registered()
    holder: dict[str, str] = {}
    for module in BUILT_IN:  # ours: a failing check is a fault of this repository, and its traceback says where
        fam = importlib.import_module(module).FAMILY
        problems = check_family(fam)
        if problems:
            raise InputError(module, "; ".join(problems))
        out.families[fam.name] = fam
        holder[fam.name] = module
    for ep in entry_points(group=GROUP):
        fam = load_family(ep)
        if isinstance(fam, Refusal):
            out.refused.append(fam)
            continue
        if fam.name in out.families:
            taken = InputError(
                entry_point_place(ep, GROUP), f"refused: family name {fam.name!r} is taken by {holder[fam.name]}"
            )
            out.refused.append(Refusal(fam.name, taken))
            continue
        out.families[fam.name] = fam
        holder[fam.name] = entry_point_place(ep, GROUP)
    return out


def families() -> dict[str, Family]:
    """name → family, every one registered."""
    return registered().families


def family(name: str) -> Family:
    found = registered()
    if name in found.families:
        return found.families[name]
    for refusal in found.refused:
        if refusal.name == name:
            raise InputError(refusal.error.where, refusal.error.what)
    raise InputError("family", f"unknown family {name!r}; known: {', '.join(found.families)}")


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
