"""Inpainters: the masked region of an image regenerated from a text (or, on the CPU, from a donor photo).

- ``composite`` (embedded default, CPU): fills the masked region from a photo of its labelled donor
  library (``store/donors.py``) — for background substitution the donor scene, unstretched and placed so that
  its focus shows (``logic/scene_fit.py``), replaces everything outside the subject; for partial substitution a
  donor crop is resized into the mask's box and colour-matched to its surroundings. A new scene meets the
  subject along a closed-form matte of the mask's outline (``logic/matting.py``: no halo of the old background,
  hair kept soft); a pasted crop's edges are feathered.
  It renders only what its library's labels say: a category is offered the entries of its template's
  ``donor_kind`` that say what they mean at its high level.
- ``sd-inpaint``: diffusers ``StableDiffusionInpaintPipeline`` (local folder or cached model id).
Masks are ``(H, W)`` bool, True = the region to change.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np
from PIL import Image
from pydantic import Field

from perceptforge.backends.diffusion import DiffusersEditor, DiffusersSettings
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.data.schema import Rendering
from perceptforge.logic.edit_region import black_and_white
from perceptforge.logic.matting import matte, within_person
from perceptforge.logic.scene_fit import focus_shown, scene_window
from perceptforge.logic.templates import Template
from perceptforge.store.donors import DonorLibrary

# of a scene's focus (donors.yaml), the share that must show beside the subject for its label to be true
MIN_FOCUS_SHOWN = 0.4


class CompositeSettings(BackendSettings):
    backend: Literal["composite"]
    donors: str | None = Field(None, description="donor library folder (donors.yaml); default: the bundled one")
    feather_px: int = Field(7, ge=0, le=64)
    matte_band: float = Field(
        0.008,
        ge=0,
        le=0.1,
        description="background edits: the matted band on each side of the outline, a share of "
        "the image's longer side (0: a hard cut, feathered inwards)",
    )
    colour_match: bool = True
    batch_size: int = Field(
        8, ge=1, description="units per edit task: no model to fill, but fewer tasks to orchestrate"
    )


class SDInpaintSettings(DiffusersSettings):
    backend: Literal["sd-inpaint"]
    strength: float = Field(1.0, gt=0, le=1)
    negative_prompt: str = ""


def feather(mask: np.ndarray, radius: int) -> np.ndarray:
    """Soft alpha in [0, 1] from a bool mask, blurred across ``radius`` pixels."""
    alpha: np.ndarray = mask.astype(np.float32)
    if radius > 0:
        k = 2 * radius + 1
        alpha = cv2.GaussianBlur(alpha, (k, k), radius / 2)
    return alpha


def matte_band_px(shape: tuple[int, ...], share: float = 0.008) -> int:
    """The matted band on each side of a subject's outline, in pixels, for an image of ``shape``."""
    return max(2, round(share * max(shape[:2])))


def match_colour(patch: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Shift the patch's per-channel mean and spread in Lab space to the reference pixels'."""
    src = cv2.cvtColor(patch, cv2.COLOR_RGB2LAB).astype(np.float32).reshape(-1, 3)
    ref = cv2.cvtColor(reference.reshape(-1, 1, 3), cv2.COLOR_RGB2LAB).astype(np.float32).reshape(-1, 3)
    out = (src - src.mean(0)) / (src.std(0) + 1e-6) * ref.std(0) + ref.mean(0)
    return cv2.cvtColor(np.clip(out, 0, 255).astype(np.uint8).reshape(patch.shape), cv2.COLOR_LAB2RGB)


@register("inpainter", "composite", CompositeSettings)
class CompositeInpainter:
    name, model_id = "composite", "composite"
    batch_size = 1
    concurrent_calls = True  # nothing kept between calls; the person map comes from a locked interpreter

    @classmethod
    def from_settings(cls, settings: CompositeSettings, runtime: Runtime) -> CompositeInpainter:
        backend = cls(
            settings.feather_px, settings.colour_match, DonorLibrary.load(settings.donors), settings.matte_band
        )
        backend.batch_size = settings.batch_size
        return backend

    def __init__(
        self,
        feather_px: int = 7,
        colour_match: bool = True,
        library: DonorLibrary | None = None,
        matte_band: float = 0.008,
    ):
        self.feather_px, self.colour_match, self.matte_band = feather_px, colour_match, matte_band
        self.library = library or DonorLibrary.load()

    def load(self) -> CompositeInpainter:
        return self

    def renderings(self, template: Template) -> tuple[list[Rendering], str]:
        if template.donor_kind is None:
            return [], f"composite pastes library photos, and {template.id} names no donor kind"
        donors = self.library.of_kind(template.donor_kind, template.high)
        values = [
            Rendering(value=d.label, high=d.highs[template.high], backend=self.name, how="donor", donor=d.id)
            for d in donors
        ]
        why = f"the donor library has no {template.donor_kind} that says what it means for {template.high}"
        return values, "" if values else why

    def edit_one(self, req: EditRequest) -> Image.Image:
        req.check()
        if req.mask is None:
            raise ValueError("composite editing needs a mask")
        entry = None
        if req.donor is not None:
            donor = np.asarray(req.donor.convert("RGB"), dtype=np.uint8)
        elif req.rendering is not None and req.rendering.donor is not None:
            entry = self.library.donors[req.rendering.donor]
            with Image.open(self.library.path(entry.id)) as photo:
                donor = np.asarray(photo.convert("RGB"), dtype=np.uint8)
        else:
            raise ValueError("composite editing needs a donor: an image or a rendering naming a library entry")
        mask: np.ndarray = req.mask
        base = np.asarray(req.image, dtype=np.uint8)
        h, w = base.shape[:2]
        if req.partial:
            ys, xs = np.nonzero(mask)
            y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
            fill: np.ndarray = base.copy()
            patch = cv2.resize(donor, (x1 - x0, y1 - y0), interpolation=cv2.INTER_AREA)
            if self.colour_match:
                ring = cv2.dilate(mask.astype(np.uint8), np.ones((15, 15), np.uint8)).astype(bool) & ~mask
                if ring.any():
                    patch = match_colour(patch, base[ring])
            fill[y0:y1, x0:x1] = patch
        else:
            focus = entry.focus if entry is not None else None
            x0, y0, x1, y1 = window = scene_window((donor.shape[1], donor.shape[0]), (w, h), mask, focus)
            if entry is not None and focus is not None:
                shown = focus_shown(window, (w, h), mask, focus)
                if shown < MIN_FOCUS_SHOWN:
                    # a launch pad whose rocket stands behind the subject is a dark sky with towers: the
                    # question would name what nobody can see
                    raise ValueError(
                        f"donor {entry.id}: only {shown:.0%} of what its label names ({entry.label}) would show "
                        f"beside the subject, and at least {MIN_FOCUS_SHOWN:.0%} must"
                    )
            fill = cv2.resize(donor[y0:y1, x0:x1], (w, h), interpolation=cv2.INTER_AREA)
            if black_and_white(cv2.cvtColor(base.astype(np.float32) / 255, cv2.COLOR_RGB2LAB)):
                # a black-and-white photo keeps its look: a colour scene behind a grey man is a paste, and the
                # change asked for is the scene, not the photo's aesthetic
                fill = np.repeat(cv2.cvtColor(fill, cv2.COLOR_RGB2GRAY)[..., None], 3, axis=2)
            if self.matte_band > 0:
                # a hard cut keeps a rim of the old background around hair and shoulders: the subject's own
                # alpha and colours along its outline, over the new scene
                # a drawn line lies on the edge: one pixel either side of it is matted (a wider band faded a dark
                # tripod leg into a dark scene and shaved a collar ring's highlight), and round a thin thing (a
                # strut) none
                if req.drawn:
                    alpha_s, subject = matte(base, ~mask, 1, hard_thin=True)
                else:
                    from perceptforge.backends.referees import person_probability

                    alpha_s, subject = matte(base, ~mask, matte_band_px((h, w), self.matte_band), hair=req.hair)
                    # outside the cut, the old photo shows only where it is the person (a curl), or at the cut's
                    # own edge
                    alpha_s = within_person(alpha_s, ~mask, person_probability(base))
                out = alpha_s[..., None] * subject + (1 - alpha_s[..., None]) * fill.astype(np.float64)
                return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))
        alpha = feather(mask, self.feather_px)[..., None]
        # Feather inwards only: pixels outside the mask stay exactly as they were. A new scene replaces the old
        # background almost wholly up to the subject (at least 85%): half of the old one left along the outline
        # was a halo of it around her hair
        alpha = np.where(mask[..., None], np.maximum(alpha, 0.5 if req.partial else 0.85), 0.0)
        out = base.astype(np.float32) * (1 - alpha) + fill.astype(np.float32) * alpha
        return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        return [self.edit_one(r) for r in requests]


@register("inpainter", "sd-inpaint", SDInpaintSettings)
class SDInpainter(DiffusersEditor):
    name, pipeline_class = "sd-inpaint", "StableDiffusionInpaintPipeline"

    @classmethod
    def from_settings(cls, settings: SDInpaintSettings, runtime: Runtime) -> SDInpainter:
        return cls(
            settings.model,
            settings.negative_prompt,
            settings.strength,
            **cls.pipeline_kwargs(settings, runtime),
        )

    def __init__(self, model: str, negative_prompt: str = "", strength: float = 1.0, **kw):
        super().__init__(model, **kw)
        self.negative_prompt, self.strength = negative_prompt, strength

    def _call(self, batch: list[EditRequest], images: list[Image.Image]) -> list[Image.Image]:
        masks = [
            Image.fromarray(np.asarray(r.mask, np.uint8) * 255).resize(im.size, Image.Resampling.NEAREST)
            for r, im in zip(batch, images)
        ]
        w, h = images[0].size
        return self.pipe(
            prompt=[r.prompt for r in batch],
            image=images,
            mask_image=masks,
            height=h,
            width=w,
            negative_prompt=[self.negative_prompt] * len(batch) if self.negative_prompt else None,
            num_inference_steps=self.steps,
            guidance_scale=self.guidance_scale,
            strength=self.strength,
            generator=self._generators([r.seed for r in batch]),
        ).images
