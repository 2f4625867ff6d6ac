"""Human verification of a BLINK-style run (``run blink``: ``items/<id>.json`` as ``PerceptionItem``) in
Label Studio, with sync.py's push and pull machinery: one project per BLINK task (the ``perception_mcq``
config, its image slots cut to the task's items), tasks keyed by item id, two annotators per item, the same
decision rules (decisions.decide; only the answer letter can be corrected) and the same layout::

    RUN_DIR/annotation/projects.json          project id per BLINK task (no credentials)
    RUN_DIR/verification/decisions.jsonl      one decision per item, by task then item id: its project and task,
                                              each verdict, reason and corrected answer with its annotator
    RUN_DIR/verification/items/<id>.json      kept items, verified; a corrected one as its next version, its
                                              lineage naming the item it corrects and the decisions file
    RUN_DIR/verification/summary.json         counts per status and task, agreement (also in summary.json)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from perceptforge.annotation.decisions import decide, perception_corrected, perception_corrections
from perceptforge.annotation.labeling import config_text, controls, perception_config
from perceptforge.annotation.labelstudio import LabelStudio
from perceptforge.annotation.sync import (
    REQUIRED_ANNOTATORS,
    decide_projects,
    project_title,
    push_groups,
    push_lock,
    pushed_projects,
    write_verification,
)
from perceptforge.annotation.task_data import perception_task
from perceptforge.data.schema import PerceptionItem
from perceptforge.outputs.blink_export import load_perception_items
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir

KIND = "perception_mcq"


def image_slots(items: list[PerceptionItem]) -> int:
    return max(len(i.images) for i in items)


def project_settings(run: RunDir, task: str, items: list[PerceptionItem]) -> dict:
    return {
        "title": project_title(run, task),
        "description": f"perceptforge BLINK-style {task} items from {run.path.resolve()}",
        "label_config": perception_config(image_slots(items)),
        "expert_instruction": load_prompt("annotation/perception_instructions").text,
        "show_instruction": True,
        "maximum_annotations": REQUIRED_ANNOTATORS,
        "overlap_cohort_percentage": 100,
        "show_collab_predictions": True,
        "sampling": "Sequential sampling",
    }


def push(
    run_dir: Path,
    ls: LabelStudio,
    document_root: Path,
    chunk_size: int = 100,
    on_chunk: Callable[[int], None] | None = None,
) -> dict:
    """Create or update one project per BLINK task and import the items it does not have yet (idempotent)."""
    with push_lock(run_dir, ls, document_root) as run:
        by_task: dict[str, list[PerceptionItem]] = defaultdict(list)
        for item in load_perception_items(run.path):
            by_task[item.task].append(item)
        slots = {task: image_slots(items) for task, items in by_task.items()}
        return push_groups(
            run,
            ls,
            by_task,
            lambda task, items: project_settings(run, task, items),
            lambda item: perception_task(item, run, document_root, slots[item.task]),
            chunk_size,
            on_chunk,
        )


def pull(run_dir: Path, ls: LabelStudio) -> dict:
    """Decide every pushed item from its annotations; write decisions, kept items and agreement per task.
    Everything is rebuilt from the server's export and the run's items, so pulling twice writes the same bytes."""
    run = RunDir(Path(run_dir).resolve())
    known = pushed_projects(run, ls)
    config = controls(config_text(KIND))
    decided = decide_projects(
        run,
        ls,
        known,
        {i.id: i for i in load_perception_items(run.path)},
        lambda task, item, annotations, names, required=REQUIRED_ANNOTATORS: decide(
            item,
            annotations,
            config,
            required,
            names,
            kind=item.task,
            changes_of=perception_corrections,
            apply=perception_corrected,
        ),
    )
    return write_verification(run, decided)
