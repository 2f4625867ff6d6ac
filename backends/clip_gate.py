"""The faithfulness gate's model: a ``transformers`` CLIPModel (weights by local path) that says whether
the edited region looks more like the new value than like the old one (MVP-Bench's manual check, made
automatic for the gpu profile)."""

from __future__ import annotations

from typing import Any

from PIL import Image

from perceptforge.backends.devices import release
from perceptforge.backends.hub import locate
from perceptforge.prompts.library import load_prompt


class ClipScorer:
    name = "clip"

    def __init__(self, model: str, device: str = "cpu"):
        self.model_path, self.device = model, device
        self.model_id = model
        self.model: Any = None
        self.processor: Any = None

    def load(self) -> ClipScorer:
        if self.model is None:
            from transformers import CLIPModel, CLIPProcessor

            found = locate(self.model_path, "transformers")
            self.processor = CLIPProcessor.from_pretrained(found.path)
            self.model = CLIPModel.from_pretrained(found.path).to(self.device).eval()  # type: ignore[arg-type]
            self.model_id = found.label
        return self

    def unload(self) -> None:
        self.model = self.processor = None
        release()

    def similarities(self, image: Image.Image, values: list[str]) -> list[float]:
        """Cosine similarity of the image to each value's text (``prompts/gates/clip_text``)."""
        import torch

        self.load()
        prompt = load_prompt("gates/clip_text")
        texts = [prompt.render(value=v) for v in values]
        inputs = self.processor(text=texts, images=image, return_tensors="pt", padding=True).to(self.device)
        with torch.no_grad():
            out = self.model(**inputs)  # image_embeds and text_embeds come out normalised
        return [round(float(s), 6) for s in (out.text_embeds @ out.image_embeds[0]).tolist()]

    def image_embeddings(self, images: list[Image.Image]) -> list[list[float]]:
        """Each image's CLIP embedding, normalised (cosine similarity is their dot product): the perceptual
        embedding that decides a BLINK-style Visual Similarity item."""
        import torch

        self.load()
        inputs = self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt").to(self.device)
        with torch.no_grad():
            embeds = self.model.get_image_features(**inputs)
        if not isinstance(embeds, torch.Tensor):  # transformers 5 returns an output object
            embeds = embeds.pooler_output
        embeds = embeds / embeds.norm(dim=-1, keepdim=True)
        return [[round(float(v), 6) for v in row] for row in embeds.tolist()]

    def measure(self, region: Image.Image, new: str, old: str) -> dict[str, float]:
        sim_new, sim_old = self.similarities(region, [new, old])
        return {"clip_new": sim_new, "clip_old": sim_old}
