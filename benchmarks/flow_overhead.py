"""Whole-flow throughput with the embedded backends, and how much of it is orchestration.

    python benchmarks/flow_overhead.py --items 10 100 1000

For each size, in a fresh process, it builds a source directory by replicating the bundled people photos (new ids, so every
unit is distinct), runs the mvp flow (Prefect, threads), and reports items per second, peak memory of the
process (RSS; flat across sizes means nothing accumulates per item), and the orchestration share: 1 - (the same work done by the pure functions, divided by
the worker count) / flow wall time.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import yaml


def replicate(sample: Path, out: Path, copies: int) -> None:
    doc = json.loads((sample / "annotations.json").read_text())
    shutil.copytree(sample / "images", out / "images")
    shutil.copytree(sample / "depth", out / "depth")  # the depth scene names its disparity map
    people = [i for i in doc["images"] if i.get("subject")]
    donors = [i for i in doc["images"] if not i.get("subject")]
    images, anns, next_id = (
        list(donors),
        [a for a in doc["annotations"] if a["image_id"] in {d["id"] for d in donors}],
        1000,
    )
    for k in range(copies):
        src = people[k % len(people)]
        images.append({**src, "id": next_id})
        anns += [
            {**a, "id": 10 * next_id + j, "image_id": next_id}
            for j, a in enumerate(a for a in doc["annotations"] if a["image_id"] == src["id"])
        ]
        next_id += 1
    (out / "annotations.json").write_text(json.dumps({**doc, "images": images, "annotations": anns}))


def pure_time(source: Path, run: Path, seed: int, categories: list[str]) -> float:
    """The same work without Prefect: the flow's pure functions, one unit after another."""
    from perceptforge.backends.writers import TemplateWriter
    from perceptforge.configs.profile import load_profile
    from perceptforge.flows.common import renderable_values
    from perceptforge.logic.templates import templates
    from perceptforge.store.rundir import RunDir
    from perceptforge.store.sources import grounding_from_entry, read_source_dir
    from perceptforge.tasks.edit import EditUnit, edit_batch
    from perceptforge.tasks.idea import make_idea
    from perceptforge.tasks.ingest import ingest_entry
    from perceptforge.tasks.mask import make_mask
    from perceptforge.tasks.questions import make_candidate

    prof = load_profile("local")
    found = templates()
    used = {k: found[k] for k in categories}
    descriptions = {tid: t.cross_description for tid, t in found.items()}
    editors = prof.build("inpainter")
    segmenter, backends = prof.build("segmenter"), {b.name: b for b in editors}
    offers, _ = renderable_values(used, prof, editors, None)
    writer, rd = TemplateWriter(), RunDir(run)
    t0 = time.perf_counter()
    entries = read_source_dir(source)
    recs = {e.source_id: ingest_entry(source, e, rd) for e in entries}
    for e in entries:
        if not e.subject:
            continue
        g, src = grounding_from_entry(e), recs[e.source_id]
        for t in used.values():
            try:
                idea = make_idea(t, g, writer, offers[t.id], seed)
                cand = make_candidate(t, g, src.sha256, idea, writer, descriptions, seed)
                mask = make_mask(t, cand, src, g, rd, segmenter, prof.gates, seed)
            except ValueError:  # what the flow quarantines: no such attribute, a degenerate mask
                continue
            edit_batch([EditUnit(t, cand, src, mask)], rd, backends, seed)
    return time.perf_counter() - t0


def measure(n_items: int, workers: int) -> dict:
    """One size, in this process (so its peak RSS is this size's alone)."""
    from perceptforge.settings import configure_prefect

    configure_prefect()
    from perceptforge.configs.profile import load_profile
    from perceptforge.flows.common import renderable_values, task_runner
    from perceptforge.flows.mvp import mvp_flow
    from perceptforge.logic.templates import templates

    sample = Path(str(resources.files("perceptforge.data").joinpath("sample")))
    prof = load_profile("local")
    offers, _ = renderable_values(templates(), prof, prof.build("inpainter"), None)
    # The categories the local profile can render × 5 questions per photo; small sizes take fewer categories.
    copies = max(1, round(n_items / (5 * len(offers))))
    categories = sorted(offers)
    categories = categories[: max(1, min(len(categories), round(n_items / 5)))]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        replicate(sample, src, copies)
        # Replicated photos make near-identical edits; the near-duplicate gate would drop most of them.
        profile = load_profile("local").model_dump(mode="json")
        profile["gates"]["min_phash_distance"] = 0
        (Path(tmp) / "bench.yaml").write_text(yaml.safe_dump(profile))
        flow = mvp_flow.with_options(task_runner=task_runner("threads", workers))
        t0 = time.perf_counter()
        summary = flow(
            source=str(src),
            profile=str(Path(tmp) / "bench.yaml"),
            out=str(Path(tmp) / "run"),
            seed=0,
            categories=categories,
        )
        wall = time.perf_counter() - t0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        pure = pure_time(src, Path(tmp) / "pure", 0, categories)
    return {
        "items": summary["counts"]["items"],
        "photos": copies,
        "wall_s": wall,
        "pure_s": pure,
        "peak_rss_mib": rss,
        "stages_s": summary["wall_time_s"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, nargs="+", default=[10, 100])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child mode: measure one size, print JSON
    args = p.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.workers)))
        return
    for n_items in args.items:
        # A fresh process per size: peak RSS then shows whether memory grows with the number of items.
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n_items), "--workers", str(args.workers)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        overhead = max(0.0, 1 - (r["pure_s"] / args.workers) / r["wall_s"])
        print(
            f"{r['items']:5d} items ({r['photos']} photos): flow {r['wall_s']:6.1f} s = {r['items'] / r['wall_s']:5.1f} items/s; "
            f"pure functions {r['pure_s']:6.1f} s; orchestration share ~{100 * overhead:.0f}%; peak RSS {r['peak_rss_mib']:.0f} MiB; "
            f"stages {r['stages_s']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
