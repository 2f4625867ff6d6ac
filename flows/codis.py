"""CODIS (§3.3): a folder of images → drafted items that annotators author and four others cross-check in
Label Studio, then CODIS's ``data.json``. The stages are in ``flows/authored.py``."""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from perceptforge.flows.authored import plan_authored, run_authored


@flow(name="codis", task_runner=ThreadPoolTaskRunner(max_workers=2))  # type: ignore[arg-type]
def codis_flow(
    source: str,
    out: str = "runs/codis",
    profile: str = "local",
    seed: int | None = None,
    limit: int | None = None,
    fresh: bool = False,
) -> dict:
    """Draft one CODIS item per source image into ``out``; authoring and review follow in Label Studio."""
    return run_authored(plan_authored("codis", source, out, profile, seed, limit, fresh))
