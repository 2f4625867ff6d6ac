"""Pure logic of the human-authored flows (CODIS §3.3, MME-RealWorld §3.2): what the embedded drafter writes
from a source's annotations, the automatic checks recorded on every item version, and item ids.

Drafts are only proposals an annotator edits in Label Studio; the embedded ones are still chosen to be true of
the image where the annotations allow it (a quadrant from the object's box, a side from its centre)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from perceptforge.data.schema import (
    CODIS_CATEGORIES,
    LETTERS,
    Box,
    CheckResult,
    CodisContent,
    MMERealWorldContent,
)
from perceptforge.prompts.library import Prompt

QUADRANTS = ("upper_left", "upper_right", "lower_left", "lower_right")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on at to is are does do what which where who how this that image".split())


def item_id(source_id: str, source_sha256: str, benchmark: str, seed: int) -> str:
    """The source's id is part of it: copies of one photo under two ids are two items (one may be quarantined as
    a near-duplicate), never one file written twice."""
    return hashlib.sha256(f"{source_sha256}:{benchmark}:{seed}:{source_id}".encode()).hexdigest()[:16]


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def parse_fields(text: str, where: str) -> dict[str, str]:
    """A rendered draft template: ``key: value`` lines (blank lines and ``#`` comments ignored)."""
    fields: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not value.strip():
            raise ValueError(f"{where} line {n}: expected 'key: value', got {line!r}")
        fields[key.strip()] = value.strip()
    return fields


def labelled_things(regions: list[dict]) -> list[dict]:
    """The annotations a draft may ask about: labelled things, not stuff (COCO panoptic ``isthing: 0``: hair, a
    backdrop) and not faces."""
    return [r for r in regions if r.get("label") and r.get("isthing", 1) != 0 and r.get("role") != "face"]


def small_targets(regions: list[dict], width: int, height: int, max_fraction: float) -> list[dict]:
    """The labelled things within ``max_fraction`` of the image, smallest first (ties by id)."""
    small = [r for r in labelled_things(regions) if r["bbox"][2] * r["bbox"][3] <= max_fraction * width * height]
    return sorted(small, key=lambda r: (r["bbox"][2] * r["bbox"][3], str(r.get("id"))))


def target_region(regions: list[dict], width: int, height: int, max_fraction: float) -> dict | None:
    """The smallest labelled thing within ``max_fraction`` of the image; None when there is none."""
    return next(iter(small_targets(regions, width, height, max_fraction)), None)


def quadrant_share(box: list[float], width: int, height: int) -> float:
    """How much of an ``[x, y, w, h]`` box lies in the quarter of the image that holds its centre: near 1, the
    box is plainly in that quarter; lower, it straddles a middle line and "where is it?" has no one answer."""
    x, y, w, h = box
    left, top = quadrant(box, width, height).split("_")[1] == "left", quadrant(box, width, height).startswith("upper")
    inside_x = (min(x + w, width / 2) - x) if left else (x + w - max(x, width / 2))
    inside_y = (min(y + h, height / 2) - y) if top else (y + h - max(y, height / 2))
    return max(0.0, inside_x) * max(0.0, inside_y) / (w * h)


def quadrant(box: list[float], width: int, height: int) -> str:
    """Which quarter of the image holds the box's centre."""
    cx, cy = box[0] + box[2] / 2, box[1] + box[3] / 2
    return f"{'upper' if cy < height / 2 else 'lower'}_{'left' if cx < width / 2 else 'right'}"


def unambiguous_position(targets: list[dict], width: int, height: int, least: float = 0.9) -> dict | None:
    """The first target lying (at least ``least`` of its box) in one quarter of the image."""
    return next((r for r in targets if quadrant_share(r["bbox"], width, height) >= least), None)


def mme_position_draft(
    template: Prompt, region: dict, width: int, height: int, domain: str, rng: np.random.Generator
) -> MMERealWorldContent:
    """Where is the <object>? Four quadrant options in a seeded order, the right one from the box."""
    label = str(region["label"])
    fields = parse_fields(template.render(object=label), template.id)
    order = [QUADRANTS[i] for i in rng.permutation(len(QUADRANTS))]
    x, y, w, h = region["bbox"]
    return MMERealWorldContent(
        question=fields["question"],
        options=[fields[q] for q in order],
        absent_object=label,
        answer=LETTERS[order.index(quadrant(region["bbox"], width, height))],
        domain=domain,
        subtask=fields["subtask"],
        target=Box(x0=x, y0=y, x1=x + w, y1=y + h),
    )


def codis_draft(template: Prompt, category: str, thing: str, side: str | None) -> CodisContent:
    """A category's draft wording with the source's main object; ``side`` (left/right: where the object's
    centre is in the picture) fills the orientation answers."""
    other = {"left": "right", "right": "left"}.get(side or "")
    values = {"object": thing, "side": side, "other_side": other}
    fields = parse_fields(
        template.render(**{k: v for k, v in values.items() if k in template.placeholders}), template.id
    )
    return CodisContent(category=category, **{k: fields[k] for k in CodisContent.model_fields if k != "category"})


def context_decides(template: Prompt) -> bool:
    """Whether a CODIS wording file says its answers follow from the contexts alone (``image_needed: no``): CODIS
    asks for items that need both, so such a draft is a scaffold an author must rewrite."""
    return parse_fields(template.text, template.id).get("image_needed") == "no"


def codis_category(index: int, given: str | None, left_or_right: bool = True) -> str:
    """The source's own category when it names one, else the five in turn by source order; the orientation
    wording needs an object clearly on one side, so without one its turn passes to the next category."""
    if given in CODIS_CATEGORIES:
        return str(given)
    turn = CODIS_CATEGORIES[index % len(CODIS_CATEGORIES)]
    if turn == "Location and Orientation" and not left_or_right:
        return CODIS_CATEGORIES[(index + 1) % len(CODIS_CATEGORIES)]
    return turn


def side(centre_x: float, width: int, margin: float = 0.1) -> str | None:
    """Where a thing's centre is: "left" or "right", None within ``margin`` of the image's width of the middle."""
    offset = centre_x / width - 0.5
    return None if abs(offset) < margin else ("left" if offset < 0 else "right")


# --- automatic checks -----------------------------------------------------------------------------------


def similarity(a: str, b: str) -> float:
    """Token Jaccard of two questions (stop words dropped): near-duplicates score near 1."""
    sa, sb = set(words(a)) - _STOP, set(words(b)) - _STOP
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def near_duplicates(questions: dict[str, str], threshold: float) -> dict[str, tuple[str, float]]:
    """item id → (the earlier item it nearly repeats, similarity); ids are compared in sorted order, so the
    first of a group is kept and each later one flagged."""
    found: dict[str, tuple[str, float]] = {}
    ids = sorted(questions)
    for k, later in enumerate(ids):
        for earlier in ids[:k]:
            s = similarity(questions[earlier], questions[later])
            if s >= threshold:
                found[later] = (earlier, round(s, 3))
                break
    return found


def codis_checks(content: CodisContent) -> list[CheckResult]:
    """The rules one CODIS item can be checked on alone: the two contexts differ, and lead to different answers."""
    same_answer = words(content.answer_1) == words(content.answer_2)
    same_context = words(content.context_1) == words(content.context_2)
    return [
        CheckResult(
            name="answers_differ",
            flagged=same_answer,
            detail="both contexts lead to the same answer" if same_answer else "",
        ),
        CheckResult(
            name="contexts_differ", flagged=same_context, detail="the two contexts are the same" if same_context else ""
        ),
    ]


def checks_for(
    content: CodisContent | MMERealWorldContent, width: int, height: int, max_fraction: float
) -> list[CheckResult]:
    """The checks one version gets on its own (the split-wide and model checks come on top)."""
    if isinstance(content, CodisContent):
        return codis_checks(content)
    return mme_checks(content, width, height, max_fraction)


def target_fraction(box: Box, width: int, height: int) -> float:
    return (box.x1 - box.x0) * (box.y1 - box.y0) / (width * height)


def mme_checks(content: MMERealWorldContent, width: int, height: int, max_fraction: float) -> list[CheckResult]:
    """MME-RealWorld §3.2: a small target (at most ``max_fraction`` of the image), an E option naming the
    asked-about object, four distinct options."""
    checks = []
    if content.target is None:
        checks.append(CheckResult(name="target_small", flagged=True, detail="no target rectangle drawn"))
    else:
        fraction = round(target_fraction(content.target, width, height), 4)
        big = fraction > max_fraction
        checks.append(
            CheckResult(
                name="target_small",
                flagged=big,
                value=fraction,
                detail=f"the target covers {fraction:.1%} of the image (at most {max_fraction:.1%})" if big else "",
            )
        )
        inside = content.target.x1 <= width and content.target.y1 <= height
        if not inside:
            checks.append(CheckResult(name="target_inside", flagged=True, detail="the rectangle leaves the image"))
    named = set(words(content.absent_object)) - _STOP
    missing = sorted(named - set(words(content.question)))
    checks.append(
        CheckResult(
            name="e_names_object",
            flagged=bool(missing) or not named,
            detail=f"the question does not name {' '.join(missing) or content.absent_object!r}, the E option's object"
            if missing or not named
            else "",
        )
    )
    normalised = [" ".join(words(o)) for o in content.options]
    repeated = sorted({o for o in normalised if normalised.count(o) > 1})
    checks.append(
        CheckResult(
            name="options_distinct",
            flagged=bool(repeated) or "" in normalised,
            detail=f"options repeat: {repeated}" if repeated else ("an option is empty" if "" in normalised else ""),
        )
    )
    return checks
