"""The run directory: everything one run writes, laid out so a killed run can resume.

Each unit of work writes one file when it finishes (atomically), so "done" means "its file exists".
Files are named by content or by stable ids, never by order of completion, which keeps reruns
byte-identical. Layout::

    RUN_DIR/run.json              the run's identity (flow, profile digest, seed, categories, sources digest,
                                  limit): a rerun with another identity is refused (flows/common.prepare_run)
    RUN_DIR/profile.yaml          resolved profile (no secrets: only environment-variable names)
    RUN_DIR/sources.jsonl         ingested source images (SourceImage records), sorted by id
    RUN_DIR/images/<sha256>.png   content-addressed images (natural, manipulated) and masks; the authored flows
                                  keep each source's original bytes as images/<sha256>.<jpg|png|webp|tif>
    RUN_DIR/groundings/<id>.json  one grounding per source image
    RUN_DIR/ideas/<unit>.json     IdeaRecord;  candidates/<unit>.json  Candidate (idea + questions + lineage)
    RUN_DIR/masks/<unit>.json     MaskRecord;  edits/<unit>.json  EditRecord;  items/<id>.json  BenchmarkItem
    RUN_DIR/gates/<unit>.json     GateRecord: every gate measurement, passed or not
    RUN_DIR/quarantine/<unit>.json one file per failed unit: stage, reason, detail
    RUN_DIR/quarantine.jsonl      the same, gathered and sorted at the end of the run
    RUN_DIR/summary.json          counts per stage and category, failures by reason, wall time per stage
    RUN_DIR/annotation/, verification/   Label Studio projects, then verdicts and kept items (annotation/sync.py)
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from perceptforge.data.schema import ImageRef
from perceptforge.errors import InputError
from perceptforge.fileio import atomic_write_bytes, dumps_canonical, sha256_bytes, write_json, write_jsonl
from perceptforge.store.images import load_rgb, png_bytes

ORIGINAL_FORMATS = {"JPEG": "jpg", "PNG": "png", "WEBP": "webp", "TIFF": "tif"}


def safe_name(unit_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", unit_id)


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def inside(self, rel: str) -> Path:
        """``rel`` (a path read from a record) resolved, refused when it leaves the run directory."""
        root = self.path.resolve()
        target = (root / rel).resolve()
        if not target.is_relative_to(root):
            raise InputError(rel, f"points outside the run directory {root}")
        return target

    def sub(self, *parts: str) -> Path:
        return self.path.joinpath(*parts)

    def store_image(self, image: Image.Image) -> ImageRef:
        """Write an image as ``images/<sha256>.png`` (once) and return its reference."""
        data = png_bytes(image)
        digest = sha256_bytes(data)
        rel = f"images/{digest}.png"
        target = self.sub(rel)
        if not target.exists():
            atomic_write_bytes(target, data)
        return ImageRef(path=rel, sha256=digest, width=image.width, height=image.height)

    def store_original(self, path: Path, max_pixels: int | None = None) -> tuple[str, str, int, int]:
        """Copy a source file byte for byte to ``images/<sha256>.<ext>`` (once); (path, sha256, width,
        height). Its header is read for the size and format, its pixels never decoded or re-encoded; an image
        above ``max_pixels`` (the profile's ``ingest.max_pixels``) is refused from its header."""
        data = Path(path).read_bytes()
        digest = sha256_bytes(data)
        try:
            opened = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as exc:  # far above Pillow's own cap: refused before any pixel
            raise InputError(str(path), f"refused: {exc}") from None
        with opened as im:
            if max_pixels is not None and im.width * im.height > max_pixels:
                raise InputError(
                    str(path),
                    f"{im.width}x{im.height} is {im.width * im.height / 1e6:.1f} MP, above the profile's "
                    f"ingest.max_pixels ({max_pixels / 1e6:.1f} MP)",
                )
            ext = ORIGINAL_FORMATS.get(im.format or "")
            if ext is None:
                raise InputError(
                    str(path), f"{im.format} images are not kept as originals; use {', '.join(ORIGINAL_FORMATS)}"
                )
            width, height = im.size
            im.verify()  # a truncated or corrupt file fails here, not in front of an annotator
        rel = f"images/{digest}.{ext}"
        if not self.sub(rel).exists():
            atomic_write_bytes(self.sub(rel), data)
        return rel, digest, width, height

    def store_mask(self, mask: np.ndarray) -> ImageRef:
        """An ``(H, W)`` bool mask as a black-and-white PNG, content-addressed like any image."""
        return self.store_image(Image.fromarray(mask.astype(np.uint8) * 255))

    def load_mask(self, rel: str) -> np.ndarray:
        """The mask stored at ``rel`` as ``(H, W)`` bool."""
        return np.asarray(load_rgb(self.sub(rel)))[..., 0] > 127

    def write_record(self, rel: str, record: dict) -> Path:
        return atomic_write_bytes(self.sub(rel), (dumps_canonical(record) + "\n").encode())

    def replace_records(self, rel: str, records: dict[str, dict]) -> None:
        """The folder ``rel`` holding exactly ``records`` (file name → record): rebuilt whole beside the old one,
        then swapped in, so nothing stale stays and a crash midway leaves the previous folder intact."""
        fresh = self.sub(f"{rel}.new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        for name, record in records.items():
            self.write_record(f"{rel}.new/{name}", record)
        shutil.rmtree(self.sub(rel), ignore_errors=True)
        fresh.rename(self.sub(rel))

    def read_record(self, rel: str) -> dict | None:
        target = self.sub(rel)
        return json.loads(target.read_text()) if target.exists() else None

    def once(self, rel: str, compute) -> dict:
        """The record at ``rel`` if a finished unit wrote it, else ``compute()`` written there atomically."""
        cached = self.read_record(rel)
        if cached is not None:
            return cached
        record = compute()
        self.write_record(rel, record)
        return record

    def quarantine(self, unit_id: str, stage: str, reason: str, detail: str = "", **extra) -> dict:
        record = {"unit": unit_id, "stage": stage, "reason": reason, "detail": detail, **extra}
        self.write_record(f"quarantine/{safe_name(unit_id)}.json", record)
        return record

    def clear_quarantine(self, unit_id: str) -> None:
        """A unit that succeeded drops the quarantine record an earlier, failed attempt left."""
        self.sub("quarantine", f"{safe_name(unit_id)}.json").unlink(missing_ok=True)

    def quarantined(self) -> list[dict]:
        folder = self.sub("quarantine")
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []

    def gather_quarantine(self) -> list[dict]:
        records = sorted(self.quarantined(), key=lambda r: r["unit"])
        write_jsonl(self.sub("quarantine.jsonl"), records)
        return records

    def write_summary(self, summary: dict) -> Path:
        return write_json(self.sub("summary.json"), summary)
