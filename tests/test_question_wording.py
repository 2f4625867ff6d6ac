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
    assert s2.confusable("a watercolour") == {"an oil painting", "a cartoon"}
    assert s2.confusable("An oil painting") == {"a watercolour", "a cartoon"}  # read both ways
    assert s2.confusable("a sepia photograph") == set()
    with pytest.raises(ValueError, match="could also be called right"):
        check_not_confusable("a watercolour", ["a pencil sketch", "an oil painting"], s2.confusable("a watercolour"))
    from perceptforge.backends.writers import TemplateWriter

    ctx = {"new_value": "a watercolour", "original_value": "a colour photograph"}
    for seed in range(20):  # every draw of the embedded writer
        drawn = TemplateWriter().distractors(s2, ctx, np.random.default_rng(seed))
        assert "an oil painting" not in drawn and len(drawn) == 3


def candidate(template_id, value, grounding_=None, old="a colour photograph"):
    """The unit's questions for one value of a template, on a tiny grounding (no photo is read)."""
    from perceptforge.backends.writers import TemplateWriter
    from perceptforge.data.schema import Idea, IdeaRecord
    from perceptforge.logic.renderings import from_alternatives
    from perceptforge.tasks.questions import make_candidate

    found = templates()
    template = found[template_id]
    g = grounding_ or grounding((0, 0, 100, 100), [], label="woman")
    g = g.model_copy(update={"attributes": {template.attribute: old}})
    rendering = next(r for r in from_alternatives(template, "sd-inpaint") if r.value == value)
    idea = Idea(
        category=template_id,
        subject="woman",
        attribute=template.attribute,
        old=old,
        new=value,
        new_caption="c",
        high_level_value=rendering.high,
        rendering=rendering,
    )
    descriptions = {tid: t.cross_description for tid, t in found.items()}
    record = IdeaRecord(unit=f"7-{template_id}", idea=idea)
    return make_candidate(template, g, "a" * 64, record, TemplateWriter(), descriptions, seed=0)


def cross_high(candidate_):
    return [q.question for q in candidate_.questions if q.question.kind == "cross_mcq" and q.question.level == "high"]


@pytest.mark.parametrize(("template_id", "value"), [("S2", "a sepia photograph"), ("S1", "a desert")])
def test_a_change_to_the_whole_scene_is_asked_in_the_release_wording_without_the_person(template_id, value):
    # "Which aspect of the woman has been altered?" → scenario, for a photo filter: the woman is unchanged
    (asked,) = cross_high(candidate(template_id, value))
    assert asked.question == "Which aspect has been altered between the pair of images?"
    assert asked.options["ABCDE".index(asked.answer)] == "scenario"


def test_a_change_to_the_person_still_names_them():
    (asked,) = cross_high(candidate("I1", "a clown's face paint", old="short brown hair"))
    assert asked.question == "Which aspect of the woman has been altered between the pair of images?"
    assert asked.options["ABCDE".index(asked.answer)] == "identity"


def test_dyed_hair_gets_no_identity_question():
    # bright blue hair changes how she looks, not who she is: no "which aspect … altered?" → identity
    i1 = templates()["I1"]
    assert not i1.asks_cross_high("bright blue hair") and i1.asks_cross_high("a clown's face paint")
    made = candidate("I1", "bright blue hair", old="short brown hair")
    assert cross_high(made) == [] and len(made.questions) == 3
    assert "questions/cross_high" not in {p.id for p in made.lineage.prompts}


def test_a_pencil_sketch_is_not_drawn_for_a_black_and_white_photo():
    # the sketch keeps a grey photo's detail: "a black-and-white photograph", the natural answer, would be right too
    from perceptforge.logic.renderings import choices, photo_filters

    s2 = templates()["S2"]
    offered = photo_filters(s2, "filters")
    grey = {r.value for r in choices(offered, "a black-and-white photograph", "", s2.confusable)}
    colour = {r.value for r in choices(offered, "a colour photograph", "", s2.confusable)}
    assert "a pencil sketch" in colour and "a pencil sketch" not in grey and "a sepia photograph" in grey


def test_the_stylization_filter_is_called_what_it_looks_like():
    # OpenCV's stylization draws ink outlines round flat colour: a cartoon, never offered beside a watercolour
    s2 = templates()["S2"]
    (filtered,) = [a for a in s2.writer.alternatives if a.photo_filter == "watercolour"]
    assert filtered.value == "a cartoon"
    assert s2.confusable("a cartoon") == {"a watercolour", "an oil painting"}
    single = next(q.question for q in candidate("S2", "a cartoon").questions if q.question.kind == "single_mcq")
    assert "a watercolour" not in single.options and "an oil painting" not in single.options


def test_a_scene_label_claims_no_time_of_day_a_black_and_white_photo_cannot_show():
    from pydantic import ValidationError

    from perceptforge.store.donors import Donor, DonorLibrary, colour_only_claim

    assert colour_only_claim("a rocket launch pad at dusk") == "dusk" and colour_only_claim("a duskier wall") is None
    with pytest.raises(ValidationError, match="names 'dusk', which a black-and-white photo"):
        Donor(id="pad", file="p.jpg", kind="scene", label="a launch pad at dusk", highs={"scenario": "x"}, licence="l")
    with pytest.raises(ValidationError, match="names 'sunset'"):
        Donor(id="pad", file="p.jpg", kind="scene", label="a pad", highs={"scenario": "at sunset"}, licence="l")
    bundled = DonorLibrary.load().donors
    assert all(colour_only_claim(t) is None for d in bundled.values() for t in (d.label, *d.highs.values()))


def test_a_pasted_starry_sky_says_what_the_picture_shows():
    # the deep-field paste reads as a backdrop: "in front of a starry sky", never "in outer space"
    from perceptforge.store.donors import DonorLibrary

    assert DonorLibrary.load().donors["deep-space"].highs == {"scenario": "in front of a starry sky"}
