from collections import Counter

import numpy as np
import pytest

from perceptforge.logic import questions as q

DESCRIPTIONS = [
    "Substitute the background.",
    "Alter the main subject's movement.",
    "Replace the object held by the main subject.",
    "Change the main subject's clothes.",
    "Introduce a group of people.",
    "Change the main subject's gesture.",
]


def test_yes_no_pair_has_opposite_answers():
    pair = q.yes_no_pair("Is the woman  holding a gun?", "low")
    assert (pair.question, pair.answer_natural, pair.answer_manipulated) == ("Is the woman holding a gun?", "no", "yes")
    with pytest.raises(ValueError, match="must end with"):
        q.yes_no_pair("The woman holds a gun.", "low")


def test_single_mcq_options_and_answer():
    mcq = q.single_mcq(
        "What is the woman holding?", "a gun", "a helmet", ["a cup", "a book", "a phone"], np.random.default_rng(0)
    )
    assert sorted(mcq.options) == sorted(["a gun", "a helmet", "a cup", "a book", "a phone"])
    assert mcq.answer_text == "a gun" and mcq.image == "manipulated"
    with pytest.raises(ValueError, match="repeats the correct or the natural answer"):
        q.single_mcq("Q?", "a gun", "a helmet", ["A Gun", "a book", "a phone"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="duplicates"):
        q.single_mcq("Q?", "a gun", "a helmet", ["a cup", "a cup", "a phone"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="an option is empty"):
        q.single_mcq("Q?", "a gun", "a helmet", ["a cup", " ", "a phone"], np.random.default_rng(0))
    with pytest.raises(ValueError, match="exactly 3 distractors"):
        q.single_mcq("Q?", "a gun", "a helmet", ["a cup"], np.random.default_rng(0))


def test_answer_letters_are_balanced_and_seeded():
    letters = Counter(
        q.single_mcq("Q?", "a", "b", ["c", "d", "e"], np.random.default_rng(seed)).answer for seed in range(2000)
    )
    assert set(letters) == set("ABCDE") and min(letters.values()) > 340  # ~400 each
    same = [q.single_mcq("Q?", "a", "b", ["c", "d", "e"], np.random.default_rng(7)).options for _ in range(2)]
    assert same[0] == same[1]


def test_cross_mcqs():
    low = q.cross_mcq_low(
        "How have the pair of images been modified?",
        "Substitute the background.",
        DESCRIPTIONS + ["Substitute the background."],
        np.random.default_rng(1),
    )
    assert low.answer_text == "Substitute the background." and len(set(low.options)) == 5 and low.level == "low"
    high = q.cross_mcq_high(
        "Which aspect of the man has been altered between the pair of images?", "role", np.random.default_rng(1)
    )
    assert sorted(high.options) == sorted(q.HIGH_LEVEL_OPTIONS) and high.answer_text == "role"
    with pytest.raises(ValueError, match="need 4 other"):
        q.cross_mcq_low("Q?", "Substitute the background.", DESCRIPTIONS[:3], np.random.default_rng(0))
    with pytest.raises(ValueError, match="not one of"):
        q.cross_mcq_high("Q?", "mood", np.random.default_rng(0))


def test_cross_high_leaves_out_what_the_edit_also_changes():
    mcq = q.cross_mcq_high("Which aspect?", "behaviour", np.random.default_rng(0), exclude=["scenario"])
    assert sorted(mcq.options) == ["behaviour", "emotion", "identity", "role"] and mcq.answer_text == "behaviour"
    with pytest.raises(ValueError, match="both the answer and excluded"):
        q.cross_mcq_high("Which aspect?", "behaviour", np.random.default_rng(0), exclude=["behaviour"])
