"""Human verification of BLINK-style items, the pure pieces: the labeling config, task data, decisions on
annotations, corrected versions, the export's data card and its clean-up (tiny inputs, no server)."""

import json

import pytest

from perceptforge.annotation.decisions import decide, perception_corrected, perception_corrections
from perceptforge.annotation.labeling import choice, config_text, config_version, controls, perception_config, text
from perceptforge.annotation.task_data import BLANK_IMAGE, perception_task
from perceptforge.data.schema import PerceptionItem
from perceptforge.outputs.blink_export import data_card, remove_stale
from perceptforge.store.rundir import RunDir

A, R = "Accept", "Reject"
SHA = "ab" * 32


@pytest.fixture
def item() -> PerceptionItem:
    return PerceptionItem.model_validate(
        {
            "id": "p1",
            "task": "Counting",
            "question": "How many cups are in the image?",
            "choices": ["2", "3", "4"],
            "answer": "A",
            "images": [{"path": f"images/{SHA}.png", "sha256": SHA, "width": 8, "height": 8}],
            "random_choice": 33.33,
            "sources": ["s1"],
            "lineage": {
                "source_id": "s1",
                "source_sha256": SHA,
                "template_id": "counting",
                "template_version": 1,
                "seed": 0,
            },
        }
    )


def test_the_perception_config_is_versioned_and_shows_only_the_slots_a_project_uses():
    whole = config_text("perception_mcq")
    assert config_version(whole) == 1
    found = controls(whole)
    assert found["verdict"].required and found["verdict"].choices == (A, R)
    assert found["reject_reason"].type == "textarea" and not found["reject_reason"].required
    assert found["answer"].choices == tuple("ABCDE") and not found["answer"].required
    for n in range(1, 5):
        cut = perception_config(n)
        assert [f"$image_{k}" in cut for k in range(1, 5)] == [k <= n for k in range(1, 5)]
        assert controls(cut) == found  # the controls, and so the checks of annotations, stay the same
    for bad in (0, 5):
        with pytest.raises(ValueError, match="1 to 4 images"):
            perception_config(bad)


def test_task_data_fills_every_slot_of_its_project(item, tmp_path):
    run = RunDir(tmp_path / "run")
    task = perception_task(item, run, tmp_path, slots=3)
    data = task["data"]
    assert data["image_1"] == f"/data/local-files/?d=run/images/{SHA}.png"
    assert data["image_2"] == data["image_3"] == BLANK_IMAGE and "image_4" not in data
    assert data["choices_text"] == "(A) 2\n(B) 3\n(C) 4" and data["proposed_text"] == "(A) 2"
    assert data["lineage"]["template_id"] == "counting" and data["config_version"] == 1
    assert task["predictions"][0]["result"] == [choice("answer", "image_1", "A")]
    with pytest.raises(ValueError, match="item p1: 1 images, but its project shows 0"):
        perception_task(item, run, tmp_path, slots=0)


def test_only_the_answer_letter_can_be_corrected(item):
    assert perception_corrections(item, {"verdict": A, "answer": "A"}) == ({}, [])
    assert perception_corrections(item, {"verdict": A}) == ({}, [])
    assert perception_corrections(item, {"verdict": A, "answer": "C"}) == ({"answer": "C"}, [])
    assert perception_corrections(item, {"verdict": A, "answer": "E"}) == (
        {},
        ["answer 'E' is not one of the item's choices ['A', 'B', 'C']"],
    )
    fixed = perception_corrected(item, {"answer": "C"})
    assert (fixed.answer, fixed.version, fixed.verified, fixed.id) == ("C", 2, True, "p1")
    assert fixed.lineage.parent_id == "p1" and fixed.lineage.artifacts == {
        "verification": "verification/decisions.jsonl"
    }
    assert (item.answer, item.version, item.lineage.parent_id) == ("A", 1, None)
    with pytest.raises(ValueError, match="not one of the 3 choices"):
        perception_corrected(item, {"answer": "D"})


def annotation(n: int, who: int, *result: dict) -> dict:
    return {"id": n, "completed_by": who, "result": list(result)}


def blink_decision(item, *annotations):
    return decide(
        item,
        list(annotations),
        controls(config_text("perception_mcq")),
        2,
        {1: "ann1", 2: "ann2"},
        kind=item.task,
        changes_of=perception_corrections,
        apply=perception_corrected,
    )


def test_decisions_on_blink_items_follow_the_verification_rules(item):
    verdict = {v: choice("verdict", "image_1", v) for v in (A, R)}
    reason = text("reject_reason", "image_1", "two counts fit")
    kept = blink_decision(
        item, annotation(1, 1, verdict[A]), annotation(2, 2, verdict[A], choice("answer", "image_1", "B"))
    )
    assert (kept.status, kept.kind, kept.corrections, kept.corrected_by) == (
        "kept",
        "Counting",
        {"answer": "B"},
        {"answer": ["ann2"]},
    )
    assert kept.item.answer == "B" and kept.item.version == 2 and kept.record()["version"] == 2
    plain = blink_decision(item, annotation(1, 1, verdict[A]), annotation(2, 2, verdict[A]))
    assert plain.status == "kept" and plain.item == item.model_copy(update={"verified": True})
    split = blink_decision(item, annotation(1, 1, verdict[A]), annotation(2, 2, verdict[R], reason))
    assert (split.status, split.reject_reasons, split.item) == ("disagreement", [("ann2", "two counts fit")], None)
    clash = blink_decision(
        item,
        annotation(1, 1, verdict[A], choice("answer", "image_1", "B")),
        annotation(2, 2, verdict[A], choice("answer", "image_1", "C")),
    )
    assert (clash.status, clash.detail) == ("conflict", "annotators corrected answer differently")
    # a rejection without a reason and a letter the item lacks do not count
    bad = blink_decision(
        item, annotation(1, 1, verdict[R]), annotation(2, 2, verdict[A], choice("answer", "image_1", "E"))
    )
    assert bad.status == "incomplete" and [i["errors"] for i in bad.invalid] == [
        ["a rejection needs a reason"],
        ["answer 'E' is not one of the item's choices ['A', 'B', 'C']"],
    ]


def test_the_data_card_gives_items_random_choice_and_agreement_per_task(item):
    jigsaw = item.model_copy(update={"id": "p2", "task": "Jigsaw", "random_choice": 66.67, "sources": ["s2"]})
    verification = {
        "required_annotators": 2,
        "items": 2,
        "status": {"kept": 1, "rejected": 1},
        "status_per_kind": {"Counting": {"kept": 1}, "Jigsaw": {"rejected": 1}},
        "corrected": 1,
        "invalid_annotations": 0,
        "agreement": {
            "Counting": {"items": 1, "percent_agreement": 100.0, "cohens_kappa": None},
            "overall": {"items": 1, "percent_agreement": 100.0, "cohens_kappa": None},
        },
    }
    sources = {"s1": {"licence": "CC0-1.0", "attribution": "someone"}}
    card = data_card([item, jigsaw], verification, sources, "cc0-1.0")
    assert card.startswith("---\nlicense: cc0-1.0\n") and "- config_name: Jigsaw" in card
    assert "| Counting | 1 | 33.33% |" in card and "| Jigsaw | 1 | 66.67% |" in card
    assert "| all (random choice: mean over tasks) | 2 | 50.0% |" in card
    assert "| rejected | 1 |" in card and "| kept with a corrected answer | 1 |" in card
    assert "| Counting | 1 | 1 | 1 | 100.0% | — |" in card and "| Jigsaw | 1 | 0 | 0 | — | — |" in card
    assert "| overall | 2 | 1 | 1 | 100.0% | — |" in card
    assert "- s1: CC0-1.0 (someone)" in card and "- s2: licence not recorded" in card
    assert "Not verified by people yet" in data_card([item], None, sources, "other")


def test_a_new_export_removes_only_what_the_previous_one_wrote_and_no_longer_writes(tmp_path):
    out = tmp_path / "out"
    for rel in ("val_answers.json", "Jigsaw/val-00000-of-00001.parquet", "concat/Jigsaw/val.parquet", "mine.txt"):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(rel)
    listed = ["val_answers.json", "Jigsaw/val-00000-of-00001.parquet", "concat/Jigsaw/val.parquet", "../outside"]
    (tmp_path / "outside").write_text("not ours")
    (out / "manifest.json").write_text(
        json.dumps({"official": ["val_answers.json"], "files": dict.fromkeys(listed, "x")})
    )
    remove_stale(out, {"val_answers.json"})
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert left == ["manifest.json", "mine.txt", "val_answers.json"] and (tmp_path / "outside").exists()
