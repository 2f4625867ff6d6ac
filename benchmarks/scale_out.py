"""Scale-out figures: model stages on 1 and 2 Dask worker processes, Prefect task runs per 1,000 units, the local
profile's wall time and the share outside the model stages as the source grows, export peak memory, and the
near-duplicate check's time.

    python benchmarks/scale_out.py                      # every part, default sizes
    python benchmarks/scale_out.py --parts workers --images 12
    python benchmarks/scale_out.py --parts local --sizes 10 100 1000

Parts:
- ``workers``: the mvp flow (categories B1, S1) with tiny real models the script builds (SAM, Stable Diffusion
  inpainting), on a local Dask cluster of 1 and then 2 worker processes, one thread each; model-stage units/s is
  (mask + edit units) / (mask + edit stage wall time), and the run's task runs per 1,000 units.
- ``local``: the local profile (threads runner) on the bundled people photos replicated to each size; wall time,
  and the share of it outside the model stages (mask, edit, gates: GrabCut, compositing, recolouring).
- ``export``: ``perceptforge export`` of runs of about 100 and 1,000 items (one run's items copied under new ids
  and sources), each in a fresh process: its peak RSS.
- ``dupes``: the gates' near-duplicate check over 10k and 100k clustered 64-bit hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]  # flow_overhead.replicate; the tests' tiny model builders
SAMPLE = Path(str(resources.files("perceptforge.data").joinpath("sample")))


def prepare() -> None:
    from perceptforge.settings import configure_prefect

    configure_prefect()


def source_of(n_images: int, work: Path) -> Path:
    from flow_overhead import replicate

    src = work / f"src-{n_images}"
    if not src.exists():
        replicate(SAMPLE, src, n_images)
    return src


def tiny_profile(work: Path, workers: int) -> Path:
    from tiny_models import save_tiny_sam, save_tiny_sd

    from perceptforge.configs.profile import load_profile

    if not (work / "sd" / "inpaint").exists():
        save_tiny_sam(work / "sam")
        save_tiny_sd(work / "sd", "inpaint")
    profile = load_profile("local").model_dump(mode="json")
    profile |= {"name": "tiny-models", "cpu_threads": 1}
    profile["segmenter"] = {
        "backend": "sam",
        "checkpoint": str(work / "sam" / "sam_tiny.pth"),
        "model_type": "tiny_test",
    }
    profile["inpainter"] = {"backend": "sd-inpaint", "model": str(work / "sd" / "inpaint"), "steps": 8, "max_side": 128}
    from helpers import OPEN_GATES  # tests/ is on the path: the gates a flow test opens

    profile["gates"] |= OPEN_GATES | {"min_phash_distance": 0}
    profile["gates"] |= {"min_inside_change": 0.0, "max_outside_change": 255.0}
    profile["runner"] = {"kind": "dask", "max_workers": workers, "chunk_size": 24}
    path = work / f"tiny-{workers}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def per_thousand(summary: dict) -> float:
    engine = summary["engine"]
    return 1000 * sum(engine["task_runs"].values()) / max(1, sum(engine["units_run"].values()))


def workers_part(n_images: int, work: Path) -> None:
    from distributed import Client, LocalCluster
    from tiny_models import register_tiny_sam

    from perceptforge.flows.run import run as run_flow

    src = source_of(n_images, work)
    rates = {}
    for workers in (1, 2):
        profile = tiny_profile(work, workers)
        with (
            LocalCluster(n_workers=workers, threads_per_worker=1, host="127.0.0.1", dashboard_address=None) as cluster,
            Client(cluster) as client,
        ):
            client.run(register_tiny_sam)
            started = time.perf_counter()
            summary = run_flow(
                "mvp", src, work / f"run-dask-{workers}", profile=str(profile), categories=["B1", "S1"],
                dask_address=cluster.scheduler_address, fresh=True,
            )  # fmt: skip
            wall = time.perf_counter() - started
        units = sum(summary["engine"]["units_run"].get(s, 0) for s in ("mask", "edit"))
        stage_s = sum(summary["wall_time_s"].get(s, 0.0) for s in ("mask", "edit"))
        rates[workers] = units / stage_s
        print(
            f"workers {workers}: {units} model-stage units in {stage_s:.1f} s = {rates[workers]:.2f} units/s "
            f"(run {wall:.1f} s wall, {summary['counts']['items']} items); task runs per 1,000 units "
            f"{per_thousand(summary):.0f}; loads {summary['engine']['model_loads']}"
        )
    print(f"speed-up with 2 worker processes: {rates[2] / rates[1]:.2f}x (goal >= 1.6x)")


def local_part(sizes: list[int], work: Path) -> None:
    for n in sizes:
        src = source_of(n, work)
        out = work / f"run-local-{n}"
        cmd = [sys.executable, "-m", "perceptforge.cli", "run", "mvp", "--source", str(src), "--out", str(out)]
        started = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([*cmd, "--fresh"], check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter() - started
        summary = json.loads((out / "summary.json").read_text())
        model = sum(summary["wall_time_s"].get(s, 0.0) for s in ("mask", "edit", "gates"))
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(
            f"local profile, {n} source images: {summary['counts']['items']} items, {wall:.1f} s wall, {cpu:.1f} s CPU; "
            f"outside the model stages {100 * (wall - model) / wall:.0f}% ; task runs per 1,000 units "
            f"{per_thousand(summary):.0f}"
        )


def synthetic_run(base: Path, n_items: int, out: Path) -> Path:
    """``base``'s items copied under new ids and sources until there are ``n_items`` (images shared by content)."""
    import shutil

    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base, out, ignore=shutil.ignore_patterns("items", "verification"))
    (out / "items").mkdir()
    items = [json.loads(p.read_text()) for p in sorted((base / "items").glob("*.json"))]
    for k in range(n_items):
        item = json.loads(json.dumps(items[k % len(items)]))
        item["id"] = hashlib.sha256(f"{item['id']}:{k}".encode()).hexdigest()[:16]
        item["lineage"]["source_id"] = f"{item['lineage']['source_id']}-{k // len(items)}"
        (out / "items" / f"{item['id']}.json").write_text(json.dumps(item))
    return out


EXPORT_CHILD = """
import resource, sys
from pathlib import Path
from perceptforge.outputs.export import export_split
manifest = export_split(Path(sys.argv[1]), Path(sys.argv[2]), ("jsonl", "parquet", "vlmevalkit", "lmms-eval"), 0, 0.5)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, manifest.counts["val"] + manifest.counts["test"])
"""


def export_part(sizes: list[int], work: Path) -> None:
    base = work / "run-local-10"
    if not (base / "items").is_dir():
        local_part([10], work)
    for n in sizes:
        run = synthetic_run(base, n, work / f"run-synthetic-{n}")
        out = work / f"export-{n}"
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", EXPORT_CHILD, str(run), str(out)], check=True, capture_output=True, text=True
        )
        peak_mb, items = done.stdout.split()[-2:]
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20
        print(
            f"export of {items} items: peak RSS {float(peak_mb):.0f} MiB, {time.perf_counter() - started:.1f} s, "
            f"{size:.0f} MiB written"
        )


def dupes_part(sizes: list[int]) -> None:
    from helpers import clustered_hashes

    from perceptforge.logic.gates import near_duplicates

    for n in sizes:
        hashes = [(f"u{k}", h) for k, h in enumerate(clustered_hashes(n, 0))]
        started = time.perf_counter()
        dupes = near_duplicates(hashes, 4)
        print(f"near-duplicate check, {n} hashes: {time.perf_counter() - started:.2f} s, {len(dupes)} duplicates")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", default=["workers", "local", "export", "dupes"])
    p.add_argument("--images", type=int, default=12, help="source images of the workers part")
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 100], help="source images of the local part")
    p.add_argument("--export-items", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--hashes", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--work", type=Path, help="where to build (default: a temporary folder)")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="scale-out-"))
    work.mkdir(parents=True, exist_ok=True)
    prepare()
    if "dupes" in args.parts:
        dupes_part(args.hashes)
    if "workers" in args.parts:
        workers_part(args.images, work)
    if "local" in args.parts:
        local_part(args.sizes, work)
    if "export" in args.parts:
        export_part(args.export_items, work)


if __name__ == "__main__":
    main()
