"""The one device check (benchmarks/gpu_check.py) runs its whole path on the CPU with tiny models, so it cannot rot
between the rare runs on a lent GPU: every row of its table comes out, the flow builds items on threads and on a Dask
worker that offers GPU=1, and the models load on that worker."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("prefect_dask")
pytest.importorskip("segment_anything")
pytest.importorskip("diffusers")

REPO = Path(__file__).resolve().parents[1]


def test_gpu_check_tiny_prints_every_row(tmp_path, cli_env):
    out = tmp_path / "rows.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--tiny", "--units", "6", "--sam-images", "2"]
    done = subprocess.run([*cmd, "--json", str(out)], env=cli_env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = {r["measure"]: r["figure"] for r in json.loads(out.read_text())}
    measures = "\n".join(rows)
    for wanted in ("SAM tiny_test image encoder", "sd-inpaint (64², 2 steps", "instruct-pix2pix (64², 2 steps",
                   "flow (threads): edit stage", "flow (threads): edit stage outside model calls",
                   "dask worker (GPU=1): model loads", "dask worker: whole run", "check"):  # fmt: skip
        assert wanted in measures, measures
    assert all("images/s" in f for m, f in rows.items() if m.startswith(("SAM", "sd-inpaint (", "instruct-pix2pix (")))
    threads_items = int(rows["flow (threads): whole run"].split("; ")[1].split()[0])
    assert threads_items > 0 and "(= threads)" in rows["dask worker: whole run"], rows
    loads = rows["dask worker (GPU=1): model loads"]
    assert "segmenter:sam worker ×1" in loads and "inpainter:sd-inpaint" in loads, loads
    assert "gpu_check on CPU" in done.stdout  # the table, with the machine it ran on
