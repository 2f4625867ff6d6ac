"""Ingest: decode each source image (upright RGB), hash it, store it content-addressed in the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.data.schema import IngestedSource
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import sha256_file, write_jsonl
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry, resolve_inside
from perceptforge.tasks.runner import StageRunner, Unit


def check_size(entry: SourceEntry, width: int, height: int) -> None:
    """The image must be the size its annotation says (boxes and points are in its pixels)."""
    if (width, height) != (entry.width, entry.height):
        raise PerceptforgeError(
            f"{entry.file_name}: annotation says {entry.width}x{entry.height}, image is {width}x{height}"
        )


def ingest_entry(source_dir: Path, entry: SourceEntry, run: RunDir, max_pixels: int | None = None) -> IngestedSource:
    """Decode one source image and store it; the record links to the stored copy. An image above
    ``max_pixels`` is refused before it is decoded (its memory would scale with it in every stage)."""
    path = resolve_inside(source_dir, entry.file_name)
    image = load_rgb(path, max_pixels)
    check_size(entry, image.width, image.height)
    return IngestedSource(
        id=entry.source_id,
        path=entry.file_name,
        sha256=sha256_file(path),
        width=image.width,
        height=image.height,
        licence=entry.licence,
        attribution=entry.attribution,
        stored=run.store_image(image).path,
    )


# Resume is by the files each unit writes, so Prefect's own input caching stays off (inputs hold clients).
@task(name="ingest", cache_policy=NO_CACHE)
def ingest(entry: SourceEntry, source_dir: Path, max_pixels: int | None, run_path: Path) -> IngestedSource | Exception:
    try:
        return ingest_entry(source_dir, entry, RunDir(run_path), max_pixels)
    except (
        PerceptforgeError,
        ValueError,
        OSError,
    ) as exc:  # a bad source file: quarantined in one line, not a traceback
        return exc


def ingest_stage(
    runner: StageRunner, entries: list[SourceEntry], source_dir: Path, task: Any = ingest, **limits: Any
) -> dict[str, tuple[SourceEntry, Any]]:
    """source id → (entry, ingested record); ``sources.jsonl`` lists every ingested source, sorted by id.
    ``task`` ingests one source under the named ``limits`` it takes (this module's ``ingest``: decoded, at most
    ``max_pixels``; the authored flows' ``tasks/authored.ingest``: original bytes, ``min_short_side``)."""
    units = [Unit(f"source-{e.source_id}", e.file_name, e) for e in entries]
    done = runner.map("ingest", task, units, source_dir=source_dir, **limits)
    write_jsonl(runner.run.sub("sources.jsonl"), [record.model_dump(mode="json") for _, record in done])
    return {u.value.source_id: (u.value, record) for u, record in done}
