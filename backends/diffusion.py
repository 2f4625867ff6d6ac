"""What the diffusers backends share: lazy loading from a local folder or cached id, one seeded generator
per request, resizing to the model's multiple of 8 and back, halving the batch on CUDA out-of-memory.

Near the hardware: attention through PyTorch's SDPA kernels (checked at load), the UNet optionally in
``channels_last`` and ``torch.compile``-d, and ``batch_size: auto`` — the largest batch that fits the free
GPU memory, measured once per image size from one real call's peak and recorded in the run's cache, so a
resumed run plans the same batches."""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

from PIL import Image
from pydantic import Field

from perceptforge.backends.devices import pick_dtype, release, run_batched
from perceptforge.backends.hub import locate
from perceptforge.backends.protocols import EditRequest
from perceptforge.backends.registry import BackendSettings, Runtime
from perceptforge.data.schema import Rendering
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_bytes
from perceptforge.logic import renderings
from perceptforge.logic.templates import Template

log = logging.getLogger("perceptforge")

AUTO_BATCH_MAX = 32  # beyond this the UNet's throughput no longer grows (2.57 → 2.68 images/s from 8 to 16)
AUTO_BATCH_CPU = 4  # without a GPU there is no memory to fill: the old default
AUTO_MEMORY_SHARE = 0.9  # of the memory free after one image's peak, what a batch may take


def batch_that_fits(per_image: int, free: int, most: int = AUTO_BATCH_MAX) -> int:
    """The largest batch (1 to ``most``) whose images, ``per_image`` bytes each at peak, fit in a share of
    ``free`` bytes."""
    return int(max(1, min(most, AUTO_MEMORY_SHARE * free // max(1, per_image))))


class DiffusersSettings(BackendSettings):
    """What every diffusers backend's profile section holds."""

    model: str = Field(
        description="local folder, or hub id at a revision (org/name@<commit>, fetched by `perceptforge models pull`)",
        json_schema_extra={"model": "diffusers"},
    )
    steps: int = Field(50, ge=1)
    guidance_scale: float = Field(7.5, ge=0)
    batch_size: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        4, description="units per pipeline call; auto: the largest that fits the free GPU memory (4 on the CPU)"
    )
    max_side: int = Field(512, ge=64, description="images are scaled so their longer side is at most this")
    channels_last: bool = Field(False, description="the UNet in channels_last memory format")
    compile: bool = Field(False, description="torch.compile the UNet (its one-time cost is in the summary)")


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
        batch_size: int | str = 4,
        max_side: int = 512,
        channels_last: bool = False,
        compile: bool = False,
        cache_dir: Path | None = None,
    ):
        self.model, self.device, self.dtype_name = model, device, dtype
        self.steps, self.guidance_scale, self.batch_size, self.max_side = steps, guidance_scale, batch_size, max_side
        self.channels_last, self.compile = channels_last, compile
        self.model_id = model
        self.pipe: Any = None
        self.batch_record = cache_dir / "batch_sizes.json" if cache_dir else None
        self.chosen: dict[str, int] = {}  # image size at the model → batch size (auto)
        self.fits: dict[str, int] = {}  # image size → the batch a CUDA out-of-memory halved it to
        self.attention: list[str] = []
        self.calls: list[tuple[float, int]] = []  # (seconds, images) per pipeline call that edits units
        self.measure_s = 0.0  # batch_size auto's measuring calls: not edits, so kept out of the per-image time
        self.counts: Counter[str] = Counter()

    @staticmethod
    def pipeline_kwargs(settings: Any, runtime: Runtime) -> dict[str, Any]:
        """What every diffusers backend takes from its settings (steps, guidance, batch) and the runtime."""
        return {
            "device": runtime.device,
            "dtype": runtime.dtype,
            "steps": settings.steps,
            "guidance_scale": settings.guidance_scale,
            "batch_size": settings.batch_size,
            "max_side": settings.max_side,
            "channels_last": settings.channels_last,
            "compile": settings.compile,
            "cache_dir": runtime.cache_dir,
        }

    def renderings(self, template: Template) -> tuple[list[Rendering], str]:
        return renderings.from_alternatives(template, self.name), ""

    def load(self):
        if self.pipe is None:
            import diffusers

            found = locate(self.model, "diffusers")
            cls = getattr(diffusers, self.pipeline_class)
            try:
                # local_files_only: the folder is local or a cache snapshot (`perceptforge models pull`); nothing is
                # downloaded during a run.
                self.pipe = cls.from_pretrained(
                    found.path,
                    dtype=pick_dtype(self.dtype_name, self.device),
                    local_files_only=True,
                    safety_checker=None,
                    requires_safety_checker=False,
                )
            except (OSError, ValueError) as exc:
                raise PerceptforgeError(f"{self.model}: cannot load {self.pipeline_class}: {exc}") from None
            self.model_id = found.label
            self.pipe = self.pipe.to(self.device)
            self.pipe.set_progress_bar_config(disable=True)
            self._near_the_hardware()
        return self

    def _near_the_hardware(self) -> None:
        import torch
        from diffusers.models.attention_processor import AttnProcessor, AttnProcessor2_0

        unet = self.pipe.unet
        # The plain processor materialises the attention matrix; SDPA (flash / memory-efficient) does not.
        if any(type(p) is AttnProcessor for p in unet.attn_processors.values()):
            log.warning("%s: attention was not on PyTorch SDPA kernels; switching to AttnProcessor2_0", self.name)
            unet.set_attn_processor(AttnProcessor2_0())
        self.attention = sorted({type(p).__name__ for p in unet.attn_processors.values()})
        if self.channels_last:
            unet.to(memory_format=torch.channels_last)
        if self.compile:
            # Compiled on the first call: that call's extra time is reported as compile_s.
            self.pipe.unet = torch.compile(unet)

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
        started = time.perf_counter()
        out = self._call(batch, [to_multiple(r.image, max_side=self.max_side) for r in batch])
        self.calls.append((time.perf_counter() - started, len(batch)))
        return [o.resize(r.image.size, Image.Resampling.LANCZOS) for o, r in zip(out, batch)]

    def model_size(self, request: EditRequest) -> str:
        w, h = to_multiple(request.image, max_side=self.max_side).size
        return f"{w}x{h}"

    def edit(self, requests: list[EditRequest]) -> list[Image.Image]:
        self.load()
        for r in requests:
            r.check()
        size = self.model_size(requests[0]) if requests else ""
        start = self.batch_size if isinstance(self.batch_size, int) else len(requests)

        def halved(to: int) -> None:  # later calls of this size start there instead of failing again
            self.fits[size] = to
            self.counts["halved_on_out_of_memory"] += 1

        return run_batched(self._run, requests, min(start, self.fits.get(size, start)), halved)

    def choose_batch_size(self, sample: EditRequest) -> int:
        """Units per planned batch for images the size of ``sample``: the setting, or (auto) the recorded
        choice for this size and device, else one measured now."""
        if isinstance(self.batch_size, int):
            return self.batch_size
        size = self.model_size(sample)
        key = f"{self.name} {size} {self._device_name()}"
        record = self.batch_record
        recorded = json.loads(record.read_text()) if record and record.is_file() else {}
        if key not in recorded:
            recorded[key] = self._measure_batch_size(sample)
            if record:
                atomic_write_bytes(record, (json.dumps(recorded, indent=1, sort_keys=True) + "\n").encode())
        self.chosen[size] = recorded[key]
        return int(recorded[key])

    def _device_name(self) -> str:
        import torch

        return torch.cuda.get_device_name(self.device) if self.device.startswith("cuda") else "cpu"

    def _measure_batch_size(self, sample: EditRequest) -> int:
        """One real call at batch 1; its peak above the weights, against the memory left, gives the batch.
        The peak holds fixed workspace too, so the estimate errs small; out-of-memory still halves."""
        if not self.device.startswith("cuda"):
            return AUTO_BATCH_CPU
        import torch

        self.load()
        torch.cuda.synchronize(self.device)
        base = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._run([sample])
        self.measure_s += self.calls.pop()[0]
        per_image = max(1, torch.cuda.max_memory_allocated(self.device) - base)
        free, _ = torch.cuda.mem_get_info(self.device)
        free += torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        chosen = batch_that_fits(per_image, free)
        log.info(
            "%s: batch size %d at %s (%.2f GB per image)", self.name, chosen, self.model_size(sample), per_image / 1e9
        )
        return chosen

    def stats(self) -> dict[str, Any]:
        """For the run's summary: the batch sizes chosen, attention kernels, time per image, compile cost,
        peak GPU memory."""
        out: dict[str, Any] = {"batch_size": self.chosen or self.batch_size, "attention": self.attention, **self.counts}
        if self.fits:
            out["halved_to"] = dict(self.fits)
        if self.measure_s:
            out["measure_s"] = round(self.measure_s, 3)
        if self.calls:
            out["model_s"] = round(sum(s for s, _ in self.calls), 3)
            out["seconds_per_image"] = round(sum(s for s, _ in self.calls) / sum(n for _, n in self.calls), 4)
            if self.compile and len(self.calls) > 1:
                typical = statistics.median(s for s, _ in self.calls[1:])
                out["compile_s"] = round(max(0.0, self.calls[0][0] - typical), 2)
        if self.device.startswith("cuda"):
            import torch

            out["peak_gpu_memory_gb"] = round(torch.cuda.max_memory_allocated(self.device) / 1e9, 2)
        return out
