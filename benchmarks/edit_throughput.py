"""Images per second of each editing backend at a given size, batch and dtype.

    python benchmarks/edit_throughput.py --backend composite --size 512 --n 16
    python benchmarks/edit_throughput.py --backend filters --size 512 --photos data/sample/images /tmp/photos/images
    python benchmarks/edit_throughput.py --backend sd-inpaint --size 512 --batch 4 --dtype float16 --device cuda --real-size

Diffusers backends use random weights (the speed is the same as trained ones): ``--real-size`` builds the
Stable Diffusion 1.5 UNet / VAE / CLIP-L architecture, otherwise a tiny one. For sd-inpaint the batched run
is compared with the naive one-image-at-a-time loop.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def save_real_size_sd(folder: Path, kind: str) -> Path:
    """Stable Diffusion 1.5-size random weights: ``kind`` "inpaint" (UNet in_channels 9) or "ip2p" (8)."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from tiny_models import sd_pipeline, write_byte_clip_tokenizer
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    write_byte_clip_tokenizer(folder / "_tok")
    tokenizer = CLIPTokenizer.from_pretrained(folder / "_tok", model_max_length=77)
    text = CLIPTextModel(
        CLIPTextConfig(
            vocab_size=len(tokenizer),
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            max_position_embeddings=77,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        )
    )
    unet = UNet2DConditionModel(
        sample_size=64,
        in_channels=9 if kind == "inpaint" else 8,
        out_channels=4,
        cross_attention_dim=768,
        block_out_channels=(320, 640, 1280, 1280),
        layers_per_block=2,
        attention_head_dim=8,
    )
    vae = AutoencoderKL(
        block_out_channels=[128, 256, 512, 512],
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        latent_channels=4,
        layers_per_block=2,
        sample_size=512,
    )
    pipe = sd_pipeline(kind, vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet)
    pipe.save_pretrained(folder / kind)
    return folder / kind


def requests(n: int, size: int, masked: bool = True):
    """Noise images with a centred mask and a donor (``masked``), or whole-image instructions."""
    from perceptforge.backends.protocols import EditRequest

    rng = np.random.default_rng(0)
    mask = np.zeros((size, size), bool)
    mask[size // 4 : 3 * size // 4, size // 4 : 3 * size // 4] = True
    donor = Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8))
    return [
        EditRequest(
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)),
            mask if masked else None,
            "a red car" if masked else "Change the man's shirt into a red one.",
            seed=k,
            donor=donor if masked else None,
            partial=masked,
        )
        for k in range(n)
    ]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def filters_side_by_side(folders: list[Path] | None, size: int, reqs) -> None:
    """Each photo filter on every photo of ``folders`` (resized to ``size`` on its longer side, as a run's
    images are) or on the noise requests, and OpenCV's ``pencilSketch``, which the pencil sketch replaced,
    beside it in the same loop: the anchor."""
    import cv2

    from perceptforge.backends.filters import FILTERS

    if folders:
        images = []
        for path in sorted(p for folder in folders for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".png")):
            with Image.open(path) as photo:
                photo = photo.convert("RGB")
                photo.thumbnail((size, size))
                images.append(np.asarray(photo))
    else:
        images = [np.asarray(r.image) for r in reqs]

    def anchor(image: np.ndarray) -> np.ndarray:
        return cv2.pencilSketch(cv2.cvtColor(image, cv2.COLOR_RGB2BGR), sigma_s=60, sigma_r=0.07, shade_factor=0.05)[0]

    for name, draw in [*FILTERS.items(), ("opencv pencilSketch (anchor)", anchor)]:
        draw(images[0])  # warm-up
        s = timed(lambda draw=draw: [draw(im) for im in images])
        print(f"filters {name}: {len(images)} images up to {size}px, {len(images) / s:.1f} images/s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["composite", "grabcut", "filters", "sd-inpaint"], default="composite")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--real-size", action="store_true")
    p.add_argument("--photos", nargs="*", type=Path, help="filters: folders of photos to filter (default: noise)")
    args = p.parse_args()
    reqs = requests(args.n, args.size)
    if args.backend == "composite":
        from perceptforge.backends.inpainters import CompositeInpainter

        s = timed(lambda: CompositeInpainter().edit(reqs))
        print(f"composite {args.size}px: {args.n / s:.1f} images/s")
    elif args.backend == "filters":
        filters_side_by_side(args.photos, args.size, reqs)
    elif args.backend == "grabcut":
        from perceptforge.backends.segmenters import GrabCutSegmenter

        seg = GrabCutSegmenter()
        s = timed(lambda: [seg.box_mask(np.asarray(r.image), (64, 64, args.size - 64, args.size - 64)) for r in reqs])
        print(f"grabcut {args.size}px: {args.n / s:.1f} images/s")
    else:
        from tiny_models import save_tiny_sd

        from perceptforge.backends.inpainters import SDInpainter

        with tempfile.TemporaryDirectory() as tmp:
            folder = save_real_size_sd(Path(tmp), "inpaint") if args.real_size else save_tiny_sd(Path(tmp), "inpaint")
            kw = dict(device=args.device, dtype=args.dtype, steps=args.steps, max_side=args.size)
            batched = SDInpainter(str(folder), batch_size=args.batch, **kw).load()
            batched.edit(reqs[: args.batch])  # warm-up
            sb = timed(lambda: batched.edit(reqs))
            single = SDInpainter(str(folder), batch_size=1, **kw).load()
            ss = timed(lambda: [single.edit([r]) for r in reqs])
        arch = "SD-1.5-size" if args.real_size else "tiny"
        print(
            f"sd-inpaint ({arch}, {args.size}px, {args.steps} steps, {args.dtype}, {args.device}): "
            f"batched x{args.batch} {args.n / sb:.2f} images/s, one at a time {args.n / ss:.2f} images/s, speed-up {ss / sb:.2f}x"
        )


if __name__ == "__main__":
    main()
