"""Questions with one right answer: no distractor a careful annotator could also call right, and a subject that
names one person where the photo has two of its label."""

import numpy as np
import pytest

from perceptforge.data.schema import Box, Grounding, Region
from perceptforge.logic.context import subject_name
from perceptforge.logic.questions import check_not_confusable
from perceptforge.logic.templates import templates


def grounding(subject_box, others, label="man"):
    regions = [Region(label=label, box=Box.from_xyxy(b), role="object") for b in others]
    regions.append(Region(label="face", box=Box.from_xyxy((10, 10, 20, 20)), role="face"))
    return Grounding(
        source_id="7",
        caption="Two men.",
        subject=Region(label=label, box=Box.from_xyxy(subject_box), role="subject"),
        regions=regions,
        backend="annotations",
    )


def test_a_subject_alone_with_its_label_keeps_its_label():
    assert subject_name(grounding((0, 0, 100, 100), [])) == "man"


def test_two_men_side_by_side_are_told_apart_by_their_place():
    assert subject_name(grounding((0, 5, 405, 470), [(410, 0, 800, 470)])) == "man on the left"
    assert subject_name(grounding((410, 0, 800, 470), [(0, 5, 405, 470)])) == "man on the right"
    assert subject_name(grounding((300, 0, 500, 400), [(0, 0, 250, 400), (550, 0, 800, 400)])) == "man in the middle"


def test_a_man_standing_behind_another_cannot_be_named_and_says_so():
    with pytest.raises(ValueError, match="would not say which one is meant"):
        subject_name(grounding((100, 0, 400, 400), [(150, 50, 350, 400)]))


def test_a_watercolour_is_never_offered_beside_an_oil_painting():
    s2 = templates()["S2"]
    assert s2.confusable("a watercolour") == {"an oil painting"}
    assert s2.confusable("An oil painting") == {"a watercolour"}  # read both ways
    assert s2.confusable("a sepia photograph") == set()
    with pytest.raises(ValueError, match="could also be called right"):
        check_not_confusable("a watercolour", ["a pencil sketch", "an oil painting"], s2.confusable("a watercolour"))
    from perceptforge.backends.writers import TemplateWriter

    ctx = {"new_value": "a watercolour", "original_value": "a colour photograph"}
    for seed in range(20):  # every draw of the embedded writer
        drawn = TemplateWriter().distractors(s2, ctx, np.random.default_rng(seed))
        assert "an oil painting" not in drawn and len(drawn) == 3
