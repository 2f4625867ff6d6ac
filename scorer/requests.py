"""What ``perceptforge predict`` sends: one request per (item, image set), keyed by the fields the
benchmark's prediction format uses. Each benchmark module builds its own in ``requests(data, images)``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from perceptforge.errors import InputError


@dataclass(frozen=True)
class Request:
    key: dict  # the id fields written with the output
    text: str
    images: tuple[Path | bytes, ...]

    @property
    def uid(self) -> str:
        return json.dumps(self.key, sort_keys=True)


def image_under(root: Path, rel: str, where: str) -> Path:
    """The image ``rel`` under ``root``; a missing one, or one outside ``root`` (an absolute path, ``../``), is an
    error naming the record: a data file never makes predict send a file from elsewhere."""
    base = Path(os.path.normpath(Path(root).absolute()))
    path = Path(os.path.normpath(base / rel))
    if not path.is_relative_to(base):
        raise InputError(where, f"image {rel} is outside {root} (--images): refused")
    if not path.exists():
        raise InputError(where, f"image {rel} not found under {root}")
    return path
