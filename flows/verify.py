"""Human verification (MVP-Bench §4.1): push a run's items to Label Studio, wait for two annotators per
item (polling, with a timeout), then pull verdicts, corrections and agreement. ``now=True`` pulls what is
there at once; a timed-out wait also pulls, and the summary counts the incomplete items."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from perceptforge.annotation.decisions import counted_annotations
from perceptforge.annotation.labelstudio import connect
from perceptforge.annotation.sync import REQUIRED_ANNOTATORS, pull, push
from perceptforge.fileio import read_json


@task(name="push", cache_policy=NO_CACHE)
def push_task(run_dir: str, url: str | None, document_root: str) -> dict:
    return push(Path(run_dir), connect(url), Path(document_root))


def waiting_for(run_dir: Path, ls) -> int:
    """Items that still lack their required annotations."""
    projects = read_json(run_dir / "annotation" / "projects.json")
    return sum(
        len(counted_annotations(t.get("annotations", []))) < REQUIRED_ANNOTATORS
        for p in projects.values()
        for t in ls.export(p["id"])
    )


@task(name="wait", cache_policy=NO_CACHE)
def wait_task(run_dir: str, url: str | None, timeout_s: float, poll_s: float) -> int:
    ls, logger = connect(url), get_run_logger()
    deadline = time.monotonic() + timeout_s
    while True:
        left = waiting_for(Path(run_dir), ls)
        if left == 0 or time.monotonic() >= deadline:
            return left
        logger.info("%d items still wait for annotations; next look in %.0f s", left, poll_s)
        time.sleep(poll_s)


@task(name="pull", cache_policy=NO_CACHE)
def pull_task(run_dir: str, url: str | None) -> dict:
    return pull(Path(run_dir), connect(url))


@flow(name="verify")
def verify_flow(
    run_dir: str,
    document_root: str,
    url: str | None = None,
    now: bool = False,
    timeout_s: float = 3600,
    poll_s: float = 30,
) -> dict:
    """Push, wait (unless ``now``), pull; returns the verification summary."""
    pushed = push_task(run_dir, url, document_root)
    left = 0 if now else wait_task(run_dir, url, timeout_s, poll_s)
    summary = pull_task(run_dir, url)
    return {"pushed": pushed, "still_waiting": left, **summary}
