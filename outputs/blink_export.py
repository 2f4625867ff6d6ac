"""A BLINK-style run in BLINK's official layout, so ``perceptforge score blink`` (and BLINK's own tooling)
reads it unchanged: ``<Task>/val-00000-of-00001.parquet`` per task with BLINK's columns (``idx``,
``question``, ``sub_task``, ``image_1`` … ``image_4``, ``choices``, ``answer`` as "(A)", ``prompt``,
``explanation``), and ``val_answers.json`` ({idx: "(A)"}). ``idx`` is ``val_<Task>_<n>``, numbered in item-id
order, so the same run exports the same bytes. Images are embedded (Hugging Face ``Image`` features).

``concat/`` holds BLINK's variant for single-image models: each multi-image item joined side by side into
one image, each part labelled with its number.

Beside that layout (whose bytes depend only on the run and ``only_verified``): ``items.jsonl`` (every exported
item under its ``idx``, with its lineage and, once `annotate pull` ran, its verification decision),
``verification.json`` (the pull's summary, where ``perceptforge audit`` reads it), ``README.md`` (the data card:
licence, items and random-choice accuracy per task, verification and agreement figures, sources) and
``manifest.json`` (every other file with its SHA-256). ``only_verified`` exports only kept items, corrections
applied (``verification/items/``).
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from itertools import groupby
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from perceptforge.data.schema import LETTERS, PerceptionItem
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.fileio import atomic_write_text, dumps_canonical, iter_jsonl, sha256_file, write_json, write_jsonl
from perceptforge.outputs.export import estimate_lines, write_hf_parquet
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


def numbered(items: list[PerceptionItem]) -> list[tuple[str, PerceptionItem]]:
    """``(idx, item)`` in export order: tasks by name, items by id within a task, ``idx`` = ``val_<Task>_<n>``."""
    by_task: dict[str, list[PerceptionItem]] = defaultdict(list)
    for item in items:
        by_task[item.task].append(item)
    return [
        (f"val_{task}_{n}", item)
        for task in sorted(by_task)
        for n, item in enumerate(sorted(by_task[task], key=lambda i: i.id), start=1)
    ]


def write_official(run: RunDir, rows_in_order: list[tuple[str, PerceptionItem]], out: Path) -> list[Path]:
    """BLINK's layout (and its concatenated variant) under ``out`` for the numbered items."""
    answers: dict[str, str] = {}
    written: list[Path] = []
    for task, group in groupby(rows_in_order, key=lambda row: row[1].task):
        rows, concat_rows = [], []
        for idx, item in group:
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
    by_task: dict[str, list[PerceptionItem]] = defaultdict(list)
    for _, item in rows_in_order:
        by_task[item.task].append(item)
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


def verified_items(run: RunDir) -> list[PerceptionItem]:
    """The kept items of the run's last `annotate pull`, corrections applied."""
    folder = run.sub("verification", "items")
    if not folder.is_dir():
        raise PerceptforgeError(
            f"{run.path}: nothing verified yet (no verification/items/); push the run with `perceptforge annotate "
            "push`, let two annotators check it, then `perceptforge annotate pull`"
        )
    return [PerceptionItem.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json"))]


def read_verification(run: RunDir) -> tuple[dict | None, dict[str, dict]]:
    """The last pull's summary (None when there was none) and its decisions by item id."""
    summary_path, decisions_path = run.sub("verification", "summary.json"), run.sub("verification", "decisions.jsonl")
    if not summary_path.is_file():
        return None, {}
    decisions = {rec["item_id"]: rec for _, rec in iter_jsonl(decisions_path)} if decisions_path.is_file() else {}
    return json.loads(summary_path.read_text()), decisions


def read_sources(run: RunDir) -> dict[str, dict]:
    path = run.sub("sources.jsonl")
    return {rec["id"]: rec for _, rec in iter_jsonl(path)} if path.is_file() else {}


def remove_stale(out: Path, keep: set[str]) -> None:
    """Files a previous BLINK export into ``out`` listed that this one does not write (a task with no kept
    item left), so the folder holds exactly what the new manifest lists; nothing else is touched."""
    old = out / "manifest.json"
    try:
        previous = json.loads(old.read_text()) if old.is_file() else {}
    except json.JSONDecodeError:
        return
    # only a manifest this layout wrote (its official files include val_answers.json) says what to remove
    if "val_answers.json" not in previous.get("official", []) or not isinstance(previous.get("files"), dict):
        return
    for rel in sorted(set(previous["files"]) - keep):
        target = (out / rel).resolve()
        if target.is_relative_to(out.resolve()) and target.is_file():
            target.unlink()
            for parent in target.parents:
                if parent == out.resolve() or any(parent.iterdir()):
                    break
                parent.rmdir()


def export_blink(run_dir: Path, out: Path, license: str = "other", only_verified: bool = False) -> dict:
    """Write the run's items in BLINK's layout under ``out``, with items.jsonl, verification.json (once
    pulled), the data card and the manifest; returns the manifest. ``only_verified``: the kept items only,
    corrections applied."""
    run = RunDir(Path(run_dir).resolve())
    out = Path(out)
    items = verified_items(run) if only_verified else load_perception_items(run.path)
    rows = numbered(items)
    out.mkdir(parents=True, exist_ok=True)
    official = [p.relative_to(out).as_posix() for p in write_official(run, rows, out)]
    verification, decisions = read_verification(run)
    write_jsonl(
        out / "items.jsonl",
        [{"idx": idx, **item.model_dump(mode="json"), "verification": decisions.get(item.id)} for idx, item in rows],
    )
    files = [*official, "items.jsonl"]
    if verification is not None:
        write_json(out / "verification.json", verification)  # where `perceptforge audit` looks beside a split
        files.append("verification.json")
    atomic_write_text(out / "README.md", data_card(items, verification, read_sources(run), license, only_verified))
    files.append("README.md")
    remove_stale(out, set(files))
    manifest = {
        "benchmark": "blink",
        "items": len(items),
        "only_verified": only_verified,
        "official": official,
        "run": json.loads(run.sub("run.json").read_text()) if run.sub("run.json").is_file() else {},
        "files": {f: sha256_file(out / f) for f in sorted(files)},
    }
    atomic_write_text(out / "manifest.json", dumps_canonical(manifest) + "\n")
    return manifest


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value}%"


def _num(value: float | None) -> str:
    return "—" if value is None else str(value)


def data_card(
    items: list[PerceptionItem],
    verification: dict | None,
    sources: dict[str, dict],
    license: str,
    only_verified: bool = False,
) -> str:
    """README.md: Hub front matter (licence, one config per task), items and random-choice accuracy per task,
    the human verification's figures (status counts, agreement and Cohen's kappa per task and overall), sources
    and their licences."""
    by_task: dict[str, list[PerceptionItem]] = defaultdict(list)
    for item in items:
        by_task[item.task].append(item)
    random = {t: round(sum(i.random_choice for i in v) / len(v), 2) for t, v in sorted(by_task.items())}
    overall_random = round(sum(random.values()) / len(random), 2) if random else None
    which = (
        "the items both annotators accepted, with their corrected answers"
        if only_verified
        else "every item of the run, with the answers the pipeline proposed"
    )
    lines = [
        "---",
        f"license: {license}",
        "task_categories:",
        "- visual-question-answering",
        "- multiple-choice",
        "configs:",
        *(
            f"- config_name: {t}\n  data_files:\n  - split: val\n    path: {t}/val-00000-of-00001.parquet"
            for t in sorted(by_task)
        ),
        "---",
        "# perceptforge BLINK-style split",
        "",
        f"{len(items)} multiple-choice questions over images whose visual prompts (circles, boxes, letters) are drawn "
        f"in: {which}. Format: BLINK's official layout (`<Task>/val-00000-of-00001.parquet`, `val_answers.json`, "
        "and `concat/` for single-image models), so `perceptforge score blink` and BLINK's own tooling read it "
        "unchanged.",
        "",
        "## Items per task",
        "",
        "| task | items | random choice |",
        "| --- | --- | --- |",
        *(f"| {t} | {len(by_task[t])} | {random[t]}% |" for t in sorted(by_task)),
        f"| all (random choice: mean over tasks) | {len(items)} | {_pct(overall_random)} |",
        "",
        "## Human verification",
        "",
        *verification_lines(verification),
        "",
        "## Sources",
        "",
        *source_lines(items, sources),
        "",
        "## Files",
        "",
        "- `items.jsonl`: every exported item under its `idx`, with its lineage (source images, task template, "
        "prompt, seed, parent version) and its verification decision (verdicts, reasons, corrections, annotators, "
        "Label Studio task);",
        "- `verification.json`: the verification summary `perceptforge audit` reads;",
        "- `manifest.json`: every file with its SHA-256, and the run's settings.",
        "",
    ]
    return "\n".join(lines)


def verification_lines(verification: dict | None) -> list[str]:
    if verification is None:
        return ["Not verified by people yet: no `perceptforge annotate pull` for this run."]
    status, per_task, agreement = verification["status"], verification["status_per_kind"], verification["agreement"]
    rows = []
    for task in [*sorted(per_task), "overall"]:
        counts = per_task.get(task, {}) if task != "overall" else status
        a = agreement.get(task, {})
        rows.append(
            f"| {task} | {sum(counts.values())} | {counts.get('kept', 0)} | {a.get('items', 0)} | "
            f"{_pct(a.get('percent_agreement'))} | {_num(a.get('cohens_kappa'))} |"
        )
    return [
        f"Each item is checked in Label Studio by {verification['required_annotators']} annotators, who accept or "
        "reject it (a rejection with its reason) and may correct its answer; an item is kept only when both accept. "
        f"The last `perceptforge annotate pull` decided {verification['items']} items:",
        "",
        "| status | items |",
        "| --- | --- |",
        *(f"| {s} | {n} |" for s, n in sorted(status.items())),
        f"| kept with a corrected answer | {verification['corrected']} |",
        f"| invalid annotations (not counted) | {verification['invalid_annotations']} |",
        "",
        "Agreement on accept / reject, over the items both annotators judged:",
        "",
        "| task | items decided | kept | doubly annotated | agreement | Cohen's kappa |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        *estimate_lines(verification.get("estimate")),
    ]


def source_lines(items: list[PerceptionItem], sources: dict[str, dict]) -> list[str]:
    used = sorted({s for i in items for s in i.sources})
    lines = []
    for sid in used:
        rec = sources.get(sid, {})
        credit = f" ({rec['attribution']})" if rec.get("attribution") else ""
        lines.append(f"- {sid}: {rec.get('licence', 'licence not recorded')}{credit}")
    return lines or ["(no items)"]
