"""``perceptforge audit``: read a split, run every check, write ``audit.json`` and ``audit.html``."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import yaml

from perceptforge.audit import checks
from perceptforge.audit.items import AuditItem, read_items
from perceptforge.audit.page import audit_page
from perceptforge.backends.chat import ChatClient
from perceptforge.errors import InputError
from perceptforge.fileio import atomic_write_text, read_yaml, write_json
from perceptforge.logic.gate_corpus import check_figures, corpus_view
from perceptforge.scorer import benchmarks

# what the gates stop of pairs labelled by looking (`python benchmarks/gate_corpus/measure.py` writes it)
GATE_CORPUS = "gate_corpus.json"


def thresholds(path: Path | None = None) -> dict:
    """The defaults (``audit/thresholds.yaml``), each section updated from ``path`` when given."""
    merged = yaml.safe_load(resources.files("perceptforge.audit").joinpath("thresholds.yaml").read_text())
    if path is not None:
        try:
            given = read_yaml(path) or {}
        except FileNotFoundError:
            raise InputError(str(path), "thresholds file not found") from None
        if not isinstance(given, dict):
            raise InputError(str(path), "thresholds are a YAML mapping of sections")
        for section, values in given.items():
            if section not in merged or not isinstance(values, dict):
                raise InputError(str(path), f"unknown threshold section {section!r}; known: {', '.join(merged)}")
            unknown = set(values) - set(merged[section])
            if unknown:
                raise InputError(str(path), f"{section}: unknown thresholds {sorted(unknown)}")
            for name, value in values.items():
                merged[section][name] = checked_threshold(f"{path}: {section}.{name}", value, RANGES[section][name])
    return merged


# Each threshold's kind and range: a count, a share or a distance; anything else is refused at load.
RANGES: dict[str, dict[str, tuple[type, float, float]]] = {
    "balance": {
        "min_items": (int, 0, math.inf),
        "min_p_value": (float, 0, 1),
        "max_yes_share_deviation": (float, 0, 50),
    },
    "option_bias": {
        "min_items": (int, 0, math.inf),
        "max_gain_over_random": (float, 0, 100),
        "give_away_length_ratio": (float, 1, math.inf),
    },
    "duplicates": {"image_hamming": (int, 0, 64)},
    "human_verification": {"min_percent_agreement": (float, 0, 100)},
    "blind_baseline": {"max_gain_over_random": (float, 0, 100)},
}


def checked_threshold(where: str, value: object, kind_range: tuple[type, float, float]) -> float:
    """``value`` when it is a finite number of the threshold's kind within its range; else one line saying why
    (a NaN threshold would never fail a check)."""
    kind, low, high = kind_range
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or (kind is int and not number.is_integer()):
        raise InputError(where, f"must be a finite {'whole ' if kind is int else ''}number, got {value!r}")
    if not low <= number <= high:
        raise InputError(where, f"must be between {low:g} and {high:g}, got {value!r}")
    return int(number) if kind is int else number


def gate_corpus_figures(path: Path | None = None) -> dict | None:
    """The gate corpus's figures: ``path``, else the bundled ``audit/gate_corpus.json``; None when there are none."""
    bundled = resources.files("perceptforge.audit").joinpath(GATE_CORPUS)
    if path is None and not bundled.is_file():
        return None
    where = str(path or GATE_CORPUS)
    try:
        text = path.read_text() if path is not None else bundled.read_text()
        return check_figures(json.loads(text), where)
    except FileNotFoundError:
        raise InputError(where, "gate corpus figures not found") from None
    except ValueError as exc:  # not JSON, or not the corpus's figures
        raise InputError(where, str(exc).removeprefix(f"{where}: ")) from None


def split_gate_limits(paths: list[Path]) -> dict | None:
    """The gate limits the split was made with: its export manifest's profile, or a run directory's
    ``profile.yaml``; None when neither says."""
    for p in paths:
        folder = p if p.is_dir() else p.parent
        manifest, profile = folder / "manifest.json", folder / "profile.yaml"
        try:
            if manifest.is_file():
                gates = (json.loads(manifest.read_text()).get("profile") or {}).get("gates")
            elif profile.is_file():
                gates = (yaml.safe_load(profile.read_text()) or {}).get("gates")
            else:
                continue
        except (ValueError, yaml.YAMLError, AttributeError):
            continue  # not ours: the corpus's limits cannot be compared
        if isinstance(gates, dict):
            return gates
    return None


def run_checks(items: list[AuditItem], limits: dict, verification: dict | None = None) -> list[checks.Check]:
    return [
        checks.answer_balance(items, limits["balance"]),
        checks.opposite_pairs(items, limits["balance"]),
        checks.option_bias(items, limits["option_bias"]),
        checks.duplicates(items, limits["duplicates"]),
        checks.human_verification(verification, limits["human_verification"]),
    ]


def audit(
    paths: list[Path],
    out: Path,
    benchmark: str = "perceptforge",
    thresholds_path: Path | None = None,
    verification: dict | None = None,
    blind: ChatClient | None = None,
    images: Path | None = None,
    gate_corpus: Path | None = None,
) -> dict:
    """Audit the split and write ``out/audit.json`` and ``out/audit.html``; returns the JSON document.
    With a ``blind`` client, the blind baseline runs too (its predictions are kept in ``out``). A split of ours
    also gets the gate corpus's figures (``gate_corpus``, else the bundled ones), marked stale when the split was
    gated with other limits."""
    limits = thresholds(thresholds_path)
    corpus = gate_corpus_figures(gate_corpus) if benchmark == "perceptforge" else None  # a bad file: before any work
    items = read_items(paths, benchmark)
    if not items:
        raise InputError(", ".join(map(str, paths)), "no items to audit")
    if verification is None:
        # beside an export, or in a run directory after `annotate pull`
        # (a file path, e.g. CODIS's data.json, looks in its folder)
        folders = [p if p.is_dir() else p.parent for p in paths]
        places = [f for p in folders for f in (p / "verification.json", p / "verification" / "summary.json")]
        found = [f for f in places if f.is_file()]
        verification = yaml.safe_load(found[0].read_text()) if found else None
    out.mkdir(parents=True, exist_ok=True)
    results = run_checks(items, limits, verification)
    if blind is not None:
        from perceptforge.audit.blind import blind_baseline

        # what the benchmark leaves out in turn (CODIS: the image, then the context); by default the image, grey
        modes = getattr(benchmarks.get(benchmark), "BLIND_MODES", ("grey",))
        results += [
            blind_baseline(paths, benchmark, items, blind, out, limits["blind_baseline"], images, mode)
            for mode in modes
        ]
    sides = [p for p in paths if p.is_dir() and (p / "val.jsonl").is_file() and (p / "test.jsonl").is_file()]
    empty = sorted({s for p in sides for s in ("val", "test") if not (p / f"{s}.jsonl").stat().st_size})
    doc = {
        "benchmark": benchmark,
        "inputs": [os.path.relpath(p, out) for p in paths],  # relative: the same split audits to the same bytes
        "items": len(items),
        # a one-sided export (too few source images for both sides) is audited on the side it has
        "notes": [f"no {s} split: every item is on the other side" for s in empty],
        "passed": all(c.passed is not False for c in results),
        "thresholds": limits,
        "checks": [asdict(c) for c in results],
    }
    if corpus is not None:
        doc["gate_corpus"] = corpus_view(corpus, split_gate_limits(paths))
    write_json(out / "audit.json", doc)
    atomic_write_text(out / "audit.html", audit_page(doc, {i.id: i for i in items}))
    return doc
