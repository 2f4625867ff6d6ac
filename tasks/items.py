"""Items: one benchmark item per question of a unit that passed the gates, with full lineage."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.data.schema import BenchmarkItem, Candidate, EditRecord
from perceptforge.logic.items import build_items
from perceptforge.store.rundir import RunDir
from perceptforge.tasks.runner import StageRunner, Unit


class ItemsUnit(NamedTuple):
    candidate: Candidate
    edit: EditRecord


@task(name="items", cache_policy=NO_CACHE)
def write_items(unit: ItemsUnit, run_path: Path) -> list[BenchmarkItem] | OSError:
    run = RunDir(run_path)
    items = build_items(*unit)
    try:
        for item in items:
            run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
    except OSError as exc:  # a full disk: the runner stops the run with one line
        return exc
    return items


def items_stage(
    runner: StageRunner, passed: list[tuple[Unit, EditRecord]], candidates: dict[str, Candidate]
) -> list[BenchmarkItem]:
    units = [Unit(u.name, u.file, ItemsUnit(candidates[u.name], e)) for u, e in passed]
    return [item for _, items in runner.map("items", write_items, units) for item in items]
