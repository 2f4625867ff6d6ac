"""What one MVP category needs of a source, checked before any stage: the attribute its questions ask about,
the region its edit changes (a face, the held object, the ``hair`` a colour value names), and a value the
profile can render that is not the photo's own. The flow skips a unit that lacks one, with the reason, and
``perceptforge sources check`` prints the same reasons for every source and category; it also asks the mask stage's
own refusal of a region on the photo (``refusal``: a black-and-white photo, hair as pale as the skin), which the run
meets later, as a quarantine with the same words."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from perceptforge.data.schema import Grounding, Rendering
from perceptforge.logic import context, renderings
from perceptforge.logic.edit_region import target_box
from perceptforge.logic.templates import Template


def region_labels(grounding: Grounding) -> set[str]:
    return {r.label.lower() for r in grounding.regions}


def servable(choices: Sequence[Rendering], grounding: Grounding) -> list[Rendering]:
    """The values a source can be given: those that name a region (a hair colour) only where that region is
    annotated."""
    labels = region_labels(grounding)
    return [r for r in choices if r.region is None or r.region.lower() in labels]


def unmet(
    template: Template,
    grounding: Grounding,
    offered: Sequence[Rendering],
    refusal: Callable[[str, str], str | None] | None = None,
) -> str | None:
    """Why the source ``grounding`` describes cannot give ``template`` an item with the values ``offered`` (the
    profile's edit backends'), as one short phrase; None: it can. ``refusal`` (old value, region → why the photo
    itself cannot give that region, or None) is the mask stage's verdict on the photo's pixels: where it refuses
    every value left, that is the reason, in the words the run's quarantine would use."""
    try:
        old = context.original_value(template, grounding)
    except ValueError:
        value = grounding.attributes.get(template.attribute, "").strip()
        return f"'{template.attribute}' is {value!r}" if value else f"no '{template.attribute}' attribute"
    choices = renderings.choices(list(offered), old, confusable=template.confusable)
    if not choices:
        return f"the only value the profile can render is the photo's own ({old})"
    usable = servable(choices, grounding)
    if not usable:
        needed = sorted({r.region for r in choices if r.region})
        return " or ".join(f"no '{name}' region" for name in needed)
    try:
        target_box(template, grounding, old, usable[0].region)
    except ValueError as exc:
        return str(exc).split(": ", 1)[-1]
    if refusal is None:
        return None
    refused = {name: refusal(old, name) for name in sorted({r.region for r in usable if r.region})}
    if all(r.region and refused[r.region] for r in usable):
        return next(why for why in refused.values() if why)
    return None
