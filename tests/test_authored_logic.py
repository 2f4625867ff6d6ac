"""The human-authored flows' pure parts on hand-made inputs: drafts, automatic checks, annotation parsing."""

import numpy as np
import pytest

from perceptforge.annotation.authored import content_of, prefill, revision_notes
from perceptforge.annotation.labeling import config_text, controls, rectangle, rectangle_result, result_errors
from perceptforge.data.schema import Box, CodisContent, MMERealWorldContent, Review
from perceptforge.flows.mme_realworld import MME_REALWORLD
from perceptforge.logic import authored
from perceptforge.prompts.library import load_prompt


def mme(**kw) -> MMERealWorldContent:
    base = dict(
        question="What colour is the mission patch?",
        options=["Red", "Blue", "Green", "White"],
        absent_object="mission patch",
        answer="B",
        domain="Monitoring",
        subtask="color",
        target=Box(x0=0, y0=0, x1=100, y1=100),
    )
    return MMERealWorldContent(**(base | kw))


def flagged(checks, name):
    return next(c for c in checks if c.name == name).flagged


def test_a_target_of_a_fifth_of_the_image_is_flagged_and_a_twentieth_is_not():
    # 1000x1000 image: 447x447 ≈ 1/5, 224x224 ≈ 1/20
    big = authored.mme_checks(mme(target=Box(x0=0, y0=0, x1=447, y1=447)), 1000, 1000, 0.1)
    small = authored.mme_checks(mme(target=Box(x0=500, y0=500, x1=724, y1=724)), 1000, 1000, 0.1)
    assert flagged(big, "target_small") and next(c for c in big if c.name == "target_small").value == pytest.approx(
        0.1998, abs=1e-3
    )
    assert "20.0% of the image (at most 10.0%)" in next(c.detail for c in big if c.name == "target_small")
    assert not flagged(small, "target_small")
    assert flagged(authored.mme_checks(mme(target=None), 1000, 1000, 0.1), "target_small")


def test_the_e_option_must_name_the_asked_about_object_and_options_must_differ():
    assert not flagged(authored.mme_checks(mme(), 1000, 1000, 0.1), "e_names_object")
    other = authored.mme_checks(mme(absent_object="flag"), 1000, 1000, 0.1)
    assert flagged(other, "e_names_object") and "flag" in next(c.detail for c in other if c.name == "e_names_object")
    repeated = authored.mme_checks(mme(options=["Red", "red.", "Green", "White"]), 1000, 1000, 0.1)
    assert flagged(repeated, "options_distinct") and "red" in next(c.detail for c in repeated if c.flagged)
    assert mme().choices[-1] == "The image does not feature the mission patch."


def test_codis_answers_and_contexts_must_differ():
    same = CodisContent(
        question="Is it morning?",
        context_1="After sunrise.",
        context_2="Before sunset.",
        answer_1="Yes.",
        answer_2="yes",
        category="Temporal Information",
    )
    checks = authored.codis_checks(same)
    assert flagged(checks, "answers_differ") and not flagged(checks, "contexts_differ")


def test_near_duplicate_questions_flag_the_later_item_only():
    questions = {
        "a": "Is the man on my left or on my right?",
        "b": "Is the man on my right or my left?",
        "c": "What season is it in the picture?",
    }
    assert authored.near_duplicates(questions, 0.8) == {"b": ("a", 1.0)}
    assert authored.near_duplicates(questions, 1.01) == {}


def test_the_position_draft_is_true_of_the_box():
    prompt = load_prompt("draft/mme_realworld_position")
    region = {"label": "name tag", "bbox": [800, 700, 50, 30]}  # lower right of 1000x1000
    for seed in range(5):
        draft = authored.mme_position_draft(prompt, region, 1000, 1000, "Monitoring", np.random.default_rng(seed))
        assert draft.choices["ABCDE".index(draft.answer)] == "In the lower right part of the image."
        assert sorted(draft.options) == sorted(
            authored.parse_fields(prompt.render(object="x"), "p")[q] for q in authored.QUADRANTS
        )
        assert draft.target == Box(x0=800, y0=700, x1=850, y1=730) and draft.absent_object == "name tag"
        assert "name tag" in draft.question


def test_the_orientation_draft_mirrors_the_side_for_the_other_viewer():
    draft = authored.codis_draft(
        load_prompt("draft/codis_location_and_orientation"), "Location and Orientation", "camera", "left"
    )
    assert (draft.answer_1, draft.answer_2) == ("On my left.", "On my right.") and "camera" in draft.question


def test_a_small_target_is_a_thing_not_stuff_and_within_the_fraction():
    regions = [
        {"id": 1, "label": "woman", "bbox": [0, 0, 500, 500], "role": "subject"},
        {"id": 2, "label": "hair", "bbox": [0, 0, 20, 20], "isthing": 0},
        {"id": 3, "label": "face", "bbox": [0, 0, 30, 30], "role": "face"},
        {"id": 4, "label": "patch", "bbox": [10, 10, 60, 60]},
    ]
    assert authored.target_region(regions, 1000, 1000, 0.1)["label"] == "patch"
    assert authored.target_region(regions[:3], 1000, 1000, 0.1) is None


def test_a_bad_draft_template_line_is_named():
    with pytest.raises(ValueError, match="draft/x line 2: expected 'key: value'"):
        authored.parse_fields("question: q\nno colon here", "draft/x")


def test_an_authored_mme_annotation_reads_back_as_content_with_its_rectangle_in_pixels():
    content = mme(answer="E", absent_object="mission patch", target=Box(x0=400, y0=300, x1=800, y1=600))
    from perceptforge.data.schema import AuthoredItem

    item = AuthoredItem.model_validate(
        {
            "id": "x",
            "version": 1,
            "image": {
                "path": "images/" + "a" * 64 + ".jpg",
                "sha256": "a" * 64,
                "width": 4000,
                "height": 3000,
                "source_id": "s",
                "file_name": "s.jpg",
                "licence": "CC0",
            },
            "content": content.model_dump(),
            "lineage": {
                "source_id": "s",
                "source_sha256": "a" * 64,
                "benchmark": "mme-realworld",
                "seed": 0,
                "draft_backend": {"name": "template"},
            },
        }
    )
    result = prefill(item)
    assert result_errors(result, controls(config_text("mme_realworld_author"))) == []
    back = content_of(result, MME_REALWORLD, 4000, 3000)
    assert back == content
    # an annotator who types the whole E sentence still gives only its object
    typed = [r for r in result if r["from_name"] != "absent_object"]
    typed.append(
        {
            "from_name": "absent_object",
            "to_name": "image",
            "type": "textarea",
            "value": {"text": ["(E) The image does not feature the mission patch."]},
        }
    )
    assert content_of(typed, MME_REALWORLD, 4000, 3000).absent_object == "mission patch"
    # an object whose name starts with an E keeps it
    typed[-1] = typed[-1] | {"value": {"text": ["Eiffel tower model"]}}
    assert content_of(typed, MME_REALWORLD, 4000, 3000).absent_object == "Eiffel tower model"
    missing = [r for r in result if r["from_name"] != "question"]
    with pytest.raises(ValueError, match="question"):
        content_of(missing, MME_REALWORLD, 4000, 3000)


def test_rectangles_round_trip_through_label_studio_percentages():
    r = rectangle_result("target", "image", (123.45, 67.8, 901.2, 345.6), 4000, 3000, "target")
    assert rectangle([r], "target", 4000, 3000) == (123.45, 67.8, 901.2, 345.6)
    assert result_errors([r | {"value": {"x": 1}}], controls(config_text("mme_realworld_author")))


def test_revision_notes_name_each_failing_reviewer_and_what_they_said_no_to():
    reviews = [
        Review(reviewer="a@x", correct=True, distinct=True, follows_rules=True),
        Review(reviewer="b@x", correct=False, distinct=True, follows_rules=False, comment="answer 2 is wrong"),
    ]
    assert revision_notes(reviews) == "b@x (correct, rules): answer 2 is wrong"


def test_an_object_near_the_middle_is_on_no_side_and_its_orientation_turn_passes():
    assert authored.side(325, 640) is None and authored.side(390, 512) == "right" and authored.side(100, 512) == "left"
    assert authored.codis_category(0, None) == "Location and Orientation"
    assert authored.codis_category(0, None, left_or_right=False) == "Temporal Information"
    assert authored.codis_category(0, "Relationships", left_or_right=False) == "Relationships"


def test_a_position_question_is_drafted_only_about_a_target_in_one_quarter():
    rocket = {"label": "rocket", "bbox": [305, 120, 40, 260]}  # 640x427: across both middle lines
    camera = {"label": "camera", "bbox": [255, 135, 75, 65]}  # 512x512: 1 px over the vertical middle
    assert authored.quadrant_share(rocket["bbox"], 640, 427) < 0.5
    assert authored.quadrant_share(camera["bbox"], 512, 512) == pytest.approx(74 / 75)
    assert authored.unambiguous_position([rocket], 640, 427) is None
    assert authored.unambiguous_position([rocket, camera], 512, 512) is camera


def test_the_wording_files_say_which_drafts_the_contexts_alone_decide():
    from perceptforge.data.schema import CODIS_CATEGORIES

    decided = {
        c: authored.context_decides(load_prompt("draft/codis_" + "_".join(authored.words(c)))) for c in CODIS_CATEGORIES
    }
    assert decided == {c: c != "Location and Orientation" for c in CODIS_CATEGORIES}
