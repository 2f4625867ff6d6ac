"""Answer extraction on real outputs (BLINK saved_outputs of GPT-4V and LLaVA-1.5, MVP-Bench, MME-RealWorld
failure cases from the reference README) and on the formats evaluators meet."""

import re

import pytest

from perceptforge.scorer.extract import extract_choice, extract_yes_no, normalise_answer

POINTS = ["Point A", "Point B", "Point C", "Point D"]
IMAGES = ["the second image", "the third image"]

CASES = [
    # (output, number of options, options or None, expected letter or None)
    ("B", 5, None, "B"),
    ("(B)", 4, None, "B"),
    ("B.", 4, None, "B"),
    ("B)", 4, None, "B"),
    ("Answer: B", 4, None, "B"),
    ("**B**", 4, None, "B"),
    ("the answer is (B)", 4, None, "B"),
    ("The answer is B.", 4, None, "B"),
    ("<s> (B) 3", 4, None, "B"),
    ("<s> (D) 0", 4, None, "D"),
    ("<s> (B) no", 2, None, "B"),
    ("<s> (A) the first image", 4, None, "A"),
    ("(C) Point C", 4, None, "C"),
    (
        "(D) 0\n\nThe toilet in the image is white, not black. There are no black toilets visible in this image.",
        4,
        None,
        "D",
    ),
    ("There is one blue float visible in the image.\n\nThe correct answer is:\n(D) 1", 4, None, "D"),
    ("In the image, there are two players wearing red shirts. So the correct answer is:\n\n(C) 2", 4, None, "C"),
    (
        "Based on the pattern observed, the correct answer should be an enclosed symbol with a circle. Therefore, the correct choice is:\n\n(D) picture D",
        4,
        None,
        "D",
    ),
    ("Therefore, the correct choice is:\n(D) Point D", 4, POINTS, "D"),
    (
        "<s> The corresponding point for the reference point on the second image, labeled REF, is (A) Point A.",
        4,
        POINTS,
        "A",
    ),
    (
        "- Option D has three triangles with an incorrect sequence of stripes.\n\nThe correct answer that follows the pattern is:\n\n(B) picture B",
        4,
        None,
        "B",
    ),
    (
        "Point A is closer to the camera. It is located on the thumb of the left hand, which is extended further towards the camera than point B, which is on the right hand.",
        2,
        None,
        "A",
    ),
    ("A is closer to the camera.", 2, None, "A"),
    (
        "Box B more accurately localizes and encloses the wok. It fits closely to the edges of the wok, whereas Box A is too large.",
        2,
        ["Box A", "Box B"],
        "B",
    ),
    (
        'The point labeled with "REF" in the first image corresponds to point "C" in the second image. You can tell because it is the same corner of the building.',
        4,
        POINTS,
        "C",
    ),
    (
        "The corresponding point to the reference point (REF) on the first image is Point C, as it is the only point located on the front wheel. Point A is on the seat.",
        4,
        POINTS,
        "C",
    ),
    ("Therefore, the image that shares the same style as the reference image is:\n(A) the second image", 2, None, "A"),
    (
        "Based on the similarity in pattern and coloration, (A) the second image is most similar to the first one.",
        2,
        None,
        "A",
    ),
    (
        "The camera is moving to the right (clockwise) around the object. This is evident because the second image shows more of the left side of the mug.",
        2,
        ["left", "right"],
        "B",
    ),
    (
        "Therefore, the second image shares the same style as the reference image, which is Pop Art.",
        2,
        ["the second image", "the third image"],
        "A",
    ),
    ("it appears that the cat is sitting on the table. Therefore, the most likely answer is:\n\n(A) yes", 2, None, "A"),
    # Refusals, hedges and empty outputs are unparsed, never a letter.
    ("", 5, None, None),
    ("   ", 4, None, None),
    (None, 4, None, None),
    ("I'm sorry, I cannot determine which image is real from these pictures.", 4, None, None),
    (
        "As an AI, I don't have the ability to authenticate photographs, but I might lean towards (B), (C), or (D) as being more likely real.",
        4,
        None,
        None,
    ),
    ("Without further evidence, all four images could potentially be real photographs.", 4, None, None),
    (
        "it is not possible to confidently select either (A) the second image or (B) the third image as the more appropriate image.",
        2,
        None,
        None,
    ),
    ("If pressed to select only one, I might choose (A) or (B) due to the soft focus and sepia tone.", 4, None, None),
    # MME-RealWorld's official script turns these into A and B; they are unparsed (or right) here.
    ("Based on the image, the answer is D", 5, None, "D"),
    ("Based on the image, I cannot tell.", 5, None, None),
    # Only the item's valid letters count.
    ("Therefore, the correct answer is (E) Point E, which corresponds to the REF point.", 4, POINTS, None),
    ("E", 4, None, None),
    ("A cat is sitting on the sofa.", 4, None, None),
    ("the answer is a pen", 4, None, None),
    # Each declaration form, found from the word it needs (the match may start before that word).
    ("After looking closely, I would choose (C) since it is brighter.", 4, None, "C"),
    ("Hard to say. I'll go with B.", 4, None, "B"),
    ("I'd pick: D", 4, None, "D"),
    ("The point that matches the reference is :  (B) Point B", 4, POINTS, "B"),
    ("The matching points are:\n(D) Point D", 4, POINTS, "D"),
    ("The image is: sunny. So the answer is (A).", 4, None, "A"),
    # A character whose lower case is longer ("İ" → "i̇") must not shift where the declaration is read.
    ("İİİİİİ İstanbul photo: (A) shows the mosque. The answer is (C).", 4, None, "C"),
    # Last explicit declaration wins.
    ("At first I thought the answer is A. On reflection, the answer is (C).", 4, None, "C"),
    # Option-text fallback.
    ("She is holding a red umbrella.", 4, ["a gun", "a red umbrella", "a helmet", "a book"], "B"),
    (
        "Change the main subject's facial expression. She now frowns instead of smiling.",
        5,
        [
            "Substitute the background.",
            "Change the main subject's facial expression.",
            "Introduce a group of people.",
            "Change the main subject's clothes.",
            "Change the main subject's gesture.",
        ],
        "B",
    ),
    # misreads found on BLINK's released outputs: the model lettering the images itself ("the third image
    # (C)" where the option "the third image" is B). A valid letter beside another option's text makes the
    # output ambiguous (its letters or the options'?): unparsed, for the judge.
    (
        "The third image (C) is most similar to the first one. Both the first and third images feature a "
        "grilled cheese sandwich, whereas the second image (B) shows a salad.",
        2,
        IMAGES,
        None,
    ),
    (
        "Based on the context, the second image (B) is more appropriate to place in the missing spot.\n\n"
        "So, the answer is:\n**(A) the second image**",
        2,
        IMAGES,
        None,
    ),
    ("So, the answer is: **(B) the second image**", 2, IMAGES, None),
    ("The second image (A) matches the first one best.", 2, IMAGES, "A"),
    # only letters the item lacks as labels ("(C)" of two options): unparsed unless the output also pairs a
    # letter with its own option text
    ("Therefore, the third image (C) is the missing part of the first image.", 2, IMAGES, None),
    (
        "Comparing these, the third image (C) is most similar to the first one. Therefore, the answer is:\n"
        "(B) the third image.",
        2,
        IMAGES,
        "B",
    ),
    # the opening letter and the statement after it name different options
    (
        "B\nThe missing part of the first image would be more appropriate to place with the second image, as "
        "both show a blue curtain.",
        2,
        IMAGES,
        None,
    ),
    # an opening sentence that describes, contradicted by the concluding one
    (
        "The first image shows a wok with vegetables, while the second image shows an empty wok. The third "
        "image also shows a wok with vegetables. Therefore, the third image is most similar to the first image.",
        2,
        IMAGES,
        None,
    ),
    # a concluding sentence that names an option only by its text decides nothing when the output names
    # both (the official judge read such conclusions otherwise one time in five): for the judge
    (
        "The second and third images both show a dog on grass. Therefore, the second image is most similar "
        "to the first one.",
        2,
        IMAGES,
        None,
    ),
    # a negation ("cannot") and an elided list ("the second or third image") name no choice
    (
        "Based on the information provided, I cannot accurately determine which of the second or third image "
        "is the missing part.",
        2,
        IMAGES,
        None,
    ),
    # "box (A or B)" names both boxes, not A
    (
        "To determine which bounding box (A or B) more accurately localizes the sweater, we compare how "
        "closely each fits it.",
        2,
        ["Box A", "Box B"],
        None,
    ),
    # a list of the options after "are:" is not a declaration; the concluding one is
    (
        "The choices provided are:\n\n(A) Point A - at the top of a hammer\n(B) Point B - at the face of a "
        "hammer\n(C) Point C - at the handle of a hammer\n\nTherefore, the corresponding point is (C) Point C.",
        4,
        POINTS,
        "C",
    ),
    ("The correct answer is:\n\n(A) picture A\n(B) picture B\n(C) picture C\n(D) picture D", 4, None, None),
    # one declaration per option: none chosen
    (
        "Point A is on the head. Therefore, the answer is (A).\n\nPoint B is on the tail. Therefore, the "
        "answer is (B).\n\nPoint C is on the paw. Therefore, the answer is (C).",
        4,
        POINTS,
        None,
    ),
    # a declaration, then a conclusion naming two options together
    (
        "The handle is used to hold it, so the corresponding point is:\n\n(B) Point B\n\nSo, the "
        "corresponding points for the reference point (REF) are (B) Point B and (C) Point C.",
        4,
        POINTS,
        None,
    ),
    # a conclusion that refers to other options is not two answers
    (
        "The correct answer is (D) picture D. The first picture (A) is flipped to create the second picture "
        "(B), and the third picture (C) is flipped to create the fourth picture (D), which is the correct answer.",
        4,
        None,
        "D",
    ),
    # declarations through "So/Therefore, … is X" and through a named option
    (
        "(A) Point A is below REF.\n(B) Point B is above REF.\n\nSo, the corresponding point for REF is (C).",
        4,
        POINTS,
        "C",
    ),
    ("Therefore, the corresponding point for the reference point is Point B.", 4, POINTS, "B"),
    ("I would select Point C as the corresponding point to the reference point labeled REF.", 4, POINTS, "C"),
    # two hedged answers: strict never guesses
    (
        "Point A is in a shadow, so it might give the impression that:\n\n(A) A is darker\n\nBut without the "
        "shading, the answer could be:\n\n(C) About the same",
        3,
        None,
        None,
    ),
    # "Therefore:" then the option, after a first sentence that names another point
    (
        "Point A is located on the ceiling, which appears white. The refrigerator's surface (B) is darker. "
        "Therefore:\n\n(B) B is darker",
        3,
        None,
        "B",
    ),
    # the last concluding sentence argues against an option; the one before it chooses
    (
        "(A) The second image shows a real flower.\n\n(B) The third image is an illustration.\n\nBased on these "
        "observations, the second image (A) is most similar to the first one. The third image (B) is an "
        "illustration and thus differs significantly in style.",
        2,
        ["the second image", "the third image"],
        "A",
    ),
]


@pytest.mark.parametrize("output, n, options, expected", CASES)
def test_extract_choice(output, n, options, expected):
    assert extract_choice(output, n, options).value == expected


def test_table_is_large_enough():
    assert len(CASES) >= 40


def test_unparsed_says_why():
    assert extract_choice("", 4).method == "empty"
    assert extract_choice("I cannot answer this.", 4).method == "refusal"
    assert extract_choice("the answer is (B)", 4).method == "declaration"


@pytest.mark.parametrize(
    "output, expected",
    [
        ("Yes", "yes"),
        ("No.", "no"),
        ("yes, she is", "yes"),
        ("**No**", "no"),
        ("The answer is no.", "no"),
        ("I think so, yes.", "yes"),
        ("", None),
        ("Maybe", None),
        ("Yes and no", "yes"),
        ("It could be yes or no.", None),
        ("Maybe? The answer is yes and no", None),  # strict never guesses
    ],
)
def test_extract_yes_no(output, expected):
    assert extract_yes_no(output).value == expected


def test_normalise_answer():
    assert normalise_answer("Putting on my clothes.") == "putting on my clothes"
    assert normalise_answer("The  Left  side!") == "left side"


# --- issue 45: the rules that read only what every earlier rule left open (tiny inputs, taken from the
# released BLINK outputs; the last column is the rule that must decide, None where the output stays unread)
LAST_RULES = [
    ("左", 2, ["left", "right"], "A", "option_word"),
    ("右。", 2, ["left", "right"], "B", "option_word"),
    ("はい", 2, ["yes", "no"], "A", "option_word"),
    ("左", 2, None, None, None),  # options unknown: nothing to translate into
    ("左", 2, ["the second image", "the third image"], None, None),  # "left" is no option here
    ("Point A is closer to the camera than point B.", 2, None, "A", "compared_subject"),
    ("The surface color (albedo) at point B appears darker than at point A.", 2, None, "B", "compared_subject"),
    (
        "Point A, which is on the person's headscarf, is closer to the camera than point B.",
        2,
        None,
        "A",
        "compared_subject",
    ),
    ("It appears that B is closer to the camera than A.", 2, None, "B", "compared_subject"),
    (
        "Box A more accurately localizes and encloses the bench because it fits, while Box B overlaps.",
        2,
        ["Box A", "Box B"],
        "A",
        "compared_subject",
    ),
    ("Point A appears to be further from the camera than point B.", 2, None, None, None),  # not what is asked
    ("Point A might be closer to the camera than point B.", 2, None, None, None),  # hedged
    ("Point A is not closer to the camera than point B.", 2, None, None, None),  # negated
    (
        "Point A appears to be further away from the camera compared to point B. The trees near point A look small. "
        "Therefore, point B is likely closer to the camera than point A.",
        2,
        None,
        "B",
        "compared_subject",
    ),
    (
        "The red circle matches the handle. The corresponding point for the reference point is A.",
        4,
        POINTS,
        "A",
        "final_statement",
    ),
    (
        "The handle serves the same function. The corresponding point is the handle, which is labeled C.",
        4,
        POINTS,
        "C",
        "final_statement",
    ),
    ('The man labeled "A" appears to be standing closer to the camera than the boy labeled "B".', 2, None, None, None),
    ("Circle E matches the red circle. Therefore, the answer is (E).", 4, POINTS, None, None),  # E: not an option
    (
        "The reference point is on the face of the hammer.\n\n- Point A is on the face.\n- Point B is on the claw.\n\n"
        "Given the face, the corresponding point in the second image is Point A, as it is on the face.",
        4,
        POINTS,
        "A",
        "final_statement",
    ),
    (
        "Option (B) adds a line and (C) removes one. Given the pattern, option (D) seems to be the most logical choice.",
        4,
        None,
        "D",
        "final_statement",
    ),
    (
        "Point C is on the blade and Point D is on the handle. The corresponding point could be Point D.",
        4,
        POINTS,
        None,
        None,
    ),
    (
        "Some look staged: (B) is posed and (C) is lit, as the second and third images show. If I had to choose, I would lean towards:\n\n(A) the first image, as it looks natural.",
        4,
        ["the first image", "the second image", "the third image", "the fourth image"],
        "A",
        "final_statement",
    ),
    (
        "I cannot make assumptions about the identity of the people in the images. However, the edges match. Therefore, my answer is (A) the second image.",
        2,
        IMAGES,
        "A",
        "declaration",
    ),
    ("I cannot determine which image fits. Therefore, my answer is (A) the second image.", 2, IMAGES, None, "refusal"),
    # the output's own lettering of the images, as the official GPT judge reads it half one way, half the other
    ("The second image (B) is most similar to the first image.", 2, IMAGES, None, "conflicting_letters"),
    ("The third image (C) is most similar to the first image (A).", 2, IMAGES, None, "conflicting_letters"),
]


@pytest.mark.parametrize("output,n,options,expected,method", LAST_RULES)
def test_last_rules(output, n, options, expected, method):
    got = extract_choice(output, n, options)
    assert got.value == expected, got
    if method:
        assert got.method == method, got


def test_disclaims_only_and_hedged():
    from perceptforge.scorer.extract import _hedged, disclaims_only

    assert disclaims_only("i cannot make assumptions about the identity of the people.", " however, the edges …")
    assert not disclaims_only("i cannot determine which image fits.", " however, …")
    assert not disclaims_only("i cannot make assumptions about the people.", " the answer is unknown.")
    assert not _hedged("if i had to choose, i would pick (a)", 0, 37)
    assert not _hedged("i might lean towards (a)", 0, 24)
    assert _hedged("it might be (a)", 0, 15)


def test_scan_helpers_read_as_the_patterns_they_replace():
    """The str.find scans behind the rules (issue 45's speed) read exactly as the regexes they replaced."""
    from perceptforge.scorer.extract import _find_mentions, _sentence_spans, _standalone, _two_capitals

    standalone = re.compile(r"[ABCD](?![A-Za-z])(?<![A-Za-z].)")
    for text, start, end in [
        ("Based on (B), A is", 0, 18),
        ("xA Bx C.", 0, 8),
        ("AB", 0, 1),
        ("aB c", 2, 4),
        ("", 0, 0),
    ]:
        found = standalone.search(text, start, end)
        assert _standalone(text, "ABCD", start, end) == (found.start() if found else -1), text
    assert _sentence_spans("One. Two!\n\n  \nThree...  four? ") == ((0, 4), (5, 9), (14, 22), (24, 29))
    assert _two_capitals("A and B", "AB", 0, 7) and not _two_capitals("A and B", "AB", 0, 6)
    text = "Point A, [B] and image (C]"
    assert [m[2] for m in _find_mentions(text, text.lower(), "ABC", 0, len(text))] == ["A", "B", "C"]


def test_prefilters_never_skip_what_their_pattern_would_match():
    """Issue 45's speed: each cheap test before a regex call (an opening character, a word found with str.find,
    a sentence's last capital) skips the call only where the pattern cannot match; one scan of all the nouns
    finds the letters the scan per noun finds."""
    from perceptforge.scorer.extract import (
        _NAMED_LETTER,
        _NAMED_LETTERS,
        _REFUSAL,
        _ends_with_letter,
        _final_patterns,
        _holds_label_word,
        _last_standalone,
        _standalone,
        refusal,
    )

    closing, labelled = _final_patterns("ABCD")[1], _final_patterns("ABCD")[3]
    sentences = ['It is A."  ', "is 'B' !", "It is (C).", "labeled D in the image", "is A. B", "is E.", "A"]
    for sentence in sentences:
        if closing.search(sentence):
            assert _ends_with_letter(sentence, 0, len(sentence), "ABCD"), sentence
        if labelled.search(sentence):
            assert _holds_label_word(sentence.lower(), 0, len(sentence)), sentence
    assert not _ends_with_letter("is A. B", 0, 7, "A") and _ends_with_letter('is A ."', 0, 7, "A")
    assert closing.search('is A ."') and not closing.search('is A ".')
    for text in ["Based on (A) B", "xA B. aC", "A", "CAB"]:
        whole = [k for k in range(len(text)) if _standalone(text, "ABCD", k, len(text)) == k]
        for end in range(len(text) + 1):  # neighbours read in the whole text
            assert _last_standalone(text, "ABCD", end) == max((k for k in whole if k < end), default=-1), (text, end)
    for text in ["Based on the image", "I'm sorry.", "(I cannot tell.)", "There is no answer.", "Unable to say."]:
        assert (refusal(_choice_text(text)) is False) == bool(_REFUSAL.match(text)), text
    lower = "point a, the box (b) and figure 'c'; apoint d, image\ne"
    one = sorted((m.start(1), m.group(1)) for m in _NAMED_LETTER.finditer(lower))
    each = sorted((m.start(1), m.group(1)) for _, pattern in _NAMED_LETTERS for m in pattern.finditer(lower))
    assert one == each == [(6, "a"), (18, "b"), (33, "c"), (53, "e")]  # not "apoint d"


def _choice_text(text: str):
    from perceptforge.scorer.extract import ChoiceText

    c = ChoiceText(text, "ABCD", ())
    c.__dict__["lower"] = text.lower()
    return c
