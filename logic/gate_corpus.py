"""The gate corpus's figures as the audit shows them: what the gates stop of pairs labelled by looking
(``benchmarks/gate_corpus``), and whether those figures were measured with the gate limits a split was made with.

The limits are named by a fingerprint: a short hash of the profile's ``gates`` section as JSON with sorted keys,
so a limit changed or a gate added (a new field of ``Gates``) after the corpus was measured shows as a stale table.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def limits_fingerprint(limits: Mapping[str, Any]) -> str:
    """16 hex digits naming a profile's ``gates`` section (its JSON form): equal limits, equal fingerprints."""
    text = json.dumps(limits, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


FIGURE_KEYS = ("date", "pairs", "bad", "good", "limits_fingerprint", "gates", "recall", "false_quarantines")


def check_figures(figures: Any, where: str) -> dict:
    """``figures`` when it is a gate corpus document (``measure.py``'s JSON); else ValueError naming ``where`` and
    what is missing."""
    if not isinstance(figures, dict):
        raise ValueError(f"{where}: the gate corpus's figures are a JSON object")
    missing = [k for k in FIGURE_KEYS if k not in figures]
    if missing:
        raise ValueError(f"{where}: the gate corpus's figures lack {', '.join(missing)}")
    return figures


def pct(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(100 * part / whole, 1)


def corpus_view(figures: Mapping[str, Any], split_limits: Mapping[str, Any] | None) -> dict:
    """What the audit shows of the corpus: one row per gate (the bad pairs it stopped by defect kind, the good
    pairs it stopped), the overall recall and false quarantines, and ``stale``: True when the split was gated with
    other limits than the corpus was measured with, None when the split's limits are unknown."""
    split_print = None if split_limits is None else limits_fingerprint(split_limits)
    stale = None if split_print is None else split_print != figures["limits_fingerprint"]
    kinds = list(figures["recall"]["by_defect"])
    rows = {
        gate: {kind: row["stopped_bad"].get(kind, 0) for kind in kinds} | {"good pairs stopped": row["stopped_good"]}
        for gate, row in figures["gates"].items()
    }
    by_defect = figures["recall"]["by_defect"]
    rows["all gates (recall %)"] = {kind: by_defect[kind]["recall %"] for kind in kinds} | {
        "good pairs stopped": figures["false_quarantines"]["share %"]
    }
    rows["pairs"] = {kind: by_defect[kind]["pairs"] for kind in kinds} | {"good pairs stopped": figures["good"]}
    return {
        "date": figures["date"],
        "pairs": figures["pairs"],
        "bad": figures["bad"],
        "good": figures["good"],
        "recall": figures["recall"]["overall %"],
        "false_quarantines": figures["false_quarantines"]["share %"],
        "targets": figures.get("targets", {}),
        "misses": len(figures.get("misses", [])),
        "fingerprint": figures["limits_fingerprint"],
        "split_fingerprint": split_print,
        "stale": stale,
        "rows": rows,
    }
