"""Export a human-authored run's kept items in the benchmark's official format, and as our own split.

- CODIS: ``data.json`` (the release's records: id, image_id, question, context, answer, category) and
  ``images/<image_id>``;
- MME-RealWorld: ``MME_RealWorld.json`` (English) and ``MME_RealWorld_CN.json`` (Chinese), the release's
  records (Question_id, Image, Text, Answer choices A–E, Ground truth, Task, Subtask, Category, Dataset), and
  the images under ``images/<domain>/``;
- both: ``items.jsonl`` (every kept version with its lineage, reviews and checks), ``manifest.json`` (every file
  with its SHA-256) and ``README.md``, the data card with the review and agreement figures.

Images are copied byte for byte: the exported file hashes to the source file. Only kept items are exported
(every review passed); the card says how many were not, and why."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.data.schema import AuthoredItem, CodisContent, MMERealWorldContent
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_text, dumps_canonical, sha256_file, write_json, write_jsonl
from perceptforge.store.rundir import RunDir


def kept_items(run: RunDir) -> list[AuthoredItem]:
    folder = run.sub("authoring", "items")
    if not folder.is_dir():
        raise PerceptforgeError(
            f"{run.path}: no authored items yet (authoring/items/); author and review them in Label Studio, then "
            "`perceptforge annotate pull`"
        )
    items = [AuthoredItem.model_validate_json(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return [i for i in items if i.status == "kept"]


def codis_record(item: AuthoredItem, image_id: str, record_id: str | None = None) -> dict:
    """The item as a record of CODIS's ``data.json`` (under ``record_id``, by default the item's id)."""
    c = item.content
    assert isinstance(c, CodisContent)
    return {
        "id": record_id or item.id,
        "image_id": image_id,
        "question": c.question,
        "context": {"context_1": c.context_1, "context_2": c.context_2},
        "answer": {"answer_1": c.answer_1, "answer_2": c.answer_2},
        "category": c.category,
    }


def mme_record(item: AuthoredItem, image: str) -> dict:
    c = item.content
    assert isinstance(c, MMERealWorldContent) and c.domain is not None
    domain = c.domain.replace(" ", "_")
    return {
        "Question_id": f"{c.task}/{domain}/{c.subtask}/{item.id}",
        "Question Type": "Multiple Choice",
        "Image": image,
        "Text": c.question,
        "Answer choices": [f"({'ABCDE'[k]}) {o}" for k, o in enumerate(c.choices)],
        "Ground truth": c.answer,
        "Task": c.task,
        "Subtask": domain,
        "Category": c.subtask,
        "Dataset": item.lineage.source_id,
    }


def copy_original(run: RunDir, item: AuthoredItem, out: Path, rel: str) -> None:
    target = out / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run.inside(item.image.path), target)


def export_authored(run_dir: Path, out: Path, benchmark: AuthoredBenchmark, license: str = "other") -> dict:
    """Write the kept items of a CODIS or MME-RealWorld run to ``out``; returns the manifest."""
    run = RunDir(Path(run_dir).resolve())
    items = kept_items(run)
    out.mkdir(parents=True, exist_ok=True)
    files: list[str] = []
    if benchmark.content is CodisContent:
        records = []
        for item in items:
            image_id = f"{item.image.sha256[:10]}{Path(item.image.path).suffix}"
            copy_original(run, item, out, f"images/{image_id}")
            records.append(codis_record(item, image_id))
        write_json(out / "data.json", records)
        files.append("data.json")
    else:
        by_language: dict[str, list[dict]] = {"en": [], "cn": []}
        for item in items:
            c = item.content
            assert isinstance(c, MMERealWorldContent) and c.domain is not None
            image = f"{c.domain.replace(' ', '_')}/{item.image.sha256[:16]}{Path(item.image.path).suffix}"
            copy_original(run, item, out, f"images/{image}")
            by_language[c.language].append(mme_record(item, image))
        for language, name in (("en", "MME_RealWorld.json"), ("cn", "MME_RealWorld_CN.json")):
            if by_language[language]:
                write_json(out / name, by_language[language])
                files.append(name)
    official = list(files)
    write_jsonl(out / "items.jsonl", [i.model_dump(mode="json") for i in items])
    files += ["items.jsonl", *sorted(p.relative_to(out).as_posix() for p in (out / "images").rglob("*") if p.is_file())]
    review = json.loads(run.sub("authoring", "summary.json").read_text())
    atomic_write_text(out / "README.md", data_card(benchmark, items, review, license))
    # the review figures in the shape `perceptforge audit` reads beside a split (its human-verification check)
    agreement = review["reviewer_agreement"]
    write_json(
        out / "verification.json",
        {k: v for k, v in review.items() if k != "report"} | {"agreement": {"review": agreement, "overall": agreement}},
    )
    files += ["README.md", "verification.json"]
    manifest = {
        "benchmark": benchmark.name,
        "items": len(items),
        "official": official,
        "run": json.loads(run.sub("run.json").read_text()),
        "files": {f: sha256_file(out / f) for f in sorted(files)},
    }
    atomic_write_text(out / "manifest.json", dumps_canonical(manifest) + "\n")
    return manifest


def category(item: AuthoredItem) -> str:
    c = item.content
    return c.category if isinstance(c, CodisContent) else f"{c.domain}/{c.subtask}"


def data_card(authored: AuthoredBenchmark, items: list[AuthoredItem], review: dict, license: str) -> str:
    name, benchmark = authored.title, authored.name
    per_category = Counter(category(i) for i in items)
    agreement = review.get("reviewer_agreement") or {}
    status = review.get("status", {})
    lines = [
        "---",
        f"license: {license}",
        "task_categories:",
        "- visual-question-answering",
        "---",
        f"# perceptforge {name}-style split",
        "",
        f"{len(items)} items written by people from model drafts and cross-checked in Label Studio "
        f"({review.get('reviews_needed')} review(s) per version, all of which must pass). Format: the official "
        f"{name} release's, so `perceptforge score {benchmark}` reads it unchanged.",
        "",
        "## Items per category",
        "",
        "| category | items |",
        "| --- | --- |",
        *(f"| {c} | {n} |" for c, n in sorted(per_category.items())),
        "",
        "## Human authoring and review",
        "",
        "| figure | value |",
        "| --- | --- |",
        *(f"| items {s} | {n} |" for s, n in sorted(status.items())),
        f"| reviews | {review.get('reviews')} |",
        f"| reviews passed | {review.get('review_pass_rate')}% |",
        f"| revisions | {review.get('revisions')} |",
        f"| reviewer pairs | {agreement.get('items')} |",
        f"| reviewer agreement | {agreement.get('percent_agreement')}% |",
        f"| Cohen's kappa over reviewer pairs | {agreement.get('cohens_kappa')} |",
        *(f"| items flagged by `{f}` | {n} |" for f, n in sorted((review.get("flagged") or {}).items())),
        "",
        "Only kept items are exported. Every item's versions, authors, reviews and automatic checks are in "
        "`items.jsonl` (lineage: source image, draft backend and prompt, parent version, Label Studio task).",
        "",
        "## Sources",
        "",
        *(
            f"- {s}: {lic}"
            for s, lic in sorted({(i.lineage.source_id, i.image.licence) for i in items}, key=lambda t: t[0])
        ),
        "",
    ]
    return "\n".join(lines)
