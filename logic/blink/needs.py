"""What a BLINK-style task may need, as data: one table, read by one check.

A template lists its ``needs`` by name. Each need says what a source must have, or which of the profile's
models stands in for it (and for which sources), why a source that lacks it cannot serve the task, which
other sources the unit takes along (its *companions*), and how many items one source can give. The flow,
the build stage and the template loader ask this module; nothing else names a need.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol


class Source(Protocol):
    """What the needs read of a source (``store.sources.SourceEntry`` has it)."""

    @property
    def regions(self) -> list[dict]: ...
    @property
    def caption(self) -> str: ...
    @property
    def synthetic(self) -> bool: ...
    @property
    def extras(self) -> dict[str, str]: ...
    @property
    def pose(self) -> dict | None: ...
    @property
    def style(self) -> str | None: ...
    @property
    def count_labels(self) -> list[str]: ...
    @property
    def complete_labels(self) -> list[str]: ...
    @property
    def scene(self) -> str | None: ...
    @property
    def reflectance(self) -> list[dict]: ...


# Which other sources a unit takes besides its own: every other view of its pose sequence (``sequence``),
# every other source that gives the same need (``same``: the builder picks its partners), every other photo of
# its scene (``scene``: the same ``scene`` name or pose sequence, secondary views included), or another picture
# (``other``: the next source in id order that is not a view of the same scene; every such source when the
# profile has an embedding to rank them).
Companions = Literal["sequence", "same", "scene", "other"]


def scene_of(e: Source) -> str | None:
    """The scene a photo shows: its ``scene`` name, else its pose sequence's (views of one sequence are one scene)."""
    return e.scene or ((e.pose or {}).get("sequence") if e.pose else None)


@dataclass(frozen=True)
class Need:
    name: str
    missing: str  # why a source cannot serve a task that needs this
    source: Callable[[Source], bool] | None = None  # what the source must have (None: nothing of its own serves)
    model: str | None = None  # the profile's model this need's builder uses (loaded and given only then)
    model_serves: Callable[[Source], bool] | None = None  # with that model, a source like this serves too
    missing_without_model: str | None = None  # the reason when the profile lacks the model
    min_sources: int = 1  # the run must have this many sources
    companions: Companions | None = None
    secondary_views: bool = False  # a secondary view of a pose sequence serves it
    most_items: Callable[[Source], int] | None = None  # the most items one source gives (one per judgement)


def _regions_with(key: str) -> Callable[[Source], bool]:
    return lambda e: any(r.get(key) for r in e.regions)


def _labelled(e: Source) -> bool:
    return any("bbox" in r and r.get("label") for r in e.regions)


def _complete(e: Source) -> bool:
    """A label the source declares completely boxed (``complete_labels``) has a box of a thing (not stuff)."""
    return any("bbox" in r and r.get("label") in e.complete_labels and r.get("isthing", 1) != 0 for r in e.regions)


COMPLETE_MISSING = "no label declared completely boxed (complete_labels) with a box of a thing"


def _always(e: Source) -> bool:
    return True


# In the order they are checked: a source lacking several gets the first one's reason.
TABLE: tuple[Need, ...] = (
    Need("image", "no image", _always),
    Need("generator", "the profile names no text-to-image generator", model="generator", model_serves=_always),
    Need("caption", "no caption", lambda e: bool(e.caption)),
    Need("photograph", "a rendered image, not a photograph", lambda e: not e.synthetic),
    Need("labelled_boxes", "no labelled boxes", _labelled),
    # a box one may count or point at only when no instance of its label goes unboxed (issue 28: a third wheel)
    Need("complete_labels", COMPLETE_MISSING, _complete),
    Need(
        "countable",
        COMPLETE_MISSING,
        _complete,
        model="detector",  # the profile's grounder, when it is an open-vocabulary detector
        model_serves=lambda e: bool(e.count_labels),
        missing_without_model=f"{COMPLETE_MISSING} (and the profile's grounder is no detector)",
    ),
    Need("second_image", "needs a second source image", _always, model="embedder", min_sources=2, companions="other"),
    # Visual Similarity against an unrelated photo is trivial (issue 28): the distractor shows the same scene
    Need(
        "related_image",
        "no scene shared with another photo (scene, or a pose sequence)",
        lambda e: scene_of(e) is not None,
        model="embedder",
        min_sources=2,
        companions="scene",
    ),
    Need(
        "disparity",
        "no disparity map",
        lambda e: "disparity" in e.extras,
        model="depth",
        model_serves=_always,
        missing_without_model="no disparity map (and the profile names no depth model)",
    ),
    Need("pose", "no camera pose", lambda e: bool(e.pose), companions="sequence", secondary_views=True),
    Need("style", "no art style label", lambda e: e.style is not None, companions="same"),
    Need("keypoints", "no keypoints", _regions_with("keypoints"), companions="same"),
    Need(
        "functional_keypoints",
        "no functional keypoints",
        _regions_with("functional_keypoints"),
        companions="same",
    ),
    Need(
        "reflectance",
        "no reflectance judgements",
        lambda e: bool(e.reflectance),
        most_items=lambda e: len(e.reflectance),
    ),
)
NEEDS: dict[str, Need] = {n.name: n for n in TABLE}
SECONDARY_VIEW = "a secondary view of a pose sequence (it serves Multi-view tasks only)"


def secondary_view(entry: Source) -> bool:
    """A view of a pose sequence other than its reference view: it serves Multi-view units, and the reference
    view's Multi-view and Visual Similarity units take it along."""
    pose = entry.pose
    return bool(pose and not pose["reference"])


def accompanies(entry: Source, kept: Iterable[Source]) -> bool:
    """Whether one of ``kept`` is another view of ``entry``'s pose sequence or a photo of its scene: the companions
    Multi-view (``sequence``) and Visual Similarity (``scene``) units take."""
    sequence, scene = (entry.pose or {}).get("sequence"), scene_of(entry)
    return any(
        (sequence is not None and (k.pose or {}).get("sequence") == sequence)
        or (scene is not None and scene_of(k) == scene)
        for k in kept
    )


def check_needs(names: Iterable[str]) -> list[str]:
    """Problems with a template's ``needs``: an unknown name, or two needs that take different companions."""
    names = list(names)
    problems = [f"unknown need {n!r}; known: {', '.join(NEEDS)}" for n in names if n not in NEEDS]
    taking = sorted({n for n in names if n in NEEDS and NEEDS[n].companions})
    if len({NEEDS[n].companions for n in taking}) > 1:
        problems.append(f"needs {taking} each take other companions; a task may name one kind")
    return problems


def needs_named(names: Iterable[str]) -> list[Need]:
    """The template's needs, in the table's order."""
    wanted = set(names)
    return [n for n in TABLE if n.name in wanted]


def source_gives(entry: Source, need: str) -> bool:
    """Whether the source itself has what ``need`` asks (no model standing in)."""
    check = NEEDS[need].source
    return check is not None and check(entry)


def unmet(names: Iterable[str], entry: Source, n_sources: int, models: Collection[str] = ()) -> str | None:
    """Why ``entry`` cannot serve a task needing ``names`` in a run of ``n_sources`` sources whose profile
    has ``models`` (names: ``embedder``, ``depth``, ``generator``, ``detector``); None: it can."""
    needs = needs_named(names)
    for need in needs:
        has_model = need.model is not None and need.model in models
        served = (need.source is not None and need.source(entry)) or (
            has_model and need.model_serves is not None and need.model_serves(entry)
        )
        if not served:
            return need.missing if has_model or need.model is None else need.missing_without_model or need.missing
        if n_sources < need.min_sources:
            return need.missing
    if secondary_view(entry) and not any(n.secondary_views for n in needs):
        return SECONDARY_VIEW
    return None


def companions(
    names: Iterable[str], sid: str, entries: Mapping[str, Source], models: Collection[str] = ()
) -> list[str]:
    """The ids of the other sources a unit of source ``sid`` takes, in the order the builder sees them. For a
    need of kind ``other``, the next picture; every other picture when the profile has the need's model (an
    embedding ranks them)."""
    kinds = [n for n in needs_named(names) if n.companions]
    if not kinds:
        return []
    need, entry, ids = kinds[0], entries[sid], sorted(entries)
    if need.companions == "sequence":
        sequence = entry.pose["sequence"] if entry.pose else None
        return [k for k in ids if k != sid and (entries[k].pose or {}).get("sequence") == sequence]
    if need.companions == "same":
        return [k for k in ids if k != sid and source_gives(entries[k], need.name)]
    if need.companions == "scene":
        scene = scene_of(entry)
        return [k for k in ids if k != sid and scene is not None and scene_of(entries[k]) == scene]
    scene = (entry.pose or {}).get("sequence")
    later = ids[ids.index(sid) + 1 :] + ids[: ids.index(sid)]
    other = [
        k
        for k in later
        if (scene is None or (entries[k].pose or {}).get("sequence") != scene)
        and (entries[k].pose or {}).get("reference", True)
    ]
    return other if need.model in models else other[:1]


def items_per_source(names: Iterable[str], wanted: int, entry: Source) -> int:
    """How many items the source gives: ``wanted``, never more than a need allows (one per judgement)."""
    limits = [n.most_items(entry) for n in needs_named(names) if n.most_items is not None]
    return min([wanted, *limits])


def models_used(names: Iterable[str]) -> frozenset[str]:
    """The profile's models a task needing ``names`` is given (and which must load before its units run)."""
    return frozenset(n.model for n in needs_named(names) if n.model)
