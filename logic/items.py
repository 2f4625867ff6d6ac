"""From a candidate (idea + questions) and its edit (image pair) to benchmark items with full lineage."""

from __future__ import annotations

from perceptforge.data.schema import BenchmarkItem, Candidate, EditRecord, Lineage


def build_items(candidate: Candidate, edit: EditRecord) -> list[BenchmarkItem]:
    lineage = candidate.lineage.model_dump()
    lineage["backends"] |= {k: v.model_dump() for k, v in edit.backends.items()}
    lineage["artifacts"] |= {"candidate": f"candidates/{candidate.unit}.json", "edit": f"edits/{candidate.unit}.json"}
    if edit.pair.mask:
        lineage["artifacts"]["mask"] = edit.pair.mask.path
    return [
        BenchmarkItem(
            id=q.id,
            category=candidate.category,
            question=q.question,
            pair=edit.pair,
            idea=candidate.idea,
            edit=edit.edit,
            lineage=Lineage.model_validate(lineage),
        )
        for q in candidate.questions
    ]
