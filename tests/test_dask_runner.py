"""Every family on a local Dask cluster (prefect-dask's DaskTaskRunner, worker processes): the same path as the
threads runner, the same files."""

import json

import pytest

pytest.importorskip("prefect_dask")


def test_mvp_flow_on_local_dask_cluster(prefect_api, sample_dir, tmp_path):
    from perceptforge.flows.run import run as run_flow

    summary = run_flow("mvp", sample_dir, tmp_path / "dask", runner="dask", seed=1, limit=1, categories=["B1", "I1"])
    assert summary["runner"]["kind"] == "DaskTaskRunner"
    assert summary["engine"]["kind"] == "dask" and summary["engine"]["workers"] == 2
    # B1 asks 4 questions (no cross-image high-level MCQ), I1's hair colour 3 (is this hair dyed? is not asked of a
    # photo that cannot show it, nor "which aspect … altered?" → identity of a hair colour)
    assert summary["counts"]["candidates"] == 2 and summary["counts"]["items"] == 7 == 4 + 3
    threads = run_flow("mvp", sample_dir, tmp_path / "threads", seed=1, limit=1, categories=["B1", "I1"])
    assert threads["counts"] == summary["counts"]
    for name in ("1-B1.json", "1-I1.json"):  # the runner does not change results
        assert json.loads((tmp_path / "dask" / "candidates" / name).read_text()) == json.loads(
            (tmp_path / "threads" / "candidates" / name).read_text()
        )


@pytest.mark.parametrize(("family", "folder"), [("blink", "items"), ("codis", "drafts")])
def test_other_families_on_local_dask_cluster(prefect_api, sample_dir, tmp_path, family, folder):
    from perceptforge.flows.run import run as run_flow

    dask = run_flow(family, sample_dir, tmp_path / "dask", runner="dask", seed=2)
    threads = run_flow(family, sample_dir, tmp_path / "threads", seed=2)
    assert dask["runner"]["kind"] == "DaskTaskRunner" and dask["counts"] == threads["counts"]
    made = {p.name: p.read_bytes() for p in sorted((tmp_path / "dask" / folder).glob("*.json"))}
    assert made and made == {p.name: p.read_bytes() for p in sorted((tmp_path / "threads" / folder).glob("*.json"))}
