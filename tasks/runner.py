"""The one stage runner every construction flow uses.

A flow hands it a stage (a Prefect task) and its units; the runner submits one task per unit (or per
batch), collects the results in unit order, quarantines a failed unit with its reason instead of failing
the run (a task *returns* the exception for what is expected — a source without what a category changes,
a gate's verdict — so Prefect logs no error for it; it raises for faults), shows a progress bar per
stage, times each stage, frees the stage's models when the profile asks, and publishes the run's summary
as Prefect artifacts. Resume is the tasks' own business: each writes one file per finished unit through
``RunDir.once``, so a rerun skips what is done.
"""

from __future__ import annotations

import errno
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from prefect import Task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.context import FlowRunContext
from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from perceptforge.backends.chat import EndpointUnavailable
from perceptforge.errors import PerceptforgeError
from perceptforge.store.rundir import RunDir

log = logging.getLogger("perceptforge")
# Out of space, or the folder turned read-only: every later write fails too, so the run stops at once.
_STOPS_THE_RUN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


class RunStopped(PerceptforgeError):
    """The run cannot go on (the disk is full); rerunning the same command resumes it."""


U = TypeVar("U")


def transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry a task only when its endpoint failed in a way that may pass."""
    return isinstance(state.result(raise_on_failure=False), EndpointUnavailable)


R = TypeVar("R", bound=BaseModel)


def unit_record(
    run: RunDir, rel: str, compute: Callable[[], BaseModel], model: type[R], exclude_none: bool = True
) -> R | Exception:
    """The unit's record at ``rel``, computed and written once; or the expected failure, *returned* so the
    runner quarantines it in one line (a ValueError: the source lacks what the stage needs; an OSError: a
    full disk, which stops the run). Faults of other kinds still raise."""
    try:
        record = run.once(rel, lambda: compute().model_dump(mode="json", exclude_none=exclude_none))
    except (ValueError, OSError) as exc:
        return exc
    return model.model_validate(record)


@dataclass(frozen=True)
class Unit(Generic[U]):
    """One unit of a stage: its stable name (also its quarantine file), the source file it comes from, and
    what the stage's task takes."""

    name: str
    file: str
    value: U


@dataclass
class StageRunner:
    run: RunDir
    release_models: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    console: Console = field(default_factory=lambda: Console(stderr=True))

    def quarantine(self, stage: str, unit: Unit, exc: BaseException) -> None:
        if isinstance(exc, OSError) and exc.errno in _STOPS_THE_RUN:
            where = exc.filename or self.run.path
            raise RunStopped(
                f"{where}: {exc.strerror} — the run stopped at stage {stage}; make room and run the same "
                "command again to resume"
            )
        extra = {k: getattr(exc, k) for k in ("raw", "measurements") if hasattr(exc, k)}
        extra |= getattr(exc, "evidence", {})  # run-relative paths of what shows the failure (a rejected mask)
        self.run.quarantine(unit.name, stage, type(exc).__name__, str(exc), file=unit.file, **extra)
        self.failures[f"{stage}: {type(exc).__name__}"] += 1
        log.warning("%s: %s quarantined: %s: %s", stage, unit.name, type(exc).__name__, exc)

    def map(
        self, stage: str, task: Task, units: Sequence[Unit], *, models: Iterable[Any] = (), **inputs: Any
    ) -> list[tuple[Unit, Any]]:
        """One ``task(unit.value, **inputs, run_path=…)`` per unit; (unit, result) of those that succeeded, in
        unit order. Inputs go by name, so each reaches the task parameter that says what it is."""
        self.timings[stage] = -time.perf_counter()
        futures = [(u, task.submit(u.value, run_path=self.run.path, **inputs)) for u in units]
        done: list[tuple[Unit, Any]] = []
        with _StageProgress(self.console, stage, len(futures)) as advance:
            for unit, future in futures:
                try:
                    result = future.result()
                except Exception as exc:
                    result = exc
                self._settle(stage, unit, result, done)
                advance()
        self._end(stage, models)
        return done

    def map_batches(
        self,
        stage: str,
        task: Task,
        batches: Sequence[Sequence[Unit]],
        *,
        models: Iterable[Any] = (),
        **inputs: Any,
    ) -> list[tuple[Unit, Any]]:
        """Like :meth:`map` for a task that takes a batch of unit values and returns one result or exception each."""
        self.timings[stage] = -time.perf_counter()
        futures = [(b, task.submit([u.value for u in b], run_path=self.run.path, **inputs)) for b in batches]
        done: list[tuple[Unit, Any]] = []
        with _StageProgress(self.console, stage, sum(len(b) for b in batches)) as advance:
            for batch, future in futures:
                try:
                    results = future.result()
                except Exception as exc:  # the whole task failed (a worker died): every unit of it
                    results = [exc] * len(batch)
                for unit, result in zip(batch, results):
                    self._settle(stage, unit, result, done)
                    advance()
        self._end(stage, models)
        return sorted(done, key=lambda d: d[0].name)

    def _settle(self, stage: str, unit: Unit, result: Any, done: list[tuple[Unit, Any]]) -> None:
        """A unit's result: an exception (raised, a fault; or returned, an expected failure) is quarantined;
        anything else is done, and drops the quarantine record an earlier attempt left."""
        if isinstance(result, Exception):
            self.quarantine(stage, unit, result)
        else:
            self.run.clear_quarantine(unit.name)
            done.append((unit, result))

    def _end(self, stage: str, models: Iterable[Any]) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter()
        if self.release_models:
            for model in models:
                if model is not None and hasattr(model, "unload"):
                    model.unload()

    def publish(self, flow: str, summary: dict, per_category: dict[str, int]) -> None:
        """The run's counts, failures and per-category table as artifacts of the flow run (Prefect UI)."""
        if FlowRunContext.get() is None:
            return
        rows = [{"stage": k, "count": v} for k, v in summary["counts"].items()]
        rows += [{"stage": f"quarantined · {k}", "count": v} for k, v in summary["failures"].items()]
        create_table_artifact(rows, key=f"{flow}-summary", description=f"{flow} run in {self.run.path}")
        create_table_artifact(
            [{"category": k, "items": v} for k, v in per_category.items()],
            key=f"{flow}-categories",
            description="items per category and level",
        )
        skipped = "\n".join(f"- **{k}**: {v}" for k, v in summary.get("skipped_categories", {}).items())
        create_markdown_artifact(f"# {flow} run\n\n`{self.run.path}`\n\n{skipped}", key=f"{flow}-run")


class _Rate(ProgressColumn):
    def render(self, task: Any) -> Text:
        return Text(f"{task.speed:.1f}/s" if task.speed else "–/s")


class _StageProgress:
    """A rich progress bar for one stage (done / total, rate, ETA) on a terminal; one log line otherwise."""

    def __init__(self, console: Console, stage: str, total: int):
        self.console, self.stage, self.total, self.done = console, stage, total, 0
        self.progress: Progress | None = None

    def __enter__(self) -> Callable[[], None]:
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn(f"[bold]{self.stage:<10}"),
                BarColumn(),
                MofNCompleteColumn(),
                _Rate(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self.progress.start()
            self.task_id = self.progress.add_task(self.stage, total=self.total)
        return self.advance

    def advance(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress.advance(self.task_id)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
        else:
            log.info("%s: %d/%d units", self.stage, self.done, self.total)
