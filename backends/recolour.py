"""Recolouring (CPU, no weights): a region takes a new colour and keeps its shading.

A named region's mask (hair) is its own pixels, found by colour (``logic/edit_region.colour_region``), and all of
them change; inside a box's mask only the pixels close in CIELAB to its median colour do. Each keeps its
lightness offset from that median, so folds and highlights survive, and takes the target's hue and chroma.
Edges are feathered inwards: pixels outside the mask
never change.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np
from PIL import Image
from pydantic import Field

from perceptforge.backends.inpainters import feather
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data.schema import Rendering
from perceptforge.logic import renderings
from perceptforge.logic.matting import matte
from perceptforge.logic.templates import Template


class RecolourSettings(BackendSettings):
    backend: Literal["recolour"]
    tolerance: float = Field(
        30.0, gt=0, description="CIELAB distance from the region's median colour within which pixels change"
    )
    feather_px: int = Field(2, ge=0, le=32)
    batch_size: int = Field(8, ge=1)


def hex_to_lab(colour: str) -> np.ndarray:
    rgb = np.array([[[int(colour[i : i + 2], 16) for i in (1, 3, 5)]]], np.float32) / 255
    return np.asarray(cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB)[0, 0])


def recolour(image: np.ndarray, mask: np.ndarray, colour: str, tolerance: float | None, feather_px: int) -> np.ndarray:
    """``image`` (H, W, 3) uint8 with the masked region's dominant colour turned into ``colour``; with no
    ``tolerance`` the mask is the region itself (its highlights and shadows change too)."""
    lab = cv2.cvtColor(image.astype(np.float32) / 255, cv2.COLOR_RGB2LAB)
    median = np.median(lab[mask], axis=0)
    region = mask if tolerance is None else mask & (np.linalg.norm(lab - median, axis=2) < tolerance)
    target = hex_to_lab(colour)
    out = lab.copy()
    out[..., 0] = np.clip(target[0] + (lab[..., 0] - median[0]), 0, 100)
    out[..., 1], out[..., 2] = target[1], target[2]
    new = np.clip(cv2.cvtColor(out, cv2.COLOR_LAB2RGB) * 255, 0, 255)
    if tolerance is None and feather_px > 0:
        # the region's own outline (drawn, or found by colour): the pixels along it are part hair, part skin or
        # sky, and a hard line left an olive rim of the old colour; a matte says how much of each is the region
        alpha = matte(image, region, feather_px)[0][..., None]
    else:
        alpha = np.where(region, np.maximum(feather(region, feather_px), 0.5), 0.0)[..., None]
    blended = image.astype(np.float32) * (1 - alpha) + new * alpha
    return np.clip(blended + 0.5, 0, 255).astype(np.uint8)


@register("inpainter", "recolour", RecolourSettings)
class RecolourEditor:
    name, model_id = "recolour", "recolour"
    concurrent_calls = True  # nothing kept between calls

    @classmethod
    def from_settings(cls, settings: RecolourSettings, runtime: Runtime) -> RecolourEditor:
        return cls(settings.tolerance, settings.feather_px, settings.batch_size)

    def __init__(self, tolerance: float = 30.0, feather_px: int = 2, batch_size: int = 8):
        self.tolerance, self.feather_px, self.batch_size = tolerance, feather_px, batch_size

    def load(self) -> RecolourEditor:
        return self

    def renderings(self, template: Template) -> tuple[list[Rendering], str]:
        values = renderings.colours(template, self.name)
        return values, "" if values else f"no value of {template.id} is a colour"

    def edit_one(self, req: EditRequest) -> Image.Image:
        req.check()
        if req.mask is None or req.rendering is None or req.rendering.colour is None:
            raise ValueError("recolouring needs a mask and a rendering with a target colour")
        base = np.asarray(req.image, dtype=np.uint8)
        # a named region's mask is already its own pixels (logic/edit_region.colour_region); a box's mask is not
        tolerance = None if req.rendering.region else self.tolerance
        return Image.fromarray(recolour(base, req.mask, req.rendering.colour, tolerance, self.feather_px))

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        return [self.edit_one(r) for r in requests]
