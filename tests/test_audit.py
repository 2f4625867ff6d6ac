"""perceptforge audit: each check on hand-made splits, the blind baseline against a local chat server, the
CLI's --strict gate, and the audit that export runs."""

import base64
import io
import json
import math
import re
import shutil
import subprocess

import numpy as np
import pytest
from helpers import perceptforge_cmd
from PIL import Image
from test_export import make_run

from perceptforge.audit import checks
from perceptforge.audit.items import AuditItem, read_items
from perceptforge.audit.run import audit, thresholds
from perceptforge.audit.stats import chi2_sf
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.outputs.export import export_split

LIMITS = thresholds()


def mcq(n: int, answer, options=("a cat", "a dog", "a cup", "a hat"), category="c") -> list[AuditItem]:
    return [
        AuditItem(
            f"q{k}",
            category,
            "mcq",
            "What is on the table?",
            answer(k),
            tuple(options(k) if callable(options) else options),
        )
        for k in range(n)
    ]


def hand_written_chi2_sf(x: float, df: int) -> float:
    """``audit/stats.chi2_sf`` as it was before scipy computed it (issue 29), kept only to compare with."""
    if x <= 0:
        return 1.0
    a, z = df / 2, x / 2
    if z < a + 1:
        term = total = 1 / a
        k = a
        while term > total * 1e-15:
            k += 1
            term *= z / k
            total += term
        return max(0.0, 1 - total * math.exp(-z + a * math.log(z) - math.lgamma(a)))
    b, c, d = z + 1 - a, 1e300, 1 / (z + 1 - a)
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return min(1.0, h * math.exp(-z + a * math.log(z) - math.lgamma(a)))


# both sides of the series / continued-fraction switch (z = a + 1), the tails, and the audit's df (letters - 1)
CHI2_TABLE = [
    (x, df)
    for df in (1, 2, 3, 4, 5, 9, 30, 100)
    for x in (0.0, 1e-6, 0.01, 0.5, 1.0, df / 2, df, df + 2, 1.5 * df + 3, 3 * df + 10, 80.0, 250.0, 700.0)
]


@pytest.mark.parametrize(("x", "df"), CHI2_TABLE)
def test_scipys_chi_square_p_value_equals_the_hand_written_one(x, df):
    new, old = chi2_sf(x, df), hand_written_chi2_sf(x, df)
    assert abs(new - old) <= 1e-9 and math.isclose(new, old, rel_tol=1e-9, abs_tol=1e-300)


def test_chi_square_survival_matches_tables():
    for x, df, p in [(3.841, 1, 0.05), (9.210, 2, 0.01), (11.070, 5, 0.05), (0.0, 3, 1.0)]:
        assert chi2_sf(x, df) == pytest.approx(p, abs=2e-4)


def test_answers_all_a_fail_the_balance_check_and_uniform_answers_pass():
    failed = checks.answer_balance(mcq(40, lambda k: "A"), LIMITS["balance"])
    assert failed.passed is False and failed.figures["answer_letters"] == {"A": 40}
    assert failed.figures["chi_square"]["p_value"] < 1e-6 and "not uniform" in failed.summary
    passed = checks.answer_balance(mcq(40, lambda k: "ABCD"[k % 4]), LIMITS["balance"])
    assert passed.passed is True and passed.figures["chi_square"]["p_value"] == 1.0
    few = checks.answer_balance(mcq(3, lambda k: "A"), LIMITS["balance"])
    assert few.passed is None  # too few to judge: reported, not failed
    yes = [AuditItem(f"y{k}", "c", "yes_no", "Is it red?", "yes") for k in range(20)]
    assert checks.answer_balance(yes, LIMITS["balance"]).figures["yes_share"] == 100.0
    assert checks.answer_balance(yes, LIMITS["balance"]).passed is False


def test_pairs_need_two_different_answers():
    pair = [
        AuditItem("p#1", "c", "yes_no", "Is it red?", "yes", pair="p"),
        AuditItem("p#2", "c", "yes_no", "Is it red?", "yes", pair="p"),
    ]
    fine = [
        AuditItem("r#1", "c", "yes_no", "Is it red?", "yes", pair="r"),
        AuditItem("r#2", "c", "yes_no", "Is it red?", "no", pair="r"),
    ]
    result = checks.opposite_pairs(pair + fine, LIMITS["balance"])
    assert result.passed is False and result.flags == [
        {"item": "p#1", "check": "pairs", "pair": "p", "answers": ["yes", "yes"]}
    ]


def test_longest_option_always_right_fails_the_option_bias_check():
    rotate = ["a cat", "a dog", "a cup", "a hat"]

    def options(k):  # the answer, at a rotating position, is the only long option
        opts = list(rotate)
        opts[k % 4] = "a small striped cat sleeping on a folded woollen blanket"
        return opts

    biased = checks.option_bias(mcq(40, lambda k: "ABCD"[k % 4], options), LIMITS["option_bias"])
    assert biased.passed is False and biased.figures["longest_is_answer"] == 100.0
    assert biased.figures["heuristic_accuracy"] == 100.0 and biased.figures["random"] == 25.0
    assert biased.figures["per_category"] == {"c": {"items": 40, "heuristic": 100.0, "random": 25.0}}
    assert len(biased.flags) == 40 and biased.flags[0]["check"] == "option_bias"
    fair = checks.option_bias(
        mcq(40, lambda k: "ABCD"[k % 4], ["a cat", "a dog", "a cup", "a hat"]), LIMITS["option_bias"]
    )
    assert fair.passed is True and fair.flags == []


def test_two_identical_images_are_flagged_as_duplicates(tmp_path):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "one.png")
    Image.fromarray(pixels).save(tmp_path / "same.jpg", quality=90)  # the same picture, re-encoded
    Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(tmp_path / "other.png")
    items = [
        AuditItem("a", "c", "mcq", "Q1?", "A", ("x", "y"), images=(str(tmp_path / "one.png"),), source="s1"),
        AuditItem("b", "c", "mcq", "Q2?", "B", ("x", "y"), images=(str(tmp_path / "same.jpg"),), source="s2"),
        AuditItem("c", "c", "mcq", "Q3?", "A", ("x", "y"), images=(str(tmp_path / "other.png"),), source="s3"),
    ]
    result = checks.duplicates(items, LIMITS["duplicates"])
    assert result.passed is False and result.figures["near_duplicate_image_pairs"] == 1
    (flag,) = result.flags
    assert {flag["item"], flag["other_item"]} == {"a", "b"} and flag["hamming"] <= LIMITS["duplicates"]["image_hamming"]


def test_leakage_between_val_and_test_is_flagged():
    items = [
        AuditItem("a", "c", "mcq", "Q1?", "A", ("x", "y"), split="val", source="s1"),
        AuditItem("b", "c", "mcq", "Q2?", "A", ("x", "y"), split="test", source="s1"),
    ]
    result = checks.duplicates(items, LIMITS["duplicates"])
    assert result.passed is False and result.figures["sources_in_both_splits"] == 1
    assert result.flags[0]["check"] == "leakage" and result.flags[0]["splits"] == ["test", "val"]


def test_an_export_audits_clean_and_each_yes_no_pair_is_two_questions(tmp_path):
    out = tmp_path / "s"
    export_split(make_run(tmp_path), out)
    items = read_items([out])
    assert len(items) == 32 and {i.split for i in items} == {"val", "test"}
    doc = audit([out], out)
    by_name = {c["name"]: c for c in doc["checks"]}
    assert by_name["pairs"]["passed"] is True and by_name["pairs"]["figures"]["pairs"] == 8
    assert by_name["human_verification"]["passed"] is None
    # export splits whole sources: no picture is on both sides
    assert by_name["duplicates"]["passed"] is True and by_name["duplicates"]["figures"]["sources_in_both_splits"] == 0
    assert (out / "audit.html").read_text().startswith("<!doctype html>")
    assert json.loads((out / "audit.json").read_text())["inputs"] == ["."]


def test_blind_baseline_against_a_chat_server_that_answers_from_text(tmp_path):
    from chat_server import ChatServer

    from perceptforge.backends.chat import ChatClient

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl",))
    seen_pixels = set()

    def from_text_alone(req):
        content = req["messages"][0]["content"]
        for part in content[:-1]:
            data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
            seen_pixels.update(
                map(tuple, np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).reshape(-1, 3).tolist())
            )
        return "Yes" if "Yes or No" in content[-1]["text"] else "A"

    with ChatServer(from_text_alone) as server:
        doc = audit([out], out, blind=ChatClient(base_url=server.base_url, model="tiny"))
        asked = len(server.requests)
        audit([out], out, blind=ChatClient(base_url=server.base_url, model="tiny"))
        assert len(server.requests) == asked == 32  # the same endpoint and model: nothing asked again
    blind = next(c for c in doc["checks"] if c["name"] == "blind_baseline")
    assert seen_pixels == {(128, 128, 128)}  # the model saw grey images only
    # single MCQs: 2 of 8 answers are A; cross MCQs (answer B): 0 of 8; Yes/No: right on the 8 manipulated images
    assert blind["figures"]["accuracy"] == pytest.approx(100 * 10 / 32, abs=0.01)
    assert blind["figures"]["random"] == pytest.approx(100 * (8 / 5 + 8 / 2 + 16 / 2) / 32, abs=0.01)
    assert blind["passed"] is True and set(blind["figures"]["per_category"]) == {
        "B3 Behaviour-Object Association",
        "S1 Scenario-Background",
    }
    assert len(list(out.glob("blind_grey-*.jsonl"))) == 1  # the answers, kept per endpoint and model
    with ChatServer(from_text_alone) as other:  # another model is asked itself, never given the first one's answers
        audit([out], out, blind=ChatClient(base_url=other.base_url, model="other"))
        assert len(other.requests) == 32
    with ChatServer(lambda req: (401, "invalid api key")) as refusing:
        with pytest.raises(
            PerceptforgeError, match=r"16 of 16 request\(s\) to .* failed, e.g. .*HTTP 401: .*invalid api key"
        ):
            audit([out], out, blind=ChatClient(base_url=refusing.base_url, model="locked"))


def test_cli_strict_gates_on_a_failed_check_and_export_runs_the_audit(tmp_path, cli_env):
    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl",))
    for line_file in ("val.jsonl", "test.jsonl"):  # every MCQ answer becomes A: the balance check fails
        rows = [json.loads(line) for line in (out / line_file).read_text().splitlines()]
        for row in rows:
            if "options" in row["question"]:
                row["question"]["answer"] = "A"
        (out / line_file).write_text("".join(json.dumps(r) + "\n" for r in rows))
    strict = subprocess.run(
        [*perceptforge_cmd(), "audit", str(out), "--strict"], capture_output=True, text=True, env=cli_env, timeout=300
    )
    assert strict.returncode == 1 and "balance" in strict.stdout and "FAILED" in strict.stdout
    lenient = subprocess.run(
        [*perceptforge_cmd(), "audit", str(out)], capture_output=True, text=True, env=cli_env, timeout=300
    )
    assert lenient.returncode == 0
    loose = tmp_path / "loose.yaml"
    loose.write_text("balance:\n  min_p_value: 0.0\n")
    relaxed = subprocess.run(
        [*perceptforge_cmd(), "audit", str(out), "--strict", "--thresholds", str(loose)],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=300,
    )
    assert relaxed.returncode == 0, relaxed.stdout
    loose.write_text("balance:\n  min_pvalue: 0.0\n")
    with pytest.raises(InputError, match="unknown thresholds"):
        thresholds(loose)

    shutil.rmtree(out)
    exported = subprocess.run(
        [*perceptforge_cmd(), "export", str(tmp_path / "run"), "--out", str(out)],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=300,
    )
    assert exported.returncode == 0, exported.stderr
    assert (out / "audit.json").exists() and (out / "audit.html").exists() and "option_bias" in exported.stdout


def test_codis_pairs_get_two_blind_checks_no_image_and_no_context(tmp_path):
    """A model that reads the answer off the context alone beats random without the image (the check fails);
    without the context, a pair's two questions are the same, so it gets one of each pair right (random)."""
    from chat_server import ChatServer

    from perceptforge.backends.chat import ChatClient

    records = []
    for k in range(12):
        Image.fromarray(np.full((16, 16, 3), k * 10, np.uint8)).save(tmp_path / f"{k}.png")
        records.append(
            {
                "id": f"{k:03d}",
                "image_id": f"{k}.png",
                "question": "Am I opening or closing the door?",
                "context": {"context_1": "The door swings toward me.", "context_2": "The door swings away from me."},
                "answer": {"answer_1": "Opening the door.", "answer_2": "Closing the door."},
                "category": "Location and Orientation",
            }
        )
    data = tmp_path / "data.json"
    data.write_text(json.dumps(records))
    asked = {"with_image": 0, "with_context": 0}

    def reply(req):
        content = req["messages"][0]["content"]
        text = content if isinstance(content, str) else content[-1]["text"]
        asked["with_image"] += not isinstance(content, str)
        asked["with_context"] += "Context:" in text
        if "away from me" in text:
            return "The door moves away.\nClosing the door."
        return "It looks like a door.\nOpening the door."

    with ChatServer(reply) as server:
        doc = audit(
            [data],
            tmp_path / "audit",
            "codis",
            blind=ChatClient(base_url=server.base_url, model="tiny"),
            images=tmp_path,
        )
    by_name = {c["name"]: c for c in doc["checks"]}
    no_image, no_context = by_name["blind_baseline (no image)"], by_name["blind_baseline (no context)"]
    assert (
        no_image["figures"]["accuracy"] == 100.0
        and no_image["figures"]["random"] == 50.0
        and no_image["passed"] is False
    )
    assert no_context["figures"]["accuracy"] == 50.0 and no_context["passed"] is True
    assert asked == {"with_image": 24, "with_context": 24}  # 24 questions each way: no image once, no context once
    assert doc["passed"] is False


def test_human_verification_figures_come_from_the_pull_summary(tmp_path):
    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl",))
    summary = {
        "items": 10,
        "status": {"kept": 8, "rejected": 1, "disagreement": 1},
        "agreement": {"overall": {"items": 9, "percent_agreement": 88.89, "cohens_kappa": 0.6}},
    }
    (out / "verification.json").write_text(json.dumps(summary))
    check = next(c for c in audit([out], out)["checks"] if c["name"] == "human_verification")
    assert check["passed"] is True and check["figures"]["kept_share"] == 80.0
    assert check["figures"]["agreement"]["overall"]["cohens_kappa"] == 0.6
    summary["agreement"]["overall"]["percent_agreement"] = 60.0
    (out / "verification.json").write_text(json.dumps(summary))
    assert next(c for c in audit([out], out)["checks"] if c["name"] == "human_verification")["passed"] is False


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("balance:\n  min_p_value: high\n", "balance.min_p_value: must be a finite number, got 'high'"),
        ("balance:\n  min_p_value: .nan\n", "balance.min_p_value: must be a finite number, got nan"),
        ("balance:\n  min_p_value: 2\n", "balance.min_p_value: must be between 0 and 1, got 2"),
        ("duplicates:\n  image_hamming: 3.5\n", "duplicates.image_hamming: must be a finite whole number, got 3.5"),
        ("balance:\n  min_items: 5\n  min_items: 50\n", "thresholds.yaml:3: key 'min_items' is given twice"),
        ("balance: [1\n", "invalid YAML"),
    ],
)
def test_thresholds_are_numbers_in_range_given_once(tmp_path, text, said):
    from perceptforge.audit.run import thresholds

    path = tmp_path / "thresholds.yaml"
    path.write_text(text)
    with pytest.raises(PerceptforgeError, match=re.escape(said)):
        thresholds(path)
    path.write_text("balance:\n  min_p_value: 0.05\nduplicates:\n  image_hamming: 6\n")
    assert thresholds(path)["balance"]["min_p_value"] == 0.05 and thresholds(path)["duplicates"]["image_hamming"] == 6


def test_a_one_sided_export_is_audited_and_says_it_has_no_test_split(tmp_path, cli_env):
    """--val-fraction 1 puts every source in val: the export succeeds, and its audit says there is no test split."""
    import subprocess

    from helpers import perceptforge_cmd
    from test_export import make_run

    run = make_run(tmp_path)
    out = tmp_path / "split"
    done = subprocess.run(
        [*perceptforge_cmd(), "export", str(run), "--out", str(out), "--val-fraction", "1", "--formats", "jsonl"],
        env=cli_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads((out / "audit.json").read_text())
    assert doc["notes"] == ["no test split: every item is on the other side"]
    assert "no test split" in (out / "audit.html").read_text()
