"""The MVP-Bench construction flow (MVP-Bench §4.1): sources → grounding → ideas and questions → … → items.

Stages: ingest (decode, normalise to upright RGB, hash, store content-addressed), grounding,
candidates (one per source image × category template: the manipulation idea and its questions), edit
(mask and manipulated image), quality gates, and items (one per question, with full lineage). Each unit of work writes one file when done, so a rerun skips it; a unit that fails is
quarantined with its reason and the run goes on. Categories whose edit kind the profile cannot serve
are skipped with the reason in the summary.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np
import yaml
from perceptforge.configs.profile import Profile, load_profile
from perceptforge.data.schema import Grounding, SourceImage
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.fileio import atomic_write_text, sha256_file, write_json, write_jsonl
from perceptforge.prompts.library import load_prompt
from perceptforge.tasks.candidates import make_candidate, unit_id
from perceptforge.tasks.edit_stage import EditUnit, edit_batch, plan_batches
from perceptforge.tasks.editors import build_editor, build_inpainter
from perceptforge.tasks.gates import check_pair as gate_pair
from perceptforge.tasks.gates import near_duplicates, phash
from perceptforge.tasks.grounders import build_grounder
from perceptforge.tasks.images import load_rgb
from perceptforge.tasks.items import build_items
from perceptforge.tasks.llm import LLMReplyError, build_writer
from perceptforge.tasks.report import write_report
from perceptforge.tasks.rundir import RunDir, safe_name
from perceptforge.tasks.segmenters import build_segmenter
from perceptforge.tasks.sources import SourceEntry, read_source_dir, resolve_inside
from perceptforge.tasks.templates import Template, templates
from PIL import Image
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
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


# Resume is by the files each unit writes, so Prefect's own input caching stays off (inputs hold clients).
@task(name="ingest", cache_policy=NO_CACHE)
def ingest_task(entry: SourceEntry, source_dir: Path, run_path: Path) -> dict:
    return ingest_entry(source_dir, entry, RunDir(run_path))


@task(name="ground", cache_policy=NO_CACHE)
def ground_task(entry: SourceEntry, source: dict, grounder, used: list[Template], run_path: Path) -> dict:
    run = RunDir(run_path)
    return run.once(f"groundings/{safe_name(entry.source_id)}.json",
                    lambda: grounder.ground(load_rgb(run.sub(source["stored"])), entry, used).model_dump(mode="json"))


@task(name="edit", cache_policy=NO_CACHE)
def edit_batch_task(batch: list[EditUnit], models: dict, donors: list[str], seed: int, device: str, run_path: Path) -> list:
    """One planned batch; finished units are read back, and a partly written batch is redone whole (same
    batch, same bytes) with only its missing files written."""
    run = RunDir(run_path)
    rels = [f"edits/{safe_name(u.name)}.json" for u in batch]
    done = [run.read_record(rel) for rel in rels]
    if all(r is not None for r in done):
        return done
    fresh = edit_batch(batch, run, models, donors, seed, device)
    out = []
    for rel, old, new in zip(rels, done, fresh):
        if old is None and not isinstance(new, Exception):
            run.write_record(rel, new)
        out.append(old if old is not None else new)
    return out


@task(name="candidate", cache_policy=NO_CACHE)
def candidate_task(unit: tuple[SourceEntry, Template], source: dict, grounding: dict, writer, all_templates: dict,
                   seed: int, run_path: Path) -> dict:
    entry, template = unit
    run = RunDir(run_path)
    return run.once(f"candidates/{safe_name(unit_id(entry.source_id, template))}.json", lambda: make_candidate(
        template, Grounding.model_validate(grounding), source["sha256"], writer, all_templates, seed))


def _resolved_profile_yaml(profile: Profile) -> str:
    return yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=True)


def _usage(backend):
    client = getattr(backend, "client", None)
    return getattr(client, "usage", None)


def task_runner(kind: str = "threads", max_workers: int = 2, dask_address: str | None = None):
    """Threads on one machine (the default: fastest for 2-core boxes), or Dask: a local cluster, or an
    existing one at ``dask_address`` (tcp://host:8786). For GPU clusters prefect-ray's RayTaskRunner is the
    same one-line swap (see README "Scale-out")."""
    if kind == "threads":
        return ThreadPoolTaskRunner(max_workers=max_workers)
    if kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise PerceptforgeError("--runner dask needs prefect-dask: pip install 'perceptforge[scale]'") from None
        if dask_address:
            return DaskTaskRunner(address=dask_address)
        return DaskTaskRunner(cluster_kwargs={"n_workers": max_workers, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": None})
    raise PerceptforgeError(f"unknown runner {kind!r}: threads or dask")


def select_templates(categories: list[str] | None) -> tuple[dict[str, Template], dict[str, Template]]:
    """(all discovered templates, the ones this run uses); an unknown category id is an input error."""
    found = templates()
    if not categories:
        return found, found
    unknown = sorted(set(categories) - set(found))
    if unknown:
        raise InputError("--categories", f"unknown categories {unknown}; known: {', '.join(found)}")
    return found, {k: found[k] for k in sorted(set(categories))}


@flow(name="mvp", task_runner=ThreadPoolTaskRunner(max_workers=2))
def mvp_flow(source: str, profile: str = "local", out: str = "runs/mvp", seed: int = 0, limit: int | None = None,
             categories: list[str] | None = None) -> dict:
    """Build MVP-Bench-style candidates from a source directory into the run directory ``out``."""
    prof = load_profile(profile)
    all_templates, used = select_templates(categories)
    source_dir = Path(source).resolve()
    run = RunDir(Path(out).resolve())
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.sub("profile.yaml"), _resolved_profile_yaml(prof))
    versions = {tid: {"version": t.version, "prompts": [load_prompt(p).ref() for p in t.prompt_ids()]} for tid, t in used.items()}
    write_json(run.sub("templates.json"), versions)

    annotation_file = getattr(prof.grounder, "file", "annotations.json")
    entries = sorted(read_source_dir(source_dir, annotation_file), key=lambda e: e.source_id)
    if limit is not None:
        # The limit counts images with a main subject (the units); donor scenes are always ingested.
        subjects = [e for e in entries if e.subject][:limit]
        entries = sorted(subjects + [e for e in entries if not e.subject], key=lambda e: e.source_id)

    timings: dict[str, float] = {}
    failures: Counter[str] = Counter()

    def fail(stage_name: str, unit_name: str, entry: SourceEntry, exc: Exception) -> None:
        extra = {"raw": exc.raw} if isinstance(exc, LLMReplyError) else {}
        run.quarantine(unit_name, stage_name, type(exc).__name__, str(exc), file=entry.file_name, **extra)
        failures[f"{stage_name}: {type(exc).__name__}"] += 1

    def stage(name: str, stage_task, units: list, *args) -> list[tuple[object, dict]]:
        """Submit one task per unit, then collect in unit order; a failed unit is quarantined, never fatal."""
        t0 = time.perf_counter()
        futures = [(u, stage_task.submit(u, *(a(u) if callable(a) else a for a in args), run.path)) for u in units]
        done = []
        for unit, future in futures:
            entry, template = unit if isinstance(unit, tuple) else (unit, None)
            unit_name = unit_id(entry.source_id, template) if template else f"source-{entry.source_id}"
            try:
                done.append((unit, future.result()))
            except Exception as exc:
                fail(name, unit_name, entry, exc)
        timings[name] = time.perf_counter() - t0
        return done

    def batch_stage(name: str, stage_task, batches: list[list], unit_of, *args) -> list[tuple[object, dict]]:
        """Like ``stage`` for tasks that take a batch and return one record or exception per unit."""
        t0 = time.perf_counter()
        futures = [(b, stage_task.submit(b, *args, run.path)) for b in batches]
        done = []
        for batch, future in futures:
            try:
                results = future.result()
            except Exception as exc:  # the whole task failed (e.g. a worker died): every unit of it
                results = [exc] * len(batch)
            for member, result in zip(batch, results):
                entry, template = unit_of(member)
                if isinstance(result, Exception):
                    fail(name, unit_id(entry.source_id, template), entry, result)
                else:
                    done.append(((entry, template), result))
        timings[name] = time.perf_counter() - t0
        return sorted(done, key=lambda d: unit_id(d[0][0].source_id, d[0][1]))

    ingested = stage("ingest", ingest_task, entries, source_dir)
    write_jsonl(run.sub("sources.jsonl"), [record for _, record in ingested])
    sources = {e.source_id: record for e, record in ingested}

    # Images without a main subject (donor backgrounds and objects) are sources, not units to ground.
    grounder = build_grounder(prof.grounder, prof.device).load()
    to_ground = [e for e, _ in ingested if e.subject]
    grounded = stage("ground", ground_task, to_ground, lambda e: sources[e.source_id], grounder, list(used.values()))
    groundings = {e.source_id: g for e, g in grounded}

    skipped = {t.id: f"edit kind {t.edit_kind.value} needs an instruction editor; profile '{prof.name}' has none"
               for t in used.values() if t.edit_kind.value == "direct_alteration" and prof.editor is None}
    writer = build_writer(prof.llm)
    units = [(e, t) for e, _ in grounded for t in used.values() if t.id not in skipped]
    candidates = stage("candidate", candidate_task, units, lambda u: sources[u[0].source_id],
                       lambda u: groundings[u[0].source_id], writer, all_templates, seed)

    # Step two: masks and edits. One model stage at a time (models are built once and shared by the threads).
    by_unit = {unit_id(e.source_id, t): record for (e, t), record in candidates}
    donors = [record["stored"] for e, record in ingested if not e.subject]
    models = {"segmenter": build_segmenter(prof.segmenter, prof.device).load(),
              "inpainter": build_inpainter(prof.inpainter, prof.device, prof.dtype).load(),
              "editor": build_editor(prof.editor, prof.device, prof.dtype)}
    edit_units = [EditUnit(t, by_unit[unit_id(e.source_id, t)], sources[e.source_id], groundings[e.source_id]) for (e, t), _ in candidates]
    batches = plan_batches(edit_units, {"inpainter": prof.inpainter.batch_size,
                                        "editor": prof.editor.batch_size if prof.editor else 1})
    entry_of = {unit_id(e.source_id, t): (e, t) for (e, t), _ in candidates}
    edited = batch_stage("edit", edit_batch_task, batches, lambda u: entry_of[u.name], models, donors, seed, prof.device)

    if prof.release_models_between_stages:
        for model in models.values():
            getattr(model, "unload", lambda: None)()

    # Quality gates, then items: one file per question, named by its stable id.
    t0 = time.perf_counter()
    passed = []
    for (entry, template), edit in edited:
        unit = unit_id(entry.source_id, template)
        natural, manipulated = (load_rgb(run.sub(edit["pair"][k]["path"])) for k in ("natural", "manipulated"))
        mask = np.asarray(load_rgb(run.sub(edit["pair"]["mask"]["path"])))[..., 0] > 127 if edit["pair"]["mask"] else None
        reason = gate_pair(natural, manipulated, mask, prof.gates)
        if reason:
            run.quarantine(unit, "gates", "QualityGate", reason, file=entry.file_name)
            failures["gates: QualityGate"] += 1
            continue
        # Hash what the edit changed: whole-image hashes of small edits on one photo all look alike.
        change = Image.fromarray(np.abs(np.asarray(manipulated, np.int16) - np.asarray(natural, np.int16)).astype(np.uint8))
        passed.append((unit, entry, edit, phash(change)))
    dupes = near_duplicates([(u, h) for u, _, _, h in passed], prof.gates.min_phash_distance)
    items = []
    for unit, entry, edit, _ in passed:
        if unit in dupes:
            run.quarantine(unit, "gates", "NearDuplicate", f"manipulated image nearly duplicates {dupes[unit]}'s", file=entry.file_name)
            failures["gates: NearDuplicate"] += 1
            continue
        for item in build_items(by_unit[unit], edit):
            run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
            items.append(item)
    timings["gates"] = time.perf_counter() - t0

    quarantine = run.gather_quarantine()
    per_category = Counter(record["category"]["low"] for _, record in candidates)
    summary = {
        "flow": "mvp",
        "profile": prof.name,
        "backends": prof.backend_names(),
        "seed": seed,
        "counts": {"sources": len(entries), "ingested": len(ingested), "grounded": len(grounded),
                   "candidates": len(candidates), "edited": len(edited), "pairs": len(passed) - len(dupes), "items": len(items),
                   "quarantined": len(quarantine)},
        "items_per_category_level": dict(sorted(Counter(f"{i.category.low}/{getattr(i.question, 'level', '')}" for i in items).items())),
        "candidates_per_category": dict(sorted(per_category.items())),
        "skipped_categories": skipped,
        "failures": dict(sorted(failures.items())),
        "token_use": {name: {"requests": u.requests, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
                      for name, u in (("grounder", _usage(grounder)), ("llm", _usage(writer))) if u is not None},
        "wall_time_s": {k: round(v, 3) for k, v in timings.items()},
    }
    run.write_summary(summary)
    summary["report"] = write_report(run)
    return summary
