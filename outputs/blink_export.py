"""A BLINK-style run in BLINK's official layout, so ``perceptforge score blink`` (and BLINK's own tooling)
reads it unchanged: ``<Task>/val-00000-of-00001.parquet`` per task with BLINK's columns (``idx``,
``question``, ``sub_task``, ``image_1`` … ``image_4``, ``choices``, ``answer`` as "(A)", ``prompt``,
``explanation``), and ``val_answers.json`` ({idx: "(A)"}). ``idx`` is ``val_<Task>_<n>``, numbered in item-id
order, so the same run exports the same bytes. Images are embedded (Hugging Face ``Image`` features).

``concat/`` holds BLINK's variant for single-image models: each multi-image item joined side by side into
one image, each part labelled with its number.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from perceptforge.data.schema import LETTERS, PerceptionItem
from perceptforge.errors import InputError
from perceptforge.fileio import write_json
from perceptforge.outputs.export import write_hf_parquet
from perceptforge.store.rundir import RunDir

MAX_IMAGES = 4


def load_perception_items(run_dir: Path) -> list[PerceptionItem]:
    folder = Path(run_dir) / "items"
    if not folder.is_dir():
        raise InputError(str(run_dir), "no items/ folder: is this a run directory?")
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json"))]
    if not items:
        raise InputError(str(folder), "holds no items")
    return items


def prompt_text(item: PerceptionItem) -> str:
    """The question with its lettered choices, as BLINK's ``prompt`` column words it."""
    options = "\n".join(f"({LETTERS[k]}) {c}" for k, c in enumerate(item.choices))
    return f"{item.question}\nSelect from the following choices.\n{options}"


def concatenated(images: list[Image.Image], height: int = 512) -> Image.Image:
    """Several images side by side at one height, each labelled with its number (BLINK's concat variant)."""
    scaled = [im.resize((max(1, round(im.width * height / im.height)), height)) for im in images]
    canvas = Image.new("RGB", (sum(im.width for im in scaled) + 10 * (len(scaled) - 1), height), "white")
    draw, font = ImageDraw.Draw(canvas), ImageFont.load_default(size=28)
    x = 0
    for k, im in enumerate(scaled, start=1):
        canvas.paste(im, (x, 0))
        draw.text((x + 8, 6), f"({k})", fill=(255, 255, 255), font=font, stroke_width=3, stroke_fill=(0, 0, 0))
        x += im.width + 10
    return canvas


def png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


BLINK_COLUMNS = [
    ("idx", "string"),
    ("question", "string"),
    ("sub_task", "string"),
    *((f"image_{k}", "image") for k in range(1, MAX_IMAGES + 1)),
    ("choices", "strings"),
    ("answer", "string"),
    ("prompt", "string"),
    ("explanation", "string"),
]


def export_blink(run_dir: Path, out: Path) -> list[Path]:
    """Write the run's items in BLINK's layout (and its concatenated variant) under ``out``."""
    run = RunDir(Path(run_dir).resolve())
    by_task: dict[str, list[PerceptionItem]] = defaultdict(list)
    for item in load_perception_items(run.path):
        by_task[item.task].append(item)
    answers: dict[str, str] = {}
    written: list[Path] = []
    for task in sorted(by_task):
        rows, concat_rows = [], []
        for n, item in enumerate(sorted(by_task[task], key=lambda i: i.id), start=1):
            idx = f"val_{task}_{n}"
            answers[idx] = f"({item.answer})"
            pictures = [run.inside(ref.path).read_bytes() for ref in item.images]
            base = {
                "idx": idx,
                "question": item.question,
                "sub_task": task.replace("_", " "),
                "choices": item.choices,
                "answer": f"({item.answer})",
                "prompt": prompt_text(item),
                "explanation": f"perceptforge item {item.id}",
            }
            slots = {f"image_{k}": None for k in range(1, MAX_IMAGES + 1)}
            rows.append(
                base
                | slots
                | {f"image_{k + 1}": {"bytes": b, "path": f"{idx}_{k + 1}.png"} for k, b in enumerate(pictures)}
            )
            joined = (
                png(concatenated([Image.open(io.BytesIO(b)).convert("RGB") for b in pictures]))
                if len(pictures) > 1
                else pictures[0]
            )
            concat_rows.append(base | slots | {"image_1": {"bytes": joined, "path": f"{idx}_concat.png"}})
        written.append(write_hf_parquet(rows, BLINK_COLUMNS, out / task / "val-00000-of-00001.parquet"))
        written.append(
            write_hf_parquet(concat_rows, BLINK_COLUMNS, out / "concat" / task / "val-00000-of-00001.parquet")
        )
    written.append(write_json(out / "val_answers.json", dict(sorted(answers.items()))))
    written.append(write_json(out / "tasks.json", task_table(by_task)))
    return written


def task_table(by_task: dict[str, list[PerceptionItem]]) -> dict[str, dict]:
    """What ``score blink`` needs of each task beside ``val_answers.json`` (``tasks.json``), so a task BLINK does
    not have scores too: its number of options and, when every item words them the same, the option texts."""
    table: dict[str, dict] = {}
    for task, items in sorted(by_task.items()):
        wordings = {tuple(i.choices) for i in items}
        table[task] = {"options": max(len(i.choices) for i in items)}
        if len(wordings) == 1:
            table[task]["choices"] = list(next(iter(wordings)))
    return table
