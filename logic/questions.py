"""Question assembly (MVP-Bench §4.1 step three), pure and seeded.

Every builder returns a validated question record or raises ``ValueError`` with the reason, which the
flow turns into a quarantine entry. The random generator is always passed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import ValidationError

from perceptforge.data.schema import LETTERS, CrossImageMCQ, SingleImageMCQ, YesNoPair
from perceptforge.errors import describe_validation_error

HIGH_LEVEL_OPTIONS = ("identity", "emotion", "scenario", "role", "behaviour")


def _validated(model, **fields):
    try:
        return model(**fields)
    except ValidationError as exc:
        raise ValueError("; ".join(describe_validation_error(exc))) from None


def yes_no_pair(question: str, level: str) -> YesNoPair:
    """A question whose answer is yes on the manipulated image and no on the natural one."""
    question = " ".join(question.split())
    if not question.endswith("?"):
        raise ValueError(f"question: a Yes/No question must end with '?': {question!r}")
    return _validated(YesNoPair, question=question, level=level, answer_natural="no", answer_manipulated="yes")


def place_answer(correct: str, others: list[str], rng: np.random.Generator) -> tuple[list[str], str]:
    """Options with the correct one at a uniformly random position (balanced letters), the rest shuffled."""
    others = list(others)
    rng.shuffle(others)
    position = int(rng.integers(0, len(others) + 1))
    options = others[:position] + [correct] + others[position:]
    return options, LETTERS[position]


def single_mcq(
    question: str, correct: str, natural_answer: str, distractors: list[str], rng: np.random.Generator
) -> SingleImageMCQ:
    """MCQ on the manipulated image: the correct answer, the natural image's answer and three distractors."""
    if len(distractors) != 3:
        raise ValueError(f"options: need exactly 3 distractors, got {len(distractors)}")
    lowered = {correct.strip().lower(), natural_answer.strip().lower()}
    clash = [d for d in distractors if d.strip().lower() in lowered]
    if clash:
        raise ValueError(f"options: distractor {clash[0]!r} repeats the correct or the natural answer")
    options, answer = place_answer(correct, [natural_answer, *distractors], rng)
    # it asks for the low-level value itself (the scene, the hair), never what the value means
    return _validated(
        SingleImageMCQ, question=question, options=options, answer=answer, level="low", image="manipulated"
    )


def check_not_confusable(correct: str, distractors: Sequence[str], confusable: set[str]) -> None:
    """Raises ValueError when a distractor is a value a careful annotator could also call right (``confusable``,
    lower case: the template's ``Alternative.confusable``, e.g. an oil painting for a watercolour filter)."""
    clash = [d for d in distractors if d.strip().lower() in confusable]
    if clash:
        raise ValueError(f"options: distractor {clash[0]!r} could also be called right for {correct!r}")


def cross_mcq_low(
    question: str, description: str, other_descriptions: list[str], rng: np.random.Generator
) -> CrossImageMCQ:
    """What changed in the pair: the category's description among four others (the release's wording)."""
    pool = sorted({d for d in other_descriptions if d != description})
    if len(pool) < 4:
        raise ValueError(f"options: need 4 other manipulation descriptions, have {len(pool)}")
    picked = [pool[i] for i in rng.choice(len(pool), size=4, replace=False)]
    options, answer = place_answer(description, picked, rng)
    return _validated(CrossImageMCQ, question=question, options=options, answer=answer, level="low")


def high_options(exclude: Sequence[str] = ()) -> list[str]:
    """The cross-image high-level MCQ's options: every high level but those a template leaves out."""
    return [h for h in HIGH_LEVEL_OPTIONS if h not in exclude]


def cross_mcq_high(question: str, high: str, rng: np.random.Generator, exclude: Sequence[str] = ()) -> CrossImageMCQ:
    """Which high-level aspect changed: the five high-level categories as options, less those the edit
    also changes (``exclude``), which would make a second option right."""
    if high not in HIGH_LEVEL_OPTIONS:
        raise ValueError(f"high-level category {high!r} is not one of {HIGH_LEVEL_OPTIONS}")
    if high in exclude:
        raise ValueError(f"high-level category {high!r} cannot be both the answer and excluded")
    options, answer = place_answer(high, [h for h in high_options(exclude) if h != high], rng)
    return _validated(CrossImageMCQ, question=question, options=options, answer=answer, level="high")


def natural_high_known(natural_high: str, attribute: str, attributes: dict[str, str], new_high: str) -> bool:
    """Whether the natural image answers the high-level Yes/No question ("Is the woman someone with dyed hair?")
    with a clear no: always when the template infers it from its own value's meaning, else only when the source
    annotates that meaning (``<attribute>_high``) and it is not the new one."""
    if natural_high == "inferred":
        return True
    own = attributes.get(f"{attribute}_high", "").strip().lower()
    return bool(own) and own != new_high.strip().lower()
