"""A hand-made source folder for the MME-RealWorld flow: a 4000x3000 JPEG with a small annotated target (a
name plate, 1/60 of the image) and a 300x200 image below the full-resolution threshold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw


def big_photo_source(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    # noise keeps the JPEG from being trivially small, as a real photo's would be
    pixels = (rng.normal(128, 30, (3000, 4000, 3))).clip(0, 255).astype(np.uint8)
    big = Image.fromarray(pixels)
    draw = ImageDraw.Draw(big)
    draw.rectangle([3100, 2300, 3500, 2600], fill=(200, 30, 30))  # the plate: lower right, 400x300 px
    big.save(folder / "street.jpg", quality=90)
    Image.new("RGB", (300, 200), (90, 90, 90)).save(folder / "thumb.png")
    doc = {
        "images": [
            {
                "id": "street",
                "file_name": "street.jpg",
                "width": 4000,
                "height": 3000,
                "caption": "A street.",
                "license": 1,
            },
            {"id": "thumb", "file_name": "thumb.png", "width": 300, "height": 200, "license": 1},
        ],
        "annotations": [
            {
                "id": 1,
                "image_id": "street",
                "label": "red name plate",
                "bbox": [3100, 2300, 400, 300],
                "role": "object",
            },
            {"id": 2, "image_id": "thumb", "label": "wall", "bbox": [0, 0, 30, 30], "role": "object"},
        ],
        "categories": [{"id": 1, "name": "object"}],
        "licenses": [{"id": 1, "name": "CC0-1.0"}],
    }
    (folder / "annotations.json").write_text(json.dumps(doc))
    return folder
