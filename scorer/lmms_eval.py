"""lmms-eval task functions for an exported perceptforge split (``export`` writes the task folder; its
``utils.py`` re-exports these). Questions are asked with the prompts ``perceptforge predict`` uses, and
the metrics are our scorer's, so lmms-eval reports the numbers ``perceptforge score`` would.

A Yes/No pair is two questions (one per image), as in MVP-Bench: ``process_docs`` turns each pair row of
the Parquet split into two documents with ids ``<item>#natural`` and ``<item>#manipulated``.
"""

from __future__ import annotations

from typing import Any

from perceptforge.scorer.benchmarks.perceptforge import question_text, score_rows
from perceptforge.scorer.predictions import Prediction, PredictionSet

IMAGES = ("natural", "manipulated")
KEPT = ("id", "kind", "level", "category", "question", "options", "answer", "image")


def expand_pairs(batch: dict[str, list]) -> dict[str, list]:
    """One batch of Parquet rows → documents: a Yes/No pair row ("no/yes": natural/manipulated) becomes
    one document per image, every other row one document (``image`` empty)."""
    out: dict[str, list] = {k: [] for k in [*batch, "image"]}
    for n in range(len(batch["id"])):
        row = {k: v[n] for k, v in batch.items()}
        if row["kind"] == "yes_no_pair":
            for image, answer in zip(IMAGES, row["answer"].split("/")):
                for k, v in {**row, "id": f"{row['id']}#{image}", "answer": answer, "image": image}.items():
                    out[k].append(v)
        else:
            for k, v in {**row, "image": ""}.items():
                out[k].append(v)
    return out


def process_docs(dataset: Any) -> Any:
    return dataset.map(expand_pairs, batched=True, batch_size=64)


def doc_to_visual(doc: dict) -> list:
    """The images a question is asked on: a pair's own image, both for a cross-image MCQ, else the edited one."""
    if doc["kind"] == "yes_no_pair":
        names = [f"{doc['image']}_image"]
    elif doc["kind"] == "cross_mcq":
        names = ["natural_image", "manipulated_image"]
    else:
        names = ["manipulated_image"]
    return [doc[n].convert("RGB") for n in names]


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    return question_text(doc["kind"], doc["question"], list(doc.get("options") or []))


def process_results(doc: dict, results: list[str]) -> dict[str, dict]:
    """The same record for each metric: what the aggregation needs of the document, and the output."""
    record = {"doc": {k: doc[k] for k in KEPT if k in doc}, "output": results[0] if results else None}
    return {"perceptforge_overall": record, "perceptforge_micro": record}


def score_logged(records: list[dict]) -> dict:
    """Our scorer's metrics over process_results records."""
    rows: list[dict] = []
    pairs: dict[str, dict] = {}
    preds = PredictionSet()
    for rec in records:
        doc = rec["doc"]
        base = {"category": doc["category"], "level": doc.get("level") or "", "question": doc["question"]}
        if doc["kind"] == "yes_no_pair":
            item_id = doc["id"].rpartition("#")[0]
            if item_id not in pairs:
                pairs[item_id] = {"id": item_id, "kind": "yes_no_pair", **base, "answers": {}}
                rows.append(pairs[item_id])
            pairs[item_id]["answers"][doc["image"]] = doc["answer"]
        else:
            rows.append(
                {"id": doc["id"], "kind": doc["kind"], **base, "options": list(doc["options"]), "answer": doc["answer"]}
            )
        if rec["output"] is not None:
            preds.by_key[doc["id"]] = Prediction(doc["id"], rec["output"], f"lmms-eval doc {doc['id']}")
    return score_rows(rows, preds).metrics


def aggregate_overall(records: list[dict]) -> float:
    """Mean accuracy over categories (the split's headline number)."""
    return score_logged(records)["overall"]


def aggregate_micro(records: list[dict]) -> float:
    """Accuracy over all questions."""
    return score_logged(records)["overall_micro"]
