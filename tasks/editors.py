"""Image editing backends: inpainters (mask + text) and instruction editors (text only).

- ``composite`` (embedded default, CPU): fills the masked region from a donor photo of the source set —
  for background substitution the donor scene replaces everything outside the subject; for partial
  substitution a donor crop is resized into the mask's box and colour-matched to its surroundings. Edges
  are feathered. It is real pixel editing, not a placeholder.
- ``sd-inpaint``: diffusers ``StableDiffusionInpaintPipeline`` (local folder or cached model id).
- ``instruct-pix2pix``: diffusers ``StableDiffusionInstructPix2PixPipeline``.
Diffusers backends load lazily, run batched with one seeded generator per item, resize to the model's
multiple of 8 and back to the source size, and halve the batch on CUDA out-of-memory.
Masks are ``(H, W)`` bool, True = the region to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from perceptforge.errors import PerceptforgeError
from perceptforge.tasks.devices import pick_dtype, release, run_batched
from PIL import Image


@dataclass(frozen=True)
class EditRequest:
    image: Image.Image
    mask: np.ndarray | None  # None for instruction edits
    prompt: str
    seed: int
    donor: Image.Image | None = None  # composite only
    partial: bool = False  # composite: a donor crop into the mask box (True) or a donor scene around the subject


def check_pair(image: Image.Image, mask: np.ndarray | None) -> None:
    if image.mode != "RGB":
        raise ValueError(f"image must be RGB (load it with tasks.images.load_rgb), got mode {image.mode}")
    if mask is not None:
        if mask.shape != (image.height, image.width):
            raise ValueError(f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is {image.width}x{image.height}")
        if not mask.any():
            raise ValueError("mask is empty: nothing to edit")


# --- composite --------------------------------------------------------------------------------------------


def feather(mask: np.ndarray, radius: int) -> np.ndarray:
    """Soft alpha in [0, 1] from a bool mask, blurred across ``radius`` pixels."""
    alpha = mask.astype(np.float32)
    if radius > 0:
        k = 2 * radius + 1
        alpha = cv2.GaussianBlur(alpha, (k, k), radius / 2)
    return alpha


def match_colour(patch: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Shift the patch's per-channel mean and spread in Lab space to the reference pixels'."""
    src = cv2.cvtColor(patch, cv2.COLOR_RGB2LAB).astype(np.float32).reshape(-1, 3)
    ref = cv2.cvtColor(reference.reshape(-1, 1, 3), cv2.COLOR_RGB2LAB).astype(np.float32).reshape(-1, 3)
    out = (src - src.mean(0)) / (src.std(0) + 1e-6) * ref.std(0) + ref.mean(0)
    return cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8).reshape(patch.shape), cv2.COLOR_LAB2RGB)


class CompositeInpainter:
    name, model_id = "composite", "composite"

    def __init__(self, feather_px: int = 7, colour_match: bool = True):
        self.feather_px, self.colour_match = feather_px, colour_match

    def load(self) -> "CompositeInpainter":
        return self

    def edit_one(self, req: EditRequest) -> Image.Image:
        check_pair(req.image, req.mask)
        if req.donor is None:
            raise ValueError("composite editing needs a donor image from the source set")
        base = np.asarray(req.image, dtype=np.uint8)
        h, w = base.shape[:2]
        donor = np.asarray(req.donor.convert("RGB"), dtype=np.uint8)
        if req.partial:
            ys, xs = np.nonzero(req.mask)
            y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
            fill = base.copy()
            patch = cv2.resize(donor, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
            if self.colour_match:
                ring = cv2.dilate(req.mask.astype(np.uint8), np.ones((15, 15), np.uint8)).astype(bool) & ~req.mask
                if ring.any():
                    patch = match_colour(patch, base[ring])
            fill[y0:y1, x0:x1] = patch
        else:
            fill = cv2.resize(donor, (w, h), interpolation=cv2.INTER_AREA)
        alpha = feather(req.mask, self.feather_px)[..., None]
        # Feather inwards only: pixels outside the mask stay exactly as they were.
        alpha = np.where(req.mask[..., None], np.maximum(alpha, 0.5), 0.0)
        out = base.astype(np.float32) * (1 - alpha) + fill.astype(np.float32) * alpha
        return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        return [self.edit_one(r) for r in requests]


# --- diffusers ----------------------------------------------------------------------------------------------


def _to_multiple(image: Image.Image, multiple: int = 8, max_side: int = 512) -> Image.Image:
    scale = min(1.0, max_side / max(image.size))
    w = max(multiple, int(image.width * scale) // multiple * multiple)
    h = max(multiple, int(image.height * scale) // multiple * multiple)
    return image.resize((w, h), Image.LANCZOS)


class _DiffusersEditor:
    pipeline_class = ""

    def __init__(self, model: str, device: str = "cpu", dtype: str = "float32", steps: int = 50, guidance_scale: float = 7.5,
                 batch_size: int = 4, max_side: int = 512):
        self.model, self.device, self.dtype_name = model, device, dtype
        self.steps, self.guidance_scale, self.batch_size, self.max_side = steps, guidance_scale, batch_size, max_side
        self.model_id = model
        self.pipe = None

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
                self.pipe = cls.from_pretrained(source, dtype=pick_dtype(self.dtype_name, self.device), local_files_only=True,
                                                safety_checker=None, requires_safety_checker=False)
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

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        self.load()
        for r in requests:
            check_pair(r.image, r.mask)
        return run_batched(self._run, requests, self.batch_size)


class SDInpainter(_DiffusersEditor):
    name, pipeline_class = "sd-inpaint", "StableDiffusionInpaintPipeline"

    def __init__(self, model: str, negative_prompt: str = "", strength: float = 1.0, **kw):
        super().__init__(model, **kw)
        self.negative_prompt, self.strength = negative_prompt, strength

    def _run(self, batch: list[EditRequest]) -> list[Image.Image]:
        if len({r.image.size for r in batch}) > 1:  # one pipeline call needs one size
            return [self._run([r])[0] for r in batch]
        images = [_to_multiple(r.image, max_side=self.max_side) for r in batch]
        masks = [Image.fromarray(r.mask.astype(np.uint8) * 255).resize(im.size, Image.NEAREST) for r, im in zip(batch, images)]
        w, h = images[0].size
        out = self.pipe(prompt=[r.prompt for r in batch], image=images, mask_image=masks, height=h, width=w,
                        negative_prompt=[self.negative_prompt] * len(batch) if self.negative_prompt else None,
                        num_inference_steps=self.steps, guidance_scale=self.guidance_scale, strength=self.strength,
                        generator=self._generators([r.seed for r in batch])).images
        return [o.resize(r.image.size, Image.LANCZOS) for o, r in zip(out, batch)]


class InstructPix2PixEditor(_DiffusersEditor):
    name, pipeline_class = "instruct-pix2pix", "StableDiffusionInstructPix2PixPipeline"

    def __init__(self, model: str, image_guidance_scale: float = 1.5, **kw):
        super().__init__(model, **kw)
        self.image_guidance_scale = image_guidance_scale

    def _run(self, batch: list[EditRequest]) -> list[Image.Image]:
        if len({r.image.size for r in batch}) > 1:
            return [self._run([r])[0] for r in batch]
        images = [_to_multiple(r.image, max_side=self.max_side) for r in batch]
        out = self.pipe(prompt=[r.prompt for r in batch], image=images, num_inference_steps=self.steps,
                        guidance_scale=self.guidance_scale, image_guidance_scale=self.image_guidance_scale,
                        generator=self._generators([r.seed for r in batch])).images
        return [o.resize(r.image.size, Image.LANCZOS) for o, r in zip(out, batch)]


def build_inpainter(settings, device: str = "cpu", dtype: str = "float32"):
    if settings.backend == "composite":
        return CompositeInpainter(settings.feather_px, settings.colour_match)
    if settings.backend == "sd-inpaint":
        return SDInpainter(settings.model, settings.negative_prompt, settings.strength, device=device, dtype=dtype,
                           steps=settings.steps, guidance_scale=settings.guidance_scale, batch_size=settings.batch_size)
    raise PerceptforgeError(f"unknown inpainter backend {settings.backend!r}")


def build_editor(settings, device: str = "cpu", dtype: str = "float32"):
    if settings is None:
        return None
    return InstructPix2PixEditor(settings.model, settings.image_guidance_scale, device=device, dtype=dtype,
                                 steps=settings.steps, guidance_scale=settings.guidance_scale, batch_size=settings.batch_size)
