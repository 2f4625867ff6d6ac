"""Inter-annotator agreement on the accept / reject verdict (MVP-Bench Table 1 reports it per question type)."""

from __future__ import annotations

from collections import Counter


def percent_agreement(pairs: list[tuple[str, str]]) -> float | None:
    """Share of items on which both annotators gave the same label; None when there are no pairs."""
    if not pairs:
        return None
    return sum(a == b for a, b in pairs) / len(pairs)


def cohens_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's kappa for two raters: (p_o - p_e) / (1 - p_e), p_e from each rater's own label shares.

    None when it is undefined: no pairs, or both raters used one and the same label throughout (p_e = 1).

    Hand-written rather than ``sklearn.metrics.cohen_kappa_score``: scikit-learn 1.9.1 would add a 10 MB
    download (with narwhals and threadpoolctl), 60 MB installed and 3.3 s to every install, and a second to
    the import, for these few lines; its answer agrees with this one to 1e-15 on the examples in
    ``tests/test_annotation_logic.py``, but where kappa is undefined it warns and gives nan, not None."""
    if not pairs:
        return None
    n = len(pairs)
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_o = sum(a == b for a, b in pairs) / n
    p_e = sum(first[label] * second[label] for label in first) / (n * n)
    if p_e == 1:
        return None
    return (p_o - p_e) / (1 - p_e)


def agreement_table(pairs_by_kind: dict[str, list[tuple[str, str]]]) -> dict[str, dict]:
    """Per kind and ``overall``: number of doubly annotated items, percent agreement and kappa."""
    everything = [p for kind in sorted(pairs_by_kind) for p in pairs_by_kind[kind]]
    table = {}
    for name, pairs in [*sorted(pairs_by_kind.items()), ("overall", everything)]:
        po, kappa = percent_agreement(pairs), cohens_kappa(pairs)
        table[name] = {
            "items": len(pairs),
            "percent_agreement": None if po is None else round(100 * po, 2),
            "cohens_kappa": None if kappa is None else round(kappa, 4),
        }
    return table
