"""Gates: checks a pair must pass before annotators see it (``logic/gates.py`` holds the measurements)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.configs.profile import Gates
from perceptforge.data.schema import EditRecord
from perceptforge.logic.gates import check_pair, near_duplicates, phash
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir
from perceptforge.tasks.runner import StageRunner, Unit


class QualityGate(ValueError):
    """The pair failed a quality gate; the message says which and by how much."""


class NearDuplicate(ValueError):
    """The pair's change nearly duplicates another unit's."""


@task(name="gate", cache_policy=NO_CACHE)
def gate(edit: EditRecord, gates: Gates, run_path: Path) -> int:
    """The perceptual hash of what the edit changed, if the pair passes; else QualityGate with the reason."""
    run = RunDir(run_path)
    natural, manipulated = (load_rgb(run.sub(ref.path)) for ref in (edit.pair.natural, edit.pair.manipulated))
    mask = run.load_mask(edit.pair.mask.path) if edit.pair.mask else None
    reason = check_pair(natural, manipulated, mask, gates)
    if reason:
        raise QualityGate(reason)
    # Hash what the edit changed: whole-image hashes of small edits on one photo all look alike.
    change = np.abs(np.asarray(manipulated, np.int16) - np.asarray(natural, np.int16)).astype(np.uint8)
    return phash(Image.fromarray(change))


def gates_stage(
    runner: StageRunner, edits: list[tuple[Unit, EditRecord]], gates: Gates
) -> list[tuple[Unit, EditRecord]]:
    """The edits that pass every gate, in unit order; the others are quarantined with the gate's reason."""
    passed = runner.map("gates", gate, [Unit(u.name, u.file, e) for u, e in edits], gates)
    dupes = near_duplicates([(u.name, h) for u, h in passed], gates.min_phash_distance)
    for u, _ in passed:
        if u.name in dupes:
            runner.quarantine("gates", u, NearDuplicate(f"manipulated image nearly duplicates {dupes[u.name]}'s"))
    return [(u, u.value) for u, _ in passed if u.name not in dupes]
