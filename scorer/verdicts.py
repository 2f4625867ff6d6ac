"""How one question of our split is put to a model and how its answer is judged, in the standard library and
``extract`` alone.

``perceptforge predict`` / ``score`` and the exported lmms-eval task share these functions. The task folder must
run where perceptforge is not installed, so ``export`` writes this module's source (with ``extract``'s and the task
functions', ``standalone.task_utils``) into the folder's ``perceptforge_scorer.py``: the code that judges there
is this code, not a copy kept by hand. Nothing here may import anything but the standard library and ``extract``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from perceptforge.scorer.extract import LETTERS, Extraction, extract_choice, extract_yes_no


def ask(prompts: Mapping[str, str], kind: str, question: str, options: Sequence[str] = ()) -> str:
    """The text a Yes/No or MCQ question is asked with: ``prompts`` are the texts of ``predict/yes_no`` and
    ``predict/mcq`` (named ``yes_no``, ``mcq``), filled as ``Prompt.render`` fills them (``str.format``)."""
    if kind == "yes_no_pair":
        return prompts["yes_no"].format(question=question)
    lettered = "\n".join(f"{LETTERS[k]}. {o}" for k, o in enumerate(options))
    return prompts["mcq"].format(question=question, options=lettered)


def instruction(prompts: Mapping[str, str], kind: str) -> str:
    """What the prompt of ``kind`` asks beyond the question and its options (the MCQ prompt's closing line), for a
    kit that lays out the question and the options its own way."""
    return prompts["yes_no" if kind == "yes_no_pair" else "mcq"].format(question="", options="").strip()


def read_answer(kind: str, output: str | None, options: Sequence[str] = ()) -> Extraction:
    """What ``output`` answers: yes / no for a question on one image of a Yes/No pair, else an option letter."""
    if kind == "yes_no_pair":
        return extract_yes_no(output)
    return extract_choice(output, len(options), options)


def accuracy(tallies: Iterable[tuple[str, int, int]]) -> tuple[float | None, float | None]:
    """``(macro, micro)`` accuracy in percent over ``(category, right, total)`` tallies (a category may come in
    several tallies, one per kind): the mean over categories of each one's accuracy (the split's headline
    number), and the accuracy over all questions. None where there is nothing to count."""
    by_category: dict[str, list[int]] = {}
    for category, right, total in tallies:
        tally = by_category.setdefault(category, [0, 0])
        tally[0] += right
        tally[1] += total
    # sorted as score_rows sorts its per-category table: a float sum depends on its order
    shares = [100.0 * r / t for _, (r, t) in sorted(by_category.items()) if t]
    right = sum(r for r, _ in by_category.values())
    total = sum(t for _, t in by_category.values())
    return (sum(shares) / len(shares) if shares else None, 100.0 * right / total if total else None)
