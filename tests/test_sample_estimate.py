"""The verified sample's draw and the estimate it gives (logic/verified_sample.py), on tiny inputs."""

import math

import pytest
from scipy.stats import binomtest

from perceptforge.errors import InputError
from perceptforge.logic.verified_sample import (
    SampleSize,
    allocate,
    draw,
    estimate,
    parse_sample_size,
    stratum_order,
)

STRATA = {"B1": [f"b{i:02d}" for i in range(12)], "I1": [f"i{i}" for i in range(8)], "S2": [f"s{i}" for i in range(4)]}


def test_sizes_parse_as_a_count_or_a_share_and_anything_else_is_one_line():
    assert parse_sample_size("20") == SampleSize(count=20) and parse_sample_size("10%") == SampleSize(percent=10.0)
    assert SampleSize(percent=10.0).of(44) == 5 and SampleSize(count=99).of(44) == 44
    for bad in ("0", "-3", "ten", "0%", "150%", ""):
        with pytest.raises(InputError, match=r"^--sample '.*': give a number of items"):
            parse_sample_size(bad)


def test_allocation_is_proportional_gives_every_stratum_one_and_never_shrinks_as_the_sample_grows():
    population = {h: len(ids) for h, ids in STRATA.items()}
    assert allocate(population, 3) == {"B1": 1, "I1": 1, "S2": 1}
    assert allocate(population, 12) == {"B1": 6, "I1": 4, "S2": 2}  # exactly in proportion: 12 of 24
    assert allocate(population, 24) == population
    previous = allocate(population, 0)
    for n in range(1, 25):
        now = allocate(population, n)
        assert sum(now.values()) == n and all(now[h] >= previous[h] for h in now)
        previous = now


def test_the_draw_is_seeded_stratified_and_a_larger_sample_extends_the_smaller():
    first = draw(STRATA, SampleSize(count=12), seed=7)
    assert first == draw({h: list(reversed(ids)) for h, ids in STRATA.items()}, SampleSize(count=12), seed=7)
    assert first != draw(STRATA, SampleSize(count=12), seed=8)
    assert {h: len(s["drawn"]) for h, s in first["strata"].items()} == {"B1": 6, "I1": 4, "S2": 2}
    assert first["strata"]["B1"]["drawn"] == stratum_order(STRATA["B1"], 7, "B1")[:6]
    grown = draw(STRATA, SampleSize(count=18), seed=7, previous=first)
    for h, s in first["strata"].items():
        assert grown["strata"][h]["drawn"][: len(s["drawn"])] == s["drawn"]
    with pytest.raises(InputError, match=r"drawn with seed 7; extend it with that seed \(--sample-seed 7\), not 8"):
        draw(STRATA, SampleSize(count=18), seed=8, previous=first)
    with pytest.raises(InputError, match="fewer than the 12 already drawn; a sample only grows"):
        draw(STRATA, SampleSize(count=6), seed=7, previous=first)
    with pytest.raises(InputError, match="the run's items changed since the sample was drawn"):
        draw({**STRATA, "S2": STRATA["S2"][:3]}, SampleSize(count=18), seed=7, previous=first)


def decision(item_id, status, corrections=(), reasons=()):
    return {
        "item_id": item_id,
        "status": status,
        "corrections": [{"field": f, "value": "x", "annotators": []} for f in corrections],
        "reject_reasons": [{"annotator": "a", "reason": r} for r in reasons],
    }


def test_the_estimate_counts_only_decided_items_and_equals_a_reference_computation():
    record = draw(STRATA, SampleSize(count=12), seed=7)
    b1, i1, s2 = (record["strata"][h]["drawn"] for h in ("B1", "I1", "S2"))
    decisions = [
        *(decision(i, "kept") for i in b1[:5]),
        decision(b1[5], "rejected", reasons=["The edit is not what the idea says"]),
        *(decision(i, "kept") for i in i1[:2]),
        decision(i1[2], "kept", corrections=["answer"]),  # kept after a correction: false as generated
        decision(i1[3], "disagreement"),  # not settled: not counted
        decision(s2[0], "kept"),
        decision(s2[1], "incomplete"),
        decision("pushed-before-the-sample", "rejected"),
    ]
    out = estimate(record, decisions)
    assert {h: (r["checked"], r["true"]) for h, r in out["strata"].items()} == {
        "B1": (6, 5),
        "I1": (3, 2),
        "S2": (1, 1),
    }
    assert out["not_counted"] == 2
    for h, (k, n) in {"B1": (5, 6), "I1": (2, 3), "S2": (1, 1)}.items():
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert out["strata"][h]["interval"] == [round(ci.low, 4), round(ci.high, 4)]
    # stratified: W = 12/24, 8/24, 4/24; Kish's n_eff = 1 / Σ W²/n
    w = {"B1": 0.5, "I1": 1 / 3, "S2": 1 / 6}
    share = w["B1"] * 5 / 6 + w["I1"] * 2 / 3 + w["S2"] * 1
    n_eff = 1 / (w["B1"] ** 2 / 6 + w["I1"] ** 2 / 3 + w["S2"] ** 2 / 1)
    z = 1.959963984540054
    centre = (share + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z / (1 + z * z / n_eff) * math.sqrt(share * (1 - share) / n_eff + z * z / (4 * n_eff**2))
    overall = out["overall"]
    assert (overall["share"], overall["effective_n"]) == (round(share, 4), round(n_eff, 2))
    assert overall["interval"] == [round(centre - half, 4), round(centre + half, 4)]
    assert (overall["checked"], overall["true"], overall["population"]) == (10, 8, 24)
    assert [(r["item_id"], r["reasons"]) for r in out["rejected"]] == [
        (b1[5], ["The edit is not what the idea says"]),
        (i1[2], ["corrected: answer"]),
    ]


def test_a_sample_checked_in_proportion_gives_the_pooled_wilson_interval():
    record = draw(STRATA, SampleSize(count=12), seed=1)
    decisions = [decision(i, "kept") for s in record["strata"].values() for i in s["drawn"]][:-1]
    last = record["strata"]["S2"]["drawn"][-1]
    out = estimate(record, [*decisions, decision(last, "rejected", reasons=["wrong"])])
    # 6/4/2 of 12/8/4: self-weighting, so the stratified estimate is the pooled one
    assert out["overall"]["effective_n"] == 12.0
    ci = binomtest(11, 12).proportion_ci(method="wilson")
    assert out["overall"]["interval"] == [round(ci.low, 4), round(ci.high, 4)]
