"""CODIS: one image, one question, two contexts with different answers (``data.json``).

Predictions: ``{id, context: 1|2, output}`` records, or the release's example layout
``{id, output: {output_1, output_2}}``.

``strict`` (default) decides by rule first: after normalisation (case, punctuation, articles) an output is
right when it contains its own answer and not the other context's answer, wrong when it contains only the
other's; a negated answer ("It is not down.") is never read as that answer, and both answers, a negated one
or neither leave the output *unjudged*. With ``--judge`` the unjudged ones go to the LLM judge (the paper's
Table 12 prompt); without, they count as not right and are reported. A pair absent from the predictions
counts as wrong.

``--protocol official`` is the release's ``data/eval.py``: it averages over the pairs the predictions
submit (a pair absent from them is not counted) and sends every output, empty or not, to its GPT judge
with its own prompt, counting an output right when "right" appears in the reply. No rule decides: without
``--judge`` every output is reported as ``needs_judge`` and no accuracy is computed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.fileio import read_json
from perceptforge.prompts.library import load_prompt
from perceptforge.scorer import metrics as m
from perceptforge.scorer.extract import normalise_answer
from perceptforge.scorer.predictions import RecordError, iter_records, read_predictions
from perceptforge.scorer.requests import Request, image_under
from perceptforge.scorer.result import ItemLog, ScoredItem, ScoreResult, Table

# what the audit's blind baseline leaves out in turn: CODIS items must need both the image and the context
BLIND_MODES = ("none", "no_context")


def read_data(paths: list[Path]) -> dict[str, dict]:
    pairs = {}
    for path in map(Path, paths):
        doc = read_json(path)
        if not isinstance(doc, list):
            raise InputError(str(path), "expected the CODIS data.json list of pairs")
        for k, rec in enumerate(doc):
            if not isinstance(rec, dict):
                raise InputError(f"{path}[{k}]", f"expected a CODIS pair (an object), got {type(rec).__name__}")
            if str(rec.get("id")) in pairs:
                raise InputError(f"{path}[{k}]", f"id {rec.get('id')} again: each pair is scored once")
            try:
                pairs[str(rec["id"])] = {
                    "question": rec["question"],
                    "category": rec["category"],
                    "answers": (rec["answer"]["answer_1"], rec["answer"]["answer_2"]),
                }
            except (KeyError, TypeError) as exc:
                raise InputError(f"{path}[{k}]", f"not a CODIS pair: missing {exc}") from None
    return pairs


def _occurrences(text: str, phrase: str) -> list[int]:
    """Where the phrase starts in the text, as whole words (both normalised: single spaces)."""
    if not phrase:
        return []
    padded, needle = f" {text} ", f" {phrase} "
    found, at = [], padded.find(needle)
    while at >= 0:
        found.append(at)
        at = padded.find(needle, at + 1)
    return found


# "not", "no", "never", and the tail of "isn't" ("isn t" once normalised)
_NEGATIONS = frozenset({"not", "no", "never", "neither", "nor", "cannot", "t", "without", "instead"})


def _negated(text: str, at: int) -> bool:
    """Whether one of the three words before position ``at`` of the padded text negates what follows."""
    return any(word in _NEGATIONS for word in f" {text} "[:at].split()[-3:])


def judge_by_rule(output: str | None, own: str, other: str) -> tuple[bool | None, str]:
    """(correct, method); correct is None when rules cannot decide."""
    if output is None or not output.strip():
        return None, "empty"
    text, mine, theirs = normalise_answer(output), normalise_answer(own), normalise_answer(other)
    at_mine, at_theirs = _occurrences(text, mine), _occurrences(text, theirs)
    if any(_negated(text, at) for at in at_mine + at_theirs):
        return None, "unjudged"  # "It is not down.": a negated answer is never read as that answer
    if at_mine and not at_theirs:
        return True, "rule_own_answer"
    if at_theirs and not at_mine:
        return False, "rule_other_answer"
    return None, "unjudged"


def _keys(rec: dict):
    if isinstance(rec.get("output"), dict):
        out = rec["output"]
        return [(f"{rec['id']}#1", out.get("output_1")), (f"{rec['id']}#2", out.get("output_2"))]
    context = rec["context"]
    if str(context) not in ("1", "2"):
        raise RecordError(f"context must be 1 or 2, got {context!r}")
    return [(f"{rec['id']}#{context}", rec["output"])]


def score(data: list[Path], predictions: list[Path], protocol: str = "strict", judge=None, **_) -> ScoreResult:
    pairs = read_data(data)
    known = {f"{pid}#{c}" for pid in pairs for c in (1, 2)}
    official = protocol == "official"
    # data/eval.py formats a null output into its prompt ("None"): official keeps it as a prediction
    preds = read_predictions(predictions, _keys, known=known, nulls="keep" if official else "missing")
    scored, missing, codis_pairs = ItemLog(), [], []
    absent = 0
    for pid, pair in pairs.items():
        if not any(f"{pid}#{c}" in preds.by_key for c in (1, 2)):
            absent += 1
            if official:  # the official script iterates over the submitted outputs only
                missing += [f"{pid}#1", f"{pid}#2"]
                continue
        flags, outs = [], []
        for c in (1, 2):
            key = f"{pid}#{c}"
            own, other = pair["answers"][c - 1], pair["answers"][2 - c]
            held = preds.by_key.get(key)
            output = held.output if held else None
            if held is None:
                missing.append(key)
            if official:
                correct, method = _judged_officially(judge, pair["question"], own, output, held is not None)
            else:
                correct, method = judge_by_rule(output, own, other)
                if correct is None and judge is not None and output:
                    correct, method = judge.codis(pair["question"], own, output), "judge"
            scored.append(
                ScoredItem(
                    key, pair["category"], output, output if correct is not None else None, method, bool(correct)
                )
            )
            flags.append(bool(correct))
            outs.append(normalise_answer(output or ""))
        codis_pairs.append(m.CodisPair(pair["category"], (flags[0], flags[1]), outs[0] != outs[1]))
    metrics = m.codis(codis_pairs)
    needs_judge = sum(1 for s in scored if s.method == "needs_judge")
    if needs_judge:  # official without a judge: nothing may be decided by rule, so nothing is computed
        for block in (*metrics["categories"].values(), metrics["overall"]):
            block.update(Acc_p=None, Acc_q=None)
        preds.warnings.append(
            f"{needs_judge} outputs need the judge: --protocol official sends every output to it, as the "
            "official script does (data/eval.py, GPT-4); pass --judge openai:MODEL@BASE_URL. No accuracy is "
            "computed without it."
        )
    metrics["unjudged"] = sum(1 for s in scored if s.method in ("unjudged", "empty"))
    metrics["needs_judge"] = needs_judge
    metrics["absent_pairs"] = absent
    metrics["absent_pairs_counted"] = "not counted (official)" if official else "counted as wrong"
    rows = [[c, v["Acc_p"], v["Acc_q"]] for c, v in metrics["categories"].items()]
    rows.append(["overall", metrics["overall"]["Acc_p"], metrics["overall"]["Acc_q"]])
    tables = [
        Table("CODIS", ["category", "Acc_p", "Acc_q"], rows),
        Table(
            "CODIS context",
            ["metric", "value"],
            [
                ["context awareness", metrics["context_awareness"]],
                ["unjudged outputs", metrics["unjudged"]],
                ["outputs that need the judge", needs_judge],
                [f"absent pairs ({metrics['absent_pairs_counted']})", absent],
            ],
        ),
    ]
    bars = {c: v["Acc_p"] for c, v in metrics["categories"].items()}
    return ScoreResult(
        "codis",
        protocol,
        metrics,
        tables,
        scored,
        preds.warnings,
        missing,
        preds.unknown,
        bars,
        left_out=2 * absent if official else 0,
    )


def _judged_officially(judge, question: str, own: str, output: str | None, submitted: bool) -> tuple[bool | None, str]:
    """``data/eval.py``: every submitted output goes to the judge (an empty one too, and a null one as the
    text "None", which is what ``str.format`` makes of it); none is read by rule."""
    if not submitted:
        return False, "missing"  # a context the predictions leave out of a submitted pair
    if judge is None:
        return None, "needs_judge"
    return judge.codis_official(question, own, str(output)), "judge"


def requests(data: Path, images: Path, with_context: bool = True) -> Iterator[Request]:
    """What ``perceptforge predict`` asks, with the paper's prompt (DI + CoT). ``with_context=False`` asks
    without the context (the audit's blind check: CODIS items must need it)."""
    prompt = load_prompt("predict/codis_di_cot" if with_context else "predict/codis_no_context")
    for where, rec in iter_records(data):
        img = image_under(images, rec["image_id"], where)
        for c in (1, 2):
            context = {"context": rec["context"][f"context_{c}"]} if with_context else {}
            yield Request({"id": rec["id"], "context": c}, prompt.render(question=rec["question"], **context), (img,))
