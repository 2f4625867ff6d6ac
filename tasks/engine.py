"""Where a run's tasks execute, as the stage runner needs to know it: the flow's own threads (Prefect's
``ThreadPoolTaskRunner``), or the worker processes of a Dask cluster (prefect-dask's ``DaskTaskRunner``: a local
one the run starts, or an existing one at ``--dask-address``).

The engine answers four questions: how many tasks run at once (chunk sizes follow it), how to run a function in
every process that runs tasks (model release, the models' own reports), how a stage's declared ``Resources``
become the engine's (Dask worker resources: ``GPU=1`` per model-stage task on a GPU run), and whether every worker
sees the run directory (workers on other machines need it on a shared file system).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perceptforge.backends.loaded import process_id
from perceptforge.errors import InputError

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


class DaskEngine(Engine):
    """A Dask cluster's worker processes (prefect-dask): each loads its models once (``backends/loaded``)."""

    name = "dask"

    def __init__(self, client: Any):
        self.client = client
        super().__init__(sum(client.nthreads().values()))

    def everywhere(self, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        # the flow's own process too: it may have loaded a model to plan batch sizes
        return {process_id(): fn(*args)} | {f"{worker}": value for worker, value in self.client.run(fn, *args).items()}

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


def check_scheduler(address: str, timeout_s: float = 10.0) -> None:
    """A scheduler answers at ``address`` (a TCP connection is taken), before the flow starts: the Dask client
    would otherwise try for its own timeout and end in a traceback of dozens of lines."""
    import socket

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
