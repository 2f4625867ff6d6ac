"""Peak memory of a run against the size of its source image (the basis of ``runner.peak_bytes_per_pixel``).

    python benchmarks/image_memory.py --megapixels 0.26 4 16 36

For each size, the bundled astronaut photo is scaled to that many pixels (its boxes with it) and the mvp
flow runs on it alone (local profile, B1/S1/I1) in a fresh process; it prints the process's peak RSS, the
increase over the smallest size per extra pixel, and the wall time. Sizes above ``ingest.max_pixels`` are
refused at ingest before decoding, which the last column shows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

from PIL import Image

SAMPLE = Path(str(resources.files("perceptforge.data").joinpath("sample")))


def scaled_source(folder: Path, megapixels: float) -> int:
    """The astronaut alone, scaled to ``megapixels``; returns its pixel count."""
    doc = json.loads((SAMPLE / "annotations.json").read_text())
    image = doc["images"][0]
    k = math.sqrt(megapixels * 1e6 / (image["width"] * image["height"]))
    w, h = round(image["width"] * k), round(image["height"] * k)
    (folder / "images").mkdir(parents=True)
    Image.open(SAMPLE / image["file_name"]).resize((w, h), Image.Resampling.BICUBIC).save(folder / image["file_name"])
    anns = [
        {**a, "bbox": [round(v * k) for v in a["bbox"]], "area": round(a["area"] * k * k)}
        for a in doc["annotations"]
        if a["image_id"] == image["id"]
    ]
    doc |= {"images": [{**image, "width": w, "height": h}], "annotations": anns}
    (folder / "annotations.json").write_text(json.dumps(doc))
    return w * h


def measure(megapixels: float) -> dict:
    """One size in a child process; its peak RSS is read from this process's children's usage."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        pixels = scaled_source(src, megapixels)
        env = dict(os.environ, PERCEPTFORGE_STATE_DIR=str(Path(tmp) / "state"))
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "perceptforge.cli", "run", "mvp", "--source", str(src), "--out", str(Path(tmp) / "run"),
             "--categories", "B1,S1,I1"],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        refused = "max_pixels" in proc.stdout + proc.stderr
        shutil.rmtree(src, ignore_errors=True)
    return {"pixels": pixels, "peak_bytes": peak, "wall_s": wall, "refused": refused, "rc": proc.returncode}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megapixels", type=float, nargs="+", default=[0.26, 4, 16])
    p.add_argument("--one", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    rows = []
    for mp in args.megapixels:  # a fresh parent per size, so RUSAGE_CHILDREN is that size's alone
        out = subprocess.run([sys.executable, __file__, "--one", str(mp)], capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = rows[0]
    for r in rows:
        extra = r["pixels"] - base["pixels"]
        per_pixel = (r["peak_bytes"] - base["peak_bytes"]) / extra if extra > 0 else float("nan")
        print(
            f"{r['pixels'] / 1e6:6.2f} MP: peak RSS {r['peak_bytes'] / 2**30:5.2f} GiB, "
            f"{per_pixel:6.1f} B per extra pixel, {r['wall_s']:5.1f} s, exit {r['rc']}"
            + (" (refused at ingest)" if r["refused"] else ""),
            flush=True,
        )


if __name__ == "__main__":
    main()
