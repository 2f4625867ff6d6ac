"""The one device check: from a fresh GPU machine, in one run, one table of the figures the gpu profile stands on.

    bash benchmarks/gpu_check.sh                 # on a lent GPU machine (installs the carried wheels first)
    python benchmarks/gpu_check.py --tiny        # the same path on the CPU with tiny models (tests/test_gpu_check.py)

Models are built here with random weights (no hub on a lent machine; compute and memory are those of trained
weights, the pictures are noise): SAM ViT-H and Stable Diffusion 1.5-size inpainting and InstructPix2Pix
(``--tiny``: the tests' tiny ones). Rows:

- SAM ViT-H image encoder, images/s under the profile's precision (bf16 autocast on CUDA);
- SD inpainting and InstructPix2Pix images/s at the batch ``batch_size: auto`` picks (512², 50 steps, fp16);
- the gpu profile's mvp flow (SAM masks, sd-inpaint, instruct-pix2pix; annotations grounder and template writer,
  no endpoints) on the sample photos annotated with boxes only, about ``--units`` edit units: the edit stage's
  units/s, its share of wall time outside model calls, in-flow images/s of each editor, peak GPU memory;
- the same flow on a Dask worker that offers ``GPU=1``: which process loaded each model, and the items equal the
  threads runner's count.

Each row carries the figure last measured on a lent H100 (2026-11-22) or the goal it is held to.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

CATEGORIES = ["B1", "S1", "E2"]  # background and partial substitution (sd-inpaint), direct alteration (ip2p)
ANCHOR = {  # seen on a lent H100 with the same random real-size models (../shared/notes/gpu-device.md)
    "sam": "H100 16.5",
    "sd-inpaint": "H100 2.57 (b8) / 2.68 (b16); goal in flow ≥ 2.6",
    "instruct-pix2pix": "H100 1.86 (b8) / 1.99 (b16)",
    "outside": "goal ≤ 10%",
}


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def peak_gb(device: str) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated() / 1e9, 2) if device.startswith("cuda") else None


def sam_encoder(models: dict, device: str, n_images: int, side: int) -> list[tuple]:
    """Images/s of SAM's image encoder (each image encoded once; one box decoded on it)."""
    from perceptforge.backends.sam import SamSegmenter

    seg = SamSegmenter(str(models["sam"]), str(models["sam_type"]), device=device).load()
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 255, (side * 3 // 4, side, 3), dtype=np.uint8) for _ in range(n_images + 1)]
    seg.box_mask(images[-1], (8, 8, 64, 64))  # warm-up: kernels, allocator
    sync(device)
    t0 = time.perf_counter()
    for image in images[:n_images]:
        seg.box_mask(image, (10, 10, side // 2, side // 3))
    sync(device)
    rate = n_images / (time.perf_counter() - t0)
    what = f"SAM {models['sam_type']} image encoder ({seg.stats()['precision']}, {side}px)"
    return [(what, f"{rate:.2f} images/s", ANCHOR["sam"])]


def editor_at_auto(cls, folder: Path, name: str, device: str, dtype: str, steps: int, side: int) -> list[tuple]:
    """Images/s of one backend at the batch ``auto`` picks for ``side``², after a warm-up call at that shape."""
    from edit_throughput import requests

    editor = cls(str(folder), device=device, dtype=dtype, steps=steps, batch_size="auto", max_side=side).load()
    masked = name == "sd-inpaint"
    chosen = editor.choose_batch_size(requests(1, side, masked)[0])
    reqs = requests(chosen, side, masked)
    editor.edit(reqs)  # warm-up at the batch shape
    sync(device)
    t0 = time.perf_counter()
    editor.edit(reqs)
    sync(device)
    rate = chosen / (time.perf_counter() - t0)
    what = f"{name} ({side}², {steps} steps, {dtype}, batch auto → {chosen})"
    peak = peak_gb(device)
    editor.unload()
    return [(what, f"{rate:.2f} images/s" + (f"; peak {peak} GB" if peak else ""), ANCHOR[name])]


def boxes_only_sample(folder: Path, copies: int) -> Path:
    """The bundled sample photos, ``copies`` times, annotated with boxes only (a user's folder: SAM draws every
    mask)."""
    from flow_overhead import replicate

    sample = Path(str(resources.files("perceptforge.data").joinpath("sample")))
    replicate(sample, folder, copies)
    coco = json.loads((folder / "annotations.json").read_text())
    for a in coco["annotations"]:
        a.pop("segmentation", None)
    (folder / "annotations.json").write_text(json.dumps(coco))
    return folder


def flow_profile(models: dict, device: str, dtype: str, steps: int, side: int, work: Path) -> Path:
    """The gpu profile with its models at the random-weight folders and no endpoints (annotations grounder, template
    writer); gates opened, because random weights paint noise."""
    from helpers import OPEN_GATES

    from perceptforge.configs.profile import load_profile

    local = load_profile("local").model_dump(mode="json")
    profile = load_profile("gpu").model_dump(mode="json")
    profile |= {"name": "gpu-check", "device": device, "dtype": dtype, "release_models_between_stages": False}
    profile |= {"grounder": local["grounder"], "llm": local["llm"], "depth": None, "generator": None, "embedder": None}
    profile["segmenter"] |= {"checkpoint": str(models["sam"]), "model_type": models["sam_type"], "mode": "box"}
    sizes = {"steps": steps, "max_side": side, "batch_size": "auto"}
    profile["inpainter"] = [profile["inpainter"][0] | {"model": str(models["inpaint"])} | sizes]
    profile["editor"] |= {"model": str(models["ip2p"])} | sizes
    profile["gates"] |= OPEN_GATES | {"min_phash_distance": 0, "min_inside_change": 0.0, "max_outside_change": 255.0}
    profile["gates"]["clip"] = None
    profile["runner"] |= {"kind": "threads", "max_workers": 4}
    path = work / "gpu-check.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def flow_rows(summary: dict, wall: float, device: str, label: str) -> list[tuple]:
    stats = summary.get("backend_stats", {})
    edit_s = summary["wall_time_s"].get("edit", 0.0)
    edited = summary["counts"].get("edited", 0)
    editors = {role: s for role, s in stats.items() if role != "segmenter"}
    edit_model = sum(s.get("model_s", 0.0) for s in editors.values())  # the calls that edit units (device-locked)
    measuring = sum(s.get("measure_s", 0.0) for s in editors.values())  # batch_size auto, before the stage
    outside = 100 * max(0.0, edit_s - edit_model) / max(edit_s, 1e-9)
    if edit_model > edit_s:  # two backends' calls ran side by side on worker threads: their sum is no wall time
        said = f"calls overlap: Σ {edit_model:.1f} s of model calls in {edit_s:.1f} s"
    else:
        said = f"{outside:.0f}% ({edit_s - edit_model:.1f} s)"
    rows = [
        (
            f"{label}: whole run",
            f"{wall:.1f} s wall; {summary['counts'].get('items', 0)} items",
            "H100 117 s (6 photos)",
        ),
        (f"{label}: edit stage", f"{edited} units in {edit_s:.1f} s = {edited / max(edit_s, 1e-9):.2f} units/s", ""),
        (
            f"{label}: edit stage outside model calls",
            said,
            ANCHOR["outside"],
        ),
        (f"{label}: before the edit stage", f"batch_size auto measured in {measuring:.1f} s of model calls", ""),
    ]
    for role, s in sorted(stats.items()):
        if "seconds_per_image" in s:
            rows.append(
                (
                    f"{label}: {role} in flow (batch {s.get('batch_size')})",
                    f"{1 / s['seconds_per_image']:.2f} images/s",
                    ANCHOR.get(summary["backends"].get(role, ""), ""),
                )
            )
    return rows


def run_flow_timed(source: Path, out: Path, profile: Path, **kwargs) -> tuple[dict, float]:
    from perceptforge.flows.run import run as run_flow

    t0 = time.perf_counter()
    try:
        run_flow("mvp", source, out, profile=str(profile), seed=0, categories=CATEGORIES, **kwargs)
    except Exception as exc:  # a run with no item passing its gates still has its summary and timings
        print(f"flow: {type(exc).__name__}: {exc}", flush=True)
    wall = time.perf_counter() - t0
    return json.loads((out / "summary.json").read_text()), wall


def dask_rows(source: Path, profile: Path, work: Path, tiny: bool, threads: dict) -> list[tuple]:
    """The flow on a Dask worker process that offers GPU=1 (as `dask worker --resources GPU=1` does)."""
    from distributed import Client
    from tiny_models import register_tiny_sam

    from perceptforge.tasks.engine import local_cluster

    with local_cluster(1, gpus=1) as cluster, Client(cluster) as client:
        if tiny:
            client.run(register_tiny_sam)  # the tiny SAM's builder is the tests', not segment-anything's
        worker_pids = {str(pid) for pid in client.run(os.getpid).values()}
        summary, wall = run_flow_timed(
            source, work / "dask", profile, runner="dask", dask_address=cluster.scheduler_address
        )
    loads = summary["engine"].get("model_loads", {})

    def where(places: dict[str, int]) -> str:
        said = [
            f"{'worker' if p.rsplit('-', 1)[-1] in worker_pids else 'flow process'} ×{n}" for p, n in places.items()
        ]
        return " + ".join(sorted(said))

    offered = "GPU=1" if summary["runner"]["kind"] == "DaskTaskRunner" else summary["runner"]["kind"]
    same = summary["counts"].get("items") == threads["counts"].get("items")
    models = [m for m in sorted(loads) if m.split(":")[0] in ("segmenter", "inpainter", "editor")]
    return [
        (
            f"dask worker ({offered}): model loads",
            "; ".join(f"{m} {where(loads[m])}" for m in models),
            "on the worker, once (auto batch: measured in the flow process)",
        ),
        (
            "dask worker: whole run",
            f"{wall:.1f} s wall; {summary['counts'].get('items', 0)} items ({'=' if same else '≠'} threads)",
            "the same items as threads",
        ),
    ]


def print_table(rows: list[tuple], title: str) -> None:
    widths = [max(len(str(r[k])) for r in rows + [("measure", "figure", "anchor / goal")]) for k in range(3)]
    print(f"\n{title}")
    for row in [("measure", "figure", "anchor / goal"), tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    sys.stdout.flush()


def machine(device: str) -> str:
    import torch

    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name()} · torch {torch.__version__}"
    return f"CPU ({os.cpu_count()} cores) · torch {torch.__version__}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tiny", action="store_true", help="tiny models on the CPU: the path, not the figures")
    p.add_argument("--units", type=int, default=21, help="edit units of the flow (3 per copy of a sample person)")
    p.add_argument("--sam-images", type=int, default=16)
    p.add_argument("--skip", default="", help="comma-separated parts to leave out: sam,editors,flow,dask")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # the workers' INFO lines would bury the table
    device, dtype = ("cpu", "float32") if args.tiny else ("cuda", "float16")
    steps, side, sam_side = (2, 64, 256) if args.tiny else (50, 512, 1024)
    started = time.perf_counter()
    from gpu_pipeline import build_models

    from perceptforge.backends.editors import InstructPix2PixEditor
    from perceptforge.backends.inpainters import SDInpainter
    from perceptforge.settings import configure_prefect

    configure_prefect()
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        models = build_models(work, real_size=not args.tiny)
        print(f"models built in {time.perf_counter() - t0:.0f} s", flush=True)
        if "sam" not in skip:
            rows += sam_encoder(models, device, args.sam_images, sam_side)
            print_table(rows, "so far")
        if "editors" not in skip:
            rows += editor_at_auto(SDInpainter, models["inpaint"], "sd-inpaint", device, dtype, steps, side)
            rows += editor_at_auto(
                InstructPix2PixEditor, models["ip2p"], "instruct-pix2pix", device, dtype, steps, side
            )
            print_table(rows, "so far")
        if not {"flow", "dask"} <= skip:
            source = boxes_only_sample(work / "src", max(1, args.units // len(CATEGORIES)))
            profile = flow_profile(models, device, dtype, steps, side, work)
            threads: dict = {"counts": {}}
            if "flow" not in skip:
                if device.startswith("cuda"):
                    import torch

                    torch.cuda.reset_peak_memory_stats()
                threads, wall = run_flow_timed(source, work / "threads", profile)
                rows += flow_rows(threads, wall, device, "flow (threads)")
                if peak := peak_gb(device):
                    rows.append(("flow (threads): peak GPU memory", f"{peak} GB", "H100 8.5 GB peak RSS (host)"))
                print_table(rows, "so far")
            if "dask" not in skip:
                rows += dask_rows(source, profile, work, args.tiny, threads)
    rows.append(("check", f"{time.perf_counter() - started:.0f} s in all", "goal < 8 min on the device"))
    print_table(
        rows, f"gpu_check on {machine(device)}{' (--tiny: tiny models, the figures mean nothing)' if args.tiny else ''}"
    )
    if args.json:
        args.json.write_text(json.dumps([dict(zip(("measure", "figure", "anchor"), r)) for r in rows], indent=1))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
