import numpy as np
import pytest

from perceptforge.scorer import metrics as m

Y = m.YesNoRecord
# Three pairs; questions asked on the natural (S) and the manipulated (E) image.
RECORDS = [
    Y("P1", "S", "low", "q1", True),
    Y("P1", "E", "low", "q1", True),
    Y("P1", "S", "high", "q2", True),
    Y("P1", "E", "high", "q2", False),
    Y("P2", "S", "low", "q3", False),
    Y("P2", "E", "low", "q3", True),
    Y("P2", "S", "low", "q4", True),
    Y("P2", "E", "low", "q4", True),
    Y("P3", "S", "high", "q5", True),
    Y("P3", "E", "high", "q5", True),
]


def test_mvp_yes_no_definitions_differ():
    r = m.mvp_yes_no(RECORDS)
    assert r["aAcc"] == pytest.approx(80.0)  # 8 of 10 answers
    # q1, q4 of 3 low; q5 of 2 high; 3 of the 5 questions over all
    assert r["qAcc"] == pytest.approx({"low": 200 / 3, "high": 50.0, "all": 60.0})
    assert r["iAcc"] == pytest.approx({"S": 200 / 3, "E": 200 / 3, "all": 200 / 3})  # P1-S, P3-S; P2-E, P3-E
    assert r["pooled"] == pytest.approx({"low": 500 / 6, "high": 75.0})  # both images of a level together
    assert r["mAcc"] == pytest.approx(100 / 3)  # only P3 is right everywhere
    assert r["accuracy"] == pytest.approx({"S_low": 200 / 3, "S_high": 100.0, "E_low": 100.0, "E_high": 50.0})


def test_mvp_official_filters():
    r = m.mvp_yes_no(RECORDS, official=True)
    # iAcc keeps images with more than one question (P1, P2); mAcc pairs with more than three records.
    assert r["iAcc"] == pytest.approx({"S": 50.0, "E": 50.0, "all": 50.0})
    assert r["mAcc"] == 0.0
    assert r["aAcc"] == pytest.approx(80.0)


def test_circular_and_empty():
    assert m.circular({"a": [True] * 5, "b": [True, False, True, True, True]}) == 50.0
    assert m.pct([]) is None and m.mean([None]) is None


def test_codis():
    pairs = [
        m.CodisPair("X", (True, True), True),
        m.CodisPair("X", (True, False), True),
        m.CodisPair("Y", (False, False), False),
    ]
    r = m.codis(pairs)
    assert r["overall"] == pytest.approx({"Acc_p": 100 / 3, "Acc_q": 50.0})
    assert r["categories"]["X"] == pytest.approx({"Acc_p": 50.0, "Acc_q": 75.0})
    assert r["categories"]["Y"] == {"Acc_p": 0.0, "Acc_q": 0.0}
    assert r["context_awareness"] == pytest.approx(200 / 3)


def test_mme_realworld_avg_and_avg_c():
    R = m.MMERecord
    rs = [
        R("perception", "D1", "c1", True),
        R("perception", "D1", "c1", True),
        R("perception", "D1", "c1", False),
        R("perception", "D1", "c2", True),
        R("perception", "D2", "c3", False, chose_e=True),
    ]
    out = m.mme_realworld(rs)
    r = out["perception"]
    assert r["D1"] == pytest.approx({"Avg": 75.0, "Avg_C": (200 / 3 + 100) / 2, "E": 0})
    assert r["Avg"] == 60.0  # 3 of 5 items
    assert r["Avg_C"] == 37.5  # mean of the domains: 75 and 0
    assert r["D2"]["E"] == 1 and r["E"] == 1 and out["overall"] == 60.0


def test_bootstrap_is_seeded():
    items = [("a", True), ("a", False), ("b", True), ("b", True), ("b", False)] * 4
    first = m.bootstrap_groups(items, 200, seed=3)
    assert first == m.bootstrap_groups(items, 200, seed=3)
    lo, hi = first["overall"]
    assert lo < m.mean(m.per_group(items).values()) < hi


def hand_written_bootstrap_ci(units, statistic, n, seed, alpha=0.05):
    """``scorer/metrics.bootstrap_ci`` as it was before scipy computed it (issue 29), kept only to compare with."""
    if n <= 0 or not units:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n):
        idx = rng.integers(0, len(units), len(units))
        v = statistic([units[i] for i in idx])
        if v is not None:
            values.append(v)
    if not values:
        return None
    lo, hi = np.percentile(values, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(lo), float(hi)


def macro(sample):
    return m.mean(m.per_group(sample).values())


def flags_of(size, share, seed):
    return [bool(f) for f in np.random.default_rng(seed).random(size) < share]


def grouped(size, seed):
    rng = np.random.default_rng(seed)
    return [(str(g), bool(f)) for g, f in zip(rng.choice(list("abcd"), size), rng.random(size) < 0.55)]


BOOTSTRAP_TABLE = [
    (flags_of(1, 1.0, 0), m.pct, 50, 0, 0.05),
    (flags_of(2, 0.5, 1), m.pct, 100, 1, 0.05),
    (flags_of(7, 0.6, 2), m.pct, 300, 2, 0.05),  # odd sizes: a resample's draws end mid 64-bit word
    (flags_of(50, 0.7, 3), m.pct, 1000, 3, 0.05),
    (flags_of(333, 0.4, 4), m.pct, 500, 4, 0.1),
    ([True] * 20, m.pct, 200, 5, 0.05),
    (grouped(101, 6), macro, 400, 6, 0.05),
    (grouped(40, 7), macro, 250, 7, 0.05),
]


@pytest.mark.parametrize(("units", "statistic", "n", "seed", "alpha"), BOOTSTRAP_TABLE)
def test_scipys_bootstrap_gives_the_hand_written_interval(units, statistic, n, seed, alpha):
    new, old = (
        m.bootstrap_ci(units, statistic, n, seed, alpha),
        hand_written_bootstrap_ci(units, statistic, n, seed, alpha),
    )
    assert new == pytest.approx(old, rel=1e-9, abs=1e-9) and len(new) == 2


def test_no_interval_without_resamples_or_units_or_where_the_statistic_is_undefined():
    assert m.bootstrap_ci([True, False], m.pct, 0, 0) is None and m.bootstrap_ci([], m.pct, 100, 0) is None
    assert m.bootstrap_ci([1, 2, 3], lambda s: None if 1 in s else 5.0, 100, 0) is None
    assert m.bootstrap_ci([2, 2], lambda s: float(sum(s)), 100, 0) == (4.0, 4.0)
