"""Segmenters: candidate masks for a box.

- ``grabcut`` (embedded default): OpenCV GrabCut initialised with the box, on a copy downscaled to
  ``max_side``; OpenCV's RNG is seeded so the same image and box give the same mask.
- ``sam``: segment-anything (``backends/sam.py``), once per image.
Images are ``(H, W, 3)`` uint8 RGB arrays; masks are ``(H, W)`` bool arrays of the same size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import cv2
import numpy as np
from pydantic import Field

from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data import geometry
from perceptforge.logic.edit_region import Hints
from perceptforge.logic.matting import downscaled


class GrabCutSettings(BackendSettings):
    backend: Literal["grabcut"]
    iterations: int = Field(5, ge=1, le=50)
    max_side: int = Field(512, ge=32, description="images are downscaled to this side for GrabCut")


def grabcut_from_seed(
    image: np.ndarray, seed: np.ndarray, iterations: int, rect: tuple[int, int, int, int] | None = None
) -> np.ndarray:
    """GrabCut on an RGB ``image`` from a seed of GC_* labels (or, given ``rect``, from that rectangle), written
    into ``seed`` (and returned); OpenCV's RNG is seeded, so the same input gives the same labels. Raises
    ``cv2.error`` when a kind has too few pixels."""
    bgd, fgd = np.zeros((1, 65), np.float64), np.zeros((1, 65), np.float64)
    cv2.setRNGSeed(0)
    mode = cv2.GC_INIT_WITH_MASK if rect is None else cv2.GC_INIT_WITH_RECT
    cv2.grabCut(cv2.cvtColor(image, cv2.COLOR_RGB2BGR), seed, rect or (0, 0, 1, 1), bgd, fgd, iterations, mode)
    return seed


def check_image(image: np.ndarray) -> np.ndarray:
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be (H, W, 3) uint8 RGB, got shape {image.shape} dtype {image.dtype}")
    return image


@register("segmenter", "grabcut", GrabCutSettings)
class GrabCutSegmenter:
    name, model_id = "grabcut", "opencv-grabcut"
    concurrent_calls = True  # nothing kept between calls

    @classmethod
    def from_settings(cls, settings: GrabCutSettings, runtime: Runtime) -> GrabCutSegmenter:
        return cls(settings.iterations, settings.max_side)

    def __init__(self, iterations: int = 5, max_side: int = 512):
        self.iterations, self.max_side = iterations, max_side

    def load(self) -> GrabCutSegmenter:
        return self

    def _downscaled(self, image: np.ndarray) -> tuple[np.ndarray, float]:
        """GrabCut's cost grows with pixels: it runs on the image scaled to ``max_side``."""
        return downscaled(check_image(image), self.max_side)

    def box_mask(self, image: np.ndarray, box: Sequence[float]) -> np.ndarray:
        h, w = image.shape[:2]
        x0, y0, x1, y1 = geometry.clip_xyxy(box, w, h)
        small, scale = self._downscaled(image)
        sh, sw = small.shape[:2]
        rect = (int(x0 * scale), int(y0 * scale), max(1, int((x1 - x0) * scale)), max(1, int((y1 - y0) * scale)))
        rect = (min(rect[0], sw - 1), min(rect[1], sh - 1), min(rect[2], sw - rect[0]), min(rect[3], sh - rect[1]))
        if rect[2] >= sw and rect[3] >= sh:
            # GrabCut needs some background outside the rectangle; a whole-image box keeps everything.
            fg = np.ones((sh, sw), bool)
        else:
            mask = grabcut_from_seed(small, np.zeros((sh, sw), np.uint8), self.iterations, rect)
            fg = (mask == cv2.GC_FGD) | (mask == cv2.GC_PR_FGD)
        if not fg.any():  # GrabCut found nothing: fall back to the box itself
            fg = np.zeros((sh, sw), bool)
            fg[rect[1] : rect[1] + rect[3], rect[0] : rect[0] + rect[2]] = True
        return cv2.resize(fg.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)

    def candidates(self, image: np.ndarray, box: Sequence[float]) -> list[np.ndarray]:
        return [self.box_mask(image, box)]

    def hinted_candidates(self, image: np.ndarray, box: Sequence[float], hints: Hints) -> list[np.ndarray]:
        """GrabCut seeded with what the grounding knows: inside the box probably the subject, the hints'
        inside boxes surely, their outside boxes (within the box) probably background. The subject's own box
        (``hints.extent``) is never sure background, even where a jittered box leaves it: a subject cut by the
        image's edge, or by the jitter, would otherwise teach GrabCut its own colours as background and be
        swallowed."""
        if not hints.inside and not hints.outside:
            return self.candidates(image, box)
        h, w = image.shape[:2]
        small, scale = self._downscaled(image)
        sh, sw = small.shape[:2]

        def cells(b: Sequence[float]) -> tuple[slice, slice]:
            x0, y0, x1, y1 = geometry.clip_xyxy(b, w, h)
            return slice(int(y0 * scale), max(int(y0 * scale) + 1, int(y1 * scale))), slice(
                int(x0 * scale), max(int(x0 * scale) + 1, int(x1 * scale))
            )

        seed = np.full((sh, sw), cv2.GC_BGD, np.uint8)
        if hints.extent is not None:
            seed[cells(hints.extent)] = cv2.GC_PR_BGD
        seed[cells(box)] = cv2.GC_PR_FGD
        for b in hints.outside:
            region = seed[cells(b)]
            region[region == cv2.GC_PR_FGD] = cv2.GC_PR_BGD
        for b in hints.inside:
            seed[cells(b)] = cv2.GC_FGD
        if hints.sure_mask is not None:  # the cores of the arms and the shoulder line the pose referee sees
            small_sure = cv2.resize(hints.sure_mask.astype(np.uint8), (sw, sh), interpolation=cv2.INTER_NEAREST)
            seed[small_sure.astype(bool)] = cv2.GC_FGD
        has_fg = (seed == cv2.GC_FGD).any() or (seed == cv2.GC_PR_FGD).any()
        if not has_fg or not ((seed == cv2.GC_BGD).any() or (seed == cv2.GC_PR_BGD).any()):
            # GrabCut needs pixels of both kinds to learn from (a subject box over the whole image has no background)
            raise ValueError("the subject's box leaves no background to tell it from: no background edit is possible")
        try:
            grabcut_from_seed(small, seed, self.iterations)
        except cv2.error as exc:  # too few pixels of one kind for its colour models: a reason, not OpenCV's assertion
            raise ValueError(f"GrabCut cannot separate the subject here ({exc.err or 'no detail'})") from None
        fg = (seed == cv2.GC_FGD) | (seed == cv2.GC_PR_FGD)
        return [cv2.resize(fg.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)]
