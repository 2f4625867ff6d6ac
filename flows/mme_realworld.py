"""MME-RealWorld (§3.2): full-resolution images → drafted five-option questions about small targets that one
annotator authors and another reviews in Label Studio, then the release's JSON. Stages: ``flows/authored.py``."""

from __future__ import annotations

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from perceptforge.flows.authored import plan_authored, run_authored


@flow(name="mme-realworld", task_runner=ThreadPoolTaskRunner(max_workers=2))  # type: ignore[arg-type]
def mme_realworld_flow(
    source: str,
    out: str = "runs/mme-realworld",
    profile: str = "local",
    seed: int | None = None,
    limit: int | None = None,
    fresh: bool = False,
) -> dict:
    """Draft one MME-RealWorld item per source image (originals kept byte for byte) into ``out``."""
    return run_authored(plan_authored("mme-realworld", source, out, profile, seed, limit, fresh))
