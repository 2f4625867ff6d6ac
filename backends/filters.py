"""Photo filters (CPU, no weights): the whole image turned into a sepia photograph, a pencil sketch or a
watercolour, as OpenCV's own non-photorealistic rendering does it. The embedded default's editor for direct
alteration of a photo's aesthetic (S2): only values whose template names the filter are declared, so nothing
else is claimed of a filtered image. Deterministic: the same image gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import cv2
import numpy as np
from PIL import Image
from pydantic import Field

from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data.schema import Rendering
from perceptforge.logic import renderings
from perceptforge.logic.templates import Template

# the classic sepia-tone matrix (output R, G, B from input R, G, B)
_SEPIA = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]], np.float32)
# half the length of a pencil stroke, in pixels
_STROKE = 10
# what the sketch's outlines add to every tone before dividing (of 1, white)
_FLOOR = 0.1


def sepia(image: np.ndarray) -> np.ndarray:
    """Brown-toned monochrome, as old photographic prints were."""
    return np.clip(image.astype(np.float32) @ _SEPIA.T + 0.5, 0, 255).astype(np.uint8)


def _graphite(height: int, width: int) -> np.ndarray:
    """Pencil strokes in [0.55, 1]: noise smeared along one diagonal. A fixed seed, because this is the paper's
    grain, the same under every image of a size, not a choice made per item."""
    noise = np.random.default_rng(0).random((height + 2 * _STROKE, width + 2 * _STROKE)).astype(np.float32)
    kernel = np.fliplr(np.eye(2 * _STROKE + 1, dtype=np.float32)) / (2 * _STROKE + 1)
    strokes = cv2.filter2D(noise, -1, kernel)[_STROKE:-_STROKE, _STROKE:-_STROKE]
    strokes = (strokes - strokes.min()) / max(float(strokes.max() - strokes.min()), 1e-6)
    return 0.55 + 0.45 * strokes


def pencil_sketch(image: np.ndarray) -> np.ndarray:
    """Graphite on white paper: outlines drawn where the tone changes, and each area shaded with hatching as dark
    as the photo is there (after Lu, Xu and Jia, "Combining sketch and tone for pencil drawing production",
    2012). OpenCV's ``pencilSketch`` kept only the outlines, so a black coat or dark hair came out white and a
    reviewer could not tell the person was the same one."""
    grey = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY).astype(np.float32) / 255
    # colour dodge: an edge darkens, a flat area of any tone goes to paper white. The floor keeps it from
    # dividing noise by noise in near-black areas, where it drew a JPEG's 8×8 blocks as boxes.
    outlines = np.clip((grey + _FLOOR) / (cv2.GaussianBlur(grey, (0, 0), 3) + _FLOOR), 0, 1) ** 2
    # light areas are left as paper, the darkest get the densest hatching, never solid black
    tone = 0.2 + 0.8 * np.clip(cv2.GaussianBlur(grey, (0, 0), 2) * 1.25, 0, 1)
    grain = _graphite(*grey.shape)
    # each pixel's strokes are raised to the power that makes their mean the tone wanted there
    shading = grain ** (np.log(tone) / np.log(float(grain.mean())))
    out = np.clip(outlines * shading * 255 + 0.5, 0, 255).astype(np.uint8)
    return cv2.cvtColor(out, cv2.COLOR_GRAY2RGB)


def watercolour(image: np.ndarray) -> np.ndarray:
    """Flat washes of colour with soft edges (OpenCV's edge-preserving ``stylization``)."""
    return cv2.cvtColor(
        cv2.stylization(cv2.cvtColor(image, cv2.COLOR_RGB2BGR), sigma_s=60, sigma_r=0.45), cv2.COLOR_BGR2RGB
    )


FILTERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sepia": sepia,
    "pencil_sketch": pencil_sketch,
    "watercolour": watercolour,
}


class FiltersSettings(BackendSettings):
    backend: Literal["filters"]
    batch_size: int = Field(8, ge=1)


@register("editor", "filters", FiltersSettings)
class FilterEditor:
    name, model_id = "filters", "opencv-filters"
    concurrent_calls = True  # nothing kept between calls

    @classmethod
    def from_settings(cls, settings: FiltersSettings, runtime: Runtime) -> FilterEditor:
        return cls(settings.batch_size)

    def __init__(self, batch_size: int = 8):
        self.batch_size = batch_size

    def load(self) -> FilterEditor:
        return self

    def renderings(self, template: Template) -> tuple[list[Rendering], str]:
        values = renderings.photo_filters(template, self.name)
        return values, "" if values else f"no value of {template.id} is a photo filter"

    def edit_one(self, req: EditRequest) -> Image.Image:
        req.check()
        name = req.rendering.photo_filter if req.rendering else None
        if name not in FILTERS:
            raise ValueError(f"a photo filter edit needs a rendering naming one of {', '.join(FILTERS)}, got {name!r}")
        return Image.fromarray(FILTERS[name](np.asarray(req.image.convert("RGB"), dtype=np.uint8)))

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        return [self.edit_one(r) for r in requests]
