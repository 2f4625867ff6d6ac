"""The one stage runner every construction flow uses.

A flow hands it a stage (a Prefect task over one unit, or over one planned batch) and its units; the runner
submits one Prefect task per *chunk* of units (``runner.chunk_size``, and never fewer chunks than tasks can run at
once), so a run of 100k photos makes thousands of task runs, not millions. Inside a chunk each unit runs on its
own: its result or its exception comes back alone, so resume (one file per finished unit, ``RunDir.once``),
quarantine (a failed unit with its reason; a task *returns* the exception for what is expected — a source without
what a category changes, a gate's verdict — and raises for faults) and progress stay per unit.

Models never ride in a task's arguments: a model stage passes ``ModelSpec``s and each worker process loads them
once (``backends/loaded``). A stage declares the ``Resources`` its tasks need, which the engine maps to its own
(``tasks/engine``). A chunk that fails outside its units (a worker died, the Prefect API is unreachable) stops the
run in one line: no unit is quarantined for what was not its fault. The runner also times each stage, frees the
stage's models when the profile asks, counts task runs and measures what each task's arguments weigh, and
publishes the run's summary as Prefect artifacts.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import pickle
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Generic, TypeVar

import cloudpickle
from prefect import Task, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
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

from perceptforge.backends import loaded
from perceptforge.backends.chat import EndpointUnavailable
from perceptforge.backends.loaded import ModelSpec
from perceptforge.errors import Interrupted, PerceptforgeError
from perceptforge.store.rundir import RunDir
from perceptforge.tasks.engine import CPU_STAGE, ClusterLost, Engine, Resources

log = logging.getLogger("perceptforge")
# Out of space, or the folder turned read-only: every later write fails too, so the run stops at once.
_STOPS_THE_RUN = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


# Set when the run is asked to stop (SIGTERM, SIGINT; ``stops_on_signals``): chunks running in this process start
# no further unit, so the run ends after the units in progress. Dask workers are other processes: the flow's
# client is closed instead.
STOP = threading.Event()
# How long a stop may take (the units in progress finishing, Prefect's teardown) before the process ends at once:
# a unit stuck in a long model call must not keep a user's Ctrl-C waiting. Every file is whole either way.
GRACE_S = 10.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_requested() -> bool:
    """Whether this process's run was asked to stop. A function, so that a chunk task shipped to a Dask worker by
    value names it (by reference) rather than carrying ``STOP``, whose lock does not pickle; on a worker it is
    that process's own flag."""
    return STOP.is_set()


@contextlib.contextmanager
def stops_on_signals(grace_s: float | None = None) -> Iterator[None]:
    """SIGTERM and SIGINT stop the run: ``STOP`` is set and ``Interrupted`` raised in the main thread (the flow
    fails with it, and the CLI prints its one line); if the process has not ended ``grace_s`` later, or a second
    signal comes, it ends at once (the Prefect server it started stopped first). Installed by the CLI around the
    run and again inside the flow, over Prefect's own SIGTERM handler (which would kill the process without a
    word once the running chunks finished every unit they hold). Nothing outside the main thread can take
    signals, so there it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wait = GRACE_S if grace_s is None else grace_s

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if STOP.is_set():
            end_at_once(Interrupted(signum, name, at_once=True))
        STOP.set()
        timer = threading.Timer(wait, end_at_once, (Interrupted(signum, name, at_once=True),))
        timer.daemon = True
        timer.start()
        WATCHDOGS.append(timer)
        raise Interrupted(signum, name)

    previous = {s: signal.getsignal(s) for s in _STOP_SIGNALS}
    for s in _STOP_SIGNALS:
        signal.signal(s, handler)
    _TAKEN.append(True)
    try:
        yield
    finally:
        _TAKEN.pop()
        for s, h in previous.items():
            signal.signal(s, h)


_TAKEN: list[bool] = []  # one entry per stops_on_signals in force
WATCHDOGS: list[threading.Timer] = []  # the timers a stop started (a test in one process cancels them)


def signals_taken() -> bool:
    """Whether the command line took SIGTERM and SIGINT for this run (``stops_on_signals``); a deployment's run
    leaves them to Prefect, whose runner cancels a flow run by SIGTERM."""
    return bool(_TAKEN)


def end_at_once(why: Interrupted) -> None:
    """The process ends now, with ``why``'s line and exit status: the Prefect servers it started are stopped first
    (an orphaned one would hold the run's output pipe for minutes); files are whole, being written by rename."""
    with contextlib.suppress(Exception):
        from prefect.server.api.server import SubprocessASGIServer

        for server in list(SubprocessASGIServer._instances.values()):
            server.stop()
    with contextlib.suppress(Exception):
        sys.stderr.write(f"error: {why}\n")
        sys.stderr.flush()
    os._exit(why.exit_status)


class RunStopped(PerceptforgeError):
    """The run cannot go on (the disk is full, or the engine failed); rerunning the same command resumes it."""


def stop_if_out_of_room(exc: BaseException, where: str | os.PathLike, when: str) -> None:
    """A full disk (or a folder turned read-only) stops the run in one line: where, why, and that running the same
    command again resumes. Every later write would fail too, so no unit is quarantined for it."""
    if isinstance(exc, OSError) and exc.errno in _STOPS_THE_RUN:
        raise RunStopped(
            f"{exc.filename or where}: {exc.strerror} — the run stopped {when}; make room and run the same command "
            "again to resume"
        ) from None


@contextlib.contextmanager
def out_of_room_stops(where: str | os.PathLike, when: str) -> Iterator[None]:
    """``stop_if_out_of_room`` around the writes a flow makes outside its stages (run identity, summary, report)."""
    try:
        yield
    except OSError as exc:
        stop_if_out_of_room(exc, where, when)
        raise


class UnitFault(Exception):
    """A unit's exception that cannot cross a process boundary as itself: its type's name, message and traceback."""

    def __init__(self, error_type: str, message: str, detail: str = ""):
        super().__init__(message)
        self.error_type, self.detail = error_type, detail

    def __reduce__(self) -> tuple:
        return (UnitFault, (self.error_type, str(self), self.detail))


class TransientUnits(PerceptforgeError):
    """Some units of a chunk met an endpoint that may recover: Prefect retries the chunk (finished units are read
    back from their files); ``results`` are every unit's, for when the retries run out. An input-kind error, so
    Prefect's log of the failed attempt is one line, not a traceback."""

    def __init__(self, results: list):
        super().__init__(
            f"{sum(isinstance(r, EndpointUnavailable) for r in results)} unit(s) met an unavailable endpoint"
        )
        self.results = results

    def __reduce__(self) -> tuple:
        return (TransientUnits, (self.results,))


U = TypeVar("U")


def transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry a chunk only when an endpoint failed in a way that may pass."""
    return isinstance(state.result(raise_on_failure=False), TransientUnits | EndpointUnavailable)


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


def portable(exc: Exception, fault: bool = False) -> Exception:
    """``exc`` as it may cross to another process: itself when it pickles back, else a UnitFault with its type,
    message and evidence. A fault (raised, not returned) keeps its traceback for the quarantine record."""
    detail = "".join(traceback.format_exception(exc)) if fault else ""
    try:
        back = pickle.loads(pickle.dumps(exc))
        if type(back) is type(exc) and str(back) == str(exc):
            if detail:
                back.traceback = detail  # type: ignore[attr-defined]
            return back
    except Exception:
        pass
    twin = UnitFault(type(exc).__name__, str(exc), detail)
    for key in ("raw", "measurements", "evidence"):
        if hasattr(exc, key):
            setattr(twin, key, getattr(exc, key))
    return twin


def _call(fn: Callable[..., Any], value: Any, run_path: Path, inputs: dict[str, Any]) -> Any:
    try:
        result = fn(value, run_path=run_path, **inputs)
    except Exception as exc:  # a fault of this unit alone
        return portable(exc, fault=True)
    return portable(result) if isinstance(result, Exception) else result


def resolve(stage_fn: str | Callable[..., Any]) -> Callable[..., Any]:
    """A stage's function from its ``module:name`` (a Prefect task's own function), or the function itself."""
    if not isinstance(stage_fn, str):
        return stage_fn
    module, _, name = stage_fn.partition(":")
    found = getattr(import_module(module), name)
    return found.fn if isinstance(found, Task) else found


def reference(stage: Task | Callable[..., Any]) -> str | Callable[..., Any]:
    """What a chunk task is told to run: ``module:name`` when that finds the stage again in another process
    (a few bytes), else the function itself."""
    fn = stage.fn if isinstance(stage, Task) else stage
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    try:
        if module and "." not in name and resolve(f"{module}:{name}") is fn:
            return f"{module}:{name}"
    except Exception:
        pass
    return fn


@task(name="chunk", cache_policy=NO_CACHE)
def run_chunk(
    stage_fn: str | Callable[..., Any], values: list[Any], batched: bool, run_path: Path, inputs: dict[str, Any]
) -> list[Any]:
    """Every unit of a chunk (or every planned batch of it, when ``batched``): one result or exception per unit."""
    fn = resolve(stage_fn)
    results: list[Any] = []
    for value in values:
        if stop_requested():  # the run was interrupted: no new unit (those done are on disk; resume reads them back)
            raise RunStopped("the run was interrupted before this chunk's remaining units")
        if not batched:
            results.append(_call(fn, value, run_path, inputs))
            continue
        out = _call(fn, value, run_path, inputs)
        results.extend(
            [out] * len(value)
            if isinstance(out, Exception)
            else [portable(r) if isinstance(r, Exception) else r for r in out]
        )
    if any(isinstance(r, EndpointUnavailable) for r in results):
        raise TransientUnits(results)
    return results


def chunked(items: Sequence[Any], size: int, weight: Callable[[Any], int] = lambda _: 1) -> list[list[Any]]:
    """``items`` in order, cut into chunks of about ``size`` units (``weight``: units per item; never split)."""
    chunks: list[list[Any]] = []
    load = 0
    for item in items:
        if not chunks or load + weight(item) > size and chunks[-1]:
            chunks.append([])
            load = 0
        chunks[-1].append(item)
        load += weight(item)
    return chunks


def chunk_size(units: int, most: int, workers: int) -> int:
    """Units per chunk: at most ``most``, and small enough that every worker gets one while units last."""
    return max(1, min(most, math.ceil(units / max(1, workers))))


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
    chunk_size: int = 24
    max_task_bytes: int = 96 * 1024
    engine: Engine = field(default_factory=Engine)
    device: str = "cpu"
    timings: dict[str, float] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    task_runs: Counter[str] = field(default_factory=Counter)
    units_run: Counter[str] = field(default_factory=Counter)
    largest_task_bytes: dict[str, int] = field(default_factory=dict)
    console: Console = field(default_factory=lambda: Console(stderr=True))

    def quarantine(self, stage: str, unit: Unit, exc: BaseException) -> None:
        stop_if_out_of_room(exc, self.run.path, f"at stage {stage}")
        extra = {k: getattr(exc, k) for k in ("raw", "measurements", "traceback") if hasattr(exc, k)}
        extra |= getattr(exc, "evidence", {})  # run-relative paths of what shows the failure (a rejected mask)
        error_type = exc.error_type if isinstance(exc, UnitFault) else type(exc).__name__
        if isinstance(exc, UnitFault) and exc.detail:
            extra["traceback"] = exc.detail
        self.run.quarantine(unit.name, stage, error_type, str(exc), file=unit.file, **extra)
        self.failures[f"{stage}: {error_type}"] += 1
        log.warning("%s: %s quarantined: %s: %s", stage, unit.name, error_type, exc)

    def map(
        self,
        stage: str,
        task: Task | Callable[..., Any],
        units: Sequence[Unit],
        *,
        models: Iterable[ModelSpec | None] = (),
        resources: Resources = CPU_STAGE,
        **inputs: Any,
    ) -> list[tuple[Unit, Any]]:
        """``task(unit.value, **inputs, run_path=…)`` for every unit, in chunks; (unit, result) of those that
        succeeded, in unit order. Inputs go by name, so each reaches the task parameter that says what it is."""
        size = chunk_size(len(units), self.chunk_size, self.engine.workers)
        return self._run(stage, task, [[u] for u in units], size, False, models, resources, inputs)

    def map_batches(
        self,
        stage: str,
        task: Task | Callable[..., Any],
        batches: Sequence[Sequence[Unit]],
        *,
        models: Iterable[ModelSpec | None] = (),
        resources: Resources = CPU_STAGE,
        **inputs: Any,
    ) -> list[tuple[Unit, Any]]:
        """Like :meth:`map` for a task that takes a planned batch of unit values and returns one result or
        exception each; a chunk holds whole batches."""
        size = chunk_size(sum(len(b) for b in batches), self.chunk_size, self.engine.workers)
        done = self._run(stage, task, [list(b) for b in batches], size, True, models, resources, inputs)
        return sorted(done, key=lambda d: d[0].name)

    def _run(
        self,
        stage: str,
        task: Task | Callable[..., Any],
        groups: list[list[Unit]],
        size: int,
        batched: bool,
        models: Iterable[ModelSpec | None],
        resources: Resources,
        inputs: dict[str, Any],
    ) -> list[tuple[Unit, Any]]:
        self.timings[stage] = -time.perf_counter()
        chunks = chunked(groups, size, weight=len)
        chunk_task = run_chunk.with_options(
            name=stage,
            retries=getattr(task, "retries", 0) or 0,
            retry_delay_seconds=getattr(task, "retry_delay_seconds", 0) or 0,
            retry_condition_fn=transient,
        )
        stage_fn = reference(task)
        with self.engine.watching(f"stage {stage}"):
            if chunks:
                self.engine.check_resources(resources, self.device, stage)
            with self.engine.placed(resources, self.device):
                submitted = self._submit(stage, chunk_task, stage_fn, chunks, batched, inputs)
            done = self._wait(stage, submitted)
            self._end(stage, models)
        return done

    def _submit(
        self, stage: str, chunk_task: Any, stage_fn: Any, chunks: list, batched: bool, inputs: dict[str, Any]
    ) -> list[tuple[list[Unit], Any]]:
        """Each chunk's task, submitted: (its units, its future)."""
        submitted = []
        for whole in chunks:
            for chunk, values, size in self._fit(whole, batched, stage_fn, inputs):
                self.largest_task_bytes[stage] = max(size, self.largest_task_bytes.get(stage, 0))
                future = chunk_task.submit(stage_fn, values, batched, self.run.path, inputs)
                submitted.append(([u for g in chunk for u in g], future))
        self.task_runs[stage] += len(submitted)
        return submitted

    def _wait(self, stage: str, submitted: list[tuple[list[Unit], Any]]) -> list[tuple[Unit, Any]]:
        """Each task's units settled as their results come: done, or quarantined with their reason."""
        done: list[tuple[Unit, Any]] = []
        with _StageProgress(self.console, stage, sum(len(us) for us, _ in submitted)) as advance:
            for chunk_units, future in submitted:
                try:
                    results = self.engine.result(future, stage)
                except TransientUnits as exc:  # retries spent: each unit's own outcome
                    results = exc.results
                except (Interrupted, ClusterLost):  # the CLI's one line, not a failed task's
                    raise
                except Exception as exc:
                    self.engine.check_alive(
                        f"stage {stage}"
                    )  # a task lost with its cluster: that, not the task, is said
                    raise RunStopped(
                        f"stage {stage}: a task failed outside its units ({type(exc).__name__}: {exc}); nothing was "
                        "quarantined for it — fix the cause and run the same command again to resume"
                    ) from exc
                for unit, result in zip(chunk_units, results):
                    self._settle(stage, unit, result, done)
                advance(len(chunk_units))
        self.units_run[stage] += sum(len(us) for us, _ in submitted)
        return done

    def _fit(
        self, chunk: list[list[Unit]], batched: bool, stage_fn: Any, inputs: dict[str, Any]
    ) -> list[tuple[list[list[Unit]], list[Any], int]]:
        """(chunk, its task's unit values, their serialised size): halved until each task's arguments (what a Dask
        submission ships) fit ``max_task_bytes``, or it holds one unit or batch."""
        values = [[u.value for u in g] if batched else g[0].value for g in chunk]
        size = len(cloudpickle.dumps((stage_fn, values, inputs)))
        if size <= self.max_task_bytes or len(chunk) == 1:
            return [(chunk, values, size)]
        half = len(chunk) // 2
        return self._fit(chunk[:half], batched, stage_fn, inputs) + self._fit(chunk[half:], batched, stage_fn, inputs)

    def _settle(self, stage: str, unit: Unit, result: Any, done: list[tuple[Unit, Any]]) -> None:
        """A unit's result: an exception (raised, a fault; or returned, an expected failure) is quarantined;
        anything else is done, and drops the quarantine record an earlier attempt left."""
        if isinstance(result, Exception):
            self.quarantine(stage, unit, result)
        else:
            self.run.clear_quarantine(unit.name)
            done.append((unit, result))

    def _end(self, stage: str, models: Iterable[ModelSpec | None]) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter()
        keys = [m.key for m in models if isinstance(m, ModelSpec)]
        if self.release_models and keys:
            self.engine.everywhere(loaded.release, keys)

    def model_reports(self) -> dict[str, Any]:
        """What the run's models report of their work (``stats()``, token usage), every process's merged, by label."""
        reports = self.engine.everywhere(loaded.process_report, self.run.path / "cache")
        return loaded.merge_reports(list(reports.values()))

    def figures(self) -> dict[str, Any]:
        """For the summary: task runs and units per stage, the largest task's arguments, models loaded where."""
        return {
            "task_runs": dict(self.task_runs),
            "units_run": dict(self.units_run),
            "largest_task_bytes": dict(self.largest_task_bytes),
            "model_loads": loaded.loads(self.run.path / "cache"),
        }

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

    def __enter__(self) -> Callable[[int], None]:
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

    def advance(self, units: int = 1) -> None:
        self.done += units
        if self.progress is not None:
            self.progress.advance(self.task_id, units)

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
        else:
            log.info("%s: %d/%d units", self.stage, self.done, self.total)
