"""Where a run's tasks execute, as the stage runner needs to know it: the flow's own threads (Prefect's
``ThreadPoolTaskRunner``), or the worker processes of a Dask cluster (prefect-dask's ``DaskTaskRunner``: a local
one the run starts, or an existing one at ``--dask-address``).

The engine answers four questions: how many tasks run at once (chunk sizes follow it), how to run a function in
every process that runs tasks (model release, the models' own reports), how a stage's declared ``Resources``
become the engine's (Dask worker resources: ``GPU=1`` per model-stage task on a GPU run), and whether every worker
sees the run directory (workers on other machines need it on a shared file system).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perceptforge.backends.loaded import process_id
from perceptforge.errors import InputError, PerceptforgeError

# Dask worker resource a model-stage task holds on a GPU run; workers offer it (`dask worker --resources GPU=1`).
GPU = "GPU"


@dataclass(frozen=True)
class Resources:
    """What one task of a stage needs: accelerators (one per model stage on a GPU run) and memory (GiB)."""

    gpus: int = 0
    memory_gb: float = 0.0

    def for_dask(self, device: str) -> dict[str, float]:
        """Dask worker resources: a GPU only when the run is on one (on the CPU every worker serves every stage);
        memory only when declared."""
        out: dict[str, float] = {}
        if self.gpus and device != "cpu":
            out[GPU] = self.gpus
        if self.memory_gb:
            out["MEMORY"] = self.memory_gb * 2**30
        return out


CPU_STAGE = Resources()
MODEL_STAGE = Resources(gpus=1)


class ClusterLost(PerceptforgeError):
    """The Dask cluster stopped serving the run (no worker left, or its scheduler gone): nothing is quarantined for
    it, and the same command on a working cluster resumes."""


def scheduler_lost(where: str, address: str) -> ClusterLost:
    return ClusterLost(
        f"{where}: the Dask scheduler at {address} stopped answering; start a scheduler and its workers and run the "
        "same command again to resume"
    )


class Engine:
    """The threads runner: every task runs in this process."""

    name = "threads"

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)

    def everywhere(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """``fn(*args)`` in every process that runs this run's tasks, by process."""
        return {process_id(): fn(*args)}

    def placed(self, resources: Resources, device: str) -> contextlib.AbstractContextManager:
        """Where a stage's tasks may run (submissions inside the context); threads share this process's device."""
        return contextlib.nullcontext()

    def check_shared(self, run_path: Path) -> None:
        """Workers see the run directory (trivially, in this process)."""

    def check_resources(self, resources: Resources, device: str, stage: str) -> None:
        """Some worker offers what the stage's tasks need (threads: this process has it)."""

    def result(self, future: Any, stage: str) -> Any:
        """A submitted task's result: in this process a task ends or fails by itself, so it is waited for."""
        return future.result()

    def check_alive(self, where: str, tries: int = 3) -> None:
        """Raises ``ClusterLost`` when what runs the tasks is gone (this process is not)."""

    @contextlib.contextmanager
    def watching(self, where: str) -> Iterator[None]:
        """A stage's submissions and waits: a fault that comes from a lost cluster is said as that, in one line."""
        try:
            yield
        except PerceptforgeError:
            raise
        except Exception:
            self.check_alive(where)
            raise


class _LostConnection(logging.Filter):
    """The Dask client logs every failed reconnect to a lost scheduler with its traceback; the run says it in one
    line instead (``DaskEngine.check_alive``). Other records of these loggers pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, OSError | asyncio.CancelledError | TimeoutError)


# the loggers of the Dask client's own connection handling, which log a lost scheduler's errors
DASK_CONNECTION_LOGGERS = (
    "distributed.client",
    "distributed.core",
    "distributed.comm",
    "distributed.batched",
    "asyncio",  # "Future exception was never retrieved" from the client's event loop
)


class DaskEngine(Engine):
    """A Dask cluster's worker processes (prefect-dask): each loads its models once (``backends/loaded``)."""

    name = "dask"
    # A task waits for a worker as long as the scheduler has none, and the Dask client retries a lost scheduler
    # for as long as it is told: the run would hang. How long each may last before the run stops in one line
    # (a worker restarted within the grace picks the tasks up; the seconds are a restart's, not a task's).
    poll_s = 2.0
    scheduler_grace_s = 10.0
    workers_grace_s = 30.0

    def __init__(self, client: Any):
        self.client = client
        super().__init__(sum(client.nthreads().values()))
        for name in DASK_CONNECTION_LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, _LostConnection) for f in logger.filters):
                logger.addFilter(_LostConnection())

    def everywhere(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        # a lost scheduler: the client would retry it for 30 s, then end in a traceback
        with self.watching("between stages"):
            self.check_alive("between stages", tries=1)
            # the flow's own process too: it may have loaded a model to plan batch sizes
            here = {process_id(): fn(*args)}
            return here | {f"{worker}": value for worker, value in self.client.run(fn, *args).items()}

    def placed(self, resources: Resources, device: str) -> contextlib.AbstractContextManager:
        needed = resources.for_dask(device)
        if not needed:
            return contextlib.nullcontext()
        import dask

        return dask.annotate(resources=needed)

    def check_resources(self, resources: Resources, device: str, stage: str) -> None:
        needed = resources.for_dask(device)
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        offered = [
            w for w, info in workers.items() if all(info.get("resources", {}).get(k, 0) >= v for k, v in needed.items())
        ]
        if needed and not offered:
            wanted = " ".join(f"{k}={v:g}" for k, v in needed.items())
            raise InputError(
                "--runner dask",
                f"stage {stage} needs {wanted} per task on this {device} run and no Dask worker offers it: start "
                f"workers with `dask worker <scheduler> --resources {wanted}` (one per GPU, CUDA_VISIBLE_DEVICES set)",
            )

    def result(self, future: Any, stage: str) -> Any:
        """The task's result, waited for in short steps; between them the cluster is looked at, and a scheduler
        that stopped answering or a cluster without a worker past its grace stops the run (``ClusterLost``)."""
        wrapped = future.wrapped_future
        lost: dict[str, float] = {}
        while not wrapped.done():
            try:
                wrapped.result(timeout=self.poll_s)
            except Exception:  # not done within the step (a task's own failure is read below, by Prefect)
                pass
            if not wrapped.done():
                self._watch(stage, lost)
        return future.result()

    def check_alive(self, where: str, tries: int = 3) -> None:
        """A scheduler killed resets its connections a moment before it stops listening: one answer after a fault
        does not prove it alive, so a fault's check asks ``tries`` times, half a second apart."""
        address = self.client.scheduler.address
        for attempt in range(tries):
            if attempt:
                time.sleep(0.5)
            if answers(address):
                continue
            raise scheduler_lost(where, address)

    def _watch(self, stage: str, lost: dict[str, float]) -> None:
        """Stops the run when the scheduler has not answered, or has had no worker, for longer than its grace;
        ``lost``: since when each has been so."""
        now, address = time.monotonic(), self.client.scheduler.address
        if not answers(address):
            since = lost.setdefault("scheduler", now)
            if now - since >= self.scheduler_grace_s:
                raise scheduler_lost(f"stage {stage}", address)
            return
        lost.pop("scheduler", None)
        if self.client.scheduler_info(n_workers=-1).get("workers"):
            lost.pop("workers", None)
            return
        since = lost.setdefault("workers", now)
        if now - since >= self.workers_grace_s:
            raise ClusterLost(
                f"stage {stage}: no Dask worker left on {address} for {self.workers_grace_s:g} s; start workers "
                f"(`dask worker {address}`) and run the same command again to resume"
            )

    def check_shared(self, run_path: Path) -> None:
        """Each worker reads a marker the flow wrote in the run directory and writes one back; a worker that
        cannot is named in one line (its tasks would fail on every unit)."""
        folder = run_path / "cache" / "shared-check"
        folder.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(8)
        marker = folder / f"flow-{token}"
        marker.write_text(token)
        try:
            answers = self.client.run(_see_marker, str(marker), token)
            problems = {w: why for w, why in answers.items() if why}
            for worker in answers:
                if not problems.get(worker) and not (folder / f"worker-{token}-{_safe(worker)}").is_file():
                    problems[worker] = "wrote its marker, but the flow cannot see it"
        finally:
            for path in folder.glob(f"*{token}*"):
                path.unlink(missing_ok=True)
        if problems:
            worker, why = sorted(problems.items())[0]
            raise InputError(
                str(run_path),
                f"the run directory is not shared with Dask worker {worker} ({why}); every worker must see it at "
                "the same path (a shared file system: README, Scale-out)",
            )


def _safe(worker: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in worker)


def _see_marker(marker: str, token: str, dask_worker: Any = None) -> str | None:
    """On a worker: read the flow's marker, write this worker's beside it; what went wrong, or None."""
    path = Path(marker)
    try:
        if path.read_text() != token:
            return f"{marker} holds another run's marker"
        name = _safe(dask_worker.address if dask_worker is not None else process_id())
        (path.parent / f"worker-{token}-{name}").write_text(token)
    except OSError as exc:
        return f"{marker}: {exc.strerror or exc}"
    return None


def engine_of(task_runner: Any) -> Engine:
    """The engine behind a flow run's task runner."""
    if type(task_runner).__name__ == "DaskTaskRunner":
        return DaskEngine(task_runner.client)
    return Engine(getattr(task_runner, "_max_workers", None) or 1)


def visible_gpus(device: str) -> int:
    """CUDA devices this process sees, for a GPU run (0 on the CPU)."""
    if device == "cpu":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def local_cluster(n_workers: int, gpus: int = 0, asynchronous: bool = False) -> Any:
    """A local Dask cluster of ``n_workers`` worker processes, one thread each, on 127.0.0.1. On a GPU run each
    worker sees one device (``CUDA_VISIBLE_DEVICES``; workers beyond the GPUs share them round-robin) and offers
    ``GPU=1``, so model-stage tasks spread one per GPU and CPU stages hold none. Workers never start a Prefect
    server of their own: they report to the flow's API."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {}
    for i in range(n_workers):
        env = {"PREFECT_SERVER_EPHEMERAL_ENABLED": "false"}
        options: dict[str, Any] = {"nthreads": 1, "host": "127.0.0.1", "env": env, "dashboard": False}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(i % gpus)
            options["resources"] = {GPU: 1}
        workers[f"worker-{i}"] = {"cls": Nanny, "options": options}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler, asynchronous=asynchronous, name="perceptforge")


def scheduler_host_port(address: str) -> tuple[str, int] | None:
    """The host and port a TCP Dask address names (``tcp://10.0.0.5:8786``, ``10.0.0.5:8786``, ``tls://…``); None
    for a transport this cannot dial by itself (``inproc://``, ``ucx://``). A malformed one is one line."""
    scheme, sep, rest = address.strip().partition("://")
    if not sep:
        scheme, rest = "tcp", address.strip()
    if scheme not in ("tcp", "tls"):
        return None
    host, _, port = rest.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError("--dask-address", f"{address!r} is not a scheduler address: e.g. tcp://10.0.0.5:8786")
    return host, int(port)


def answers(address: str, timeout_s: float = 2.0) -> bool:
    """Whether a TCP connection to the scheduler at ``address`` is taken within ``timeout_s``."""
    target = scheduler_host_port(address)
    if target is None:  # not a TCP address (inproc://): it lives in this process
        return True
    try:
        with socket.create_connection(target, timeout=timeout_s):
            return True
    except OSError:
        return False


def check_scheduler(address: str, timeout_s: float = 10.0) -> None:
    """A scheduler answers at ``address`` (a TCP connection is taken), before the flow starts: the Dask client
    would otherwise try for its own timeout and end in a traceback of dozens of lines."""
    target = scheduler_host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise InputError(
            "--dask-address", f"no Dask scheduler answers at {address} ({why} within {timeout_s:g} s): is it running?"
        ) from None
