"""lmms-eval functions of this task: perceptforge's own prompts and scorer (pip install perceptforge)."""

from perceptforge.scorer.lmms_eval import (  # noqa: F401
    aggregate_micro,
    aggregate_overall,
    doc_to_text,
    doc_to_visual,
    process_docs,
    process_results,
)
