"""Text-to-image generation for BLINK-style Forensic Detection: a diffusers ``StableDiffusionPipeline`` (weights
by local path) draws fakes of a real photo from its caption."""

from __future__ import annotations

import time
from typing import Literal

from PIL import Image

from perceptforge.backends.devices import call_lock
from perceptforge.backends.diffusion import DiffusersEditor, DiffusersSettings
from perceptforge.backends.registry import Runtime, register


class SDText2ImageSettings(DiffusersSettings):
    backend: Literal["sd-text2image"] = "sd-text2image"


@register("generator", "sd-text2image", SDText2ImageSettings)
class SDText2Image(DiffusersEditor):
    name, pipeline_class = "sd-text2image", "StableDiffusionPipeline"

    @classmethod
    def from_settings(cls, settings: SDText2ImageSettings, runtime: Runtime) -> SDText2Image:
        return cls(settings.model, **cls.pipeline_kwargs(settings, runtime))

    def generate(self, prompt: str, seeds: list[int], size: tuple[int, int]) -> list[Image.Image]:
        """One image per seed from ``prompt``, at ``size`` scaled to the model (multiples of 8, longer side at
        most ``max_side``), returned at ``size``."""
        self.load()
        scale = min(1.0, self.max_side / max(size))
        width, height = (max(8, int(v * scale) // 8 * 8) for v in size)
        started = time.perf_counter()
        with call_lock(self.device, self):
            out = self.pipe(
                prompt=[prompt] * len(seeds),
                generator=self._generators(seeds),
                num_inference_steps=self.steps,
                guidance_scale=self.guidance_scale,
                height=height,
                width=width,
            ).images
        self.calls.append((time.perf_counter() - started, len(seeds)))
        return [im.convert("RGB").resize(size, Image.Resampling.LANCZOS) for im in out]
