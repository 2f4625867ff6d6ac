"""One Protocol per backend role: what the stages call, and nothing more.

Images are PIL RGB images or ``(H, W, 3)`` uint8 arrays as stated; masks are ``(H, W)`` bool arrays,
True = the region to change. Every backend also has ``name``, ``model_id`` (recorded in each item's
lineage), ``load()`` (returns the loaded backend; heavy weights load here, never at import) and
``from_settings(settings, runtime)`` (see ``backends/registry.py``). ``unload()`` is optional: a
backend that holds accelerator memory frees it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from PIL import Image

from perceptforge.data.schema import CodisContent, Grounding, Idea, MMERealWorldContent, Rendering
from perceptforge.logic.edit_region import MaskSegmenter
from perceptforge.logic.templates import Template
from perceptforge.prompts.library import Prompt
from perceptforge.store.sources import SourceEntry


@dataclass(frozen=True)
class EditRequest:
    """One edit: the image, its mask (None for instruction edits), the text, and the unit's own seed."""

    image: Image.Image
    mask: np.ndarray | None
    prompt: str
    seed: int
    donor: Image.Image | None = None  # composite only
    partial: bool = False  # composite: a donor crop into the mask box (True) or a donor scene around the subject
    rendering: Rendering | None = None  # the declared value: the donor (composite) or colour (recolour) to use
    drawn: bool = False  # the mask is an annotator's outline, not a segmenter's guess: trust its line more
    hair: np.ndarray | None = None  # composite: (H, W) bool, where the kept outline is hair (its strands are unmixed)

    def check(self) -> None:
        """An RGB image and, if given, a non-empty mask of its size; else ValueError saying what is wrong."""
        if self.image.mode != "RGB":
            raise ValueError(f"image must be RGB (load it with store.images.load_rgb), got mode {self.image.mode}")
        if self.mask is not None:
            if self.mask.shape != (self.image.height, self.image.width):
                h, w = self.mask.shape[:2]
                raise ValueError(f"mask is {w}x{h} but the image is {self.image.width}x{self.image.height}")
            if not self.mask.any():
                raise ValueError("mask is empty: nothing to edit")


class Backend(Protocol):
    # a backend may also say ``concurrent_calls = True``: one copy keeps nothing between calls, so the threads
    # runner's threads may call it at once on the CPU (``devices.call_lock``; without it, one call at a time)
    name: str
    model_id: str

    def load(self) -> Backend: ...


class Grounder(Backend, Protocol):
    def ground(self, image: Image.Image, entry: SourceEntry, templates: list[Template]) -> Grounding: ...


class Segmenter(Backend, MaskSegmenter, Protocol):
    """``box_mask(image, box)``: one ``(H, W)`` bool mask for a pixel xyxy box; ``candidates(image, box)``:
    the masks to choose from (SAM's automatic masks, or the box mask alone)."""


class ImageEditor(Backend, Protocol):
    """Inpainters (mask + text) and instruction editors (text only) alike: one output per request, in order.

    ``renderings(template)`` declares the values the backend can truly put into an image for that
    category (the idea stage draws only from these), or none and the reason why."""

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]: ...

    def renderings(self, template: Template) -> tuple[list[Rendering], str]: ...


class QuestionWriter(Backend, Protocol):
    def idea(
        self, template: Template, grounding: Grounding, choices: list[Rendering], rng: np.random.Generator
    ) -> Idea: ...

    def yes_no(self, template: Template, ctx: dict, level: str, high: str) -> str: ...

    def mcq_question(self, template: Template, ctx: dict) -> str: ...

    def distractors(self, template: Template, ctx: dict, rng: np.random.Generator) -> list[str]: ...

    # the human-authored flows' drafts (CODIS, MME-RealWorld): content plus the prompt file it came from
    def draft_codis(self, category: str, facts: dict, rng: np.random.Generator) -> tuple[CodisContent, Prompt]: ...

    def draft_mme_realworld(self, facts: dict, rng: np.random.Generator) -> tuple[MMERealWorldContent, Prompt]: ...
