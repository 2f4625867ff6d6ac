"""A real `perceptforge run mvp` killed with SIGKILL mid-run, then rerun, ends byte-identical to an uninterrupted run."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from helpers import perceptforge_cmd

import perceptforge


def run_mvp(sample_dir, out, env, profile, **popen):
    cmd = [
        *perceptforge_cmd(),
        "run",
        "mvp",
        "--source",
        str(sample_dir),
        "--profile",
        str(profile),
        "--out",
        str(out),
        "--seed",
        "3",
        "--categories",
        "B1,I1,S1",
    ]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, **popen
    )


def files(folder):
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for d in ("candidates", "masks", "edits", "gates", "items", "groundings")
        for p in sorted((folder / d).glob("*.json"))
    } | {"sources.jsonl": (folder / "sources.jsonl").read_bytes()}


def test_sigkill_then_rerun_matches_uninterrupted(sample_dir, tmp_path, cli_env):
    # The local profile with its mask gates open, so that every unit goes through every stage: the kill
    # lands among the masks (GrabCut: the slowest stage here), with later stages not begun.
    profile = tmp_path / "open.yaml"
    text = (Path(perceptforge.__file__).parent / "configs" / "local.yaml").read_text()
    profile.write_text(
        text.replace(
            "gates:\n",
            "gates:\n  mask_area: {}\n  max_subject_in_mask: {}\n  max_old_kept: 1.0\n  max_protected_in_mask: 1.0\n  max_object_cut: 0.5\n  max_ragged_outline: 1.0\n",
        )
    )
    whole = tmp_path / "whole"
    proc = run_mvp(sample_dir, whole, cli_env, profile)
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()[-2000:]

    killed = tmp_path / "killed"
    proc = run_mvp(sample_dir, killed, cli_env, profile)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list((killed / "masks").glob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((killed / "masks").glob("*.json")))
    assert 3 <= done_before < len(list((whole / "masks").glob("*.json"))), "the kill must land mid-run"
    assert not (killed / "report.html").exists()
    for path in killed.rglob("*.json"):  # writes are atomic: no torn file under a final name
        json.loads(path.read_text())

    proc = run_mvp(sample_dir, killed, cli_env, profile)
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()[-2000:]
    a, b = files(whole), files(killed)
    assert sorted(a) == sorted(b)  # nothing lost, nothing duplicated
    assert a == b  # byte-identical
    ids = [p.stem for p in (killed / "items").glob("*.json")]
    assert len(ids) == len(set(ids)) > 0
