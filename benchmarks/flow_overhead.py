"""Whole-flow throughput with the embedded backends, and how much of it is orchestration.

    python benchmarks/flow_overhead.py --items 10 100 1000

For each size it builds a source directory by replicating the bundled people photos (new ids, so every
unit is distinct), runs the mvp flow (Prefect, threads), and reports items per second, peak memory of the
process (RSS), and the orchestration share: 1 - (the same work done by the pure functions, divided by
the worker count) / flow wall time.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from importlib import resources
from pathlib import Path


def replicate(sample: Path, out: Path, copies: int) -> None:
    doc = json.loads((sample / "annotations.json").read_text())
    shutil.copytree(sample / "images", out / "images")
    people = [i for i in doc["images"] if i.get("subject")]
    donors = [i for i in doc["images"] if not i.get("subject")]
    images, anns, next_id = list(donors), [a for a in doc["annotations"] if a["image_id"] in {d["id"] for d in donors}], 1000
    for k in range(copies):
        src = people[k % len(people)]
        images.append({**src, "id": next_id})
        anns += [{**a, "id": 10 * next_id + j, "image_id": next_id} for j, a in enumerate(a for a in doc["annotations"] if a["image_id"] == src["id"])]
        next_id += 1
    (out / "annotations.json").write_text(json.dumps({**doc, "images": images, "annotations": anns}))


def pure_time(source: Path, run: Path, seed: int) -> float:
    """The same work without Prefect: the flow's pure functions, one unit after another."""
    import numpy as np  # noqa: F401
    from perceptforge.configs.profile import load_profile
    from perceptforge.data.schema import Grounding
    from perceptforge.flows.mvp import edit_unit, ingest_entry
    from perceptforge.tasks.candidates import make_candidate
    from perceptforge.tasks.editors import build_inpainter
    from perceptforge.tasks.llm import TemplateWriter
    from perceptforge.tasks.rundir import RunDir
    from perceptforge.tasks.segmenters import build_segmenter
    from perceptforge.tasks.sources import grounding_from_entry, read_source_dir
    from perceptforge.tasks.templates import templates

    prof = load_profile("local")
    found = templates()
    used = {k: t for k, t in found.items() if t.edit_kind.value != "direct_alteration"}
    seg, inp, writer = build_segmenter(prof.segmenter), build_inpainter(prof.inpainter), TemplateWriter()
    rd = RunDir(run)
    t0 = time.perf_counter()
    entries = read_source_dir(source)
    recs = {e.source_id: ingest_entry(source, e, rd) for e in entries}
    donors = [recs[e.source_id]["stored"] for e in entries if not e.subject]
    for e in entries:
        if not e.subject:
            continue
        g = grounding_from_entry(e)
        for t in used.values():
            try:
                cand = make_candidate(t, g, recs[e.source_id]["sha256"], writer, found, seed)
                edit_unit(t, cand, recs[e.source_id], Grounding.model_validate(g.model_dump()), rd, seg, inp, None, donors, seed)
            except ValueError:
                pass
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, nargs="+", default=[10, 100])
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    from perceptforge.settings import configure_prefect

    configure_prefect()
    from perceptforge.flows.mvp import mvp_flow, task_runner

    sample = Path(str(resources.files("perceptforge.data").joinpath("sample")))
    for n_items in args.items:
        copies = max(1, round(n_items / 5 / 10))  # ~10 categories succeed per person, 5 questions each
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            replicate(sample, src, copies)
            flow = mvp_flow.with_options(task_runner=task_runner("threads", args.workers))
            t0 = time.perf_counter()
            summary = flow(source=str(src), profile="local", out=str(Path(tmp) / "run"), seed=0)
            wall = time.perf_counter() - t0
            pure = pure_time(src, Path(tmp) / "pure", 0)
        items = summary["counts"]["items"]
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        overhead = max(0.0, 1 - (pure / args.workers) / wall)
        print(f"{items:5d} items ({copies} photos): flow {wall:6.1f} s = {items / wall:5.1f} items/s; pure functions {pure:6.1f} s; "
              f"orchestration share ~{100 * overhead:.0f}%; peak RSS so far {rss:.0f} MiB")


if __name__ == "__main__":
    main()
