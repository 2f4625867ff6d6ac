"""What the human-authored flows (CODIS, MME-RealWorld) share: plan the run, ingest originals, draft every
item (version 0), write the summary and the report. Authoring and cross-checking happen in Label Studio
afterwards (``perceptforge annotate push`` / ``pull``), as verification does for the MVP flow."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perceptforge.configs.profile import Profile
from perceptforge.errors import InputError
from perceptforge.flows.common import prepare_run, profile_and_seed, profile_digest, record_profile, sources_digest
from perceptforge.outputs.authored_report import write_authored_report
from perceptforge.store.sources import SourceEntry, read_source_dir
from perceptforge.tasks import authoring, ingest
from perceptforge.tasks.runner import StageRunner


@dataclass(frozen=True)
class AuthoredPlan:
    benchmark: str
    profile: Profile
    seed: int
    source_dir: Path
    entries: list[SourceEntry]
    out: Path
    identity: dict[str, Any]


def plan_authored(
    benchmark: str,
    source: str | Path,
    out: str | Path,
    profile: str = "local",
    seed: int | None = None,
    limit: int | None = None,
    fresh: bool = False,
) -> AuthoredPlan:
    """Everything the run is decided by, checked before any stage; each problem is one line."""
    prof, seed = profile_and_seed(profile, seed)
    source_dir = Path(source).resolve()
    entries = sorted(read_source_dir(source_dir, "annotations.json"), key=lambda e: e.source_id)[:limit]
    if not entries:
        raise InputError(str(source_dir / "annotations.json"), "lists no images")
    identity = {
        "flow": benchmark,
        "profile": profile_digest(prof),
        "seed": seed,
        "categories": [benchmark],
        "sources": sources_digest(source_dir, "annotations.json", entries),
        "limit": limit,
    }
    prepare_run(Path(out), identity, fresh, check_only=True)
    return AuthoredPlan(benchmark, prof, seed, source_dir, entries, Path(out), identity)


def run_authored(plan: AuthoredPlan) -> dict:
    """ingest (original bytes) → draft (the profile's writer), then the summary and ``report.html``."""
    run = prepare_run(plan.out, plan.identity)
    # the review settings push and pull read later come from the run's own profile
    record_profile(run, plan.profile)
    runner = StageRunner(run, release_models=plan.profile.release_models_between_stages)
    settings = plan.profile.authoring
    min_side = settings.min_short_side if plan.benchmark == "mme-realworld" else None
    sources = ingest.ingest_stage(runner, plan.entries, plan.source_dir, authoring.ingest, min_short_side=min_side)
    writer = plan.profile.build("llm").load()
    drafts = authoring.draft_stage(runner, plan.benchmark, sources, writer, plan.seed, settings)
    quarantine = run.gather_quarantine()
    flagged: Counter[str] = Counter(c.name for d in drafts for c in d.flags)
    summary = {
        "flow": plan.benchmark,
        "profile": plan.profile.name,
        "seed": plan.seed,
        "counts": {
            "sources": len(plan.entries),
            "ingested": len(sources),
            "drafts": len(drafts),
            "quarantined": len(quarantine),
        },
        "drafts_per_category": dict(sorted(Counter(category_of(d.content) for d in drafts).items())),
        "flagged_checks": dict(sorted(flagged.items())),
        "failures": dict(sorted(runner.failures.items())),
        "drafter": writer.name,
        "wall_time_s": {k: round(v, 3) for k, v in runner.timings.items()},
    }
    run.write_summary(summary)
    runner.publish(plan.benchmark, summary, summary["drafts_per_category"])
    summary["report"] = write_authored_report(run)
    return summary


def category_of(content: Any) -> str:
    return (
        content.category
        if hasattr(content, "category")
        else f"{content.domain or '(domain to choose)'}/{content.subtask}"
    )
