"""A seeded, stratified random sample of a run's items for people to check, and what their verdicts say about the
whole split: the estimated share of true items with a 95% interval.

The draw. Each stratum (an MVP category, a BLINK task) gets a fixed random order of its item ids, from the seed and
the stratum's name; a sample of size n takes, per stratum, the first ``n_h`` ids of that order. ``n_h`` comes from a
fixed sequence of seats (one per stratum first, then Sainte-Laguë: the stratum with the largest ``N_h / (n_h + ½)``),
so a larger sample holds every item of a smaller one: ``annotate push --sample 40`` after ``--sample 20`` pushes 20
more items and redraws nothing. The draw is kept in ``RUN_DIR/annotation/sample.json``.

The estimate. An item is true when it was kept without corrections (a corrected item was false as generated);
checked when it was kept or rejected, an adjudicated verdict counting for a disputed one. Items pushed but not
decided (incomplete, still disputed, an invalid correction) are not counted; items the gates quarantined are not in
the split at all. Per stratum: the share ``k_h / n_h`` and its Wilson score interval (scipy's ``binomtest``). The
split: the stratified estimate ``Σ W_h k_h / n_h`` (``W_h = N_h / N`` over the strata with a checked item) and a
Wilson interval at Kish's effective sample size ``1 / Σ (W_h² / n_h)``, which is the pooled Wilson interval when
the checked items are spread in proportion to the strata. No finite-population correction: the interval is a little
wider than it needs to be when most of a stratum is checked.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perceptforge.errors import InputError
from perceptforge.fileio import read_json, sha256_bytes, write_json

CONFIDENCE = 0.95
SAMPLE_FILE = ("annotation", "sample.json")
# decision statuses (annotation/decisions.py) that are a verdict on the item as generated
CHECKED = ("kept", "rejected")


@dataclass(frozen=True)
class SampleSize:
    """What ``--sample`` asked for: a number of items or a share of them (``"20"``, ``"10%"``)."""

    count: int | None = None
    percent: float | None = None

    def of(self, population: int) -> int:
        if self.count is not None:
            return min(self.count, population)
        return min(population, math.ceil(population * (self.percent or 0) / 100))


def parse_sample_size(text: str) -> SampleSize:
    """``"20"`` → 20 items, ``"10%"`` → a tenth of them; anything else is one line naming the flag."""
    share = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%\s*", text)
    if share and 0 < float(share[1]) <= 100:
        return SampleSize(percent=float(share[1]))
    if re.fullmatch(r"\s*\d+\s*", text) and int(text) > 0:
        return SampleSize(count=int(text))
    raise InputError(f"--sample {text!r}", "give a number of items (20) or a share of them (10%), more than 0")


def seat_order(population: Mapping[str, int]) -> list[str]:
    """The strata in the order they receive sample seats: each non-empty stratum one (largest first), then
    Sainte-Laguë (largest ``N_h / (seats_h + ½)``, ties by name) until every item has a seat. A sample of n takes
    the first n seats, so growing a sample never takes a seat away (the divisor methods are house-monotone)."""
    strata = sorted((h for h, n in population.items() if n > 0), key=lambda h: (-population[h], h))
    seats = dict.fromkeys(strata, 1)
    order = list(strata)
    total = sum(population[h] for h in strata)
    while len(order) < total:
        h = min((h for h in strata if seats[h] < population[h]), key=lambda h: (-population[h] / (seats[h] + 0.5), h))
        seats[h] += 1
        order.append(h)
    return order


def allocate(population: Mapping[str, int], size: int) -> dict[str, int]:
    """How many items of each stratum a sample of ``size`` checks (see ``seat_order``)."""
    counts = dict.fromkeys(sorted(population), 0)
    for h in seat_order(population)[:size]:
        counts[h] += 1
    return counts


def stratum_order(ids: Iterable[str], seed: int, stratum: str) -> list[str]:
    """The stratum's item ids in the random order its sample is taken from: fixed by the seed and the stratum's
    name, whatever order the ids come in."""
    ordered = sorted(ids)
    rng = np.random.default_rng([seed, zlib.crc32(stratum.encode())])
    return [ordered[i] for i in rng.permutation(len(ordered))]


def population_digest(strata: Mapping[str, Iterable[str]]) -> str:
    """Which items the sample was drawn from: a draw extends only the population it was drawn from."""
    text = "\n".join(f"{h}\t{i}" for h in sorted(strata) for i in sorted(strata[h]))
    return sha256_bytes(text.encode())


def draw(strata: Mapping[str, list[str]], size: SampleSize, seed: int, previous: dict | None = None) -> dict:
    """The sample record (``annotation/sample.json``): seed, size, and per stratum its population and the ids
    drawn. With ``previous`` (the record of an earlier push) the seed and population must be the same and the size
    at least as large; the new record holds every earlier id."""
    population = {h: len(ids) for h, ids in strata.items()}
    n = size.of(sum(population.values()))
    digest = population_digest(strata)
    if previous is not None:
        where = "annotation/sample.json"
        if previous["seed"] != seed:
            raise InputError(
                where,
                f"the sample was drawn with seed {previous['seed']}; extend it with that seed "
                f"(--sample-seed {previous['seed']}), not {seed}",
            )
        if previous["population_sha256"] != digest:
            raise InputError(
                where,
                "the run's items changed since the sample was drawn; a sample extends only the items it "
                "was drawn from (move annotation/sample.json aside to draw a new one)",
            )
        if n < previous["size"]:
            raise InputError(
                "--sample", f"{n} items is fewer than the {previous['size']} already drawn; a sample only grows"
            )
    counts = allocate(population, n)
    return {
        "seed": seed,
        "size": n,
        "method": "stratified; Sainte-Laguë seats, one per stratum first; seeded order per stratum",
        "population_sha256": digest,
        "strata": {
            h: {"population": population[h], "drawn": stratum_order(strata[h], seed, h)[: counts[h]]}
            for h in sorted(strata)
        },
    }


def sample_path(run_path: Path) -> Path:
    return Path(run_path).joinpath(*SAMPLE_FILE)


def read_sample(run_path: Path) -> dict | None:
    path = sample_path(run_path)
    return read_json(path) if path.exists() else None


def write_sample(run_path: Path, record: dict) -> None:
    write_json(sample_path(run_path), record)


def drawn_ids(record: dict | None) -> set[str] | None:
    """The ids of the sample, or None when the run's items are pushed whole."""
    if record is None:
        return None
    return {i for s in record["strata"].values() for i in s["drawn"]}


def wilson(k: float, n: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval for ``k`` of ``n`` (``n`` may be an effective, non-whole sample size)."""
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def stratum_interval(k: int, n: int) -> tuple[float, float]:
    """One stratum's Wilson interval, by scipy."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(ci.low), float(ci.high)


def is_true(decision: dict) -> bool:
    """A decisions.jsonl record says its item was true as generated: kept, and nothing corrected."""
    return decision["status"] == "kept" and not decision["corrections"]


def estimate(record: dict, decisions: Iterable[dict]) -> dict:
    """What the checked sample says about the split (see the module's docstring), from the sample record and
    the decisions.jsonl records of its items."""
    stratum_of = {i: h for h, s in record["strata"].items() for i in s["drawn"]}
    rows: dict[str, dict] = {
        h: {"population": s["population"], "drawn": len(s["drawn"]), "checked": 0, "true": 0}
        for h, s in record["strata"].items()
    }
    rejected, not_counted = [], 0
    for d in decisions:
        h = stratum_of.get(d["item_id"])
        if h is None:
            continue  # pushed before the sample was drawn: not part of it
        if d["status"] not in CHECKED:
            not_counted += 1
            continue
        rows[h]["checked"] += 1
        if is_true(d):
            rows[h]["true"] += 1
        else:
            reasons = sorted({r["reason"] for r in d["reject_reasons"]}) or [
                "corrected: " + ", ".join(c["field"] for c in d["corrections"])
            ]
            rejected.append({"item_id": d["item_id"], "stratum": h, "status": d["status"], "reasons": reasons})
    for row in rows.values():
        n, k = row["checked"], row["true"]
        row["share"] = round(k / n, 4) if n else None
        row["interval"] = [round(x, 4) for x in stratum_interval(k, n)] if n else None
    covered = {h: r for h, r in rows.items() if r["checked"]}
    population = sum(r["population"] for r in covered.values())
    overall: dict = {
        "population": sum(r["population"] for r in rows.values()),
        "covered": population,
        "checked": sum(r["checked"] for r in rows.values()),
        "true": sum(r["true"] for r in rows.values()),
        "share": None,
        "interval": None,
        "effective_n": None,
    }
    if covered:
        weights = {h: r["population"] / population for h, r in covered.items()}
        share = sum(weights[h] * r["true"] / r["checked"] for h, r in covered.items())
        n_eff = 1 / sum(weights[h] ** 2 / r["checked"] for h, r in covered.items())
        overall.update(
            share=round(share, 4),
            interval=[round(x, 4) for x in wilson(share * n_eff, n_eff)],
            effective_n=round(n_eff, 2),
        )
    return {
        "confidence": CONFIDENCE,
        "method": "stratified estimate; Wilson interval per stratum (scipy) and at Kish's effective n overall",
        "seed": record["seed"],
        "strata": dict(sorted(rows.items())),
        "overall": overall,
        "not_counted": not_counted,
        "rejected": sorted(rejected, key=lambda r: (r["stratum"], r["item_id"])),
    }
