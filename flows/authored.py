"""What the human-authored families (CODIS, MME-RealWorld) share: ingest originals, draft every item
(version 0), then authoring and cross-checking in Label Studio (``annotation/authored``) and the release's
format (``outputs/authored_export``). What differs between them is their ``AuthoredBenchmark``, declared by each
family's own module."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perceptforge.backends.registry import Runtime
from perceptforge.data.authored_benchmark import AuthoredBenchmark
from perceptforge.flows.family import Exported, ExportOptions, Family, RunPlan, RunRequest, StagesResult, plan_inputs
from perceptforge.store.rundir import RunDir

if TYPE_CHECKING:
    from perceptforge.tasks.runner import StageRunner


def category_of(content: Any) -> str:
    return (
        content.category
        if hasattr(content, "category")
        else f"{content.domain or '(domain to choose)'}/{content.subtask}"
    )


class AuthoredFamily(Family[None]):
    """A family whose items people write from model drafts and cross-check (CODIS §3.3, MME-RealWorld §3.2)."""

    benchmark: ClassVar[AuthoredBenchmark]
    next_step = "`perceptforge annotate push {out}`: annotators write the items from these drafts"
    # the release's own format holds every item that passed review, and nothing else: only the data card's licence
    export_options = frozenset({"license"})

    def plan(self, request: RunRequest) -> RunPlan[None]:
        """Everything the run is decided by, checked before any stage; each problem is one line."""
        inputs = plan_inputs(request, self)
        return RunPlan(self.name, inputs, inputs.identity(self.name, [self.name]), request.fresh)

    def stages(self, plan: RunPlan[None], run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        """ingest (original bytes) → draft (the profile's writer)."""
        from perceptforge.tasks import authored, ingest  # with the run, not the CLI: --help stays quick

        prof, settings = plan.inputs.profile, plan.inputs.profile.authoring
        min_side = settings.min_short_side if self.benchmark.full_resolution else None
        sources = ingest.ingest_stage(
            runner,
            plan.inputs.entries,
            plan.inputs.source_dir,
            authored.ingest,
            min_short_side=min_side,
            max_pixels=prof.ingest.max_pixels,
        )
        writer = prof.spec("llm", runtime)
        drafts = authored.draft_stage(runner, self.benchmark, sources, writer, plan.inputs.seed, settings)
        per_category = dict(sorted(Counter(category_of(d.content) for d in drafts).items()))
        figures = {
            "drafts_per_category": per_category,
            "flagged_checks": dict(sorted(Counter(c.name for d in drafts for c in d.flags).items())),
            "drafter": writer.build().name,
        }
        counts = {"sources": len(plan.inputs.entries), "ingested": len(sources), "drafts": len(drafts)}
        return StagesResult(counts, per_category, figures)

    def write_report(self, run: RunDir) -> Path:
        from perceptforge.outputs.authored_report import write_authored_report

        return Path(write_authored_report(run))

    nothing_built = "the run drafted no items"

    def built(self, summary: dict) -> int:
        return int(summary["counts"]["drafts"])

    def table(self, summary: dict) -> tuple[str, list[str], list[list[str]]]:
        title = f"{self.name} run · drafter {summary['drafter']} · seed {summary['seed']}"
        return title, ["drafts per category", "items"], [[c, str(n)] for c, n in summary["drafts_per_category"].items()]

    def notes(self, summary: dict) -> list[str]:
        return [f"[yellow]flagged[/] {n} draft(s) by {check}" for check, n in summary["flagged_checks"].items()]

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> Exported:
        from perceptforge.outputs.authored_export import export_authored

        manifest = export_authored(run_dir, out, self.benchmark, license=options.license)
        official = manifest["official"]
        message = (
            f"{manifest['items']} kept items in {self.name}'s official format → [bold]{out}[/] "
            f"({', '.join(official)}); score with `perceptforge score {self.scorer_benchmark} "
            f"--data {out}/{official[0] if official else '…'} --predictions …`"
        )
        if not manifest["items"]:
            return Exported(message, [], ["no item has passed review yet: the split is empty"], manifest)
        return Exported(message, [out / f for f in official], [], manifest)

    def push(self, run_dir: Path, ls: Any, document_root: Path, checks: Any = None) -> dict:
        from perceptforge.annotation.authored import push

        return push(run_dir, ls, document_root, self.benchmark, checks)

    def pull(self, run_dir: Path, ls: Any, checks: Any = None) -> dict:
        from perceptforge.annotation.authored import pull

        return pull(run_dir, ls, self.benchmark, checks)
