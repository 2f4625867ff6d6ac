"""The model stages near the hardware: images/s per stage, the UNet's achieved TFLOP/s against a matmul peak
measured on the same device, and the whole mvp flow's wall time split into model time and everything else.

    python benchmarks/gpu_pipeline.py --device cuda --real-size            # one GPU: SAM ViT-H, SD-1.5-size
    python benchmarks/gpu_pipeline.py --device cpu --steps 2 --units 20    # tiny models: the CPU check

Models are built here with random weights (no downloads; compute and memory are those of trained weights,
the pictures are noise): ``--real-size`` builds SAM ViT-H and the Stable Diffusion 1.5 UNet / VAE / CLIP-L
architecture for inpainting and InstructPix2Pix, otherwise the tests' tiny ones. The flow runs the
bundled sample photos, replicated to about ``--units`` edit units, with the annotations grounder and the
template writer (no endpoints), SAM box masks, sd-inpaint and instruct-pix2pix at ``batch_size: auto``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def matmul_peak(device: str) -> float:
    """TFLOP/s of the best of 5 square matmuls (fp16 8192³ on a GPU, fp32 2048³ on the CPU)."""
    import torch

    n, dtype = (8192, torch.float16) if device.startswith("cuda") else (2048, torch.float32)
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(5):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


def unet_flops_per_image_step(pipe, device: str, cfg_copies: int) -> float:
    """FLOPs of one denoising step for one image (``cfg_copies`` UNet inputs per image: 2 with CFG, 3 for
    InstructPix2Pix), counted by torch's FlopCounterMode on one UNet call."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    unet = pipe.unet
    size = unet.config.sample_size
    x = torch.randn(cfg_copies, unet.config.in_channels, size, size, device=device, dtype=unet.dtype)
    text = torch.randn(cfg_copies, 77, unet.config.cross_attention_dim, device=device, dtype=unet.dtype)
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        unet(x, torch.tensor(10, device=device), encoder_hidden_states=text)
    return float(counter.get_total_flops())


def build_models(folder: Path, real_size: bool) -> dict[str, Path | str]:
    from edit_throughput import save_real_size_sd
    from tiny_models import save_tiny_sam, save_tiny_sd

    save_sd = save_real_size_sd if real_size else save_tiny_sd
    models: dict[str, Path | str] = {"inpaint": save_sd(folder, "inpaint"), "ip2p": save_sd(folder, "ip2p")}
    if real_size:
        import torch
        from segment_anything import sam_model_registry

        torch.manual_seed(0)
        models["sam_type"], models["sam"] = "vit_h", folder / "sam_vit_h_random.pth"
        torch.save(sam_model_registry["vit_h"]().state_dict(), models["sam"])
    else:
        models["sam_type"], models["sam"] = save_tiny_sam(folder)
    return models


def sam_stage(models: dict, device: str, n_images: int, image_side: int) -> None:
    from perceptforge.backends.sam import SamSegmenter

    seg = SamSegmenter(str(models["sam"]), str(models["sam_type"]), device=device).load()
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 255, (image_side * 3 // 4, image_side, 3), dtype=np.uint8) for _ in range(n_images)]
    seg.box_mask(images[0], (8, 8, 64, 64))  # warm-up (kernels, allocator)
    seg = SamSegmenter(str(models["sam"]), str(models["sam_type"]), device=device).load()
    t0 = time.perf_counter()
    for image in images:
        for box in [(10, 10, 200, 150), (50, 40, 300, 260), (0, 0, 120, 90)]:  # three units per image
            seg.box_mask(image, box)
    elapsed = time.perf_counter() - t0
    print(
        f"SAM box mode ({models['sam_type']}, {seg.stats()['precision']}): {n_images / elapsed:.2f} source images/s, "
        f"3 boxes each; encoder runs {seg.counts['encoder_runs']} for {n_images} images"
    )


def editor_stage(cls, folder: Path, kind: str, device: str, dtype: str, steps: int, side: int, batches: list) -> None:
    from edit_throughput import requests

    for batch in batches:
        editor = cls(str(folder), device=device, dtype=dtype, steps=steps, batch_size=batch, max_side=side).load()
        reqs = requests(1, side, kind == "inpaint")
        chosen = editor.choose_batch_size(reqs[0])
        reqs = requests(2 * chosen, side, kind == "inpaint")
        editor.edit(reqs[:chosen])  # warm-up at the batch shape
        sync(device)
        t0 = time.perf_counter()
        editor.edit(reqs)
        elapsed = time.perf_counter() - t0
        rate = len(reqs) / elapsed
        flops = unet_flops_per_image_step(editor.pipe, device, 3 if kind == "ip2p" else 2)
        print(
            f"{editor.name} ({side}², {steps} steps, {dtype}, batch {batch} → {chosen}): {rate:.2f} images/s; "
            f"UNet ≥ {flops * steps * rate / 1e12:.3g} TFLOP/s; peak GPU memory "
            f"{editor.stats().get('peak_gpu_memory_gb', '–')} GB"
        )


def flow_run(models: dict, device: str, dtype: str, steps: int, units: int, side: int, work: Path) -> None:
    """The mvp flow on the bundled sample replicated to about ``units`` units; model time vs the rest."""
    from flow_overhead import replicate

    from perceptforge.configs.profile import load_profile

    sample = Path(str(resources.files("perceptforge.data").joinpath("sample")))
    categories = ["B1", "S1", "E2"]  # background and partial (sd-inpaint), direct alteration (ip2p)
    replicate(sample, work / "src", max(1, units // len(categories)))
    profile = load_profile("local").model_dump(mode="json")
    profile |= {"name": "gpu-bench", "device": device, "dtype": dtype, "release_models_between_stages": False}
    profile["segmenter"] = {"backend": "sam", "checkpoint": str(models["sam"]), "model_type": models["sam_type"]}
    common = {"steps": steps, "max_side": side}
    profile["inpainter"] = {"backend": "sd-inpaint", "model": str(models["inpaint"]), "batch_size": "auto", **common}
    profile["editor"] = {"backend": "instruct-pix2pix", "model": str(models["ip2p"]), "batch_size": "auto", **common}
    from helpers import OPEN_GATES  # tests/ is on the path: the gates a flow test opens

    profile["gates"] |= OPEN_GATES | {"min_phash_distance": 0}
    profile["runner"] = {"kind": "threads", "max_workers": 4}
    (work / "bench.yaml").write_text(yaml.safe_dump(profile))
    # In this process: the tiny SAM builder is registered here only, and the flow's own timings are wanted.
    from perceptforge.settings import configure_prefect

    configure_prefect()
    from perceptforge.flows.run import run as run_flow

    t0 = time.perf_counter()
    try:
        run_flow("mvp", work / "src", work / "run", profile=str(work / "bench.yaml"), seed=0, categories=categories)
    except Exception as exc:  # a run with no item passing its gates still has its summary and timings
        print(f"flow: {type(exc).__name__}: {exc}")
    wall = time.perf_counter() - t0
    summary = json.loads((work / "run" / "summary.json").read_text())
    stats = summary.get("backend_stats", {})
    # On a GPU the device lock runs one model call at a time; on the CPU worker threads overlap them.
    model = min(wall, sum(s.get("model_s", 0.0) for s in stats.values()))
    edit_units = summary["counts"].get("edited", 0)
    edit_s = summary["wall_time_s"].get("edit", 0.0)
    print(
        f"flow: {summary['counts']} in {wall:.1f} s wall ; model calls {model:.1f} s, "
        f"everything else {wall - model:.1f} s ({100 * (wall - model) / wall:.0f}%); edit stage "
        f"{edit_units / max(edit_s, 1e-9):.2f} units/s"
    )
    print(f"  stages (s): {summary['wall_time_s']}")
    print(f"  backends: {json.dumps(stats)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--real-size", action="store_true")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--size", type=int, default=512, help="image side at the diffusion model")
    p.add_argument("--sam-images", type=int, default=16)
    p.add_argument("--units", type=int, default=200)
    p.add_argument("--skip-flow", action="store_true")
    args = p.parse_args()
    from perceptforge.backends.editors import InstructPix2PixEditor
    from perceptforge.backends.inpainters import SDInpainter

    dtype = args.dtype if args.device.startswith("cuda") else "float32"
    print(f"matmul peak on {args.device}: {matmul_peak(args.device):.3g} TFLOP/s")
    with tempfile.TemporaryDirectory() as tmp:
        models = build_models(Path(tmp), args.real_size)
        sam_stage(models, args.device, args.sam_images, 1024 if args.real_size else 256)
        batches = [4, "auto"]
        editor_stage(SDInpainter, models["inpaint"], "inpaint", args.device, dtype, args.steps, args.size, batches)
        editor_stage(InstructPix2PixEditor, models["ip2p"], "ip2p", args.device, dtype, args.steps, args.size, batches)
        if not args.skip_flow:
            flow_run(models, args.device, dtype, args.steps, args.units, args.size, Path(tmp))


if __name__ == "__main__":
    main()
