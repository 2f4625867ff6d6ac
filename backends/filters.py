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


def sepia(image: np.ndarray) -> np.ndarray:
    """Brown-toned monochrome, as old photographic prints were."""
    return np.clip(image.astype(np.float32) @ _SEPIA.T + 0.5, 0, 255).astype(np.uint8)


def pencil_sketch(image: np.ndarray) -> np.ndarray:
    """Graphite strokes on white paper (OpenCV's ``pencilSketch``, its grey output)."""
    grey, _ = cv2.pencilSketch(cv2.cvtColor(image, cv2.COLOR_RGB2BGR), sigma_s=60, sigma_r=0.07, shade_factor=0.05)
    return cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB)


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
