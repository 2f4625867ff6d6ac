"""Scale-out on a real Dask cluster: two worker *processes* on 127.0.0.1 run the mvp flow with tiny real models
(SAM and Stable Diffusion inpainting, built here). Models load on the workers, once each; no task ships a model;
the items are byte-identical to the threads runner's; no worker starts a Prefect server of its own."""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("prefect_dask")
pytest.importorskip("segment_anything")
pytest.importorskip("diffusers")

from helpers import OPEN_GATES, perceptforge_cmd, prefect_servers_here  # noqa: E402
from tiny_models import register_tiny_sam, save_tiny_sam, save_tiny_sd  # noqa: E402

CATEGORIES = ["B1", "S1"]  # background (Eq. 1 over SAM's masks) and partial substitution, both by sd-inpaint


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    sam_type, sam = save_tiny_sam(root / "sam")
    sd = save_tiny_sd(root / "sd", "inpaint")
    from perceptforge.configs.profile import load_profile

    profile = load_profile("local").model_dump(mode="json")
    profile |= {"name": "tiny-models", "release_models_between_stages": False}
    profile["segmenter"] = {"backend": "sam", "checkpoint": str(sam), "model_type": sam_type}
    profile["inpainter"] = {"backend": "sd-inpaint", "model": str(sd), "steps": 2, "max_side": 64, "batch_size": 2}
    # random weights paint noise: the gates that judge pictures are opened, the flow's path is what is tested
    profile["gates"] |= OPEN_GATES | {"min_phash_distance": 0, "min_inside_change": 0.0, "max_outside_change": 255.0}
    profile["runner"] = {"kind": "threads", "max_workers": 2}
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as local,
        Client(local) as client,
    ):
        client.run(register_tiny_sam)  # the tiny SAM's builder is the tests', not segment-anything's
        yield local, client


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def test_mvp_on_two_worker_processes(prefect_api, sample_dir, tiny_profile, cluster, tmp_path, cli_env):
    from perceptforge.flows.run import run as run_flow

    local, client = cluster
    threads = run_flow(
        "mvp", sample_dir, tmp_path / "threads", profile=str(tiny_profile), seed=1, categories=CATEGORIES
    )
    assert threads["counts"]["items"] > 0, threads

    # The command a maintainer types, against the running cluster, in a process without a Prefect API of its own.
    out = tmp_path / "dask"
    cmd = [*perceptforge_cmd(), "run", "mvp", "--source", str(sample_dir), "--out", str(out)]
    cmd += ["--profile", str(tiny_profile), "--seed", "1", "--categories", ",".join(CATEGORIES)]
    cmd += ["--runner", "dask", "--dask-address", local.scheduler_address]
    done = subprocess.run(cmd, env=cli_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())

    assert summary["runner"]["kind"] == "DaskTaskRunner"
    assert summary["counts"] == threads["counts"]  # nothing lost, nothing duplicated
    assert files(out / "items") == files(tmp_path / "threads" / "items")  # byte-identical items
    assert files(out / "edits") == files(tmp_path / "threads" / "edits")

    workers = {f"{host}-{pid}" for host, pid in client.run(lambda: (socket.gethostname(), os.getpid())).values()}
    loads = summary["engine"]["model_loads"]
    assert {"segmenter:sam", "inpainter:sd-inpaint"} <= set(loads)
    for model in ("segmenter:sam", "inpainter:sd-inpaint"):
        assert set(loads[model]) <= workers, (model, loads[model], workers)  # loaded on the workers only
        assert all(n == 1 for n in loads[model].values()), loads  # at most once per worker
    assert max(summary["engine"]["largest_task_bytes"].values()) <= 100_000, summary["engine"]
    # one task per chunk of units, not per unit
    assert sum(summary["engine"]["task_runs"].values()) < sum(summary["engine"]["units_run"].values())
    assert all(n == 0 for n in client.run(prefect_servers_here).values())  # workers reported to the flow's API


def can_hide_folders() -> str | None:
    """Why a worker cannot be given its own view of the file system here (None: it can)."""
    if not shutil.which("unshare"):
        return "no unshare(1) on this machine"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    return None if probe.returncode == 0 else f"cannot make a mount namespace: {probe.stderr.decode().strip()}"


def test_a_worker_that_cannot_see_the_run_directory_stops_the_run_in_one_line(sample_dir, tmp_path, cli_env):
    """A worker on 'another machine': its own mount namespace, where the run's parent folder is an empty tmpfs."""
    why = can_hide_folders()
    if why:
        pytest.skip(why)
    from distributed import Client, LocalCluster

    shared = tmp_path / "shared"
    shared.mkdir()
    with (
        LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=None) as local,
        Client(local) as client,
    ):
        worker_cmd = (
            f"{sys.executable} -m distributed.cli.dask_worker {local.scheduler_address} --nthreads 1 --no-dashboard"
        )
        worker = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"mount -t tmpfs none {shared} && exec {worker_cmd}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            client.wait_for_workers(1, timeout=120)
            cmd = [*perceptforge_cmd(), "run", "codis", "--source", str(sample_dir), "--out", str(shared / "run")]
            cmd += ["--runner", "dask", "--dask-address", local.scheduler_address]
            done = subprocess.run(cmd, env=cli_env, capture_output=True, text=True, timeout=300)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "the run directory is not shared with Dask worker tcp://127.0.0.1:" in done.stderr
    assert "shared file system" in done.stderr and "Traceback" not in done.stderr
    assert not (shared / "run" / "drafts").exists()  # nothing ran


def test_a_gpu_run_gives_each_local_worker_one_device_and_needs_workers_that_offer_one(cluster):
    """On a GPU run the local cluster's workers see one CUDA device each and offer GPU=1; a model stage on a
    cluster whose workers offer none stops in one line. (No GPU here: the devices are named, not used.)"""
    from distributed import Client

    from perceptforge.errors import InputError
    from perceptforge.tasks.engine import GPU, MODEL_STAGE, DaskEngine, local_cluster

    with local_cluster(2, gpus=2) as gpu_cluster, Client(gpu_cluster) as client:
        seen = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        assert sorted(seen.values()) == ["0", "1"]
        offered = [w["resources"] for w in client.scheduler_info(n_workers=-1)["workers"].values()]
        assert offered == [{GPU: 1}, {GPU: 1}]
        DaskEngine(client).check_resources(MODEL_STAGE, "cuda", "edit")  # offered: no error
    _, plain = cluster
    DaskEngine(plain).check_resources(MODEL_STAGE, "cpu", "edit")  # the CPU needs no resource
    with pytest.raises(InputError, match="stage edit needs GPU=1 per task .* --resources GPU=1"):
        DaskEngine(plain).check_resources(MODEL_STAGE, "cuda", "edit")
