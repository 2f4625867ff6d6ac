"""Exporting a run's items as a versioned split: JSONL + images, Parquet, VLMEvalKit TSV, manifest, data card.

Everything is a pure function of (items, images, seed): files are written in sorted order with stable
encodings, so the same inputs give byte-identical files.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import re
import subprocess
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path

import yaml
from pydantic import ValidationError

from perceptforge.data.schema import LETTERS, BenchmarkItem, FileEntry, ImageRef, SplitManifest
from perceptforge.errors import InputError, describe_validation_error
from perceptforge.fileio import (
    atomic_file,
    atomic_write_bytes,
    atomic_write_text,
    dumps_canonical,
    sha256_file,
    write_json,
)
from perceptforge.store.rundir import RunDir

FORMATS = ("jsonl", "parquet", "vlmevalkit", "lmms-eval")
# Items per Parquet row group: an export holds one group's images in memory at a time (each item has two).
ROWS_PER_GROUP = 16


def load_items(run_dir: Path, only_verified: bool = False) -> list[BenchmarkItem]:
    """The run's items; with ``only_verified``, the ones human verification kept (``annotate pull`` writes
    them, corrected ones as their new version, to ``verification/items``)."""
    folder = run_dir / "items"
    if not folder.is_dir():
        raise InputError(str(run_dir), "no items/ folder: is this a run directory?")
    if only_verified and (run_dir / "verification" / "items").is_dir():
        folder = run_dir / "verification" / "items"
    items = []
    for path in sorted(folder.glob("*.json")):
        try:
            item = BenchmarkItem.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise InputError(str(path), "; ".join(describe_validation_error(exc))) from None
        if item.verified or not only_verified:
            items.append(item)
    if not items:
        raise InputError(str(folder), "no items to export" + (" (none verified)" if only_verified else ""))
    return items


def placement_cost(placed: dict[str, Counter], target: dict[str, dict], cats: Counter, side: str) -> float:
    """How far both sides' per-category counts would be from their targets with ``cats`` added to ``side``."""
    return sum(
        (placed[s][c] + (n if s == side else 0) - target[s][c]) ** 2 for s in ("val", "test") for c, n in cats.items()
    )


def assign_splits(items: list[BenchmarkItem], seed: int, val_fraction: float) -> dict[str, str]:
    """Seeded val / test split, whole source images at a time (the questions about one picture never land on
    both sides: that would leak it), stratified by low-level category: sources are taken in a seeded order
    and each goes to the side that keeps every category's val share nearest ``val_fraction``."""
    by_source: dict[str, list[BenchmarkItem]] = defaultdict(list)
    for item in items:
        by_source[item.lineage.source_sha256].append(item)
    totals = Counter(i.category.low for i in items)
    target = {"val": {c: n * val_fraction for c, n in totals.items()}}
    target["test"] = {c: n - target["val"][c] for c, n in totals.items()}
    placed: dict[str, Counter] = {"val": Counter(), "test": Counter()}
    rng = random.Random(f"{seed}:sources")
    order = sorted(by_source)
    rng.shuffle(order)
    splits = {}
    for source in order:
        cats = Counter(i.category.low for i in by_source[source])
        val_cost, test_cost = (placement_cost(placed, target, cats, side) for side in ("val", "test"))
        side = "val" if val_cost < test_cost or (val_cost == test_cost and rng.random() < val_fraction) else "test"
        placed[side].update(cats)
        splits.update({i.id: side for i in by_source[source]})
    return splits


def image_bytes(run_dir: Path, item: BenchmarkItem, ref: ImageRef) -> bytes:
    """An item's image from the run directory; a missing one is an error naming the item and the path."""
    path = RunDir(run_dir).inside(ref.path)
    if not path.is_file():
        raise InputError(str(path), f"image of item {item.id} is missing from the run directory")
    return path.read_bytes()


def _b64(run_dir: Path, item: BenchmarkItem, ref: ImageRef) -> str:
    return base64.b64encode(image_bytes(run_dir, item, ref)).decode()


def _b64_pair(run_dir: Path, item: BenchmarkItem) -> str:
    """A cross-image row's cell: VLMEvalKit's list of two images, natural first."""
    return repr([_b64(run_dir, item, item.pair.natural), _b64(run_dir, item, item.pair.manipulated)])


def write_jsonl_split(items, splits, run_dir: Path, out: Path) -> list[Path]:
    """``val.jsonl``, ``test.jsonl`` and every image they name; the list is what the split holds, whether
    this call copied a file or an earlier (or interrupted) export did."""
    written = []
    for split in ("val", "test"):
        rows = [{**item.model_dump(mode="json"), "split": split} for item in items if splits[item.id] == split]
        written.append(atomic_write_text(out / f"{split}.jsonl", "".join(dumps_canonical(r) + "\n" for r in rows)))
    for item in items:
        for ref in (item.pair.natural, item.pair.manipulated, item.pair.mask):
            if ref is None:
                continue
            target = out / ref.path
            data = image_bytes(run_dir, item, ref)
            if not target.is_file() or sha256_file(target) != ref.sha256:
                atomic_write_bytes(target, data)
            written.append(target)
    return written


def _question_fields(item: BenchmarkItem) -> dict:
    q = item.question
    options = list(getattr(q, "options", []) or [])
    answer = getattr(q, "answer", None) or (
        f"{q.answer_natural}/{q.answer_manipulated}" if q.kind == "yes_no_pair" else ""
    )
    return {
        "kind": q.kind,
        "level": getattr(q, "level", ""),
        "question": q.question,
        "options": options,
        "answer": answer,
    }


def write_parquet(items, splits, run_dir: Path, out: Path) -> list[Path]:
    """``data/<split>.parquet`` per split, images embedded: the card's ``configs`` name these files, so
    ``load_dataset(<export folder>)`` (and a Hub upload of it) gives val and test as splits."""
    return [
        write_parquet_file(
            [i for i in items if splits[i.id] == split], splits, run_dir, out / "data" / f"{split}.parquet"
        )
        for split in sorted(set(splits.values()))
    ]


def write_parquet_file(items, splits, run_dir: Path, path: Path) -> Path:
    def rows() -> Iterator[dict]:  # read one item's images at a time: memory stays one row group's
        for item in items:
            yield {
                "id": item.id,
                "split": splits[item.id],
                "category": item.category.name,
                "category_high": item.category.high,
                "category_low": item.category.low,
                **_question_fields(item),
                "natural_image": {
                    "bytes": image_bytes(run_dir, item, item.pair.natural),
                    "path": item.pair.natural.path,
                },
                "manipulated_image": {
                    "bytes": image_bytes(run_dir, item, item.pair.manipulated),
                    "path": item.pair.manipulated.path,
                },
                "lineage": lineage_row(item),
            }

    columns = [
        *((name, "string") for name in ("id", "split", "category", "category_high", "category_low", "kind", "level")),
        ("question", "string"),
        ("options", "strings"),
        ("answer", "string"),
        ("natural_image", "image"),
        ("manipulated_image", "image"),
        ("lineage", "lineage"),
    ]
    return write_hf_parquet(rows(), columns, path)


def lineage_row(item: BenchmarkItem) -> dict:
    """An item's lineage as the Parquet ``lineage`` struct: its fields as they are, the maps (stage → backend, name
    → artifact path) as lists of records, since a struct's fields are fixed and a map's keys differ by item."""
    lineage = item.lineage.model_dump(mode="json")
    lineage["backends"] = [{"stage": stage, **ref} for stage, ref in sorted(lineage["backends"].items())]
    lineage["artifacts"] = [{"name": name, "path": path} for name, path in sorted(lineage["artifacts"].items())]
    return lineage


# The lineage struct's fields: (name, kind), kind a plain type or a list of records with fields of their own.
LINEAGE_FIELDS: list[tuple[str, object]] = [
    ("source_id", "string"),
    ("source_sha256", "string"),
    ("template_id", "string"),
    ("template_version", "int64"),
    ("prompts", [("id", "string"), ("version", "int64"), ("sha256", "string")]),
    ("backends", [("stage", "string"), ("name", "string"), ("model_id", "string")]),
    ("seed", "int64"),
    ("artifacts", [("name", "string"), ("path", "string")]),
    ("parent_id", "string"),
]


def _arrow_struct(fields: list[tuple[str, object]]) -> object:
    import pyarrow as pa

    def arrow(kind: object) -> object:
        return pa.list_(_arrow_struct(kind)) if isinstance(kind, list) else getattr(pa, str(kind))()

    return pa.struct([(name, arrow(kind)) for name, kind in fields])


def _hf_struct(fields: list[tuple[str, object]]) -> dict:
    """``datasets``' features of a struct: a dict of fields; a list of records is ``[{fields}]``, the list form
    datasets 3 and 4 both read as a list of dicts (a ``Sequence`` of a dict would be read as a dict of lists)."""
    return {
        name: [_hf_struct(kind)] if isinstance(kind, list) else {"dtype": kind, "_type": "Value"}
        for name, kind in fields
    }


def _card_struct(fields: list[tuple[str, object]]) -> list[dict]:
    """The card's YAML for a struct's fields: ``dtype`` for a plain one, ``list`` of fields for a list of records."""
    return [
        {"name": name, "list": _card_struct(kind)} if isinstance(kind, list) else {"name": name, "dtype": kind}
        for name, kind in fields
    ]


def write_hf_parquet(
    rows: Iterable[dict], columns: list[tuple[str, str]], path: Path, rows_per_group: int = ROWS_PER_GROUP
) -> Path:
    """``rows`` as Parquet with one column per ``(name, kind)`` — kind ``string``, ``strings`` (a list),
    ``lineage`` (``LINEAGE_FIELDS``' struct) or ``image`` ({bytes, path}) — and the metadata Hugging Face
    ``datasets`` reads to decode the images. Written row
    group by row group (``rows_per_group`` rows each, taken from ``rows`` as it yields them), so memory stays flat
    however large the split.

    The features are written here rather than by ``datasets.Features(...).arrow_schema``: datasets 4 and later
    write a list column as ``List``, which datasets 3 cannot read ("Feature type 'List' not found",
    huggingface/datasets#7739), and lmms-eval, whose task folder ships beside these files, has pinned
    ``datasets<4``; ``Sequence`` is read by both. It also keeps ``datasets`` (with huggingface_hub, dill,
    multiprocess, xxhash, hf-xet: 6.5 MB, 32 MB installed) a test dependency, not one of every install.
    ``tests/test_export.py`` checks that ``datasets`` reads these features as the ones intended."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = {
        "string": pa.string(),
        "strings": pa.list_(pa.string()),
        "image": pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
        "lineage": _arrow_struct(LINEAGE_FIELDS),
    }
    value = {"dtype": "string", "_type": "Value"}
    feature = {
        "string": value,
        "strings": {"feature": value, "_type": "Sequence"},
        "image": {"_type": "Image"},
        "lineage": _hf_struct(LINEAGE_FIELDS),
    }
    features = {name: feature[kind] for name, kind in columns}
    schema = pa.schema([(name, arrow[kind]) for name, kind in columns]).with_metadata(
        {b"huggingface": json.dumps({"info": {"features": features}}, sort_keys=True).encode()}
    )
    with atomic_file(path) as f, pq.ParquetWriter(f, schema, compression="zstd") as writer:
        written = 0
        iterator = iter(rows)
        while group := list(itertools.islice(iterator, rows_per_group)):
            writer.write_table(pa.Table.from_pylist(group, schema=schema))
            written += len(group)
        if not written:  # an empty split still has its columns
            writer.write_table(pa.Table.from_pylist([], schema=schema))
    return path


MCQ_KINDS = ("single_mcq", "cross_mcq", "absent_mcq")
# `question` is what VLMEvalKit asks (its prompt is built from it); `bare_question`, the item's question alone, is
# what our scorer reads back
TSV_COLUMNS = [
    *("index", "id", "image", "question", "answer", "category", "l2-category", "split", "kind", "level"),
    "bare_question",
]
VLMEVALKIT_CONFIG = "vlmevalkit_config.json"


def vlmevalkit_names(name: str) -> tuple[str, str]:
    """The VLMEvalKit dataset names of an export called ``name``: ``<name>_MCQ`` and ``<name>_YORN`` (anything
    but letters, digits, ``_`` and ``-`` made ``_``). VLMEvalKit reads dataset ``X`` from ``$LMUData/X.tsv``, so
    the files carry these names and need no renaming."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_-") or "perceptforge"
    return f"{stem}_MCQ", f"{stem}_YORN"


def vlmevalkit_config(name: str) -> dict:
    """The ``data`` section of a config for VLMEvalKit's ``run.py --config`` (the ``model`` section is the
    user's), naming each TSV's dataset class.

    VLMEvalKit's ``build_dataset(name)`` (``vlmeval/dataset/__init__.py``), for a name it does not list, reads
    ``$LMUData/<name>.tsv`` and takes it as ``CustomMCQDataset`` if it has columns ``A`` and ``B``, else as
    ``CustomVQADataset``: it never picks ``ImageYORNDataset`` for a name of ours, so ``--data <name>_YORN`` alone
    would score the Y/N file as open VQA. Its config names the class: ``run.py``'s ``build_dataset_from_config``
    does ``getattr(vlmeval.dataset, cfg["class"])(**valid_params)`` with the entry's other keys (``dataset``);
    ``ImageYORNDataset(dataset=<name>_YORN)`` then loads ``$LMUData/<name>_YORN.tsv`` (no md5 to match) and
    evaluates Yes/No. The same section, passed as ``run.py --data-config '<JSON>'`` with ``--data`` and
    ``--model``, does the same (open-compass/VLMEvalKit run.py at e8e78f05, ``build_dataset_from_cli``)."""
    mcq, yorn = vlmevalkit_names(name)
    return {
        "data": {
            mcq: {"class": "CustomMCQDataset", "dataset": mcq},
            yorn: {"class": "ImageYORNDataset", "dataset": yorn},
        }
    }


def write_vlmevalkit_tsv(items, splits, run_dir: Path, out: Path, name: str = "perceptforge-mvp") -> list[Path]:
    """VLMEvalKit's TSV layouts, base64 images inline, one ``index`` sequence across both files, named as
    ``vlmevalkit_names(name)`` says, and ``vlmevalkit_config.json`` naming each file's dataset class:

    - ``<name>_MCQ.tsv`` (its MCQ type: options ``A…E``, answer a letter): single, cross and absent MCQs; a
      cross-image item's ``image`` is VLMEvalKit's list of two images, natural first;
    - ``<name>_YORN.tsv`` (its Y/N type, MME's columns: answer ``Yes`` / ``No``): each Yes/No pair as two rows,
      one per image, with ids ``<item id>#natural`` and ``<item id>#manipulated`` as our scorer keys them.

    ``kind`` and ``level`` keep what our scorer groups by, so a TSV scores exactly like the JSONL split.
    VLMEvalKit builds its prompt from ``question``, so that column asks what ``perceptforge predict`` asks: a Y/N
    row holds predict's whole Yes/No prompt ("… Answer the question using a single word: Yes or No.", which
    VLMEvalKit's ``ImageYORNDataset`` sends as it is), an MCQ row the question and predict's MCQ instruction ("Answer
    with the option's letter …"; VLMEvalKit lays out the options itself, after it). ``bare_question`` keeps the
    item's question alone, for our scorer.
    An image (or a cross row's pair of images) is inlined once per file; a later row showing it names the first
    row's ``index`` instead (VLMEvalKit resolves an ``image`` of 64 characters or fewer as another row's index).
    Rows are written as they are made, so memory stays flat however large the split.
    """
    import csv

    from perceptforge.scorer.benchmarks.perceptforge import predict_prompts
    from perceptforge.scorer.verdicts import ask, instruction

    prompts = predict_prompts()
    mcq_instruction = instruction(prompts, "single_mcq")
    mcq_name, yorn_name = vlmevalkit_names(name)
    mcq_path, yorn_path = out / f"{mcq_name}.tsv", out / f"{yorn_name}.tsv"
    with atomic_file(mcq_path, "w") as mcq, atomic_file(yorn_path, "w") as yorn:
        mcq_rows = csv.writer(mcq, delimiter="\t", lineterminator="\n")
        yorn_rows = csv.writer(yorn, delimiter="\t", lineterminator="\n")
        mcq_rows.writerow([*TSV_COLUMNS[:4], *LETTERS, *TSV_COLUMNS[4:]])
        yorn_rows.writerow(TSV_COLUMNS)
        # file → image sha256 (or a cross row's two) → the row index holding it
        inlined: dict[str, dict[str, int]] = {"mcq": {}, "yorn": {}}

        def once(file: str, index: int, key: str, cell: Callable[[], str]) -> str:
            first = inlined[file].setdefault(key, index)
            return str(first) if first != index else cell()

        def single(file: str, index: int, item: BenchmarkItem, ref: ImageRef) -> str:
            return once(file, index, ref.sha256, lambda: _b64(run_dir, item, ref))

        index = 0
        for item in items:
            q = item.question
            tail = [
                item.category.name,
                item.category.high,
                splits[item.id],
                q.kind,
                getattr(q, "level", ""),
                q.question,
            ]
            if q.kind in MCQ_KINDS:
                if q.kind == "cross_mcq":  # the pair's list of two, inlined once; a later row names that row
                    pair = item.pair
                    both = partial(_b64_pair, run_dir, item)
                    image = once("mcq", index, f"{pair.natural.sha256},{pair.manipulated.sha256}", both)
                else:
                    image = single("mcq", index, item, item.pair.manipulated)
                options = list(q.options) + [""] * (len(LETTERS) - len(q.options))
                asked = f"{q.question}\n{mcq_instruction}"
                mcq_rows.writerow([index, item.id, image, asked, *options, q.answer, *tail])
                index += 1
            elif q.kind == "yes_no_pair":
                asked = ask(prompts, q.kind, q.question)
                for image_name, ref, answer in (
                    ("natural", item.pair.natural, q.answer_natural),
                    ("manipulated", item.pair.manipulated, q.answer_manipulated),
                ):
                    image = single("yorn", index, item, ref)
                    yorn_rows.writerow([index, f"{item.id}#{image_name}", image, asked, answer.capitalize(), *tail])
                    index += 1
    config = write_json(out / VLMEVALKIT_CONFIG, vlmevalkit_config(name))
    return [mcq_path, yorn_path, config]


def write_lmms_eval_task(parquet: list[Path], out: Path, name: str, version: str) -> list[Path]:
    """``lmms_eval/<task>.yaml``, its ``utils.py`` and ``perceptforge_scorer.py``: the task reads the Parquet
    splits, relative to the export folder, and scores with perceptforge's scorer, whose code the folder carries
    (``perceptforge_scorer.py``, generated by ``scorer/standalone`` from the scorer's modules; it and ``utils.py``,
    which loads it, need nothing but the standard library, so the folder runs in lmms-eval's environment without
    perceptforge). It evaluates the test split; with a val split beside it,
    ``<task>_val.yaml`` (the same task on val, through lmms-eval's ``include``) is the option that evaluates val:
    ``--tasks <task>_val``."""
    from importlib import resources

    from perceptforge.scorer.standalone import task_utils

    template = resources.files("perceptforge.scorer").joinpath("lmms_eval_task")
    task = re.sub(r"\W+", "_", name).strip("_").lower()
    splits = sorted(p.stem for p in parquet)
    text = (
        template.joinpath("perceptforge.yaml")
        .read_text()
        .format(
            task=task,
            data_files="\n".join(f"    {s}: data/{s}.parquet" for s in splits),
            test_split="test" if "test" in splits else splits[-1],
            version=json.dumps(version),
        )
    )
    folder = out / "lmms_eval"
    written = [
        atomic_write_text(folder / f"{task}.yaml", text),
        atomic_write_text(folder / "utils.py", template.joinpath("utils.py").read_text()),
        atomic_write_text(folder / "perceptforge_scorer.py", task_utils()),
    ]
    if "val" in splits and "test" in splits:
        val = f"# the {task} task on the val split: lmms-eval --include_path lmms_eval --tasks {task}_val ...\n"
        val += f"include: {task}.yaml\ntask: {task}_val\ntest_split: val\n"
        written.append(atomic_write_text(folder / f"{task}_val.yaml", val))
    return written


def source_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def export_split(
    run_dir: Path,
    out: Path,
    formats: tuple[str, ...] = FORMATS,
    seed: int = 0,
    val_fraction: float = 0.5,
    only_verified: bool = False,
    name: str = "perceptforge-mvp",
    version: str = "1",
    license: str = "other",
) -> SplitManifest:
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise InputError("--formats", f"unknown format(s) {sorted(unknown)}; choose from {', '.join(FORMATS)}")
    items = sorted(load_items(run_dir, only_verified), key=lambda i: i.id)
    splits = assign_splits(items, seed, val_fraction)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if "lmms-eval" in formats and "parquet" not in formats:
        raise InputError("--formats", "lmms-eval reads the Parquet splits: add parquet to --formats")
    if "jsonl" in formats:
        written += write_jsonl_split(items, splits, run_dir, out)
    if "parquet" in formats:
        parquet = write_parquet(items, splits, run_dir, out)
        written += parquet
        if "lmms-eval" in formats:
            written += write_lmms_eval_task(parquet, out, name, version)
    if "vlmevalkit" in formats:
        written += write_vlmevalkit_tsv(items, splits, run_dir, out, name)
    counts = Counter(splits.values())
    counts.update(f"{splits[i.id]}/{i.category.low}" for i in items)
    profile_path = run_dir / "profile.yaml"
    profile = yaml.safe_load(profile_path.read_text()) if profile_path.exists() else {}
    prompts = {(p.id, p.version): p for i in items for p in i.lineage.prompts}
    # every backend that made an item at each stage (a profile may give a stage several: mask editors by value)
    models: dict[str, set[str]] = defaultdict(set)
    for i in items:
        for stage, b in i.lineage.backends.items():
            models[stage].add(b.model_id or b.name)
    manifest = SplitManifest(
        name=name,
        version=version,
        seed=seed,
        counts=dict(sorted(counts.items())),
        files=[
            FileEntry(path=str(p.relative_to(out)), sha256=sha256_file(p), bytes=p.stat().st_size)
            for p in sorted(set(written))
        ],
        profile=profile,
        templates=dict(sorted({i.lineage.template_id: i.lineage.template_version for i in items}.items())),
        prompts=[prompts[k] for k in sorted(prompts)],
        models={stage: sorted(names) for stage, names in sorted(models.items())},
        source_commit=source_commit(),
    )
    write_json(out / "manifest.json", manifest.model_dump(mode="json"))
    verification_path = run_dir / "verification" / "summary.json"
    verification = json.loads(verification_path.read_text()) if verification_path.exists() else None
    if verification:  # the audit reads it beside the split
        write_json(out / "verification.json", verification)
    split_bytes = {p.stem: arrow_bytes(p) for p in written if p.parent == out / "data" and p.suffix == ".parquet"}
    atomic_write_text(out / "README.md", data_card(manifest, only_verified, license, verification, split_bytes))
    return manifest


# What the Parquet files hold, as the card's front matter declares it to the Hub and to `datasets`.
# Written by hand, as the Parquet schema's features are (write_hf_parquet says why): `sequence` is read by
# datasets 3 and later, where datasets 4's Features._to_yaml_list writes `list`.
CARD_FEATURES = [
    *({"name": n, "dtype": "string"} for n in ("id", "split", "category", "category_high", "category_low")),
    *({"name": n, "dtype": "string"} for n in ("kind", "level", "question")),
    {"name": "options", "sequence": "string"},
    {"name": "answer", "dtype": "string"},
    {"name": "natural_image", "dtype": "image"},
    {"name": "manipulated_image", "dtype": "image"},
    {"name": "lineage", "struct": _card_struct(LINEAGE_FIELDS)},
]


def card_front_matter(
    manifest: SplitManifest, only_verified: bool, license: str, split_bytes: dict[str, int] | None = None
) -> str:
    """The Hub's YAML header: licence, task categories, the splits and their files, the features.

    Dumped here rather than by ``huggingface_hub.DatasetCardData.to_yaml``, which would move ``language`` first
    (a changed README byte for every export) and make huggingface_hub a dependency of every install for a YAML
    dump; ``tests/test_export.py`` reads the card back with ``huggingface_hub.DatasetCard``. ``split_bytes``: each
    split's Arrow size (``arrow_bytes``)."""
    split_bytes = split_bytes or {}
    splits = sorted(
        p.removeprefix("data/").removesuffix(".parquet")
        for p in (f.path for f in manifest.files)
        if p.startswith("data/") and p.endswith(".parquet")
    )
    header = {
        "license": license,
        "task_categories": ["visual-question-answering", "multiple-choice"],
        "language": ["en"],
        "pretty_name": manifest.name,
        "tags": ["perceptforge", "mvp-bench", "perception", "verified" if only_verified else "unverified"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": s, "path": f"data/{s}.parquet"} for s in splits]}
        ],
        "dataset_info": {
            "features": CARD_FEATURES,
            # datasets takes a split's record only with num_bytes (its Arrow size, as datasets records it)
            "splits": [
                {"name": s, "num_bytes": split_bytes.get(s, 0), "num_examples": manifest.counts.get(s, 0)}
                for s in splits
            ],
        },
    }
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n\n"


def verification_lines(verification: dict | None) -> list[str]:
    """The card's human-verification section: decisions per status and agreement on accept / reject."""
    if not verification:
        return ["No human verification was pulled for this run (`perceptforge annotate pull`)."]
    statuses = ", ".join(f"{n} {s}" for s, n in verification["status"].items())
    lines = [
        f"{verification['items']} items were shown to annotators in Label Studio, "
        f"{verification['required_annotators']} per item: {statuses}; "
        f"{verification['corrected']} were kept with an annotator's correction.",
        "",
        "| kind | doubly annotated items | % agreement | Cohen's kappa |",
        "| --- | ---: | ---: | ---: |",
    ]

    def shown(v: object) -> str:
        return "—" if v is None else str(v)

    lines += [
        f"| {kind} | {row['items']} | {shown(row['percent_agreement'])} | {shown(row['cohens_kappa'])} |"
        for kind, row in verification["agreement"].items()
    ]
    return lines + estimate_lines(verification.get("estimate"))


def estimate_lines(estimate: dict | None) -> list[str]:
    """The card's statement of how true the split is, from the checked random sample (``annotate push
    --sample``; logic/verified_sample.py says how it is estimated)."""
    if not estimate:
        return []

    def pct(v: float | None) -> str:
        return "—" if v is None else f"{100 * v:.1f}%"

    def interval(ci: list[float] | None) -> str:
        return "—" if ci is None else f"{pct(ci[0])} – {pct(ci[1])}"

    overall = estimate["overall"]
    lines = [
        "",
        "### How many items are true: the checked sample",
        "",
        f"A seeded random sample (seed {estimate['seed']}), stratified, was checked by people. An item counts as "
        "true when it was kept without a correction; items not decided yet are not counted "
        f"({estimate['not_counted']}); items the gates quarantined are not in the split. Estimated share of true "
        f"items in the split: **{pct(overall['share'])}** ({estimate['confidence']:.0%} interval "
        f"{interval(overall['interval'])}), from {overall['true']} true of {overall['checked']} checked; "
        f"{estimate['method']}.",
        "",
        "| stratum | items | checked | true | estimate | interval |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {h} | {r['population']} | {r['checked']} | {r['true']} | {pct(r['share'])} | {interval(r['interval'])} |"
        for h, r in [*estimate["strata"].items(), ("all", overall)]
    ]
    if estimate["rejected"]:
        lines += ["", "Sampled items found false:", ""]
        lines += [f"- `{r['item_id']}` ({r['stratum']}): {'; '.join(r['reasons'])}" for r in estimate["rejected"]]
    return lines


def arrow_bytes(path: Path) -> int:
    """A Parquet file's size as Arrow data (``pyarrow`` ``nbytes``), the ``num_bytes`` ``datasets`` records for a
    split: read a row group at a time, so memory stays one group's."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as f:
        return sum(f.read_row_group(k).nbytes for k in range(f.num_row_groups))


def data_card(
    manifest: SplitManifest,
    only_verified: bool = False,
    license: str = "other",
    verification: dict | None = None,
    split_bytes: dict[str, int] | None = None,
) -> str:
    verified = (
        "Only items that both annotators accepted in Label Studio are included."
        if only_verified
        else "Items are as generated: not filtered by human verification."
    )
    lines = [
        f"# {manifest.name} v{manifest.version}",
        "",
        "Multimodal perception items built by perceptforge (MVP-Bench-style construction). "
        "Each item keeps its lineage:",
        "source image and hash, template and prompt versions, backends and model ids, seed.",
        "",
        verified,
        "",
        "## Counts",
        "",
        "| split / category | items |",
        "| --- | ---: |",
    ]
    lines += [f"| {k} | {v} |" for k, v in manifest.counts.items()]
    lines += ["", "## Human verification", "", *verification_lines(verification)]
    lines += ["", "## Files", "", "| file | bytes | sha256 |", "| --- | ---: | --- |"]
    lines += [
        f"| {f.path} | {f.bytes} | `{f.sha256[:16]}…` |" for f in manifest.files if not f.path.startswith("images/")
    ]
    lines += [
        "",
        f"Seed {manifest.seed}; templates {manifest.templates}; models by stage "
        + "; ".join(f"{stage}: {', '.join(names)}" for stage, names in manifest.models.items())
        + "; "
        f"source commit `{manifest.source_commit or 'unknown'}`.",
        "",
        "`audit.html` / `audit.json` (from `perceptforge audit`): answer balance, option bias, duplicates and",
        "leakage, human verification, with every flagged item.",
        "",
        "Load it with `datasets.load_dataset(<this folder or its Hub id>)` (splits val and test, images",
        "decoded); score predictions with `perceptforge score perceptforge --data val.jsonl --predictions PRED.jsonl`.",
        "",
    ]
    if any(f.path == VLMEVALKIT_CONFIG for f in manifest.files):
        mcq, yorn = vlmevalkit_names(manifest.name)
        lines += [
            f"VLMEvalKit: copy `{mcq}.tsv` and `{yorn}.tsv` into `$LMUData`, add your model to",
            f'`{VLMEVALKIT_CONFIG}` (`"model": {{"<model>": {{}}}}`) and run `python run.py --config '
            f"{VLMEVALKIT_CONFIG}`: the config makes",
            f"`{yorn}` a Y/N dataset (`ImageYORNDataset`), which VLMEvalKit cannot tell from the file alone.",
            "",
        ]
    front = (
        card_front_matter(manifest, only_verified, license, split_bytes)
        if any(f.path.startswith("data/") for f in manifest.files)
        else ""
    )
    return front + "\n".join(lines)
