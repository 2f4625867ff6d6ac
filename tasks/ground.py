"""Ground: caption, main subject, regions and attribute answers for each source image with a subject."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.backends.loaded import ModelSpec, obtain
from perceptforge.data.schema import Grounding, IngestedSource
from perceptforge.logic.templates import Template
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir, safe_name
from perceptforge.store.sources import SourceEntry
from perceptforge.tasks.runner import StageRunner, Unit, transient, unit_record


class GroundUnit(NamedTuple):
    entry: SourceEntry
    source: IngestedSource


@task(name="ground", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=10, retry_condition_fn=transient)
def ground(unit: GroundUnit, grounder: ModelSpec, used: list[Template], run_path: Path) -> Grounding | Exception:
    entry, source = unit
    run = RunDir(run_path)
    model = obtain(grounder)
    return unit_record(
        run,
        f"groundings/{safe_name(entry.source_id)}.json",
        lambda: model.ground(load_rgb(run.sub(source.stored)), entry, used),
        Grounding,
        exclude_none=False,  # the records it has always written
    )


def ground_stage(
    runner: StageRunner,
    sources: dict[str, tuple[SourceEntry, IngestedSource]],
    grounder: ModelSpec,
    used: list[Template],
) -> dict[str, Grounding]:
    """source id → grounding. Images without a main subject (donor scenes and objects) are not grounded."""
    units = [Unit(f"source-{sid}", e.file_name, GroundUnit(e, s)) for sid, (e, s) in sources.items() if e.subject]
    return {
        u.value.entry.source_id: g
        for u, g in runner.map("ground", ground, units, grounder=grounder, used=used, models=[grounder])
    }
