"""Metric definitions (ARCHITECTURE.md; metric definitions as in the papers), as plain functions over plain records.

All results are percentages (0–100), unrounded. An empty group gives ``None``, never 0.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass


def pct(flags: Sequence[bool]) -> float | None:
    return 100.0 * sum(flags) / len(flags) if flags else None


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def group_all(keys_flags: Iterable[tuple[Hashable, bool]], min_size: int = 1) -> list[bool]:
    """One flag per key: true only if every flag of the key is true; keys with fewer than ``min_size`` flags dropped."""
    groups: dict[Hashable, list[bool]] = defaultdict(list)
    for key, flag in keys_flags:
        groups[key].append(flag)
    return [all(v) for v in groups.values() if len(v) >= min_size]


# --- MVP-Bench Yes/No ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class YesNoRecord:
    pair: Hashable  # the image pair
    side: str  # "S" (natural, source) or "E" (manipulated, edited)
    level: str  # "low" | "high"
    question: str
    correct: bool


def mvp_yes_no(records: Sequence[YesNoRecord], official: bool = False) -> dict:
    """accuracy per side × level and pooled per level, qAcc per level and over all, iAcc per side and over
    all, aAcc, mAcc.

    qAcc: a question is right only if right on both images of its pair. iAcc: an image is right only if
    all its questions are right. mAcc: a pair is right only if every question on both images is right.
    ``official=True`` applies the release script's filters: iAcc counts only images with more than one
    question, mAcc only pairs with more than three records.
    """
    out: dict = {"accuracy": {}, "pooled": {}, "qAcc": {}, "iAcc": {}}
    for side in ("S", "E"):
        for level in ("low", "high"):
            out["accuracy"][f"{side}_{level}"] = pct(
                [r.correct for r in records if r.side == side and r.level == level]
            )
    for level in ("low", "high"):
        out["pooled"][level] = pct([r.correct for r in records if r.level == level])
    for level in ("low", "high"):
        out["qAcc"][level] = pct(group_all(((r.pair, r.question), r.correct) for r in records if r.level == level))
    out["qAcc"]["all"] = pct(group_all(((r.pair, r.question), r.correct) for r in records))
    image_min = 2 if official else 1
    for side in ("S", "E"):
        out["iAcc"][side] = pct(
            group_all((((r.pair, r.side), r.correct) for r in records if r.side == side), image_min)
        )
    out["iAcc"]["all"] = pct(group_all((((r.pair, r.side), r.correct) for r in records), image_min))
    out["aAcc"] = pct([r.correct for r in records])
    out["mAcc"] = pct(group_all(((r.pair, r.correct) for r in records), 4 if official else 1))
    return out


def circular(groups: Mapping[Hashable, Sequence[bool]]) -> float | None:
    """CircularEval: a question is right only if every rotation of its options is right."""
    return pct([all(v) for v in groups.values()])


# --- generic --------------------------------------------------------------------------------------------


def per_group(records: Iterable[tuple[str, bool]]) -> dict[str, float]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for key, flag in records:
        groups[key].append(flag)
    return {k: pct(v) for k, v in sorted(groups.items())}  # type: ignore[misc]


def bootstrap_ci(
    units: Sequence, statistic: Callable[[Sequence], float | None], n: int, seed: int, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic`` over ``n`` resamples of ``units``, by ``scipy.stats.bootstrap``.

    Seeded and reproducible: one resample per batch makes scipy draw each resample's positions as one
    ``rng.integers(0, len(units), len(units))`` call on ``default_rng(seed)``, the very draws this function
    made by hand before scipy, so a seed gives the intervals it gave then. scipy resamples arrays of numbers,
    so it resamples the units' positions and the statistic reads the units there. None when there is nothing
    to resample, or when the statistic is undefined (None) on any resample."""
    if n <= 0 or not units:
        return None
    if len(units) == 1:  # every resample is the sample itself, and scipy wants two observations
        value = statistic(list(units))
        return None if value is None else (float(value), float(value))
    import numpy as np  # here: scoring without --bootstrap never needs it, and it costs a tenth of a second
    from scipy import stats  # imported here: scipy.stats takes a second to import, and only --bootstrap needs it

    def at(positions: np.ndarray) -> float:
        value = statistic([units[i] for i in positions])
        return np.nan if value is None else value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)  # an undefined resample: None below
        result = stats.bootstrap(
            (np.arange(len(units)),),
            at,
            vectorized=False,
            n_resamples=n,
            batch=1,
            method="percentile",
            confidence_level=1 - alpha,
            rng=np.random.default_rng(seed),
        )
    lo, hi = result.confidence_interval
    if np.isnan(lo) or np.isnan(hi):
        return None
    return float(lo), float(hi)


# --- CODIS ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodisPair:
    category: str
    correct: tuple[bool, bool]
    outputs_differ: bool


def codis(pairs: Sequence[CodisPair]) -> dict:
    """Acc_p (both queries of a pair right), Acc_q (per query), per category and overall; context awareness."""

    def block(ps: Sequence[CodisPair]) -> dict:
        return {"Acc_p": pct([all(p.correct) for p in ps]), "Acc_q": pct([c for p in ps for c in p.correct])}

    cats = sorted({p.category for p in pairs})
    return {
        "categories": {c: block([p for p in pairs if p.category == c]) for c in cats},
        "overall": block(pairs),
        "context_awareness": pct([p.outputs_differ for p in pairs]),
    }


# --- MME-RealWorld --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MMERecord:
    task: str  # "perception" | "reasoning"
    domain: str  # the release's "Subtask", e.g. Autonomous_Driving
    category: str
    correct: bool
    chose_e: bool = False  # the answer read is E ("the image does not feature it")


def mme_realworld(records: Sequence[MMERecord]) -> dict:
    """Per domain: Avg over items, Avg_C unweighted over categories, E (answers read as E); per task: Avg over
    items, Avg_C over domains, E; ``overall``: Avg over all items (the official script's "Overall Acc")."""
    out: dict = {}
    for task in sorted({r.task for r in records}):
        rs = [r for r in records if r.task == task]
        domains = {}
        for d in sorted({r.domain for r in rs}):
            ds = [r for r in rs if r.domain == d]
            cats = per_group((r.category, r.correct) for r in ds)
            domains[d] = {
                "Avg": pct([r.correct for r in ds]),
                "Avg_C": mean(cats.values()),
                "E": sum(r.chose_e for r in ds),
            }
        out[task] = {
            **domains,
            "Avg": pct([r.correct for r in rs]),
            "Avg_C": mean(v["Avg"] for v in domains.values()),
            "E": sum(r.chose_e for r in rs),
        }
    out["overall"] = pct([r.correct for r in records])
    return out


def bootstrap_groups(items: Sequence[tuple[str, bool]], n: int, seed: int) -> dict[str, tuple[float, float] | None]:
    """95% intervals for each group's accuracy and for their unweighted mean (``overall``), resampling items."""
    groups: dict[str, list[bool]] = defaultdict(list)
    for group, flag in items:
        groups[group].append(flag)
    out = {g: bootstrap_ci(flags, pct, n, seed) for g, flags in sorted(groups.items())}

    def macro(sample: Sequence[tuple[str, bool]]) -> float | None:
        return mean(per_group(sample).values())

    out["overall"] = bootstrap_ci(list(items), macro, n, seed)
    return out
