"""Helpers shared by tests (importable because pytest puts tests/ on the path)."""

import sys


def perceptforge_cmd() -> list[str]:
    return [sys.executable, "-m", "perceptforge.cli"]


def candidate_for(template, grounding, source_sha256, writer, all_templates, seed) -> dict:
    """A unit's candidate as the idea and questions stages write it (``candidates/<unit>.json``)."""
    from perceptforge.tasks.idea import make_idea
    from perceptforge.tasks.questions import make_candidate

    idea = make_idea(template, grounding, writer, seed)
    descriptions = [t.cross_description for t in all_templates.values()]
    return make_candidate(template, grounding, source_sha256, idea, writer, descriptions, seed).model_dump(
        mode="json", exclude_none=True
    )
