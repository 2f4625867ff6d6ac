import httpx
import pytest

from perceptforge.annotation.agreement import agreement_table, cohens_kappa, percent_agreement
from perceptforge.annotation.decisions import counted_annotations, decide
from perceptforge.annotation.labeling import KINDS, choice, config_text, config_version, controls, result_errors, text
from perceptforge.data.schema import BenchmarkItem

A, R = "Accept", "Reject"


def cross_table(cells: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    """Pairs from a two-rater agreement table: ``(rater 1's label, rater 2's label) -> how many items``."""
    return [labels for labels, n in cells.items() for _ in range(n)]


KAPPA_EXAMPLES = [
    # Wikipedia, "Cohen's kappa", worked example: p_o = 35/50, p_e = 25/50·30/50 + 25/50·20/50 = 1/2
    ({("yes", "yes"): 20, ("yes", "no"): 5, ("no", "yes"): 10, ("no", "no"): 15}, 0.4),
    # the same article, two tables with p_o = 0.6: p_e = 0.54 and 0.46 (one rater's shares unbalanced)
    ({("yes", "yes"): 45, ("yes", "no"): 15, ("no", "yes"): 25, ("no", "no"): 15}, 0.06 / 0.46),
    ({("yes", "yes"): 25, ("yes", "no"): 35, ("no", "yes"): 5, ("no", "no"): 35}, 0.14 / 0.54),
    # easycalculation.com's "learn Cohen's kappa index": 20 patients, two doctors, p_o 0.7, p_e 0.62
    ({("yes", "yes"): 12, ("no", "yes"): 2, ("yes", "no"): 4, ("no", "no"): 2}, 0.08 / 0.38),
    # three labels, by hand: p_o = 18/25; rater 1 a/b/c 10/7/8, rater 2 10/10/5, p_e = 210/625; kappa = 48/83
    (
        {("a", "a"): 8, ("b", "b"): 6, ("c", "c"): 4, ("a", "b"): 2, ("b", "c"): 1, ("c", "a"): 2, ("c", "b"): 2},
        48 / 83,
    ),
    # one rater accepts everything, the other rejects everything: p_o = 0 = p_e, so kappa is 0, not -1
    ({("accept", "reject"): 4}, 0.0),
]


@pytest.mark.parametrize(("cells", "kappa"), KAPPA_EXAMPLES)
def test_kappa_equals_the_worked_examples(cells, kappa):
    assert cohens_kappa(cross_table(cells)) == pytest.approx(kappa, rel=1e-12, abs=1e-15)


def test_kappa_and_agreement_on_hand_computed_pairs():
    pairs = [(A, A), (A, R), (A, A), (R, R)]
    # p_o = 3/4; rater 1 accepts 3/4, rater 2 1/2: p_e = 3/4·1/2 + 1/4·1/2 = 1/2; kappa = (3/4 - 1/2)/(1/2)
    assert percent_agreement(pairs) == 0.75 and cohens_kappa(pairs) == 0.5
    assert cohens_kappa([(A, A), (R, R)]) == 1.0 and cohens_kappa([(A, R), (R, A)]) == -1.0
    assert cohens_kappa([(A, A), (A, A)]) is None and cohens_kappa([]) is None and percent_agreement([]) is None
    table = agreement_table({"x": [(A, A), (A, R)], "y": [(R, R)]})
    assert table["x"] == {"items": 2, "percent_agreement": 50.0, "cohens_kappa": 0.0}
    assert table["y"] == {"items": 1, "percent_agreement": 100.0, "cohens_kappa": None}
    assert table["overall"]["items"] == 3


def test_every_kind_has_a_versioned_config_with_a_required_verdict():
    for kind in KINDS:
        text_ = config_text(kind)
        assert config_version(text_) == 1
        found = controls(text_)
        assert found["verdict"].required and found["verdict"].choices == (A, R)
        assert "reject_reason" in found and "question_fix" in found
    with pytest.raises(ValueError, match="no labeling config"):
        config_text("essay")


def test_results_are_checked_against_the_config():
    known = controls(config_text("single_mcq"))
    ok = [choice("verdict", "manipulated", A), choice("answer", "manipulated", "B")]
    assert result_errors(ok, known) == []
    assert result_errors([choice("verdict", "manipulated", "Maybe")], known) == [
        "verdict: expected one of ['Accept', 'Reject'], got ['Maybe']"
    ]
    assert result_errors([choice("bogus", "x", "A"), *ok], known) == ["unknown control 'bogus'"]
    assert result_errors([choice("answer", "manipulated", "A")], known) == ["required control 'verdict' is missing"]
    assert result_errors(
        [*ok, {"from_name": "question_fix", "type": "textarea", "value": {"text": "not a list"}}], known
    ) == ["question_fix: expected a list of texts, got 'not a list'"]


@pytest.fixture
def mcq_item():
    return BenchmarkItem.model_validate(
        {
            "id": "i1",
            "category": {"high": "behaviour", "low": "B3", "name": "Behaviour-Object Association"},
            "question": {
                "kind": "single_mcq",
                "question": "What is held?",
                "options": ["a cup", "a book", "a cat", "a pen", "a hat"],
                "answer": "A",
            },
            "pair": {
                "natural": {"path": f"images/{'0' * 64}.png", "sha256": "0" * 64, "width": 4, "height": 4},
                "manipulated": {"path": f"images/{'1' * 64}.png", "sha256": "1" * 64, "width": 4, "height": 4},
            },
            "lineage": {
                "source_id": "1",
                "source_sha256": "2" * 64,
                "template_id": "B3",
                "template_version": 1,
                "seed": 0,
            },
        }
    )


def ann(id_, user, *result, cancelled=False):
    return {"id": id_, "completed_by": user, "result": list(result), "was_cancelled": cancelled}


def verdict(v):
    return choice("verdict", "manipulated", v)


def test_decisions(mcq_item):
    known = controls(config_text("single_mcq"))
    reason = choice("reject_reason", "manipulated", "Other")
    assert decide(mcq_item, [ann(1, 7, verdict(A)), ann(2, 8, verdict(A))], known).status == "kept"
    d = decide(mcq_item, [ann(1, 7, verdict(A)), ann(2, 8, verdict(R), reason)], known, names={7: "ann7@x"})
    assert (d.status, d.reject_reasons, d.verdicts) == (
        "disagreement",
        [("user 8", "Other")],
        [("ann7@x", A), ("user 8", R)],
    )
    d = decide(mcq_item, [ann(1, 7, verdict(R), reason), ann(2, 8, verdict(R), reason)], known)
    assert (d.status, len(d.reject_reasons)) == ("rejected", 2)
    assert decide(mcq_item, [ann(1, 7, verdict(R), reason)], known).status == "rejected"  # one rejection is enough
    d = decide(mcq_item, [ann(1, 7, verdict(A)), ann(2, 8, verdict(A), cancelled=True)], known)
    assert (d.status, d.detail) == ("incomplete", "1 of 2 required annotations")
    # the same annotator twice counts once, the latest
    assert (
        decide(mcq_item, [ann(1, 7, verdict(R), reason), ann(2, 7, verdict(A)), ann(3, 8, verdict(A))], known).status
        == "kept"
    )
    d = decide(mcq_item, [ann(1, 7, verdict(R)), ann(2, 8, verdict(A))], known)
    assert d.status == "incomplete" and d.invalid == [
        {"annotation": 1, "annotator": "user 7", "errors": ["a rejection needs a reason"]}
    ]


def test_corrections_make_a_new_version(mcq_item):
    known = controls(config_text("single_mcq"))
    fix = [choice("distractor_letter", "manipulated", "C"), text("distractor_fix", "manipulated", "a kettle")]
    d = decide(mcq_item, [ann(1, 7, verdict(A), *fix), ann(2, 8, verdict(A))], known, names={7: "a@x", 8: "b@x"})
    assert d.status == "kept" and d.corrections == {"option_C": "a kettle"} and d.corrected_by == {"option_C": ["a@x"]}
    assert d.record()["corrections"] == [{"field": "option_C", "value": "a kettle", "annotators": ["a@x"]}]
    assert d.item.version == 2 and d.item.verified and d.item.lineage.parent_id == "i1"
    assert d.item.question.options[2] == "a kettle" and mcq_item.question.options[2] == "a cat"
    other = [choice("distractor_letter", "manipulated", "C"), text("distractor_fix", "manipulated", "a spoon")]
    assert decide(mcq_item, [ann(1, 7, verdict(A), *fix), ann(2, 8, verdict(A), *other)], known).status == "conflict"
    dup = [choice("distractor_letter", "manipulated", "B"), text("distractor_fix", "manipulated", "a cup")]
    d = decide(mcq_item, [ann(1, 7, verdict(A), *dup), ann(2, 8, verdict(A))], known)
    assert d.status == "invalid_correction" and "duplicates" in d.detail
    d = decide(
        mcq_item, [ann(1, 7, verdict(A), choice("distractor_letter", "manipulated", "C")), ann(2, 8, verdict(A))], known
    )
    assert d.status == "incomplete" and "needs both" in d.invalid[0]["errors"][0]


def test_latest_annotation_per_annotator():
    out = counted_annotations([ann(3, 1), ann(1, 2), ann(2, 1), ann(4, 2, cancelled=True)])
    assert [a["id"] for a in out] == [1, 3]


def test_a_server_that_does_not_answer_names_the_command_that_starts_it(tmp_path, monkeypatch):
    from perceptforge.annotation.labelstudio import LabelStudio, ServerGone, connect
    from perceptforge.annotation.server import free_port
    from perceptforge.errors import PerceptforgeError

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    # one request through the client's error boundary (the SDK's own calls retry for 3 s first)
    with pytest.raises(
        ServerGone,
        match=r"did not answer while listing projects: ConnectError; is it running\? \(`perceptforge annotate serve` starts",
    ):
        LabelStudio(url, "t" * 40).call("listing projects", lambda: httpx.get(f"{url}/api/projects", timeout=5))
    monkeypatch.setenv("PERCEPTFORGE_STATE_DIR", str(tmp_path))  # no local server recorded, none named
    monkeypatch.delenv("LABEL_STUDIO_URL", raising=False)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    with pytest.raises(PerceptforgeError, match="start one with `perceptforge annotate serve`"):
        connect()


def test_a_push_draws_each_pairs_mask_overlay_once(demo_run, tmp_path, monkeypatch):
    """An edit gives four or five items and a push sends each to 1 + N servers: the overlay, most of a task's cost,
    is drawn once per pair, and the tasks are the same as without the memo."""
    from perceptforge.annotation import task_data
    from perceptforge.outputs.export import load_items
    from perceptforge.store.rundir import RunDir

    run_dir, _ = demo_run
    run = RunDir(run_dir)
    items = list(load_items(run_dir))
    drawn = []
    real = task_data.mask_overlay
    monkeypatch.setattr(task_data, "mask_overlay", lambda *a, **k: drawn.append(a[1:]) or real(*a, **k))
    overlays: dict = {}
    remembered = [task_data.task_for(i, run, run_dir.parent, overlays) for i in items]
    pairs = {(i.pair.natural.path, i.pair.mask.path) for i in items if i.pair.mask}
    assert len(drawn) == len(pairs) < len(items)
    assert remembered == [task_data.task_for(i, run, run_dir.parent) for i in items]


def test_annotators_follow_the_local_server_to_a_new_port(tmp_path, monkeypatch):
    """`annotate serve --port 9000` after a run on 8080: the annotators' own servers still start and push finds
    them; another main server's annotators stay where they were."""
    import json

    from perceptforge.annotation.server import independent_accounts, move_annotators

    monkeypatch.setenv("PERCEPTFORGE_STATE_DIR", str(tmp_path))
    folder = tmp_path / "label-studio" / "annotators"
    folder.mkdir(parents=True)
    for email, main in [("a@x.org", "http://127.0.0.1:8080"), ("b@x.org", "http://elsewhere:8080")]:
        (folder / f"{email}.json").write_text(
            json.dumps({"email": email, "url": "http://127.0.0.1:1", "main_url": main})
        )
    move_annotators("http://127.0.0.1:8080", "http://127.0.0.1:9000")
    assert [a["email"] for a in independent_accounts("http://127.0.0.1:9000")] == ["a@x.org"]
    assert independent_accounts("http://127.0.0.1:8080") == []
    assert [a["email"] for a in independent_accounts("http://elsewhere:8080")] == ["b@x.org"]
    assert (folder / "a@x.org.json").stat().st_mode & 0o777 == 0o600
