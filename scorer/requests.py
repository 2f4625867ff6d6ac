"""What ``perceptforge predict`` sends: one request per (item, image set), keyed by the fields the
benchmark's prediction format uses. Each benchmark module builds its own in ``requests(data, images)``."""

from __future__ import annotations

import json
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
    """The image ``rel`` under ``root``; a missing one is an error naming the record."""
    path = (root / rel).resolve()
    if not path.exists():
        raise InputError(where, f"image {rel} not found under {root}")
    return path
