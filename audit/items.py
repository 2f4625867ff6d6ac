"""What the audit looks at: every question of a split as one flat ``AuditItem``, read from our export, a
run directory, or an official release (through the scorer's readers, so the audit and the scorer agree on
what a record is)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from perceptforge.errors import InputError
from perceptforge.scorer import benchmarks
from perceptforge.scorer.benchmarks import blink, codis, mme_realworld, mvp_bench
from perceptforge.scorer.predictions import iter_records


@dataclass(frozen=True)
class AuditItem:
    id: str
    category: str
    answer_format: str  # mcq | yes_no | open
    question: str
    answer: str  # a letter (mcq), yes / no, or the answer text (open)
    options: tuple[str, ...] = ()
    level: str = ""
    split: str = ""
    pair: str = ""  # the questions of one pair must have different answers (MVP-Bench Yes/No, CODIS)
    images: tuple[str, ...] = ()  # image files (ours) or the release's image names (official files)
    source: str = ""  # the source image (its hash), for leakage across splits
    context: str = ""  # CODIS: the context that decides the answer
    n_options: int = 0  # when a release gives the number of options but not their texts (BLINK)

    @property
    def choices(self) -> int:
        return len(self.options) or self.n_options


def split_files(folder: Path) -> list[Path]:
    """An export's split files by name (the folder also holds the audit's own JSON Lines: blind answers); an empty
    one (a one-sided export: every source on one side) has nothing to read, and the audit says so."""
    return [p for p in (folder / "test.jsonl", folder / "val.jsonl") if p.is_file() and p.stat().st_size]


def read_items(paths: list[Path], benchmark: str = "perceptforge") -> list[AuditItem]:
    """Our export folder (val.jsonl / test.jsonl), a run directory (items/), or official release files."""
    if benchmark != "perceptforge":
        return read_official(benchmark, paths)
    items: list[AuditItem] = []
    for path in paths:
        if (path / "items").is_dir():
            for record in sorted((path / "items").glob("*.json")):
                rec = json.loads(record.read_text())
                items += blink_record_items(rec, path) if "task" in rec else mvp_record_items(rec, path, "")
            continue
        splits = split_files(path) if path.is_dir() else [path]
        if not splits:
            raise InputError(str(path), "no val.jsonl / test.jsonl (an export) and no items/ (a run directory)")
        for split in splits:
            for _, rec in iter_records(split):
                items += mvp_record_items(rec, split.parent, rec.get("split") or split.stem)
    return items


def mvp_record_items(rec: dict, folder: Path, split: str) -> list[AuditItem]:
    """One of our items: a Yes/No pair is two questions (one per image) with opposite answers."""
    q, pair, cat = rec["question"], rec["pair"], rec["category"]
    natural, manipulated = (str(folder / pair[k]["path"]) for k in ("natural", "manipulated"))
    base = {
        "category": f"{cat['low']} {cat['name']}",
        "question": q["question"],
        "level": q.get("level", ""),
        "split": split,
        "source": rec["lineage"]["source_sha256"],
    }
    if q["kind"] == "yes_no_pair":
        return [
            AuditItem(
                f"{rec['id']}#{name}", answer_format="yes_no", answer=answer, pair=rec["id"], images=(image,), **base
            )
            for name, image, answer in (
                ("natural", natural, q["answer_natural"]),
                ("manipulated", manipulated, q["answer_manipulated"]),
            )
        ]
    if q["kind"] == "context_pair":
        return [
            AuditItem(
                f"{rec['id']}#{c + 1}",
                answer_format="open",
                answer=q["answers"][c],
                pair=rec["id"],
                images=(manipulated,),
                **base,
            )
            for c in range(2)
        ]
    images = (natural, manipulated) if q["kind"] == "cross_mcq" else (manipulated,)
    return [
        AuditItem(
            rec["id"], answer_format="mcq", answer=q["answer"], options=tuple(q["options"]), images=images, **base
        )
    ]


def blink_record_items(rec: dict, folder: Path) -> list[AuditItem]:
    """One BLINK-style item of a run (``run blink``): an MCQ over its images, its task as the category."""
    return [
        AuditItem(
            rec["id"],
            category=rec["task"],
            answer_format="mcq",
            question=rec["question"],
            answer=rec["answer"],
            options=tuple(rec["choices"]),
            level=rec.get("variant", ""),
            images=tuple(str(folder / im["path"]) for im in rec["images"]),
            source=",".join(rec["sources"]),
        )
    ]


_CHOICE_PREFIX = re.compile(r"^\(?[A-H][).]\s*")


def blink_items(paths: list[Path]) -> list[AuditItem]:
    return [
        AuditItem(
            key,
            category=r["task"],
            answer_format="mcq",
            question="",
            answer=r["answer"],
            options=tuple(r["choices"] or ()),
            n_options=r["n"],
        )
        for key, r in blink.read_data(paths).items()
    ]


def mvp_bench_items(paths: list[Path]) -> list[AuditItem]:
    out = []
    for r in mvp_bench.iter_data(paths):
        if r["type"].startswith("y/n"):
            question = r["question"].split("\n")[0]
            out.append(
                AuditItem(
                    str(r["question_id"]),
                    category=r["type"],
                    answer_format="yes_no",
                    question=question,
                    answer=r["answer"].lower(),
                    level=r.get("level", ""),
                    pair=f"{r['id']}|{question}",
                    images=(r["image"],),
                )
            )
        else:
            opts = tuple(mvp_bench.options_of(r["question"]))
            out.append(
                AuditItem(
                    str(r["question_id"]),
                    category=r["type"],
                    answer_format="mcq",
                    question=r["question"].split("\n")[0],
                    answer=r["answer"],
                    options=opts,
                    level=r.get("level", ""),
                    images=(r["image"],),
                )
            )
    return out


def codis_items(paths: list[Path]) -> list[AuditItem]:
    records = {str(rec["id"]): rec for path in paths for _, rec in iter_records(path)}
    return [
        AuditItem(
            f"{key}#{c + 1}",
            category=r["category"],
            answer_format="open",
            question=r["question"],
            answer=r["answers"][c],
            pair=key,
            images=(str(records[key].get("image_id", "")),),
            context=str(records[key].get("context", {}).get(f"context_{c + 1}", "")),
        )
        for key, r in codis.read_data(paths).items()
        for c in range(2)
    ]


def mme_realworld_items(paths: list[Path]) -> list[AuditItem]:
    return [
        AuditItem(
            str(r["Question_id"]),
            category=f"{r['Subtask']}/{r['Category']}",
            answer_format="mcq",
            question=r["Text"],
            answer=r["Ground truth"],
            options=tuple(_CHOICE_PREFIX.sub("", c) for c in r["Answer choices"]),
            level=r["Task"],
            images=(r["Image"],),
        )
        for r in mme_realworld.read_data(paths)
    ]


# the official releases' readers, by scorer benchmark name; a scorer benchmark from another package is
# audited when its module offers ``audit_items(paths) -> list[dict]`` (AuditItem's fields)
READERS = {
    "blink": blink_items,
    "mvp-bench": mvp_bench_items,
    "codis": codis_items,
    "mme-realworld": mme_realworld_items,
}


def read_official(benchmark: str, paths: list[Path]) -> list[AuditItem]:
    if benchmark in READERS:
        return READERS[benchmark](paths)
    module = benchmarks.REGISTRY.get(benchmark)
    reader = (
        getattr(benchmarks.get(benchmark), "audit_items", None) if module or benchmark in benchmarks.choices() else None
    )
    if reader is None:
        raise InputError(
            "--benchmark",
            f"no audit reader for {benchmark!r}; choose perceptforge, {', '.join(READERS)}, or a scorer benchmark "
            "whose module has audit_items()",
        )
    return [AuditItem(**record) for record in reader(paths)]
