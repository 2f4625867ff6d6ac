"""What every construction flow does around its stages: choose templates and sources, record the run's
settings, pick the task runner, and write the summary (with its Prefect artifacts)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml
from prefect.task_runners import ThreadPoolTaskRunner

from perceptforge.configs.profile import Profile
from perceptforge.data.schema import BenchmarkItem, Candidate, EditKind, Rendering
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.fileio import atomic_write_text, write_json
from perceptforge.logic import renderings
from perceptforge.logic.templates import Template, templates
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry
from perceptforge.tasks.runner import StageRunner, Unit


def task_runner(kind: str = "threads", max_workers: int = 2, dask_address: str | None = None) -> Any:
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
        return DaskTaskRunner(
            cluster_kwargs={
                "n_workers": max_workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
            }
        )
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


def renderable_values(
    used: dict[str, Template], prof: Profile, mask_editors: list[Any], editor: Any
) -> tuple[dict[str, list[Rendering]], dict[str, str]]:
    """(template id → the values the profile's edit backends declare they can render, template id → why
    none can): instruction edits go to the editor, every other kind to the mask editors."""
    offers, skipped = {}, {}
    for t in used.values():
        backends = ([editor] if editor else []) if t.edit_kind == EditKind.DIRECT else mask_editors
        if not backends:
            skipped[t.id] = f"edit kind {t.edit_kind.value} needs an instruction editor; profile '{prof.name}' has none"
            continue
        declared = [
            b.renderings(t) if hasattr(b, "renderings") else ([], f"{b.name} does not declare what it can render")
            for b in backends
        ]
        values = renderings.merge([v for v, _ in declared])
        if values:
            offers[t.id] = values
        else:
            skipped[t.id] = "; ".join(why for _, why in declared)
    return offers, skipped


def select_entries(entries: list[SourceEntry], limit: int | None) -> list[SourceEntry]:
    """Sorted by id; ``limit`` counts images with a main subject (the units); donor scenes always come."""
    entries = sorted(entries, key=lambda e: e.source_id)
    if limit is None:
        return entries
    subjects = [e for e in entries if e.subject][:limit]
    return sorted(subjects + [e for e in entries if not e.subject], key=lambda e: e.source_id)


def record_run_settings(run: RunDir, prof: Profile, used: dict[str, Template]) -> None:
    """``profile.yaml`` (resolved, no secrets) and ``templates.json`` (template and prompt versions)."""
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.sub("profile.yaml"), yaml.safe_dump(prof.model_dump(mode="json"), sort_keys=True))
    write_json(
        run.sub("templates.json"),
        {
            tid: {"version": t.version, "prompts": [load_prompt(p).ref() for p in t.prompt_ids()]}
            for tid, t in used.items()
        },
    )


def summarise(
    flow: str,
    prof: Profile,
    seed: int,
    runner: StageRunner,
    skipped: dict[str, str],
    counts: dict[str, int],
    items: list[BenchmarkItem],
    candidates: list[tuple[Unit, Candidate]],
    clients: dict[str, Any],
) -> dict:
    """The run's ``summary.json`` (also published as Prefect artifacts)."""
    quarantine = runner.run.gather_quarantine()
    per_level = Counter(f"{i.category.low}/{getattr(i.question, 'level', '')}" for i in items)
    usage = {name: getattr(getattr(c, "client", None), "usage", None) for name, c in clients.items()}
    summary: dict[str, Any] = {
        "flow": flow,
        "profile": prof.name,
        "backends": prof.backend_names(),
        "seed": seed,
        "counts": counts | {"quarantined": len(quarantine)},
        "items_per_category_level": dict(sorted(per_level.items())),
        "candidates_per_category": dict(sorted(Counter(c.category.low for _, c in candidates).items())),
        "skipped_categories": skipped,
        "failures": dict(sorted(runner.failures.items())),
        "token_use": {
            name: {"requests": u.requests, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens}
            for name, u in usage.items()
            if u is not None
        },
        "wall_time_s": {k: round(v, 3) for k, v in runner.timings.items()},
    }
    runner.run.write_summary(summary)
    runner.publish(flow, summary, summary["items_per_category_level"])
    return summary
