"""Instruction editors: the whole image changed by a text instruction (MVP-Bench's direct alteration).

- ``instruct-pix2pix``: diffusers ``StableDiffusionInstructPix2PixPipeline`` with the paper's instruction
  ("Change the {subject}'s {old} into {new}.", ``prompts/editing/instruction``; "Turn this image from {old} into {new}."
  for a change to the whole image, ``prompts/editing/instruction_whole``).
"""

from __future__ import annotations

from typing import Literal

from PIL import Image
from pydantic import Field

from perceptforge.backends.diffusion import DiffusersEditor, DiffusersSettings
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import Runtime, register


class InstructPix2PixSettings(DiffusersSettings):
    backend: Literal["instruct-pix2pix"]
    image_guidance_scale: float = Field(1.5, ge=0)


@register("editor", "instruct-pix2pix", InstructPix2PixSettings)
class InstructPix2PixEditor(DiffusersEditor):
    name, pipeline_class = "instruct-pix2pix", "StableDiffusionInstructPix2PixPipeline"

    @classmethod
    def from_settings(cls, settings: InstructPix2PixSettings, runtime: Runtime) -> InstructPix2PixEditor:
        return cls(
            settings.model,
            settings.image_guidance_scale,
            **cls.pipeline_kwargs(settings, runtime),
        )

    def __init__(self, model: str, image_guidance_scale: float = 1.5, **kw):
        super().__init__(model, **kw)
        self.image_guidance_scale = image_guidance_scale

    def _call(self, batch: list[EditRequest], images: list[Image.Image]) -> list[Image.Image]:
        return self.pipe(
            prompt=[r.prompt for r in batch],
            image=images,
            num_inference_steps=self.steps,
            guidance_scale=self.guidance_scale,
            image_guidance_scale=self.image_guidance_scale,
            generator=self._generators([r.seed for r in batch]),
        ).images
