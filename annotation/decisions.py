"""From one task's annotations to a decision about its item (MVP-Bench §4.1: kept only when both annotators
accept) and, when annotators corrected it, the item's next version.

Rules where the paper is silent:
- one annotation per annotator counts, the latest; skipped (cancelled) annotations count as none;
- an annotation that does not fit the labeling config is reported and does not count;
- a valid rejection drops the item, even before the second annotator has looked: ``rejected`` when every
  verdict is a rejection, ``disagreement`` when another annotator accepted it (reported apart, because a
  reviewer may want to look at those again);
- a correction by one accepting annotator is applied (the other accepted the item as it was); two
  accepting annotators who correct the same field differently leave the item in ``conflict`` for review.

BLINK-style items (``PerceptionItem``) follow the same rules; only their answer letter can be corrected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from perceptforge.annotation.labeling import Control, answers, result_errors
from perceptforge.data.schema import LETTERS, BenchmarkItem, PerceptionItem


@dataclass
class Decision:
    item_id: str
    kind: str
    status: str  # kept | rejected | disagreement | incomplete | conflict | invalid_correction
    verdicts: list[tuple[str, str]] = field(default_factory=list)  # (annotator, Accept/Reject) in annotation order
    reject_reasons: list[tuple[str, str]] = field(default_factory=list)  # (annotator, reason)
    invalid: list[dict] = field(default_factory=list)
    corrections: dict[str, str] = field(default_factory=dict)  # applied: field → new value
    corrected_by: dict[str, list[str]] = field(default_factory=dict)  # field → the annotators who proposed it
    detail: str = ""
    item: BenchmarkItem | PerceptionItem | None = None  # the kept item, verified (a new version when corrected)
    adjudication: dict[str, str] | None = None  # reviewer, verdict, the disputed status it settled

    def record(self, task: dict | None = None) -> dict:
        """One line of decisions.jsonl; ``task`` names the Label Studio project and task it came from."""
        adjudicated = {"adjudication": self.adjudication} if self.adjudication else {}
        return {
            **adjudicated,
            "item_id": self.item_id,
            "kind": self.kind,
            "status": self.status,
            "label_studio": task or {},
            "verdicts": [{"annotator": a, "verdict": v} for a, v in self.verdicts],
            "reject_reasons": [{"annotator": a, "reason": r} for a, r in self.reject_reasons],
            "invalid_annotations": self.invalid,
            "corrections": [
                {"field": name, "value": value, "annotators": self.corrected_by.get(name, [])}
                for name, value in self.corrections.items()
            ],
            "detail": self.detail,
            "version": self.item.version if self.item else None,
        }


def counted_annotations(annotations: list[dict]) -> list[dict]:
    """The latest non-cancelled annotation of each annotator, in the order they were first made."""
    latest: dict[int, dict] = {}
    for a in sorted(annotations, key=lambda a: a["id"]):
        if not a.get("was_cancelled"):
            latest[a["completed_by"]] = a
    return sorted(latest.values(), key=lambda a: a["id"])


def proposed_fields(item: BenchmarkItem) -> dict[str, str]:
    """The item's current values under the config's control names."""
    q = item.question
    if q.kind == "yes_no_pair":
        return {"answer_natural": q.answer_natural, "answer_manipulated": q.answer_manipulated}
    if q.kind == "context_pair":
        return {"answer_1": q.answers[0], "answer_2": q.answers[1]}
    return {"answer": q.answer}


def corrections_of(item: BenchmarkItem, given: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The fields one accepting annotator changed, and what is wrong with them (client-side, item-specific)."""
    proposed, changed, errors = proposed_fields(item), {}, []
    for name, value in proposed.items():
        if name in given and given[name] != value:
            changed[name] = given[name]
    if "question_fix" in given and given["question_fix"] != item.question.question:
        changed["question"] = given["question_fix"]
    if ("distractor_letter" in given) != ("distractor_fix" in given):
        errors.append("a distractor correction needs both the option letter and its new text")
    elif "distractor_letter" in given:
        n = len(getattr(item.question, "options", []))
        if given["distractor_letter"] not in LETTERS[:n]:
            errors.append(f"distractor_letter {given['distractor_letter']!r}: the item has options {list(LETTERS[:n])}")
        else:
            changed[f"option_{given['distractor_letter']}"] = given["distractor_fix"]
    if "answer" in changed and changed["answer"] not in LETTERS[: len(getattr(item.question, "options", []))]:
        errors.append(f"answer {changed['answer']!r} is not one of the item's option letters")
    return changed, errors


def corrected(item: BenchmarkItem, fixes: dict[str, str]) -> BenchmarkItem:
    """The next version of ``item`` with ``fixes`` applied; raises ValueError when the result breaks an invariant."""
    q = item.question.model_dump(mode="json")
    for name, value in fixes.items():
        if name == "question":
            q["question"] = value
        elif name.startswith("option_"):
            q["options"][LETTERS.index(name[-1])] = value
        elif name in ("answer_1", "answer_2"):
            q["answers"][int(name[-1]) - 1] = value
        else:
            q[name] = value
    data = item.model_dump(mode="json")
    data.update(question=q, version=item.version + 1, verified=True)
    data["lineage"]["parent_id"] = item.id
    try:
        return BenchmarkItem.model_validate(data)
    except ValidationError as exc:
        raise ValueError("; ".join(e["msg"] for e in exc.errors())) from None


def perception_corrections(item: PerceptionItem, given: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """What one accepting annotator changed on a BLINK-style item (only its answer letter can change), and
    what is wrong with it."""
    if "answer" not in given or given["answer"] == item.answer:
        return {}, []
    letters = LETTERS[: len(item.choices)]
    if given["answer"] not in letters:
        return {}, [f"answer {given['answer']!r} is not one of the item's choices {list(letters)}"]
    return {"answer": given["answer"]}, []


# where a corrected BLINK-style item's correction is recorded (its lineage points there)
PERCEPTION_DECISIONS = "verification/decisions.jsonl"


def perception_corrected(item: PerceptionItem, fixes: dict[str, str]) -> PerceptionItem:
    """The next version of a BLINK-style ``item`` with ``fixes`` applied, its lineage naming the item it
    corrects and where the decision is; raises ValueError when the result breaks an invariant."""
    data = item.model_dump(mode="json")
    data.update(fixes, version=item.version + 1, verified=True)
    data["lineage"]["parent_id"] = item.id
    data["lineage"]["artifacts"] = {**data["lineage"]["artifacts"], "verification": PERCEPTION_DECISIONS}
    try:
        return PerceptionItem.model_validate(data)
    except ValidationError as exc:
        raise ValueError("; ".join(e["msg"] for e in exc.errors())) from None


def annotator_name(user_id: int, names: Mapping[int, str]) -> str:
    return names.get(user_id) or f"user {user_id}"


def decide(
    item: BenchmarkItem,
    annotations: list[dict],
    controls: dict[str, Control],
    required: int = 2,
    names: Mapping[int, str] | None = None,
    kind: str | None = None,
    changes_of: Callable[[Any, dict[str, str]], tuple[dict[str, str], list[str]]] = corrections_of,
    apply: Callable[[Any, dict[str, str]], Any] = corrected,
) -> Decision:
    """``names`` maps Label Studio user ids to what decisions call them (their e-mail addresses). Another
    kind of item (a BLINK-style one) brings its ``kind``, how to read an annotator's corrections
    (``changes_of``) and how to apply them (``apply``): the rules above stay the same."""
    d = Decision(item.id, kind or item.question.kind, "incomplete")
    valid: list[tuple[str, dict, dict]] = []  # (annotator, their answers, the fields they corrected)
    for a in counted_annotations(annotations):
        who = annotator_name(a["completed_by"], names or {})
        errors = result_errors(a["result"], controls)
        given = answers(a["result"]) if not errors else {}
        changes: dict[str, str] = {}
        if given.get("verdict") == "Reject" and "reject_reason" not in given:
            errors.append("a rejection needs a reason")
        if given.get("verdict") == "Accept":
            changes, problems = changes_of(item, given)
            errors += problems
        if errors:
            d.invalid.append({"annotation": a["id"], "annotator": who, "errors": errors})
            continue
        valid.append((who, given, changes))
        d.verdicts.append((who, given["verdict"]))
    d.reject_reasons = [(who, g["reject_reason"]) for who, g, _ in valid if g["verdict"] == "Reject"]
    if d.reject_reasons:
        d.status = "disagreement" if len(d.reject_reasons) < len(valid) else "rejected"
        return d
    if len(valid) < required:
        d.detail = f"{len(valid)} of {required} required annotations"
        return d
    proposals: dict[str, dict[str, list[str]]] = {}  # field → value → who proposed it
    for who, _, changes in valid:
        for name, value in changes.items():
            proposals.setdefault(name, {}).setdefault(value, []).append(who)
    clashing = sorted(name for name, values in proposals.items() if len(values) > 1)
    if clashing:
        d.status, d.detail = "conflict", f"annotators corrected {', '.join(clashing)} differently"
        return d
    for name, values in sorted(proposals.items()):
        ((value, who_proposed),) = values.items()
        d.corrections[name], d.corrected_by[name] = value, who_proposed
    try:
        d.item = apply(item, d.corrections) if d.corrections else item.model_copy(update={"verified": True})
    except ValueError as exc:
        d.status, d.detail = "invalid_correction", str(exc)
        return d
    d.status = "kept"
    return d
