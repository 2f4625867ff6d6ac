"""``sam``: segment-anything from a checkpoint and a model type (a key of ``sam_model_registry``, so an
extra builder registered there works too): automatic masks (``SamAutomaticMaskGenerator``) or a
box-prompted mask (``SamPredictor``).

One source image is edited for up to a dozen categories, and the image encoder is most of SAM's cost, so
the work is done once per image (keyed by a digest of its pixels), however many units ask:

- the image embedding is kept in memory for the last few images and in the run directory
  (``cache/sam/<model>/<digest>.pt``), so box prompts for every unit of an image, and a resumed run, reuse
  one ``set_image``;
- automatic masks are kept the same way (``<digest>.npz``, bit-packed).

A cached embedding is the encoder's own output, so the masks are byte-identical to recomputing it.
On CUDA the image encoder, nearly all of SAM's compute, runs under bf16 autocast (``precision: auto``; 3x its
fp32 speed on an H100) and hands float32 features to the mask decoder, which stays in float32 (it is cheap,
and segment-anything turns its outputs into numpy, which has no bfloat16). On the CPU all is float32.
Images are ``(H, W, 3)`` uint8 RGB arrays; masks are ``(H, W)`` bool arrays of the same size.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from perceptforge.backends.devices import release
from perceptforge.backends.hub import locate
from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.backends.segmenters import check_image
from perceptforge.data import geometry
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_bytes
from perceptforge.store.rundir import safe_name

Precision = Literal["auto", "float32", "bfloat16", "float16"]


class SamSettings(BackendSettings):
    backend: Literal["sam"]
    checkpoint: str = Field(
        description="local .pth file, or its published URL with its digest (https://…/sam_vit_h_4b8939.pth#sha256=<hex>)",
        json_schema_extra={"model": "file"},
    )
    model_type: str = Field("vit_h", description="a key of segment_anything.sam_model_registry")
    mode: Literal["box", "automatic"] = "box"
    pred_iou_thresh: float = Field(0.88, ge=0, le=1)
    stability_score_thresh: float = Field(0.95, ge=0, le=1)
    points_per_side: int = Field(32, ge=1)
    precision: Precision = Field(
        "auto", description="autocast dtype; auto: bfloat16 on CUDA (3x the encoder's fp32 speed), float32 on the CPU"
    )
    images_in_memory: int = Field(4, ge=1, description="embeddings and automatic masks kept in memory")


def image_key(image: np.ndarray) -> str:
    """A digest of the pixels and shape: the same image read twice has the same key."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr(image.shape).encode())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


def autocast_dtype(precision: str, device: str) -> Any:
    """The dtype SAM runs under, or None for float32 without autocast."""
    import torch

    if precision == "auto":
        return torch.bfloat16 if device.startswith("cuda") else None
    return None if precision == "float32" else getattr(torch, precision)


class _Recent(OrderedDict):
    """The last ``size`` values by key (least recently used dropped first)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get_recent(self, key: str) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return None

    def keep(self, key: str, value: Any) -> Any:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
        return value


@register("segmenter", "sam", SamSettings)
class SamSegmenter:
    name = "sam"

    @classmethod
    def from_settings(cls, settings: SamSettings, runtime: Runtime) -> SamSegmenter:
        return cls(
            settings.checkpoint,
            settings.model_type,
            settings.mode,
            runtime.device,
            settings.pred_iou_thresh,
            settings.stability_score_thresh,
            settings.points_per_side,
            settings.precision,
            runtime.cache_dir / "sam" if runtime.cache_dir else None,
            settings.images_in_memory,
        )

    def __init__(
        self,
        checkpoint: str,
        model_type: str = "vit_h",
        mode: str = "box",
        device: str = "cpu",
        pred_iou_thresh: float = 0.88,
        stability_score_thresh: float = 0.95,
        points_per_side: int = 32,
        precision: str = "auto",
        cache_dir: Path | None = None,
        images_in_memory: int = 4,
    ):
        self.checkpoint, self.model_type, self.mode, self.device = checkpoint, model_type, mode, device
        self.generator_kwargs = {
            "pred_iou_thresh": pred_iou_thresh,
            "stability_score_thresh": stability_score_thresh,
            "points_per_side": points_per_side,
        }
        self.precision = precision
        self.model_id = f"{model_type}:{Path(checkpoint).name}"
        self.sam: Any = None
        self._predictor: Any = None
        self._generator: Any = None
        self._set_key: str | None = None  # the image whose embedding the predictor holds
        self._embeddings = _Recent(images_in_memory)
        self._automatic = _Recent(images_in_memory)
        # Units of one image run on worker threads: one of them computes, the others wait and reuse.
        self._lock = threading.RLock()
        self.counts: Counter[str] = Counter()  # encoder runs, embeddings read back, automatic runs …
        self.model_seconds = 0.0
        cache_key = f"{self.model_id}-{precision}-{points_per_side}-{pred_iou_thresh}-{stability_score_thresh}"
        self.cache_dir = cache_dir / safe_name(cache_key) if cache_dir else None

    def load(self) -> SamSegmenter:
        if self.sam is None:
            path = locate(self.checkpoint, "file", what="SAM checkpoint").path
            from segment_anything import SamAutomaticMaskGenerator, SamPredictor, sam_model_registry

            if self.model_type not in sam_model_registry:
                raise PerceptforgeError(
                    f"unknown SAM model type {self.model_type!r}: choose from {', '.join(sam_model_registry)}"
                )
            self.sam = sam_model_registry[self.model_type](checkpoint=str(path)).to(self.device).eval()
            dtype = autocast_dtype(self.precision, self.device)
            if dtype is not None:
                self.sam.image_encoder = _autocast_encoder(self.sam.image_encoder, self.device, dtype)
            self._predictor = SamPredictor(self.sam)
            self._generator = SamAutomaticMaskGenerator(self.sam, **self.generator_kwargs)
        return self

    def unload(self) -> None:
        sam, self.sam, self._predictor, self._generator, self._set_key = self.sam, None, None, None, None
        self._embeddings.clear()
        self._automatic.clear()
        release(sam)

    def stats(self) -> dict[str, Any]:
        """For the run's summary: how often the encoder and generator ran, and how often they were spared."""
        precision = str(autocast_dtype(self.precision, self.device) or "float32")
        return {"precision": precision, "model_s": round(self.model_seconds, 3), **self.counts}

    @contextlib.contextmanager
    def _timed(self) -> Any:
        import torch

        started = time.perf_counter()
        with torch.inference_mode():
            yield
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
        self.model_seconds += time.perf_counter() - started

    def _path(self, key: str, suffix: str) -> Path | None:
        return self.cache_dir / f"{key}{suffix}" if self.cache_dir else None

    def _set_image(self, image: np.ndarray) -> Any:
        """The predictor with ``image``'s embedding: kept, read back from the run directory, or encoded."""
        import torch

        key = image_key(image)
        if self._set_key == key:
            return self._predictor
        predictor = self._predictor
        features = self._embeddings.get_recent(key)
        path = self._path(key, ".pt")
        if features is None and path is not None and path.is_file():
            features = torch.load(path, map_location=self.device, weights_only=True)
            self.counts["embeddings_read_back"] += 1
        if features is None:
            with self._timed():
                predictor.set_image(image)
            self.counts["encoder_runs"] += 1
            features = predictor.features
            if path is not None:
                buffer = io.BytesIO()
                torch.save(features.detach().cpu(), buffer)
                atomic_write_bytes(path, buffer.getvalue())
        else:
            # What set_image leaves behind, without running the encoder again.
            h, w = image.shape[:2]
            predictor.reset_image()
            predictor.original_size = (h, w)
            predictor.input_size = predictor.transform.get_preprocess_shape(h, w, predictor.transform.target_length)
            predictor.features = features
            predictor.is_image_set = True
        self._embeddings.keep(key, features)
        self._set_key = key
        return predictor

    def box_mask(self, image: np.ndarray, box: Sequence[float]) -> np.ndarray:

        self.load()
        check_image(image)
        h, w = image.shape[:2]
        with self._lock:
            predictor = self._set_image(image)
            with self._timed():
                masks, scores, _ = predictor.predict(
                    box=np.array(geometry.clip_xyxy(box, w, h)), multimask_output=False
                )
        return masks[int(np.argmax(scores))].astype(bool)

    def automatic(self, image: np.ndarray) -> list[np.ndarray]:

        self.load()
        key = image_key(check_image(image))
        with self._lock:
            masks = self._automatic.get_recent(key)
            path = self._path(key, ".npz")
            if masks is None and path is not None and path.is_file():
                masks = unpack_masks(path, image.shape[:2])
                self.counts["automatic_read_back"] += 1
            if masks is None:
                with self._timed():
                    found = self._generator.generate(image)
                self.counts["automatic_runs"] += 1
                masks = [m["segmentation"].astype(bool) for m in found]
                if path is not None:
                    pack_masks(path, masks)
            self._automatic.keep(key, masks)
        return [m.copy() for m in masks]  # callers may change theirs

    def candidates(self, image: np.ndarray, box: Sequence[float]) -> list[np.ndarray]:
        if self.mode == "automatic":
            masks = self.automatic(image)
            if masks:
                return masks
        return [self.box_mask(image, box)]


def pack_masks(path: Path, masks: list[np.ndarray]) -> None:
    buffer = io.BytesIO()
    bits = np.packbits(np.stack(masks).reshape(len(masks), -1), axis=1) if masks else np.zeros((0, 0), np.uint8)
    np.savez_compressed(buffer, bits=bits)
    atomic_write_bytes(path, buffer.getvalue())


def unpack_masks(path: Path, shape: tuple[int, int]) -> list[np.ndarray]:
    with np.load(path) as data:
        bits = data["bits"]
    size = shape[0] * shape[1]
    return [np.unpackbits(row, count=size).reshape(shape).astype(bool) for row in bits]


def _autocast_encoder(encoder: Any, device: str, dtype: Any) -> Any:
    """``encoder`` run under autocast, returning float32 features (``img_size`` kept: SamPredictor reads it)."""
    import torch

    class AutocastEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner, self.img_size = encoder, encoder.img_size

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(device_type=device.split(":")[0], dtype=dtype):
                return self.inner(x).float()

    return AutocastEncoder()
