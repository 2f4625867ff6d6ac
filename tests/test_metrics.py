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
