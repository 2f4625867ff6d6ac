"""A perceptual image embedding for BLINK-style Visual Similarity: a ``transformers`` vision model (DINOv2, as
BLINK's DINO/CLIP ranking suggests, or any ``AutoModel`` with an image processor) loaded from a local folder.
The image's embedding is its CLS token (``pooler_output`` where the model has one), normalised."""

from __future__ import annotations

import threading
from typing import Any, Literal

from PIL import Image
from pydantic import Field

from perceptforge.backends.devices import call_lock, release
from perceptforge.backends.hub import locate
from perceptforge.backends.registry import BackendSettings, Runtime, register


class TransformersEmbeddingSettings(BackendSettings):
    backend: Literal["transformers-embedding"] = "transformers-embedding"
    model_path: str = Field(
        description="a vision model and its image processor: local folder, or hub id at a revision "
        "(facebook/dinov2-small@<commit>)",
        json_schema_extra={"model": "transformers"},
    )
    pooling: Literal["cls", "mean"] = Field("cls", description="the CLS token (DINO's) or the mean of the patch tokens")


@register("embedder", "transformers-embedding", TransformersEmbeddingSettings)
class TransformersEmbedding:
    name = "transformers-embedding"

    @classmethod
    def from_settings(cls, settings: TransformersEmbeddingSettings, runtime: Runtime) -> TransformersEmbedding:
        return cls(settings.model_path, settings.pooling, runtime.device)

    def __init__(self, model_path: str, pooling: str = "cls", device: str = "cpu"):
        self.model_path, self.pooling, self.device = model_path, pooling, device
        self.model_id = model_path
        self.model: Any = None
        self.processor: Any = None
        self._loading = threading.Lock()

    def load(self) -> TransformersEmbedding:
        with self._loading:
            if self.model is not None:
                return self
            from transformers import AutoImageProcessor, AutoModel

            found = locate(self.model_path, "transformers")
            self.processor = AutoImageProcessor.from_pretrained(found.path)
            self.model = AutoModel.from_pretrained(found.path).to(self.device).eval()
            self.model_id = found.label
        return self

    def unload(self) -> None:
        self.model = self.processor = None
        release()

    def image_embeddings(self, images: list[Image.Image]) -> list[list[float]]:
        """Each image's embedding, normalised (cosine similarity is their dot product)."""
        import torch

        self.load()
        inputs = self.processor(images=[im.convert("RGB") for im in images], return_tensors="pt").to(self.device)
        with call_lock(self.device, self), torch.no_grad():
            hidden = self.model(**inputs).last_hidden_state
        vectors = hidden[:, 0] if self.pooling == "cls" else hidden[:, 1:].mean(dim=1)
        vectors = vectors / vectors.norm(dim=-1, keepdim=True)
        return [[round(float(v), 6) for v in row] for row in vectors.tolist()]
