"""A benchmark item (or a BLINK-style one: ``perception_task``) → a Label Studio task: what annotators see (task
data, with the item's lineage) and the generated answer as a prediction, so the labeling UI opens pre-filled with
what the pipeline proposed."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from perceptforge.annotation.labeling import choice, config_text, config_version, controls, text
from perceptforge.data.schema import LETTERS, BenchmarkItem, PerceptionItem
from perceptforge.outputs.report import mask_overlay
from perceptforge.store.rundir import RunDir

MODEL_VERSION = "perceptforge-generated"


def local_files_url(path: Path, document_root: Path) -> str:
    """How Label Studio serves a file under its local-files document root."""
    try:
        rel = path.resolve().relative_to(document_root.resolve())
    except ValueError:
        raise ValueError(
            f"{path} is outside the Label Studio document root {document_root}: start the server with "
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT set to a folder that holds the run directory"
        ) from None
    return "/data/local-files/?d=" + quote(rel.as_posix())


def options_text(options: list[str]) -> str:
    return "   ".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))


def proposed_result(item: BenchmarkItem) -> list[dict]:
    """The generated answer in the config's controls (the annotator accepts it or changes it)."""
    q = item.question
    to = {name: c.to_name for name, c in controls(config_text(q.kind)).items()}  # the image each control belongs to
    if q.kind == "yes_no_pair":
        return [
            choice("answer_natural", to["answer_natural"], q.answer_natural),
            choice("answer_manipulated", to["answer_manipulated"], q.answer_manipulated),
        ]
    if q.kind == "context_pair":
        return [text("answer_1", to["answer_1"], q.answers[0]), text("answer_2", to["answer_2"], q.answers[1])]
    return [choice("answer", to["answer"], q.answer)]


def task_for(
    item: BenchmarkItem, run: RunDir, document_root: Path, overlays: dict[tuple[str, str], str] | None = None
) -> dict:
    """The task to import: data (images as local-files URLs, question, lineage) and one prediction. ``overlays``
    keeps each pair's mask overlay for the next item of that pair (an edit gives four or five items, and drawing
    one is most of a task's cost)."""
    q = item.question
    pair = item.pair
    overlay = pair.natural.path
    if pair.mask:
        key, drawn = (pair.natural.path, pair.mask.path), overlays if overlays is not None else {}
        if key not in drawn:
            drawn[key] = mask_overlay(run, *key)
        overlay = drawn[key]
    data = {
        "item_id": item.id,
        "item_version": item.version,
        "kind": q.kind,
        "category": f"{item.category.low} {item.category.name}",
        "level": getattr(q, "level", ""),
        "question": q.question,
        "natural": local_files_url(run.sub(pair.natural.path), document_root),
        "manipulated": local_files_url(run.sub(pair.manipulated.path), document_root),
        "mask_overlay": local_files_url(run.sub(overlay), document_root),
        "lineage": item.lineage.model_dump(mode="json"),
        "config_version": config_version(config_text(q.kind)),
    }
    if hasattr(q, "options"):
        data["options_text"] = options_text(q.options)
    if q.kind == "context_pair":
        data["context_1"], data["context_2"] = q.contexts
    return {"data": data, "predictions": [{"model_version": MODEL_VERSION, "result": proposed_result(item)}]}


# An empty image slot (an item with fewer images than its project shows): Label Studio needs a value for
# every slot, and a transparent pixel draws nothing.
BLANK_IMAGE = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="
)


def perception_task(item: PerceptionItem, run: RunDir, document_root: Path, slots: int) -> dict:
    """A BLINK-style item as a task of a ``perception_config(slots)`` project: its images (marks drawn in)
    as local-files URLs, question, lettered choices, proposed answer and lineage; the proposed answer also
    as the prediction, so the "correct choice" control opens pre-filled."""
    if len(item.images) > slots:
        raise ValueError(f"item {item.id}: {len(item.images)} images, but its project shows {slots}")
    images = [local_files_url(run.inside(ref.path), document_root) for ref in item.images]
    data = {
        "item_id": item.id,
        "item_version": item.version,
        "task": item.task,
        "variant": item.variant,
        "sources_text": ", ".join(item.sources),
        "question": item.question,
        "choices_text": "\n".join(f"({LETTERS[k]}) {c}" for k, c in enumerate(item.choices)),
        "proposed_text": f"({item.answer}) {item.choices[LETTERS.index(item.answer)]}",
        "random_choice": item.random_choice,
        **{f"image_{k}": (images[k - 1] if k <= len(images) else BLANK_IMAGE) for k in range(1, slots + 1)},
        "lineage": item.lineage.model_dump(mode="json"),
        "config_version": config_version(config_text("perception_mcq")),
    }
    return {
        "data": data,
        "predictions": [{"model_version": MODEL_VERSION, "result": [choice("answer", "image_1", item.answer)]}],
    }
