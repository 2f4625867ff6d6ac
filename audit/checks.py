"""The audit's checks, each a plain function over ``AuditItem`` records and its thresholds, returning a
``Check``: pass or fail, the figures, and the items it flags (with the figures that flagged them)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from perceptforge.audit.items import AuditItem
from perceptforge.audit.stats import chi_square
from perceptforge.logic.hash_index import close_pairs, hash_int

LETTERS = "ABCDEFGH"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Check:
    name: str
    passed: bool | None  # None: nothing to check (e.g. no MCQ items, no images)
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    flags: list[dict] = field(default_factory=list)


def pct(part: float, whole: float) -> float | None:
    return None if not whole else round(100 * part / whole, 2)


def answer_balance(items: list[AuditItem], t: dict) -> Check:
    """Answer letters of the MCQs against uniform over each item's own options (chi-square), the Yes share
    of the Yes/No questions, items per category and level."""
    mcq = [i for i in items if i.answer_format == "mcq" and i.choices]
    observed = Counter(i.answer for i in mcq)
    expected: dict[str, float] = defaultdict(float)
    for i in mcq:
        for letter in LETTERS[: i.choices]:
            expected[letter] += 1 / i.choices
    figures: dict[str, Any] = {
        "answer_letters": dict(sorted(observed.items())),
        "expected_letters": {k: round(v, 2) for k, v in sorted(expected.items())},
        "per_category_level": dict(sorted(Counter(f"{i.category} {i.level}".strip() for i in items).items())),
        "answer_letters_per_category": {
            cat: dict(sorted(Counter(i.answer for i in mcq if i.category == cat).items()))
            for cat in sorted({i.category for i in mcq})
        },
    }
    failures = []
    if len(mcq) >= t["min_items"]:
        stat, df, p = chi_square(observed, expected)
        figures["chi_square"] = {"statistic": round(stat, 3), "df": df, "p_value": round(p, 6)}
        if p < t["min_p_value"]:
            failures.append(f"answer letters are not uniform (chi-square p = {p:.2g} < {t['min_p_value']})")
    yes_no = [i for i in items if i.answer_format == "yes_no"]
    if yes_no:
        share = pct(sum(i.answer == "yes" for i in yes_no), len(yes_no))
        figures["yes_share"] = share
        if len(yes_no) >= t["min_items"] and abs((share or 0) - 50) > t["max_yes_share_deviation"]:
            failures.append(f"Yes is the answer of {share}% of Yes/No questions")
    checked = len(mcq) >= t["min_items"] or len(yes_no) >= t["min_items"]
    return Check(
        "balance",
        None if not checked else not failures,
        "; ".join(failures) or f"{len(mcq)} MCQs, {len(yes_no)} Yes/No questions",
        figures,
    )


def opposite_pairs(items: list[AuditItem], t: dict) -> Check:
    """Each pair's questions must have different answers (MVP-Bench: opposite Yes/No; CODIS: two answers)."""
    by_pair: dict[str, list[AuditItem]] = defaultdict(list)
    for i in items:
        if i.pair:
            by_pair[i.pair].append(i)
    flags = [
        {"item": members[0].id, "check": "pairs", "pair": pair, "answers": [m.answer for m in members]}
        for pair, members in sorted(by_pair.items())
        if len(members) != 2 or normalise(members[0].answer) == normalise(members[1].answer)
    ]
    if not by_pair:
        return Check("pairs", None, "no paired questions")
    return Check(
        "pairs",
        not flags,
        f"{len(flags)} of {len(by_pair)} pairs lack two different answers",
        {"pairs": len(by_pair)},
        flags,
    )


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def similarity(a: str, b: str) -> float:
    """Word-set overlap (Jaccard) of two texts."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0


def heuristic_choice(item: AuditItem) -> str:
    """A text-only guess that never sees the image: the longest option, ties to the one most like the question."""
    best = max(
        range(len(item.options)), key=lambda k: (len(item.options[k]), similarity(item.options[k], item.question), -k)
    )
    return LETTERS[best]


def option_bias(items: list[AuditItem], t: dict) -> Check:
    """How often the longest option, and the option most like the question, is the answer; the text-only
    heuristic's accuracy against random per category."""
    mcq = [i for i in items if i.answer_format == "mcq" and len(i.options) > 1]
    if len(mcq) < t["min_items"]:
        return Check("option_bias", None, f"{len(mcq)} MCQs: fewer than {t['min_items']} to judge")
    longest = sum(LETTERS[max(range(len(i.options)), key=lambda k: len(i.options[k]))] == i.answer for i in mcq)
    closest = sum(
        LETTERS[max(range(len(i.options)), key=lambda k: similarity(i.options[k], i.question))] == i.answer
        for i in mcq
        if i.question
    )
    per_category: dict[str, dict] = {}
    for cat in sorted({i.category for i in mcq}):
        members = [i for i in mcq if i.category == cat]
        per_category[cat] = {
            "items": len(members),
            "heuristic": pct(sum(heuristic_choice(i) == i.answer for i in members), len(members)),
            "random": pct(sum(1 / len(i.options) for i in members), len(members)),
        }
    hits = sum(heuristic_choice(i) == i.answer for i in mcq)
    accuracy, random = pct(hits, len(mcq)), pct(sum(1 / len(i.options) for i in mcq), len(mcq))
    gain = round((accuracy or 0) - (random or 0), 2)
    flags = []
    for i in mcq:  # the answer gives itself away: much longer than every other option
        lengths = sorted((len(o) for o in i.options), reverse=True)
        answer_len = len(i.options[LETTERS.index(i.answer)]) if i.answer in LETTERS[: len(i.options)] else 0
        if answer_len == lengths[0] and lengths[1] and answer_len / lengths[1] >= t["give_away_length_ratio"]:
            flags.append(
                {"item": i.id, "check": "option_bias", "answer_length": answer_len, "next_longest": lengths[1]}
            )
    figures = {
        "longest_is_answer": pct(longest, len(mcq)),
        "most_similar_is_answer": pct(closest, len([i for i in mcq if i.question]))
        if any(i.question for i in mcq)
        else None,
        "heuristic_accuracy": accuracy,
        "random": random,
        "gain_over_random": gain,
        "per_category": per_category,
    }
    passed = gain <= t["max_gain_over_random"]
    return Check(
        "option_bias",
        passed,
        f"text-only heuristic {accuracy}% vs random {random}% ({gain:+} points; at most +{t['max_gain_over_random']})",
        figures,
        flags,
    )


def image_hash(path: str) -> int:
    """Difference hash (``imagehash.dhash``: a 9x8 grey thumbnail's left-right brightness steps as 64 bits, robust
    to re-encoding and resizing) as an integer for ``close_pairs``."""
    import imagehash
    from PIL import Image

    with Image.open(path) as im:
        return hash_int(imagehash.dhash(im).hash)


def duplicates(items: list[AuditItem], t: dict) -> Check:
    """Near-duplicate images used by different sources (perceptual hash), repeated items (same question,
    options, answer and images), and leakage between val and test (an item or a source in both)."""
    flags: list[dict] = []
    figures: dict[str, Any] = {}
    # image file → the source sets (else items) of the items showing it; an item built from several
    # sources (BLINK's Visual Similarity) has them all in its set
    groups: dict[str, set[frozenset[str]]] = defaultdict(set)
    first_item: dict[str, str] = {}
    for i in items:
        for image in i.images:
            if Path(image).is_file():  # an official release's image names are compared as names only
                groups[image].add(frozenset((i.source or i.pair or i.id).split(",")))
                first_item.setdefault(image, i.id)
    users = {image: set().union(*sets) for image, sets in groups.items()}
    if users:
        hashes = {image: image_hash(image) for image in sorted(users)}
        names = sorted(hashes)
        near = [
            (names[i], names[j], distance)
            for i, j, distance in close_pairs([hashes[n] for n in names], int(t["image_hamming"]))
            if not users[names[i]] & users[names[j]]
        ]
        # one file in items of unrelated sources (content addressing makes identical pictures one file)
        same_file = [image for image, sets in groups.items() if any(not a & b for a, b in combinations(sets, 2))]
        figures |= {
            "images": len(hashes),
            "near_duplicate_image_pairs": len(near),
            "images_shared_by_sources": len(same_file),
        }
        flags += [
            {
                "item": first_item[a],
                "check": "duplicates",
                "image": a,
                "near": b,
                "hamming": d,
                "other_item": first_item[b],
            }
            for a, b, d in near
        ]
        flags += [
            {"item": first_item[image], "check": "duplicates", "image": image, "sources": sorted(users[image])}
            for image in sorted(same_file)
        ]

    def signature(i: AuditItem) -> tuple:
        return normalise(i.question), normalise(i.context), i.options, i.answer, i.images

    seen = Counter(signature(i) for i in items if i.question or i.images)
    repeated = [i for i in items if (i.question or i.images) and seen[signature(i)] > 1]
    figures["repeated_items"] = len(repeated)
    flags += [
        {"item": i.id, "check": "duplicates", "repeated": "same question, context, options, answer and images"}
        for i in repeated
    ]
    figures["repeated_question_texts"] = sum(
        n for n in Counter(normalise(i.question) for i in items if i.question).values() if n > 1
    )
    splits: dict[str, set[str]] = defaultdict(set)
    sources: dict[str, set[str]] = defaultdict(set)
    for i in items:
        if i.split:
            splits[i.id].add(i.split)
            if i.source:
                sources[i.source].add(i.split)
    leaked_items = sorted(k for k, v in splits.items() if len(v) > 1)
    leaked_sources = sorted(k for k, v in sources.items() if len(v) > 1)
    figures |= {"items_in_both_splits": len(leaked_items), "sources_in_both_splits": len(leaked_sources)}
    flags += [{"item": k, "check": "leakage", "splits": sorted(splits[k])} for k in leaked_items]
    flags += [
        {
            "item": next(i.id for i in items if i.source == s),
            "check": "leakage",
            "source": s,
            "splits": sorted(sources[s]),
        }
        for s in leaked_sources
    ]
    duplicate_images = figures.get("near_duplicate_image_pairs", 0) + figures.get("images_shared_by_sources", 0)
    return Check(
        "duplicates",
        not flags,
        f"{duplicate_images} duplicate images, "
        f"{len(repeated)} repeated items, {len(leaked_items)} items and {len(leaked_sources)} sources in both splits",
        figures,
        flags,
    )


def human_verification(verification: dict | None, t: dict) -> Check:
    """Agreement and kappa per kind and the share kept, from `annotate pull`'s summary."""
    if not verification:
        return Check("human_verification", None, "not verified (no `annotate pull` summary)")
    kept = pct(verification["status"].get("kept", 0), verification["items"])
    overall = verification["agreement"].get("overall", {})
    agreement = overall.get("percent_agreement")
    passed = agreement is None or agreement >= t["min_percent_agreement"]
    summary = f"{kept}% kept; {agreement}% agreement on accept / reject (at least {t['min_percent_agreement']}%)"
    figures = {"kept_share": kept, "status": verification["status"], "agreement": verification["agreement"]}
    estimate = verification.get("estimate")
    if not estimate:
        return Check("human_verification", passed, summary, figures)
    overall = estimate["overall"]
    if overall["share"] is not None:
        low, high = overall["interval"]
        summary += (
            f"; a random sample says {100 * overall['share']:.1f}% of the split's items are true "
            f"({estimate['confidence']:.0%} interval {100 * low:.1f}–{100 * high:.1f}%, {overall['true']} true of "
            f"{overall['checked']} checked; {estimate['not_counted']} sampled items not decided yet)"
        )
    figures["true_items_estimate"] = {
        h: {
            "items in the split": r["population"],
            "checked": r["checked"],
            "true": r["true"],
            "estimate %": None if r["share"] is None else round(100 * r["share"], 1),
            "interval %": None if r["interval"] is None else " – ".join(f"{100 * x:.1f}" for x in r["interval"]),
        }
        for h, r in [*estimate["strata"].items(), ("all", overall)]
    }
    flags = [
        {
            "item": r["item_id"],
            "check": "human_verification",
            "stratum": r["stratum"],
            "status": r["status"],
            "reasons": r["reasons"],
        }
        for r in estimate["rejected"]
    ]
    return Check("human_verification", passed, summary, figures, flags)
