"""Depth estimation for BLINK-style Relative Depth items on photos without a disparity map: a ``transformers``
``depth-estimation`` model (DPT, Depth Anything …) loaded from a local folder."""

from __future__ import annotations

import threading
from typing import Any, Literal

import numpy as np
from PIL import Image
from pydantic import Field

from perceptforge.backends.devices import call_lock, release
from perceptforge.backends.hub import locate
from perceptforge.backends.registry import BackendSettings, Runtime, register


class TransformersDepthSettings(BackendSettings):
    backend: Literal["transformers-depth"] = "transformers-depth"
    model_path: str = Field(
        description="a depth-estimation model for transformers' pipeline: local folder, or hub id at a revision",
        json_schema_extra={"model": "transformers"},
    )
    output: Literal["inverse_depth", "depth"] = Field(
        "inverse_depth",
        description="what the model predicts: relative inverse depth (DPT, Depth Anything: larger is nearer) "
        "or depth (metric models: larger is farther)",
    )


@register("depth", "transformers-depth", TransformersDepthSettings)
class TransformersDepth:
    name = "transformers-depth"

    @classmethod
    def from_settings(cls, settings: TransformersDepthSettings, runtime: Runtime) -> TransformersDepth:
        return cls(settings.model_path, settings.output, runtime.device)

    def __init__(self, model_path: str, output: str = "inverse_depth", device: str = "cpu"):
        self.model_path, self.output, self.device = model_path, output, device
        self.model_id = model_path
        self.pipe: Any = None
        self._loading = threading.Lock()  # units run in threads: the weights load once

    def load(self) -> TransformersDepth:
        with self._loading:
            if self.pipe is not None:
                return self
            from transformers import pipeline

            found = locate(self.model_path, "transformers")
            self.pipe = pipeline("depth-estimation", model=str(found.path), device=self.device)
            self.model_id = found.label
        return self

    def unload(self) -> None:
        self.pipe = None
        release()

    def nearness(self, image: Image.Image) -> np.ndarray:
        """Per pixel, how near the camera (larger is nearer), at the image's size; only the order is
        meaningful (relative models are known up to scale and shift)."""
        self.load()
        with call_lock(self.device, self):
            predicted = self.pipe(image.convert("RGB"))["predicted_depth"]
        values = np.asarray(predicted.detach().cpu().numpy() if hasattr(predicted, "detach") else predicted, np.float64)
        values = values.reshape(values.shape[-2:])
        return -values if self.output == "depth" else values
