"""The mvp flow on a local Dask cluster (prefect-dask's DaskTaskRunner), worker processes included."""

import json

import pytest

pytest.importorskip("prefect_dask")


def test_mvp_flow_on_local_dask_cluster(prefect_api, sample_dir, tmp_path):
    from perceptforge.flows.run import run as run_flow

    summary = run_flow("mvp", sample_dir, tmp_path / "dask", runner="dask", seed=1, limit=1, categories=["B1", "I1"])
    assert summary["runner"]["kind"] == "DaskTaskRunner"
    assert summary["counts"]["candidates"] == 2 and summary["counts"]["items"] == 5 * summary["counts"]["pairs"]
    threads = run_flow("mvp", sample_dir, tmp_path / "threads", seed=1, limit=1, categories=["B1", "I1"])
    assert threads["counts"] == summary["counts"]
    for name in ("1-B1.json", "1-I1.json"):  # the runner does not change results
        assert json.loads((tmp_path / "dask" / "candidates" / name).read_text()) == json.loads(
            (tmp_path / "threads" / "candidates" / name).read_text()
        )
