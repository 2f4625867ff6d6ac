"""The MVP-Bench construction flow (MVP-Bench §4.1): sources → grounding → … → items.

Stages present so far: ingest (decode, normalise to upright RGB, hash, store content-addressed) and
grounding. Each source image is one unit of work; a unit that fails is quarantined with its reason and
the run goes on.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import yaml
from perceptforge.configs.profile import Profile, load_profile
from perceptforge.data.schema import SourceImage
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_text, sha256_file, write_jsonl
from perceptforge.tasks.images import load_rgb
from perceptforge.tasks.rundir import RunDir, safe_name
from perceptforge.tasks.sources import SourceEntry, grounding_from_entry, read_source_dir, resolve_inside
from prefect import flow, task
from prefect.task_runners import ThreadPoolTaskRunner


def ingest_entry(source_dir: Path, entry: SourceEntry, run: RunDir) -> dict:
    """Decode one source image and store it; returns the SourceImage record with a link to the stored copy."""
    path = resolve_inside(source_dir, entry.file_name)
    image = load_rgb(path)
    if (image.width, image.height) != (entry.width, entry.height):
        raise PerceptforgeError(
            f"{entry.file_name}: annotation says {entry.width}x{entry.height}, image is {image.width}x{image.height}"
        )
    stored = run.store_image(image)
    record = SourceImage(
        id=entry.source_id,
        path=entry.file_name,
        sha256=sha256_file(path),
        width=image.width,
        height=image.height,
        licence=entry.licence,
        attribution=entry.attribution,
    ).model_dump(mode="json")
    record["stored"] = stored.path
    return record


@task(name="ingest")
def ingest_task(source_dir: Path, entry: SourceEntry, run_path: Path) -> dict:
    return ingest_entry(source_dir, entry, RunDir(run_path))


@task(name="ground")
def ground_task(entry: SourceEntry, run_path: Path) -> dict:
    run = RunDir(run_path)
    rel = f"groundings/{safe_name(entry.source_id)}.json"
    cached = run.read_record(rel)
    if cached is not None:
        return cached
    record = grounding_from_entry(entry).model_dump(mode="json")
    run.write_record(rel, record)
    return record


def _resolved_profile_yaml(profile: Profile) -> str:
    return yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=True)


@flow(name="mvp", task_runner=ThreadPoolTaskRunner(max_workers=2))
def mvp_flow(source: str, profile: str = "local", out: str = "runs/mvp", seed: int = 0, limit: int | None = None) -> dict:
    """Build MVP-Bench-style items from a source directory into the run directory ``out``."""
    prof = load_profile(profile)
    source_dir = Path(source).resolve()
    run = RunDir(Path(out).resolve())
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.sub("profile.yaml"), _resolved_profile_yaml(prof))

    annotation_file = getattr(prof.grounder, "file", "annotations.json")
    entries = sorted(read_source_dir(source_dir, annotation_file), key=lambda e: e.source_id)
    if limit is not None:
        entries = entries[:limit]

    timings: dict[str, float] = {}
    failures: Counter[str] = Counter()

    def stage(name: str, stage_task, units: list[SourceEntry], *args) -> list[tuple[SourceEntry, dict]]:
        """Submit one task per unit, then collect in unit order; a failed unit is quarantined, never fatal."""
        t0 = time.perf_counter()
        futures = [(e, stage_task.submit(*args, e, run.path)) for e in units]
        done = []
        for entry, future in futures:
            try:
                done.append((entry, future.result()))
            except Exception as exc:
                run.quarantine(f"source-{entry.source_id}", name, type(exc).__name__, str(exc), file=entry.file_name)
                failures[f"{name}: {type(exc).__name__}"] += 1
        timings[name] = time.perf_counter() - t0
        return done

    ingested = stage("ingest", ingest_task, entries, source_dir)
    write_jsonl(run.sub("sources.jsonl"), [record for _, record in ingested])
    # Images without a main subject (donor backgrounds and objects) are sources, not units to ground.
    grounded = stage("ground", ground_task, [e for e, _ in ingested if e.subject])

    quarantine = run.gather_quarantine()
    summary = {
        "flow": "mvp",
        "profile": prof.name,
        "backends": prof.backend_names(),
        "seed": seed,
        "counts": {"sources": len(entries), "ingested": len(ingested), "grounded": len(grounded), "quarantined": len(quarantine)},
        "failures": dict(sorted(failures.items())),
        "wall_time_s": {k: round(v, 3) for k, v in timings.items()},
    }
    run.write_summary(summary)
    return summary
