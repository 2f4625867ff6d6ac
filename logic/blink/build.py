"""One BLINK-style item from its template, its sources and the unit's generator: the images (visual prompts
drawn in), the marks, the question's values, the choices and the answer. Builders are named by the
template (``builder:``): the built-ins below (``BUILDERS``) and the functions the ``perceptforge.blink_builders``
entry-point group names (``builders()``, gathered once per process), each ``(template, sources, ctx, style) ->
Built``. A builder takes what its template's ``needs`` promise and raises ``NotApplicable`` (the source lacks
something) or ``ValueError`` / ``MarkPlacementError`` (this draw cannot be made) otherwise. A builder whose answer
has a direction declares it (``@answers("the point closer to the camera", opposite=["farther"])``), and a task
whose question asks the opposite is refused when it loads (``logic/blink/templates.check_template``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import entry_points
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from perceptforge.data.schema import LETTERS
from perceptforge.errors import InputError, load_entry_point
from perceptforge.logic.blink import answers as bt
from perceptforge.logic.blink.templates import BUILDER_ENTRY_POINTS, Answer, PerceptionTemplate
from perceptforge.logic.marks import Mark, MarkPlacementError, MarkStyle, draw_marks

Box = tuple[float, float, float, float]
Point = tuple[float, float]


F = TypeVar("F", bound=Callable)


def answers(means: str, opposite: Sequence[str] = ()) -> Callable[[F], F]:
    """Declares what the decorated builder's answer is (``means``) and the words of a question asking for
    something else (``opposite``), which refuse a task whose question uses them."""

    def declare(builder: F) -> F:
        builder.answer = Answer(means, tuple(opposite))  # type: ignore[attr-defined]
        return builder

    return declare


class NotApplicable(ValueError):
    """The source lacks what the task needs (expected: the unit is skipped with the reason)."""


@dataclass(frozen=True)
class BuildContext:
    """What a builder draws with: the unit's generator (a task that uses nothing of its source's picture, the IQ
    Test, draws all of its puzzle from it), and the models the profile names."""

    rng: np.random.Generator
    index: int = 0  # which of the template's items_per_source this is (a source's k-th judgement)
    # a perceptual embedding (normalised vectors, one per image), when the profile names a CLIP model
    embed: Callable[[list[Image.Image]], list[list[float]]] | None = None
    embed_model: str = ""
    # an open-vocabulary detector: (image, plural noun) → boxes, when the profile's grounder is one
    detect: Callable[[Image.Image, str], list] | None = None
    detector_model: str = ""
    # a text-to-image model: (prompt, seeds, size) → one image per seed, when the profile names one
    generate: Callable[[str, list[int], tuple[int, int]], list[Image.Image]] | None = None
    generator_model: str = ""


@dataclass(frozen=True)
class SourceView:
    """What a builder sees of one source image."""

    id: str
    image: Image.Image
    boxes: tuple[tuple[str, Box, bool], ...] = ()  # (label, x0 y0 x1 y1, is a thing)
    disparity: np.ndarray | None = None  # per-pixel disparity (larger: nearer), when the source gives one
    yaw: float | None = None  # camera yaw in degrees (right positive), for a view of a pose sequence
    caption: str = ""
    nearness: np.ndarray | None = None  # a depth model's relative nearness (larger: nearer), without a disparity map
    depth_model: str = ""
    count_labels: tuple[str, ...] = ()  # labels to count with the profile's detector (no boxes needed)
    complete_labels: tuple[str, ...] = ()  # labels every instance of which is boxed (the source declares it)
    style: str | None = None  # a painting's art style
    keypoints: tuple[tuple[str, dict[str, Point]], ...] = ()  # (object label, {keypoint name: point})
    functional: tuple[tuple[str, str, dict[str, Point]], ...] = ()  # (object label, action, {part: point})
    reflectance: tuple[tuple[Point, Point, str], ...] = ()  # (a, b, darker: "a" | "b" | "equal")


@dataclass
class Built:
    images: list[Image.Image]
    choices: list[str]
    answer: int
    values: dict[str, str] = field(default_factory=dict)  # the question prompt's placeholders
    marks: list[dict] = field(default_factory=list)  # schema.Mark fields
    sources: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)  # role → model that decided the answer


def style_of(
    template: PerceptionTemplate, radius: float | None = None, colour: tuple[int, int, int] | None = None
) -> MarkStyle:
    m = template.marks
    return MarkStyle(shape=m.shape, colour=colour or m.colour, radius=radius or m.radius, line_width=m.line_width)


def marked(
    image: Image.Image, index: int, marks: list[Mark], style: MarkStyle, allow_overlap: bool = False
) -> tuple[Image.Image, list[dict]]:
    drawn, placed = draw_marks(image, marks, style, allow_overlap)
    records = [
        {
            "label": p.label,
            "image": index,
            "shape": p.shape,
            "at": list(p.centre if p.shape == "circle" else p.box or ()),
        }
        for p in placed
    ]
    return drawn, records


IRREGULAR = {"man": "men", "woman": "women", "person": "people", "child": "children", "mouse": "mice", "foot": "feet"}


def plural(label: str) -> str:
    """'cat' → 'cats', 'box' → 'boxes', 'man' → 'men', 'cup of coffee' → 'cups of coffee'."""
    head, sep, tail = label.partition(" of ")
    *before, last = head.split(" ")
    if last in IRREGULAR:
        last = IRREGULAR[last]
    elif not last.endswith("s"):
        last += "es" if last.endswith(("x", "ch", "sh")) else "s"
    return " ".join([*before, last]) + sep + tail


def things(source: SourceView) -> list[tuple[str, Box]]:
    """The boxes of countable, localizable objects (``thing``), not of stuff or parts (hair, a backdrop)."""
    return [(label, box) for label, box, thing in source.boxes if thing]


@answers("the image that fills the missing part", opposite=["does not fit", "doesn't fit"])
def jigsaw(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    rng = ctx.rng
    item = bt.jigsaw(sources[0].image, rng)
    return Built([item.reference, *item.options], ["the second image", "the third image"], item.answer)


def complete_things(source: SourceView) -> list[tuple[str, Box]]:
    """The boxes of things whose label the source declares completely boxed: only there does a box's count, or
    a box being the only one of its label, say anything about the photo."""
    complete = set(source.complete_labels)
    return [(label, box) for label, box in things(source) if label in complete]


@answers("the box that localizes the object better", opposite=["less accurately", "worse"])
def object_localization(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """BLINK §3.2: the labelled box and a Gaussian-noised distractor, drawn as boxes A and B. The object must be
    the only one of its label (declared completely boxed), its box neither tiny nor the whole image; the
    distractor's IoU with the labelled box lies in ``iou_band`` and the labelled box beats it by ``min_margin``
    of IoU even against a truth whose edges are ``box_tolerance`` off (the labelled box may be a little wrong);
    a distractor whose labels cannot both sit outside both boxes is drawn again."""
    rng = ctx.rng
    src = sources[0]
    w, h = src.image.size
    boxed = complete_things(src)
    counts = Counter(label for label, _ in boxed)
    least = float(t.params.get("min_box_fraction", 0.01))  # type: ignore[arg-type]
    usable = [
        (label, box)
        for label, box in boxed
        if counts[label] == 1 and (box[2] - box[0]) * (box[3] - box[1]) >= least * w * h and (box[2] - box[0]) < 0.9 * w
    ]
    if not usable:
        raise NotApplicable(
            "no completely boxed label (complete_labels) with exactly one box that is neither tiny nor the whole image"
        )
    label, box = usable[int(rng.integers(len(usable)))]
    band = t.params.get("iou_band", [0.15, 0.45])
    margin = float(t.params.get("min_margin", 0.3))  # type: ignore[arg-type]
    tolerance = float(t.params.get("box_tolerance", 0.1))  # type: ignore[arg-type]
    answer = int(rng.integers(2))
    band_pair = (float(band[0]), float(band[1]))  # type: ignore[index]
    for distractor in bt.localization_distractors(box, (w, h), rng, band_pair, 5000, margin, tolerance):
        boxes = [box, distractor] if answer == 0 else [distractor, box]
        try:
            image, marks = marked(
                src.image, 0, [Mark("A", box=boxes[0]), Mark("B", box=boxes[1])], style, allow_overlap=True
            )
        except MarkPlacementError:
            continue
        return Built([image], ["Box A", "Box B"], answer, {"object": label}, marks)
    raise ValueError(
        f"no distractor for the {label} with IoU in {band_pair}, a margin of {margin} (edges ±{tolerance:.0%}) and "
        "room for both labels outside both boxes"
    )


@answers("how many objects of the label there are")
def counting(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """How many of one label: from the boxes of a label the source declares completely boxed
    (``complete_labels``: a label with an unboxed instance would give a wrong count), or, when the profile's
    grounder is an open-vocabulary detector, from its boxes for the labels a source names in ``count_labels``.
    With a detector, a declared count is checked against it too; two boxes of one label that are one box twice
    (IoU above ``max_duplicate_iou``) are refused."""
    rng, src = ctx.rng, sources[0]
    boxed = complete_things(src)
    counts = Counter(label for label, _ in boxed)
    labels = sorted(set(counts) | (set(src.count_labels) if ctx.detect is not None else set()))
    if not labels:
        raise NotApplicable("no label declared completely boxed (complete_labels) to count")
    # a label of several boxes first: "how many" with one of each is the least telling question (BLINK's counts vary)
    several = [label for label in labels if counts[label] > 1]
    pool = several or labels
    label = pool[int(rng.integers(len(pool)))]
    same = [b for lab, b in boxed if lab == label]
    twice = float(t.params.get("max_duplicate_iou", 0.7))  # type: ignore[arg-type]
    for i, a in enumerate(same):
        for b in same[i + 1 :]:
            if bt.iou(a, b) > twice:
                raise ValueError(f"two boxes of {label!r} overlap by IoU {bt.iou(a, b):.2f}: one object boxed twice?")
    models = {}
    if ctx.detect is not None:
        found = len(ctx.detect(src.image, plural(label)))
        if label in counts and found != counts[label]:
            raise ValueError(
                f"{counts[label]} {plural(label)} are boxed, the detector finds {found}: the count is in doubt"
            )
        if label not in counts:
            if found == 0:
                raise ValueError(f"the detector found no {plural(label)}")
            counts[label], models = found, {"counter": ctx.detector_model}
    options, answer = bt.counting_options(counts[label], rng)
    return Built([src.image], [str(n) for n in options], answer, {"objects": plural(label)}, models=models)


@answers("the point that shows the same scene point as REF", opposite=["does not correspond"])
def visual_correspondence(
    t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle
) -> Built:
    rng = ctx.rng
    item = bt.correspondence(sources[0].image, rng)
    first, ref = marked(sources[0].image, 0, [Mark("REF", item.reference_point)], style)
    second, points = marked(item.warped, 1, [Mark(LETTERS[k], p) for k, p in enumerate(item.options)], style)
    return Built(
        [first, second], [f"Point {LETTERS[k]}" for k in range(len(item.options))], item.answer, marks=ref + points
    )


@answers("yes when the stated relation holds, else no")
def spatial_relation(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    rng = ctx.rng
    src = sources[0]
    # "the cup" names one object only when no other cup goes unboxed: labels declared completely boxed
    boxed = complete_things(src)
    counts = Counter(label for label, _ in boxed)
    unique = [(label, box) for label, box in boxed if counts[label] == 1]
    gap = float(t.params.get("min_gap_fraction", 0.05)) * max(src.image.size)  # type: ignore[arg-type]
    pairs = [
        (a, b, relation)
        for a in unique
        for b in unique
        if a[0] != b[0] and (relation := bt.separated(a[1], b[1], gap)) is not None
    ]
    if not pairs:
        raise NotApplicable(
            "no two completely boxed, uniquely labelled objects in a clear left/right/above/below relation"
        )
    first, second, relation = pairs[int(rng.integers(len(pairs)))]
    truthful = bool(rng.integers(2))
    stated = relation if truthful else bt.OPPOSITE[relation]
    return Built(
        [src.image], ["yes", "no"], 0 if truthful else 1, {"first": first[0], "second": second[0], "relation": stated}
    )


@answers("the view of the same picture as the reference", opposite=["different picture", "less similar", "dissimilar"])
def visual_similarity(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """A reference view (crop and colour shift) of the photo, a second view of the same photo (the same crop,
    another colour shift) and a view of another photo of its scene (the same crop; the other sources are its
    scene's: never an unrelated photo, which would make the item trivial), in a drawn order; the answer, "the
    same picture", is known by construction. With a perceptual embedding the item is also checked: the same
    photo's view must be nearer the reference by at least ``min_gap``, else the draw is refused."""
    rng = ctx.rng
    if len(sources) < 2:
        raise NotApplicable("no other photo of its scene")
    size = (384, round(384 * sources[0].image.height / sources[0].image.width))
    partner = sources[1 + int(rng.integers(len(sources) - 1))]
    # One crop for all three: the same photo's view keeps the reference's framing exactly, the other photo's is
    # framed alike. With crops drawn apart, a crop of the other view (the camera turned 12 degrees) could frame
    # the scene just as the reference does, and no one could tell which is "the same picture".
    frame = bt.random_frame(rng)
    reference = bt.augmented_view(sources[0].image, rng, size, frame)
    same = bt.augmented_view(sources[0].image, rng, size, frame)
    other = bt.augmented_view(partner.image, rng, size, frame)
    answer = int(rng.integers(2))
    options = [same, other] if answer == 0 else [other, same]
    models = {}
    if ctx.embed is not None:
        ref_v, same_v, other_v = np.asarray(ctx.embed([reference, same, other]))
        gap = float(same_v @ ref_v - other_v @ ref_v)
        if gap < float(t.params.get("min_gap", 0.05)):  # type: ignore[arg-type]
            raise ValueError(f"the same photo's view is nearer the reference than the other photo's by only {gap:.3f}")
        models = {"similarity": ctx.embed_model}
    return Built(
        [reference, *options],
        ["the second image", "the third image"],
        answer,
        sources=[sources[0].id, partner.id],
        models=models,
    )


@answers("the panel that continues the row")
def iq_test(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    puzzle = bt.iq_puzzle(ctx.rng)
    picture, boxes = bt.draw_iq_puzzle(puzzle)  # the letters are part of the puzzle's picture
    return Built([picture], [f"picture {LETTERS[k]}" for k in range(len(boxes))], puzzle.answer)


@answers("the point closer to the camera", opposite=["farther", "further", "more distant", "deeper"])
def relative_depth(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """Two points with a clear depth order: from the source's disparity map (a ratio), else from the profile's
    depth model (a share of its spread, as its output is known up to scale and shift)."""
    rng = ctx.rng
    src = sources[0]
    models = {}
    if src.disparity is not None:
        pair = bt.depth_pair(src.disparity, rng, float(t.params.get("min_ratio", 1.3)))  # type: ignore[arg-type]
    elif src.nearness is not None:
        pair = bt.relative_depth_pair(src.nearness, rng, float(t.params.get("min_gap", 0.25)))  # type: ignore[arg-type]
        models = {"depth": src.depth_model}
    else:
        raise NotApplicable("no disparity map and no depth model")
    image, marks = marked(src.image, 0, [Mark("A", pair.points[0]), Mark("B", pair.points[1])], style)
    return Built([image], ["A", "B"], pair.closer, marks=marks, models=models)


@answers("which way the camera turned from the first image to the second")
def multi_view(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """Two views of one pose sequence at least ``min_yaw`` apart. Each pair of views is one item, never two: a
    view pairs only with views after it in id order (the pair reversed would be the same question with the
    answer flipped), and which of the two comes first is drawn."""
    rng = ctx.rng
    own = sources[0]
    least = float(t.params.get("min_yaw", 5.0))  # type: ignore[arg-type]
    others = [
        s
        for s in sources[1:]
        if s.id > own.id and s.yaw is not None and own.yaw is not None and abs(s.yaw - own.yaw) >= least
    ]
    if not others:
        raise NotApplicable(
            f"no view after it in the sequence at least {least:g} degrees apart (each pair of views is one item)"
        )
    partner = others[int(rng.integers(len(others)))]
    first, second = (own, partner) if rng.integers(2) == 0 else (partner, own)
    assert first.yaw is not None and second.yaw is not None
    return Built(
        [first.image, second.image],
        ["left", "right"],
        1 if second.yaw > first.yaw else 0,
        sources=[first.id, second.id],
    )


@answers("the real photograph", opposite=["is generated", "was generated", "is fake", "is synthetic"])
def forensic_detection(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """The real photograph and three images the profile's text-to-image model drew from its caption, in a
    drawn order; the answer is where the photograph went."""
    from perceptforge.prompts.library import load_prompt

    src = sources[0]
    if ctx.generate is None:
        raise NotApplicable("the profile names no text-to-image generator")
    if not src.caption:
        raise NotApplicable("no caption to draw from")
    prompt = load_prompt(str(t.params.get("generation_prompt", "blink/forensic_generation"))).render(
        caption=src.caption
    )
    seeds = [int(s) for s in ctx.rng.integers(0, 2**31 - 1, size=t.choices - 1)]
    fakes = ctx.generate(prompt, seeds, src.image.size)
    answer = int(ctx.rng.integers(t.choices))
    images = [*fakes[:answer], src.image, *fakes[answer:]]
    ordinals = ["the first image", "the second image", "the third image", "the fourth image", "the fifth image"]
    return Built(images, ordinals[: t.choices], answer, models={"generator": ctx.generator_model})


@answers("the painting in the reference's style", opposite=["different style", "another style"])
def art_style(t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    """A reference painting, one other painting of its style and one of another style, in a drawn order."""
    rng, ref = ctx.rng, sources[0]
    same = [s for s in sources[1:] if s.style == ref.style]
    other = [s for s in sources[1:] if s.style is not None and s.style != ref.style]
    if not same or not other:
        raise NotApplicable(f"needs another painting in the style {ref.style!r} and one in another style")
    match, mismatch = same[int(rng.integers(len(same)))], other[int(rng.integers(len(other)))]
    answer = int(rng.integers(2))
    picked = [match, mismatch] if answer == 0 else [mismatch, match]
    return Built(
        [ref.image, *(p.image for p in picked)],
        ["the second image", "the third image"],
        answer,
        sources=[ref.id, *(p.id for p in picked)],
    )


def _point_correspondence(
    ref_points: dict[str, Point],
    partners: list[tuple[SourceView, dict[str, Point]]],
    sources: list[SourceView],
    ctx: BuildContext,
    style: MarkStyle,
    values: dict[str, str],
) -> Built:
    """REF on the first image at one named point; on the partner's image the point of that name and three other
    named points, circled A–D in a drawn order (BLINK's semantic and functional correspondence)."""
    rng = ctx.rng
    usable = [(src, pts) for src, pts in partners if set(pts) & set(ref_points) and len(pts) >= 4]
    if not usable:
        raise NotApplicable("no partner object with a shared point and at least four points")
    partner, points = usable[int(rng.integers(len(usable)))]
    shared = sorted(set(points) & set(ref_points))
    name = shared[int(rng.integers(len(shared)))]
    others = sorted(set(points) - {name})
    picked = [others[i] for i in sorted(rng.choice(len(others), size=3, replace=False))]
    order = [name, *picked]
    order = [order[i] for i in rng.permutation(4)]
    first, ref = marked(sources[0].image, 0, [Mark("REF", ref_points[name])], style)
    second, options = marked(partner.image, 1, [Mark(LETTERS[k], points[n]) for k, n in enumerate(order)], style)
    return Built(
        [first, second],
        [f"Point {LETTERS[k]}" for k in range(4)],
        order.index(name),
        values,
        ref + options,
        sources=[sources[0].id, partner.id],
    )


@answers("the point that corresponds to REF", opposite=["does not correspond"])
def semantic_correspondence(
    t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle
) -> Built:
    """SPair-71k style: an object's named keypoint, and another picture's object of the same label."""
    rng = ctx.rng
    own = sources[0].keypoints
    if not own:
        raise NotApplicable("no keypoints")
    label, ref_points = own[int(rng.integers(len(own)))]
    partners = [(s, pts) for s in sources[1:] for lab, pts in s.keypoints if lab == label]
    return _point_correspondence(ref_points, partners, sources, ctx, style, {})


@answers("the point that corresponds functionally to REF", opposite=["does not correspond"])
def functional_correspondence(
    t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle
) -> Built:
    """FunKPoint style: a part of an object used for an action, and the part of another object that does the
    same for that action."""
    rng = ctx.rng
    own = sources[0].functional
    if not own:
        raise NotApplicable("no functional keypoints")
    label, action, ref_points = own[int(rng.integers(len(own)))]
    partners = [(s, pts) for s in sources[1:] for lab, act, pts in s.functional if act == action and lab != label]
    return _point_correspondence(ref_points, partners, sources, ctx, style, {"action": action})


@answers("the point with the darker surface, or about the same", opposite=["lighter", "brighter", "whiter"])
def relative_reflectance(
    t: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle
) -> Built:
    """IIW style: the source's ``ctx.index``-th pairwise judgement (in annotation order), its points circled A and B."""
    src = sources[0]
    if ctx.index >= len(src.reflectance):
        raise NotApplicable(
            f"{len(src.reflectance)} reflectance judgements, this is item {ctx.index + 1} of the source"
        )
    a, b, darker = src.reflectance[ctx.index]
    image, marks = marked(src.image, 0, [Mark("A", a), Mark("B", b)], style)
    return Built(
        [image], ["A is darker", "B is darker", "About the same"], ("a", "b", "equal").index(darker), marks=marks
    )


Builder = Callable[[PerceptionTemplate, list[SourceView], BuildContext, MarkStyle], Built]
ENTRY_POINTS = BUILDER_ENTRY_POINTS

BUILDERS: dict[str, Builder] = {
    "jigsaw": jigsaw,
    "object_localization": object_localization,
    "counting": counting,
    "visual_correspondence": visual_correspondence,
    "spatial_relation": spatial_relation,
    "visual_similarity": visual_similarity,
    "iq_test": iq_test,
    "relative_depth": relative_depth,
    "multi_view": multi_view,
    "forensic_detection": forensic_detection,
    "art_style": art_style,
    "semantic_correspondence": semantic_correspondence,
    "functional_correspondence": functional_correspondence,
    "relative_reflectance": relative_reflectance,
}


class Unloadable:
    """Stands in for a plug-in builder whose entry point failed to load: the error, kept for the tasks that use it."""

    def __init__(self, error: InputError):
        self.error = error

    def __call__(self, *args: Any) -> Built:
        raise self.error


@cache
def builders() -> dict[str, Builder]:
    """Every builder by name: the built-ins, then the entry points (which may not take a built-in's name). Read
    once per process: scanning the entry points cost 6.7 ms, once per item when it was done for each."""
    found = dict(BUILDERS)
    for ep in entry_points(group=ENTRY_POINTS):
        where = f"entry point {ENTRY_POINTS}:{ep.name} ({ep.value})"
        if ep.name in BUILDERS:
            raise InputError(where, f"{ep.name!r} is a built-in builder; choose another name")
        try:
            target = load_entry_point(ep, ENTRY_POINTS)
        except InputError as exc:  # only the tasks that name it stop (``templates.check_template``)
            found[ep.name] = Unloadable(exc)
            continue
        if not callable(target):
            raise InputError(where, f"not a function (template, sources, ctx, style) -> Built: {target!r}")
        found[ep.name] = target
    return found


def build(template: PerceptionTemplate, sources: list[SourceView], ctx: BuildContext, style: MarkStyle) -> Built:
    built = builders()[template.builder](template, sources, ctx, style)
    if len(built.choices) != template.choices:
        raise ValueError(f"{template.id}: built {len(built.choices)} choices, the template says {template.choices}")
    built.sources = built.sources or [sources[0].id]
    return built
