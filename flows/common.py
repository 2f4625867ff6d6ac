"""What the construction flows share around their stages: the run directory's identity and preparation, the
run's recorded settings, the task runner, and the MVP templates and renderable values."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from perceptforge.configs.profile import Profile, load_profile
from perceptforge.data.schema import EditKind, Rendering
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.fileio import atomic_write_text, sha256_file, write_json
from perceptforge.logic import renderings
from perceptforge.logic.templates import Template, templates
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry

log = logging.getLogger("perceptforge")


def task_runner(executor: str = "threads", max_workers: int = 2, dask_address: str | None = None, gpus: int = 0) -> Any:
    """Threads on one machine (the default: fastest for 2-core boxes), or Dask: a local cluster of ``max_workers``
    worker processes (on a GPU run one device each: ``tasks/engine.local_cluster``), or an existing one at
    ``dask_address`` (tcp://host:8786) whose workers see the run directory (README, Scale-out)."""
    if executor == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner  # here: the CLI's --help stays quick

        return ThreadPoolTaskRunner(max_workers=max_workers)
    if executor == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise PerceptforgeError("--runner dask needs prefect-dask: pip install 'perceptforge[scale]'") from None
        if dask_address:
            return DaskTaskRunner(address=dask_address)
        from perceptforge.tasks.engine import local_cluster

        # the runner calls cluster_class(**cluster_kwargs); its annotation names the zero-argument case only
        return DaskTaskRunner(
            cluster_class=local_cluster,  # type: ignore[arg-type]
            cluster_kwargs={"n_workers": max_workers, "gpus": gpus},
        )
    raise PerceptforgeError(f"unknown runner {executor!r}: threads or dask")


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
    none can): instruction edits go to the editor, every other kind to the mask editors. A value two
    categories making the same change could both draw stays with the narrower one (``renderings.apart``), judged
    over every discovered category, so a category's draws do not depend on which others a run asks for."""
    every = {**templates(), **used}
    offers, skipped = {}, {}
    for t in every.values():
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
    kept = {tid: renderings.apart(tid, offers, every) for tid in used if tid in offers}
    return kept, {tid: why for tid, why in skipped.items() if tid in used}


def profile_and_seed(profile: str, seed: int | None) -> tuple[Profile, int]:
    """The profile, and the run's seed: the one given, else the profile's."""
    prof = load_profile(profile)
    seed = prof.seed if seed is None else seed
    if seed < 0:
        raise InputError("--seed", f"must be 0 or more, got {seed}")
    return prof, seed


def sources_digest(source_dir: Path, annotation_file: str, entries: list[SourceEntry]) -> str:
    """The annotation file's bytes and each image's name and size: what a run was built from."""
    h = hashlib.sha256((source_dir / annotation_file).read_bytes())
    for e in sorted(entries, key=lambda e: e.source_id):
        path = source_dir / e.file_name
        h.update(f"\n{e.source_id}\t{e.file_name}\t{path.stat().st_size if path.is_file() else -1}".encode())
    return h.hexdigest()


def profile_digest(prof: Profile) -> str:
    """The resolved profile's hash: a run made with other settings is another run."""
    return hashlib.sha256(json.dumps(prof.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()


def identity_conflict(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """What makes ``new`` another run than ``old``; None when resume can serve it (the same, or only more
    categories or a larger ``--limit``: the items already made stay right)."""
    differs = []
    for key in ("flow", "profile", "seed", "sources", "variants"):  # variants: the BLINK-style flow's
        if old.get(key) != new.get(key):
            differs.append(f"{key} {old.get(key)!r} → {new.get(key)!r}" if key == "seed" else key)
    if not set(old.get("categories", [])) <= set(new["categories"]):
        differs.append(f"categories {old.get('categories')} → {new['categories']}")
    old_limit, new_limit = old.get("limit"), new["limit"]
    if new_limit is not None and (old_limit is None or new_limit < old_limit):
        differs.append(f"limit {old_limit} → {new_limit}")
    return ", ".join(differs) or None


# What a run writes at the top of its directory, whatever the family (a family's own folders: Family.run_folders).
RUN_LAYOUT = frozenset(
    {
        "run.json", "profile.yaml", "templates.json", "summary.json", "report.html", "sources.jsonl",
        "quarantine.jsonl", "decisions.jsonl", "quarantine", "images", "cache", "items", "groundings", "ideas",
        "candidates", "masks", "edits", "gates", "perception", "drafts", "display", "checks", "verification",
        "authoring", "annotation", "sources",
    }
)  # fmt: skip
IDENTITY_KEYS = ("flow", "profile", "seed", "sources", "categories")


def read_identity(marker: Path) -> dict[str, Any] | None:
    """A run's identity from its ``run.json``; None when there is none, an error when the file is not one."""
    if not marker.is_file():
        return None
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        record = None
    if not isinstance(record, dict) or not all(k in record for k in IDENTITY_KEYS):
        raise InputError(
            str(marker.parent),
            f"holds a run.json that is not a perceptforge run's (it needs {', '.join(IDENTITY_KEYS)}): choose "
            "another --out; nothing was removed",
        )
    return record


def prepare_run(
    out: Path, identity: dict[str, Any], fresh: bool = False, check_only: bool = False, own: tuple[str, ...] = ()
) -> RunDir:
    """The run directory for ``identity``, created if need be. A directory that holds another run stops
    here with one line naming what differs, unless ``fresh``: then what a run writes there (``RUN_LAYOUT`` and the
    family's ``own`` folders) is removed, each removal said, and anything else is kept. Only a directory whose
    ``run.json`` is a run's identity is ever cleared. ``check_only``: the checks alone, nothing written (the CLI
    runs them before it starts the flow)."""
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "--out is a file, not a directory")
    run = RunDir(out.resolve())
    marker = run.sub("run.json")
    previous = read_identity(marker)
    if out.is_dir() and any(out.iterdir()):
        if previous is None:
            raise InputError(str(out), "is not empty and holds no run (run.json): choose another --out")
        conflict = identity_conflict(previous, identity)
        if conflict and not fresh:
            raise InputError(str(out), f"holds another run ({conflict}): give another --out, or --fresh to start over")
        if fresh and not check_only:
            clear_run(out, RUN_LAYOUT | set(own))
        elif not check_only:
            remove_orphans(out, RUN_LAYOUT | set(own))
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(str(out), f"cannot create or write the run directory ({existing} is not a writable folder)")
    if not check_only:
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_json(marker, identity)
        except OSError as exc:
            raise InputError(str(out), f"cannot create or write the run directory: {exc.strerror}") from None
    return run


def remove_orphans(out: Path, written: set[str] | frozenset[str], older_than_s: float = 60.0) -> list[Path]:
    """The temporary files a killed run left (``fileio.atomic_file``'s ``.<name>.<random>.tmp``), removed on resume.
    Only those untouched for ``older_than_s``: a write in flight renames its file within moments."""
    now = time.time()
    found = list(out.glob(".*.tmp")) + [
        p for name in sorted(written) if (out / name).is_dir() for p in (out / name).rglob(".*.tmp")
    ]
    removed = sorted(p for p in found if p.is_file() and now - p.stat().st_mtime > older_than_s)
    for path in removed:
        path.unlink(missing_ok=True)
    if removed:
        log.warning("resume: removed %d temporary file(s) an interrupted run left", len(removed))
    return removed


def clear_run(out: Path, written: set[str] | frozenset[str]) -> None:
    """Remove what a run wrote in ``out`` (the ``written`` names), saying what goes and what stays."""
    removed, kept = [], []
    for child in sorted(out.iterdir()):
        if child.name not in written:
            kept.append(child.name)
            continue
        folder = child.is_dir() and not child.is_symlink()
        shutil.rmtree(child) if folder else child.unlink()
        removed.append(child.name + ("/" if folder else ""))
    log.warning("--fresh: removed the earlier run's %s", ", ".join(removed) or "nothing")
    if kept:
        log.warning("--fresh: kept what no run writes: %s", ", ".join(kept))


def record_profile(run: RunDir, prof: Profile) -> None:
    """``profile.yaml``: the resolved profile (no secrets: only environment-variable names)."""
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_text(run.sub("profile.yaml"), yaml.safe_dump(prof.model_dump(mode="json"), sort_keys=True))


def record_run_settings(run: RunDir, prof: Profile, used: dict[str, Template]) -> None:
    """``profile.yaml`` and ``templates.json`` (template and prompt versions)."""
    record_profile(run, prof)
    write_json(
        run.sub("templates.json"),
        {
            tid: {"version": t.version, "prompts": [load_prompt(p).ref() for p in t.prompt_ids()]}
            for tid, t in used.items()
        },
    )


def is_export_manifest(manifest: Any) -> bool:
    """Whether a parsed ``manifest.json`` is one a perceptforge export wrote (every family's lists its files)."""
    return isinstance(manifest, dict) and isinstance(manifest.get("files"), dict | list)


def check_export_out(out: Path, run_dir: Path, family: str) -> None:
    """``export --out`` treated as ``run --out`` is: one line, before anything is written, when the folder is a file,
    is the run directory or inside it, or holds anything but a previous export of the same family (its
    ``manifest.json`` says so). An export writes fixed names (``val.jsonl``, ``README.md``, ``images/``…), so any
    other folder could have a user's file of that name overwritten; and an export into the run directory or the
    source folder would mix the split into what the next run reads. Nothing is removed here."""
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "--out is a file, not a folder: give a new or empty folder for the export")
    target, run = out.resolve(), run_dir.resolve()
    if target == run or target.is_relative_to(run):
        raise InputError(str(out), f"--out is inside the run directory {run_dir}: give a folder outside it")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if (out / "run.json").exists():
        raise InputError(str(out), "--out holds a run (run.json): give a new or empty folder for the export")
    is_export, previous = previous_export(out)
    if not is_export:
        raise InputError(
            str(out),
            "--out is not empty and holds no export (manifest.json): give a new or empty folder; nothing was written",
        )
    if previous is not None and previous != family:  # an export made before the marker: its family is not known
        raise InputError(
            str(out),
            f"--out holds a {previous} export, and this is a {family} run: give another folder; nothing was written",
        )


# Written first by every `perceptforge export` (its family's name): an export killed before its manifest.json was
# written is still known as one, so the same command may finish it, where a user's own folder is refused.
EXPORT_MARKER = ".perceptforge-export"


def previous_export(out: Path) -> tuple[bool, str | None]:
    """(whether ``out`` holds an export: a manifest an export wrote, or the marker of one killed before it; the
    family that made it, from the marker, or None when no marker says)."""
    manifest, marker = out / "manifest.json", out / EXPORT_MARKER
    family = None
    try:
        if marker.is_file():
            family = marker.read_text(encoding="utf-8").strip() or None
        is_export = family is not None or (
            manifest.is_file() and is_export_manifest(json.loads(manifest.read_text(encoding="utf-8")))
        )
    except (ValueError, UnicodeDecodeError):
        return False, None
    return is_export, family


def begin_export(out: Path, family: str) -> None:
    """The folder, made, and its marker (after ``check_export_out``)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / EXPORT_MARKER, family + "\n")


def recorded_sources(run_dir: Path) -> dict[str, str]:
    """source id → the SHA-256 of the source file's bytes as the run's ingest read them (``sources.jsonl``: every
    family's ingest records it); empty for a run that has not finished its ingest."""
    path = run_dir / "sources.jsonl"
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:  # a record the run did not write whole: nothing to compare with
            continue
        sid, digest = rec.get("id", rec.get("source_id")), rec.get("sha256")
        if isinstance(digest, str) and sid is not None:
            out[str(sid)] = digest
    return out


def changed_sources(run_dir: Path, source_dir: Path, entries: list[SourceEntry]) -> list[tuple[str, str, str | None]]:
    """The sources a resume would read with other bytes than the run already built from: (file name, the SHA-256
    recorded, the file's now or None when it is gone), in id order. The run's identity holds the annotation file's
    bytes and each image's name and size only (hashing every photo would not tell a resume from a new run
    faster); a photo edited in place (same size) must not leave its old items beside the new ones."""
    recorded = recorded_sources(run_dir)
    changed = []
    for entry in sorted(entries, key=lambda e: e.source_id):
        before = recorded.get(entry.source_id)
        if before is None:
            continue
        path = source_dir / entry.file_name
        try:
            now: str | None = sha256_file(path) if path.is_file() else None
        except OSError:
            now = None
        if now != before:
            changed.append((entry.file_name, before, now))
    return changed


def refuse_changed_sources(run_dir: Path, source_dir: Path, entries: list[SourceEntry]) -> None:
    """One line naming the first source that changed since the run read it (and how many others), before
    anything runs; ``--fresh`` starts the run over instead."""
    changed = changed_sources(run_dir, source_dir, entries)
    if not changed:
        return
    name, before, now = changed[0]
    what = (
        f"is gone (the run read it, sha256 {before[:12]}…)"
        if now is None
        else (f"changed since the run in {run_dir} read it (sha256 {before[:12]}… → {now[:12]}…)")
    )
    others = f", as did {len(changed) - 1} other source(s)" if len(changed) > 1 else ""
    raise InputError(
        str(source_dir / name),
        f"{what}{others}: the run's items were built from the old bytes; restore the file, or give --fresh to "
        "start the run over",
    )
