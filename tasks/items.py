"""From a candidate (idea + questions) and its edit (image pair) to benchmark items with full lineage."""

from __future__ import annotations

from perceptforge.data.schema import BenchmarkItem


def build_items(candidate: dict, edit: dict) -> list[BenchmarkItem]:
    lineage = dict(candidate["lineage"])
    lineage["backends"] = {**lineage["backends"], **edit["backends"]}
    lineage["artifacts"] = {**lineage["artifacts"], "candidate": f"candidates/{candidate['unit']}.json", "edit": f"edits/{candidate['unit']}.json"}
    if edit["pair"].get("mask"):
        lineage["artifacts"]["mask"] = edit["pair"]["mask"]["path"]
    return [
        BenchmarkItem.model_validate({
            "id": q["id"], "category": candidate["category"], "question": q["question"], "pair": edit["pair"],
            "idea": candidate["idea"], "edit": edit["edit"], "lineage": lineage,
        })
        for q in candidate["questions"]
    ]
