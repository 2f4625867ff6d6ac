"""What an edit backend can render for a category, as ``Rendering`` records the idea stage draws from."""

from __future__ import annotations

from collections.abc import Callable

from perceptforge.data.schema import Rendering
from perceptforge.logic.templates import Template


def from_alternatives(template: Template, backend: str) -> list[Rendering]:
    """A text-driven model draws any value of the template's list (diffusion inpainting, instruction editing)."""
    return [
        Rendering(value=a.value, high=a.high, backend=backend, how="prompt", region=a.region)
        for a in template.writer.alternatives
    ]


def colours(template: Template, backend: str) -> list[Rendering]:
    """The template's values that are a colour of a region: what a recolour editor can render."""
    return [
        Rendering(value=a.value, high=a.high, backend=backend, how="colour", colour=a.colour, region=a.region)
        for a in template.writer.alternatives
        if a.colour
    ]


def photo_filters(template: Template, backend: str) -> list[Rendering]:
    """The template's values a whole-image photo filter renders (a sepia photograph, a pencil sketch)."""
    return [
        Rendering(value=a.value, high=a.high, backend=backend, how="filter", photo_filter=a.photo_filter)
        for a in template.writer.alternatives
        if a.photo_filter
    ]


def merge(offers: list[list[Rendering]]) -> list[Rendering]:
    """All backends' values, each value once: the first backend that offers it renders it."""
    seen: set[str] = set()
    out = []
    for offer in offers:
        for r in offer:
            if r.value.lower() not in seen:
                seen.add(r.value.lower())
                out.append(r)
    return out


def choices(
    offered: list[Rendering],
    old_value: str,
    old_high: str = "",
    confusable: Callable[[str], set[str]] | None = None,
) -> list[Rendering]:
    """The values a unit may get: every offered one but the natural image's own, and, where the source says what
    its own value means at the high level (``<attribute>_high``), none that means the same (a black-and-white
    photo already looks historical: a sepia filter changes nothing there), and none a careful annotator could
    also call by the photo's own value once rendered (``confusable``: the template's ``Template.confusable``; a
    pencil sketch of a black-and-white photo keeps its grey photographic detail, so "a black-and-white photograph",
    the natural image's answer among the options, would be right too)."""
    old, high = old_value.strip().lower(), old_high.strip().lower()
    return [
        r
        for r in offered
        if r.value.strip().lower() != old
        and not (high and r.high.strip().lower() == high)
        and not (confusable and old in confusable(r.value))
    ]


def apart(tid: str, offers: dict[str, list[Rendering]], found: dict[str, Template]) -> list[Rendering]:
    """The values template ``tid`` may draw: its ``offers`` less those of another template that makes the same
    change (edit kind and attribute: B1's and S1's new background) and is offered fewer (ties: the first id).
    Both drawing one donor for a source make one image twice, and the second is quarantined as a near-duplicate;
    the narrower category keeps its values (B1's one donor, the launch pad), the wider one takes them only where
    it has nothing else."""
    mine, template = offers[tid], found[tid]
    taken: set[str] = set()
    for oid, theirs in offers.items():
        other = found.get(oid)
        same = other is not None and (other.edit_kind, other.attribute) == (template.edit_kind, template.attribute)
        if oid != tid and same and (len(theirs), oid) < (len(mine), tid):
            taken |= {_drawn(r) for r in theirs}
    return [r for r in mine if _drawn(r) not in taken] or mine


def _drawn(r: Rendering) -> str:
    """What makes two renderings one image: the donor pasted, else the value."""
    return r.donor or r.value.strip().lower()
