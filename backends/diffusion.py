"""What the diffusers backends share: lazy loading from a local folder or cached id, one seeded generator
per request, resizing to the model's multiple of 8 and back, halving the batch on CUDA out-of-memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from perceptforge.backends.devices import pick_dtype, release, run_batched
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import Runtime
from perceptforge.data.schema import Rendering
from perceptforge.errors import PerceptforgeError
from perceptforge.logic import renderings
from perceptforge.logic.templates import Template


def to_multiple(image: Image.Image, multiple: int = 8, max_side: int = 512) -> Image.Image:
    scale = min(1.0, max_side / max(image.size))
    w = max(multiple, int(image.width * scale) // multiple * multiple)
    h = max(multiple, int(image.height * scale) // multiple * multiple)
    return image.resize((w, h), Image.Resampling.LANCZOS)


class DiffusersEditor:
    name, pipeline_class = "", ""

    def __init__(
        self,
        model: str,
        device: str = "cpu",
        dtype: str = "float32",
        steps: int = 50,
        guidance_scale: float = 7.5,
        batch_size: int = 4,
        max_side: int = 512,
    ):
        self.model, self.device, self.dtype_name = model, device, dtype
        self.steps, self.guidance_scale, self.batch_size, self.max_side = steps, guidance_scale, batch_size, max_side
        self.model_id = model
        self.pipe: Any = None

    @staticmethod
    def pipeline_kwargs(settings: Any, runtime: Runtime) -> dict[str, Any]:
        """What every diffusers backend takes from its settings (steps, guidance, batch) and the runtime."""
        return {
            "device": runtime.device,
            "dtype": runtime.dtype,
            "steps": settings.steps,
            "guidance_scale": settings.guidance_scale,
            "batch_size": settings.batch_size,
        }

    def renderings(self, template: Template) -> tuple[list[Rendering], str]:
        return renderings.from_alternatives(template, self.name), ""

    def load(self):
        if self.pipe is None:
            import diffusers

            path = Path(self.model).expanduser()
            source = str(path) if path.exists() else self.model
            if not path.exists() and ("/" not in self.model or self.model.startswith((".", "/", "~"))):
                raise PerceptforgeError(f"{self.model}: model folder not found")
            cls = getattr(diffusers, self.pipeline_class)
            try:
                # local_files_only: a model id must already be in the local cache; nothing is downloaded.
                self.pipe = cls.from_pretrained(
                    source,
                    dtype=pick_dtype(self.dtype_name, self.device),
                    local_files_only=True,
                    safety_checker=None,
                    requires_safety_checker=False,
                )
            except (OSError, ValueError) as exc:
                raise PerceptforgeError(f"{self.model}: cannot load {self.pipeline_class}: {exc}") from None
            self.pipe = self.pipe.to(self.device)
            self.pipe.set_progress_bar_config(disable=True)
        return self

    def unload(self) -> None:
        pipe, self.pipe = self.pipe, None
        release(pipe)

    def _generators(self, seeds: list[int]):
        import torch

        return [torch.Generator(device="cpu").manual_seed(s) for s in seeds]

    def _call(self, batch: list[EditRequest], images: list[Image.Image]) -> list[Image.Image]:
        """One pipeline call: ``images`` are the batch's images at the model's size (all the same)."""
        raise NotImplementedError

    def _run(self, batch: list[EditRequest]) -> list[Image.Image]:
        if len({r.image.size for r in batch}) > 1:  # one pipeline call needs one size
            return [self._run([r])[0] for r in batch]
        out = self._call(batch, [to_multiple(r.image, max_side=self.max_side) for r in batch])
        return [o.resize(r.image.size, Image.Resampling.LANCZOS) for o, r in zip(out, batch)]

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        self.load()
        for r in requests:
            r.check()
        return run_batched(self._run, requests, self.batch_size)
