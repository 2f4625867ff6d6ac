"""A benchmark family: everything perceptforge does with one kind of benchmark, declared in one object.

A family says how its run's inputs are read and checked (``plan``), which stages build its items
(``stages``), its report, its export, how people verify or author its items in Label Studio (``push`` /
``pull``), which audit reader and which scorer benchmark read its export. The CLI, the deployments,
``export``, ``annotate``, ``audit`` and ``score`` reach a family only through ``flows/registry.py``; the run
itself goes one way for every family (``flows/run.py``).

What every family shares lives here too: the run request (the same options with the same meaning for
every ``perceptforge run <family>``) and ``plan_inputs``, which reads the profile, the seed, the source
folder (the profile's annotation file) and the ``--limit``, and checks the run directory's identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from perceptforge.configs.profile import Profile
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.flows.common import prepare_run, profile_and_seed, profile_digest, sources_digest
from perceptforge.store.sources import SourceEntry, read_source_dir

if TYPE_CHECKING:
    from perceptforge.annotation.labelstudio import LabelStudio
    from perceptforge.backends.registry import Runtime
    from perceptforge.store.rundir import RunDir
    from perceptforge.tasks.runner import StageRunner


@dataclass(frozen=True)
class RunRequest:
    """What ``perceptforge run <family>`` and a deployment ask for; every field means the same in every family.
    ``select``: the categories (MVP) or tasks (BLINK) to build, None for all; ``options``: the family's own
    options (BLINK's ``prompt_variants``)."""

    source: str
    out: str
    profile: str = "local"
    seed: int | None = None
    limit: int | None = None
    select: list[str] | None = None
    fresh: bool = False
    runner: str | None = None
    dask_address: str | None = None
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Inputs:
    """What every run is decided by: the profile, the seed, the source folder and the entries it builds from."""

    profile: Profile
    seed: int
    source_dir: Path
    annotation_file: str
    entries: list[SourceEntry]  # the ones this run builds from (``--limit``)
    out: Path
    limit: int | None
    sources: str  # the digest of the whole source folder: a larger --limit is the same run, resumed

    def identity(self, flow: str, categories: list[str], **extra: Any) -> dict[str, Any]:
        """The run's identity in ``run.json``: a directory holding another identity is another run."""
        return {
            "flow": flow,
            "profile": profile_digest(self.profile),
            "seed": self.seed,
            "categories": categories,
            **extra,
            "sources": self.sources,
            "limit": self.limit,
        }


@dataclass(frozen=True)
class RunPlan:
    """A family's checked plan: the common inputs, the run's identity, and what the family itself decided."""

    family: str
    inputs: Inputs
    identity: dict[str, Any]
    fresh: bool = False
    details: Any = None


@dataclass
class StagesResult:
    """What a family's stages made: the counts, a per-category table (a Prefect artifact) and its own figures."""

    counts: dict[str, int]
    per_category: dict[str, int]
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Exported:
    """An export: the line the CLI prints, the files the audit reads (none: no audit), and the manifest."""

    message: str
    audit_paths: list[Path]
    warnings: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExportOptions:
    formats: tuple[str, ...] = ("jsonl", "parquet", "vlmevalkit", "lmms-eval")
    only_verified: bool = False
    seed: int = 0
    val_fraction: float = 0.5
    license: str = "other"


def plan_inputs(request: RunRequest, is_unit_source: Any = None) -> Inputs:
    """Profile, seed and sources, checked; each problem one line. The annotation file is the profile's
    (``grounder.file``); ``--limit N`` keeps the first N source images (by id) the family builds units from
    (``is_unit_source``, default every image), and the others, which only serve units (MVP's donor scenes)."""
    prof, seed = profile_and_seed(request.profile, request.seed)
    source_dir = Path(request.source).resolve()
    annotation_file = str(getattr(prof.grounder, "file", "annotations.json"))
    entries = sorted(read_source_dir(source_dir, annotation_file), key=lambda e: e.source_id)
    if not entries:
        raise InputError(str(source_dir / annotation_file), "lists no images")
    digest = sources_digest(source_dir, annotation_file, entries)
    if request.limit is not None:
        counts = is_unit_source or (lambda e: True)
        kept = {e.source_id for e in [e for e in entries if counts(e)][: request.limit]}
        entries = [e for e in entries if e.source_id in kept or not counts(e)]
    return Inputs(prof, seed, source_dir, annotation_file, entries, Path(request.out), request.limit, digest)


def check_selection(given: list[str] | None, known: dict[str, Any], option: str, what: str) -> list[str]:
    """The ids a run builds: all known ones, or those given (an unknown one is an input error naming ``what``)."""
    if not given:
        return sorted(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InputError(option, f"unknown {what} {unknown}; known: {', '.join(sorted(known))}")
    return sorted(set(given))


@dataclass(frozen=True)
class SourceCheck:
    """What each source of a folder can serve before a run: ``verdicts`` (category or task → source id → why it
    cannot, None: it can), the categories the profile builds nothing of (``skipped``, with why), and the sources
    that serve none by their nature (``bystanders``: a donor scene without a subject)."""

    verdicts: dict[str, dict[str, str | None]]
    skipped: dict[str, str] = field(default_factory=dict)
    bystanders: dict[str, str] = field(default_factory=dict)


class Family:
    """One benchmark family. Subclasses set the class attributes and implement ``plan`` and ``stages``;
    the rest has defaults a family overrides when it has the thing (an export, a Label Studio path)."""

    name: ClassVar[str]  # `perceptforge run <name>`, run.json's "flow", the Prefect flow's name
    title: ClassVar[str]  # what people call it ("MVP-Bench")
    summary: ClassVar[str] = ""  # the `run` command's help
    select_option: ClassVar[str] = "--categories"  # what --categories / --tasks choose in this family
    options: ClassVar[dict[str, str]] = {}  # the family's own `run` options: name → help
    audit_benchmark: ClassVar[str] = "perceptforge"  # the audit reader of its export
    scorer_benchmark: ClassVar[str] = "perceptforge"  # `perceptforge score <this>` scores its export
    next_step: ClassVar[str] = ""  # what to do after a run, shown by the CLI
    # checks of each written item through a model endpoint at push / pull, as "module:function" taking
    # (versions, run_dir, client) (CODIS's blind checks); None: the family has none
    item_checks: ClassVar[str | None] = None
    # folders the family writes in its run directory besides the shared layout (flows/common.RUN_LAYOUT):
    # --fresh removes them too, and nothing else the run did not write
    run_folders: ClassVar[tuple[str, ...]] = ()

    def plan(self, request: RunRequest) -> RunPlan:
        raise NotImplementedError

    def check_run(self, plan: RunPlan) -> None:
        """The run directory can hold this run (another run there, without --fresh, is one line)."""
        prepare_run(plan.inputs.out, plan.identity, plan.fresh, check_only=True, own=self.run_folders)

    def largest_image(self, plan: RunPlan) -> int:
        """The largest source's pixels: the memory budget's measure for the number of workers."""
        return max((e.width * e.height for e in plan.inputs.entries), default=0)

    def stages(self, plan: RunPlan, run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        raise NotImplementedError

    def write_report(self, run: RunDir) -> Path:
        raise NotImplementedError

    nothing_built: ClassVar[str] = "the run built no items"  # the CLI's error when ``built`` is 0

    def built(self, summary: dict) -> int:
        """How many things the run made for people to take further (0: the run failed)."""
        return int(summary["counts"].get("items", 0))

    def table(self, summary: dict) -> tuple[str, list[str], list[list[str]]]:
        """The CLI's table of a run: title, columns, rows (default: the counts)."""
        title = f"{self.name} run · profile {summary['profile']} · seed {summary['seed']}"
        return title, ["stage", "count"], [[k, str(v)] for k, v in summary["counts"].items()]

    def notes(self, summary: dict) -> list[str]:
        """Lines below the table (skipped categories, flagged drafts)."""
        return []

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> Exported:
        raise PerceptforgeError(f"{run_dir}: a {self.title} run has no export")

    def source_check(self, plan: RunPlan) -> SourceCheck:
        """``perceptforge sources check``: for each category or task, why each source cannot serve it, from the
        source folder and the profile alone: the checks the run's plan makes."""
        raise PerceptforgeError(
            f"{self.title} sources are checked one by one as the run ingests them; `sources check` covers the families "
            "whose items depend on what each source is annotated with (mvp, blink)"
        )

    def push(self, run_dir: Path, ls: LabelStudio, document_root: Path, checks: Any = None) -> dict:
        raise PerceptforgeError(f"{run_dir}: {self.title} items have no Label Studio projects")

    def pull(self, run_dir: Path, ls: LabelStudio, checks: Any = None) -> dict:
        raise PerceptforgeError(f"{run_dir}: {self.title} items have no Label Studio projects")
