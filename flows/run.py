"""The one run path of every family: plan, then the flow on the profile's task runner, then the summary.

``run_family`` is what ``perceptforge run <family>`` calls, and what the deployments' flow (``deployed_run``)
calls too, so a deployment plans first and honours the profile's runner like the command line does. The
construction flow itself (``construct``) is one Prefect flow named after the family: it prepares the run
directory (``run.json``, ``profile.yaml``, ``cache/``), runs the family's stages on the shared stage runner,
and writes one summary whatever the family.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.context import FlowRunContext, TaskRunContext

from perceptforge.backends import hub, loaded
from perceptforge.backends.devices import resolve_device
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.flows.common import prepare_run, record_profile, task_runner
from perceptforge.flows.family import Family, RunPlan, RunRequest, StagesResult
from perceptforge.flows.registry import family as family_named
from perceptforge.tasks.engine import ClusterLost, check_scheduler, engine_of, visible_gpus
from perceptforge.tasks.runner import STOP, StageRunner, out_of_room_stops, signals_taken, stops_on_signals


class _PrintedByTheCli(logging.Filter):
    """Prefect logs a failed flow's traceback. An input error or a stopped run (a full disk) is printed by the
    CLI as one line instead; real faults keep their traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        # an interrupted run: the chunks it stopped and the flow fail, and the CLI's line says why and what next
        return not isinstance(exc, PerceptforgeError) and not (STOP.is_set() and record.levelno >= logging.ERROR)


def runner_for(fam: Family, plan: RunPlan, request: RunRequest) -> Any:
    """The profile's task runner (``--runner`` / ``--dask-address`` override it): threads or Dask, its workers (threads:
    enough for the endpoints in flight; cut to the memory budget for the largest source) and Dask address."""
    prof = plan.inputs.profile
    executor = choose_executor(request.runner, request.dask_address, prof.runner.kind)
    workers = prof.thread_workers() if executor == "threads" else prof.runner.max_workers
    workers = prof.workers_within_memory(workers, fam.largest_image(plan))
    gpus = visible_gpus(resolve_device(prof.device)) if executor == "dask" else 0
    address = request.dask_address or prof.runner.dask_address
    if executor == "dask" and address:
        check_scheduler(address)
    return task_runner(executor, workers, address, gpus)


def choose_executor(runner: str | None, dask_address: str | None, profile_kind: str) -> str:
    """The runner a run uses: ``--runner``, else the Dask runner when ``--dask-address`` names a scheduler (the
    address means nothing to threads, and a run that silently ignored it was a run on one machine the user
    thought was spread over a cluster), else the profile's. ``--runner`` other than dask with an address is one
    line: the two options contradict each other."""
    if runner is not None and runner not in ("threads", "dask"):
        raise InputError("--runner", f"unknown runner {runner!r}: threads or dask")
    if dask_address is not None:
        if not dask_address.strip():
            raise InputError("--dask-address", "is empty: give a scheduler's address, e.g. tcp://10.0.0.5:8786")
        if runner not in (None, "dask"):
            raise InputError(
                "--dask-address",
                f"names a Dask scheduler, but --runner {runner} was given: drop --runner (the address implies "
                "--runner dask) or drop --dask-address",
            )
        return "dask"
    return runner or profile_kind


@contextlib.contextmanager
def one_prefect_api(runner: Any) -> Iterator[None]:
    """Every process of the run reports to one Prefect API. Without ``PREFECT_API_URL``, Prefect starts a temporary
    server in the first process that asks, and under Dask every worker process would start its own on the same
    database (they timed out, and units were lost). So the flow's process starts it before the flow, and the flow's
    settings, which prefect-dask hands to every task on a worker, name it; workers may not start one."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, temporary_settings

    if type(runner).__name__ == "ThreadPoolTaskRunner" or PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()
    with temporary_settings({PREFECT_API_URL: server.api_url, PREFECT_SERVER_EPHEMERAL_ENABLED: False}):
        yield


def run_family(fam: Family, request: RunRequest) -> dict:
    """Plan (each input problem one line, nothing written), then the family's flow on the profile's runner."""
    plan = fam.plan(request)
    fam.check_run(plan)
    hub.require_present(plan.inputs.profile, request.profile)
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).addFilter(_PrintedByTheCli())
    runner = runner_for(fam, plan, request)
    construct_flow = construct.with_options(name=fam.name, task_runner=runner)
    STOP.clear()  # an earlier run in this process that was interrupted
    _PLANNED[fam.name] = (request, plan)  # the flow runs in this process: it takes this plan, not a second one
    try:
        with one_prefect_api(runner):
            return construct_flow(family=fam.name, request=request)
    finally:
        _PLANNED.pop(fam.name, None)


# family → (the request, its plan) that run_family made and its flow, in this process, is about to run
_PLANNED: dict[str, tuple[RunRequest, RunPlan]] = {}


def planned(fam: Family, request: RunRequest) -> RunPlan:
    """The plan ``run_family`` made for this request, or (a flow started some other way) a new one."""
    handed = _PLANNED.get(fam.name)
    if handed is not None and handed[0] == request:
        return handed[1]
    return fam.plan(request)


def runner_in_use() -> dict[str, Any]:
    """The flow run's task runner as the summary records it (what the profile and options chose)."""
    ctx = FlowRunContext.get()
    runner = ctx.task_runner if ctx else None
    return {
        "kind": type(runner).__name__,
        "max_workers": getattr(runner, "_max_workers", None),
        "cluster_kwargs": getattr(runner, "cluster_kwargs", None),
        "address": getattr(runner, "address", None),
    }


def summary_of(fam: Family, plan: RunPlan, runner: StageRunner, result: StagesResult) -> dict:
    """The run's ``summary.json``, the same frame for every family: its own figures between."""
    return {
        "flow": fam.name,
        "profile": plan.inputs.profile.name,
        "seed": plan.inputs.seed,
        "runner": runner_in_use(),
        **result.figures,
        "counts": result.counts | {"quarantined": len(runner.run.gather_quarantine())},
        "failures": dict(sorted(runner.failures.items())),
        "wall_time_s": {k: round(v, 3) for k, v in runner.timings.items()},
        # how the work was spread: task runs and units per stage, the largest task's arguments, model loads per process
        "engine": {"kind": runner.engine.name, "workers": runner.engine.workers, **runner.figures()},
    }


class _InARun(logging.Filter):
    """Only records made inside a flow or task run: the API handler has no run to file the others under."""

    def filter(self, record: logging.LogRecord) -> bool:
        return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def logs_to_prefect() -> None:
    """The ``perceptforge`` logger's lines (quarantine and --fresh warnings, each stage's progress) also go to the
    flow run's logs, which the Prefect UI shows: Prefect sends its own loggers' records only. Once per process."""
    from prefect.logging.handlers import APILogHandler

    logger = logging.getLogger("perceptforge")
    if any(isinstance(h, APILogHandler) for h in logger.handlers):
        return
    handler = APILogHandler()
    handler.setLevel(logging.INFO)
    handler.addFilter(_InARun())
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:  # stage lines are INFO; the terminal still shows WARNING only
        logger.setLevel(logging.INFO)


@flow(name="construct")
def construct(family: str, request: RunRequest) -> dict:
    """Build a family's items as ``request`` asks (``run_family`` names this flow after the family and gives it
    the profile's task runner)."""
    # Prefect's flow engine puts its own SIGTERM handler in place for the flow (it would let the running chunks
    # build every unit they hold, then kill the process without a word): the command line's is put back over it.
    with stops_on_signals() if signals_taken() else contextlib.nullcontext():
        return _construct(family, request)


def _construct(family: str, request: RunRequest) -> dict:
    logs_to_prefect()
    fam = family_named(family)
    plan = planned(fam, request)
    with out_of_room_stops(plan.inputs.out, "before its first stage"):
        run = prepare_run(plan.inputs.out, plan.identity, plan.fresh, own=fam.run_folders)
        record_profile(run, plan.inputs.profile)  # push, pull and export read the run's own settings
    prof = plan.inputs.profile
    runtime = prof.runtime(cache_dir=run.path / "cache")
    ctx = FlowRunContext.get()
    engine = engine_of(ctx.task_runner if ctx else None)
    engine.check_shared(run.path)
    stage_runner = StageRunner(
        run,
        release_models=prof.release_models_between_stages,
        chunk_size=prof.runner.chunk_size,
        max_task_bytes=prof.runner.max_task_kb * 1024,
        engine=engine,
        device=runtime.device,
    )
    try:
        result = fam.stages(plan, run, stage_runner, runtime)
        summary = summary_of(fam, plan, stage_runner, result)
    finally:  # the run's models leave every worker with the run (a long-lived cluster serves other runs)
        with contextlib.suppress(ClusterLost):  # a lost cluster's workers went with it; the run's own error stands
            engine.everywhere(loaded.finish, runtime.cache_dir)
    with out_of_room_stops(run.path, "after its last stage, writing the summary and report"):
        run.write_summary(summary)
        stage_runner.publish(fam.name, summary, result.per_category)
        summary["report"] = str(fam.write_report(run))
    return summary


@flow(name="perceptforge-run")
def deployed_run(family: str, request: RunRequest) -> dict:
    """A deployment's run: the same request as `perceptforge run <family>` takes, whole (prefect.yaml gives its
    fields under ``request``), and the same path (plan first, the profile's runner, the family's flow as a
    subflow)."""
    return run_family(family_named(family), request)


def run(family: str, source: str | Path, out: str | Path, **given: Any) -> dict:
    """``run_family`` from Python (tests, notebooks): ``categories`` or ``tasks`` select, the family's own
    options by name (``prompt_variants``), the rest as ``RunRequest`` fields."""
    fam = family_named(family)
    select = given.pop("categories", None) or given.pop("tasks", None)
    options = {k: str(given.pop(k)) for k in list(given) if k in fam.options and given[k] is not None}
    for k in fam.options:
        given.pop(k, None)
    return run_family(fam, RunRequest(str(source), str(out), select=select, options=options, **given))
