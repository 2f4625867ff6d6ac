"""lmms-eval task functions for an exported perceptforge split. Questions are asked with the prompts ``perceptforge
predict`` uses, and answers are judged by our scorer's rules (``verdicts``), so lmms-eval reports the numbers
``perceptforge score`` would.

The exported task folder must run in lmms-eval's own environment, where perceptforge is not installed: ``export``
writes ``standalone.task_utils()``, this module's source after ``extract``'s and ``verdicts``', with the prompt
texts as a literal in place of ``PROMPTS``' look-up, as the folder's ``perceptforge_scorer.py`` (``utils.py``
loads it). So apart from its ``perceptforge`` imports (each replaced by what it names) this module uses the
standard library alone; ``tests/test_lmms_eval_run.py`` runs the generated file with nothing of ours importable.

A Yes/No pair is two questions (one per image), as in MVP-Bench: ``process_docs`` turns each pair row of
the Parquet split into two documents with ids ``<item>#natural`` and ``<item>#manipulated``.
"""

from __future__ import annotations

from typing import Any

from perceptforge.scorer.benchmarks.perceptforge import predict_prompts
from perceptforge.scorer.verdicts import accuracy, ask, read_answer

IMAGES = ("natural", "manipulated")
KEPT = ("id", "kind", "level", "category", "question", "options", "answer", "image")
# The texts of predict's Yes/No and MCQ prompts; the generated module holds them as a literal.
PROMPTS: dict[str, str] = predict_prompts()


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
    return ask(PROMPTS, doc["kind"], doc["question"], list(doc.get("options") or []))


def process_results(doc: dict, results: list[str]) -> dict[str, dict]:
    """The same record for each metric: what the aggregation needs of the document, the output, and this
    module's verdict on it (what it read, by which rule, right or not), so the sample log shows each item's."""
    output = results[0] if results else None
    read = read_answer(doc["kind"], output, list(doc.get("options") or []))
    record = {
        "doc": {k: doc[k] for k in KEPT if k in doc},
        "output": output,
        "read": read.value,
        "method": read.method if output is not None else "missing",
        "correct": read.value == doc["answer"],
    }
    return {"perceptforge_overall": record, "perceptforge_micro": record}


def _tallies(records: list[dict]) -> list[tuple[str, int, int]]:
    return [(rec["doc"]["category"], int(rec["correct"]), 1) for rec in records]


def aggregate_overall(records: list[dict]) -> float | None:
    """Mean accuracy over categories (the split's headline number)."""
    return accuracy(_tallies(records))[0]


def aggregate_micro(records: list[dict]) -> float | None:
    """Accuracy over all questions."""
    return accuracy(_tallies(records))[1]
