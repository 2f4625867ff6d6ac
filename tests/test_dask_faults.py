"""A Dask cluster that fails under a run, as a maintainer's does: a real `dask scheduler` and two `dask worker`
processes on 127.0.0.1, the `perceptforge` command against them. All workers killed mid-run, then the scheduler
killed mid-run: one line each, within 60 s, nothing quarantined for it; the same command on a fresh cluster
finishes the run with files byte-identical to an uninterrupted one (the threads runner's, same options); and
two runs in a row on one long-lived cluster both have their task runs in Prefect's API."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("prefect_dask")

from helpers import perceptforge_cmd  # noqa: E402


class Cluster:
    """A scheduler and its workers, each its own process (what `dask scheduler` / `dask worker` start)."""

    def __init__(self, folder: Path, env: dict, workers: int = 2):
        self.folder, self.env = folder, env
        folder.mkdir(parents=True, exist_ok=True)
        info = folder / "scheduler.json"
        info.unlink(missing_ok=True)
        self.scheduler = self._start(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0"]
            + ["--no-dashboard", "--scheduler-file", str(info)],
            "scheduler",
        )
        deadline = time.monotonic() + 120
        while not info.is_file() or not info.read_text().strip():
            assert time.monotonic() < deadline, self.log("scheduler")
            time.sleep(0.2)
        self.address = json.loads(info.read_text())["address"]
        self.workers: list[subprocess.Popen] = []
        self.add_workers(workers)

    def _start(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")  # noqa: SIM115 -- closed with the process
        return subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")[-3000:]

    def add_workers(self, n: int) -> None:
        start = len(self.workers)
        for i in range(start, start + n):
            cmd = [sys.executable, "-m", "distributed.cli.dask_worker", self.address, "--nworkers", "1"]
            cmd += ["--nthreads", "1", "--no-dashboard", "--name", f"w{i}", "--local-directory", str(self.folder)]
            self.workers.append(self._start(cmd, f"worker{i}"))
        self.wait_for(lambda s: len(s["workers"]) == start + n, f"{start + n} workers")

    def info(self) -> dict:
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            return client.scheduler_info(n_workers=-1)

    def wait_for(self, ok, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not ok(self.info()):
            assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
            time.sleep(0.5)

    def busy(self) -> bool:
        """Whether a run's tasks are on the scheduler (the run is between submitting and finishing a stage)."""
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) > 0

    def kill_workers(self) -> None:
        for proc in self.workers:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)

    def kill(self) -> None:
        for proc in [self.scheduler, *self.workers]:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)


@pytest.fixture
def clusters(tmp_path, cli_env):
    made: list[Cluster] = []

    def make(name: str) -> Cluster:
        made.append(Cluster(tmp_path / name, cli_env))
        return made[-1]

    yield make
    for c in made:
        c.kill()


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.json")) if p.is_file()}


def run_until_killed(cmd: list[str], env: dict, kill) -> tuple[float, str]:
    """Start the run, call ``kill`` once its tasks are on the cluster; (seconds from the kill to the run's end,
    its stderr). The run must end non-zero."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        killed_at = kill()
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0, err[-3000:]
    return time.monotonic() - killed_at, err


def when_busy(cluster: Cluster, then) -> float:
    deadline = time.monotonic() + 300
    while not cluster.busy():
        assert time.monotonic() < deadline, "the run put no task on the cluster within 300 s"
        time.sleep(0.1)
    then()
    return time.monotonic()


def one_line(err: str, says: str) -> None:
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and says in lines[-1], err[-3000:]


def test_workers_then_scheduler_lost_mid_run_then_resumed_on_a_fresh_cluster(sample_dir, tmp_path, clusters, cli_env):
    def command(out: Path) -> list[str]:
        cmd = [*perceptforge_cmd(), "run", "mvp", "--source", str(sample_dir), "--out", str(out), "--seed", "0"]
        return [*cmd, "--categories", "S2"]  # whole-image filters: the run is short, the cluster what is tested

    reference = tmp_path / "threads"
    done = subprocess.run(command(reference), env=cli_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "run"
    cmd = command(out)
    first = clusters("first")

    took, err = run_until_killed(
        [*cmd, "--dask-address", first.address], cli_env, lambda: when_busy(first, first.kill_workers)
    )
    one_line(err, "no Dask worker left")
    assert took <= 60, (took, err[-2000:])

    first.workers.clear()
    first.add_workers(2)
    took, err = run_until_killed([*cmd, "--dask-address", first.address], cli_env, lambda: when_busy(first, first.kill))
    one_line(err, "stopped answering")
    assert took <= 60, (took, err[-2000:])

    fresh = clusters("fresh")
    done = subprocess.run(
        [*cmd, "--dask-address", fresh.address], env=cli_env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (out / "quarantine").exists() or not any(
        "Dask" in p.read_text() for p in (out / "quarantine").rglob("*.json")
    )  # the cluster's failures are not the units'
    summary, expected = (json.loads((d / "summary.json").read_text()) for d in (out, reference))
    assert summary["counts"] == expected["counts"] and summary["counts"]["items"] > 0
    for folder in ("candidates", "edits", "items", "gates"):
        assert files(out / folder) == files(reference / folder), folder


def test_two_runs_on_one_long_lived_cluster_both_report_their_task_runs(
    prefect_api, sample_dir, tmp_path, clusters, cli_env
):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    cluster = clusters("long-lived")
    env = cli_env | {"PREFECT_API_URL": PREFECT_API_URL.value()}  # one server the workers reach (docs/scale-out.md)
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        cmd = [*perceptforge_cmd(), "run", "mvp", "--source", str(sample_dir), "--out", str(out), "--seed", "3"]
        cmd += ["--categories", "S2", "--limit", "1", "--dask-address", cluster.address]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(limit=200)
        ours = [r for r in runs if any(str(out) in json.dumps(r.parameters, default=str) for out in outs)]
        assert len(ours) == 2, [r.parameters for r in runs]
        for flow_run in ours:
            from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

            tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run.id])))
            assert tasks, f"flow run {flow_run.name} has no task runs in the API"
            assert all(t.state is not None and t.state.is_completed() for t in tasks), [t.state for t in tasks]
