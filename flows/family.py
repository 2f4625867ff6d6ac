"""A benchmark family: everything perceptforge does with one kind of benchmark, declared in one object.

A family says how its run's inputs are read and checked (``plan``), which stages build its items
(``stages``), its report, its export, how people verify or author its items in Label Studio (``push`` /
``pull``), which audit reader and which scorer benchmark read its export. The CLI, the deployments,
``export``, ``annotate``, ``audit`` and ``score`` reach a family only through ``flows/registry.py``; the run
itself goes one way for every family (``flows/run.py``).

What every family shares lives here too: the run request (the same options with the same meaning for
every ``perceptforge run <family>``) and ``plan_inputs``, which reads the profile, the seed, the source
folder (the profile's annotation file) and the ``--limit``, and checks the run directory's identity.

``Family`` is an abstract base class: a subclass that lacks ``plan``, ``stages`` or ``write_report`` cannot be
made (``IncompleteFamily``, one line), so a plug-in is refused when it registers, not after its stages ran.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from perceptforge.configs.profile import Profile
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.flows.common import (
    prepare_run,
    profile_and_seed,
    profile_digest,
    refuse_changed_sources,
    sources_digest,
)
from perceptforge.store.sources import SourceEntry, read_source_dir

if TYPE_CHECKING:
    from perceptforge.annotation.labelstudio import LabelStudio
    from perceptforge.backends.registry import Runtime
    from perceptforge.store.rundir import RunDir
    from perceptforge.tasks.runner import StageRunner


# what a family's plan decides besides the common inputs (MvpDetails, BlinkPlan, None)
D = TypeVar("D")


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
class RunPlan(Generic[D]):
    """A family's checked plan: the common inputs, the run's identity, and what the family itself decided
    (``details``, typed per family: ``Family[MvpDetails]`` plans ``RunPlan[MvpDetails]``)."""

    family: str
    inputs: Inputs
    identity: dict[str, Any]
    fresh: bool = False
    details: D = None  # type: ignore[assignment]  # a family that decides nothing of its own plans RunPlan[None]


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
    """``perceptforge export``'s options; a family reads those it names in ``Family.export_options``."""

    formats: tuple[str, ...] = ("jsonl", "parquet", "vlmevalkit", "lmms-eval")
    only_verified: bool = False
    seed: int = 0
    val_fraction: float = 0.5
    license: str = "other"


EXPORT_OPTIONS = frozenset(f.name for f in fields(ExportOptions))


def export_flag(option: str) -> str:
    """The command-line flag of an ``ExportOptions`` field (``val_fraction`` → ``--val-fraction``)."""
    return "--" + option.replace("_", "-")


def plan_inputs(request: RunRequest, family: Family | None = None) -> Inputs:
    """Profile, seed and sources, checked; each problem one line. The annotation file is the profile's
    (``grounder.file``); ``--limit N`` keeps what the family says (``kept_by_limit``; every image counts when no
    family is given)."""
    prof, seed = profile_and_seed(request.profile, request.seed)
    source_dir = Path(request.source).resolve()
    annotation_file = str(getattr(prof.grounder, "file", "annotations.json"))
    entries = sorted(read_source_dir(source_dir, annotation_file), key=lambda e: e.source_id)
    if not entries:
        raise InputError(str(source_dir / annotation_file), "lists no images")
    digest = sources_digest(source_dir, annotation_file, entries)
    if request.limit is not None:
        entries = kept_by_limit(entries, request.limit, family)
    return Inputs(prof, seed, source_dir, annotation_file, entries, Path(request.out), request.limit, digest)


def kept_by_limit(entries: list[SourceEntry], limit: int, family: Family | None) -> list[SourceEntry]:
    """The first ``limit`` images (by id) that count toward ``--limit`` (``Family.counts_toward_limit``), and the
    images that do not count but come along with those (``Family.comes_along``: MVP's donor scenes, BLINK's second
    views of a kept photo's pose sequence), so the kept images build the items the whole run builds of them."""
    if family is None:
        return entries[:limit]
    kept = [e for e in entries if family.counts_toward_limit(e)][:limit]
    ids = {e.source_id for e in kept}
    return [
        e for e in entries if e.source_id in ids or (not family.counts_toward_limit(e) and family.comes_along(e, kept))
    ]


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


class IncompleteFamily(InputError):
    """A ``Family`` subclass made without one of the methods every family implements."""

    def __init__(self, cls: type, missing: Collection[str]):
        self.family_name = getattr(cls, "name", None)  # the registry files the refusal under it
        required = ", ".join(sorted(Family.__abstractmethods__))
        super().__init__(
            f"{cls.__module__}.{cls.__qualname__}",
            f"does not implement {', '.join(sorted(missing))} (every Family implements {required})",
        )

    def __reduce__(self) -> tuple:
        return (InputError, (self.where, self.what))


class Family(ABC, Generic[D]):
    """One benchmark family. Subclasses set the class attributes and implement ``plan``, ``stages`` and
    ``write_report``; the rest has defaults a family overrides when it has the thing (an export, a Label Studio
    path). ``flows/registry.py`` checks the attributes (``check_family``) when it registers the family."""

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
    # the ExportOptions fields its `export` reads (by field name: "formats", "seed", …): `perceptforge export`
    # refuses the others in one line rather than ignore them
    export_options: ClassVar[frozenset[str]] = frozenset()

    def __new__(cls, *args: Any, **kwargs: Any) -> Family:
        # ABCMeta's own refusal is a TypeError raised while the plug-in's module is imported; ours names the class
        # and what it lacks in one line the registry can show
        missing: frozenset[str] = getattr(cls, "__abstractmethods__", frozenset())
        if missing:
            raise IncompleteFamily(cls, missing)
        return super().__new__(cls)

    @abstractmethod
    def plan(self, request: RunRequest) -> RunPlan[D]:
        """Read and check everything the run is decided by, writing nothing."""

    def counts_toward_limit(self, entry: SourceEntry) -> bool:
        """Whether the source image counts toward ``--limit N``: the first N that count are kept (``kept_by_limit``).
        An image that does not count serves other images' units (a donor scene, a second view)."""
        return True

    def comes_along(self, entry: SourceEntry, kept: list[SourceEntry]) -> bool:
        """Whether an image that does not count toward ``--limit`` is kept with the images that do (``kept``)."""
        return True

    def check_run(self, plan: RunPlan[D]) -> None:
        """The run directory can hold this run (another run there, without --fresh, is one line), and a resume
        reads the sources it already built from with the same bytes (a changed one, without --fresh, is one line)."""
        prepare_run(plan.inputs.out, plan.identity, plan.fresh, check_only=True, own=self.run_folders)
        if not plan.fresh:
            refuse_changed_sources(plan.inputs.out, plan.inputs.source_dir, plan.inputs.entries)

    def largest_image(self, plan: RunPlan[D]) -> int:
        """The largest source's pixels: the memory budget's measure for the number of workers."""
        return max((e.width * e.height for e in plan.inputs.entries), default=0)

    @abstractmethod
    def stages(self, plan: RunPlan[D], run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        """Build the run's items on the shared stage runner."""

    @abstractmethod
    def write_report(self, run: RunDir) -> Path:
        """Write the run's report (``report.html``) and return its path."""

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

    def source_check(self, plan: RunPlan[D]) -> SourceCheck:
        """``perceptforge sources check``: for each category or task, why each source cannot serve it, from the
        source folder and the profile alone: the checks the run's plan makes."""
        raise PerceptforgeError(
            f"{self.title} sources are checked one by one as the run ingests them; `sources check` covers the families "
            "whose items depend on what each source is annotated with (mvp, blink)"
        )

    def push(self, run_dir: Path, ls: LabelStudio, document_root: Path, checks: Any = None) -> dict:
        raise PerceptforgeError(f"{run_dir}: {self.title} items have no Label Studio projects")

    def strata(self, run_dir: Path) -> dict[str, list[str]]:
        """The run's item ids by the stratum a verified sample is drawn in (``annotate push --sample``)."""
        raise PerceptforgeError(f"{run_dir}: {self.title} items are not checked by sample")

    def pull(self, run_dir: Path, ls: LabelStudio, checks: Any = None) -> dict:
        raise PerceptforgeError(f"{run_dir}: {self.title} items have no Label Studio projects")


# A family's name is a command (`perceptforge run <name>`); its select option and its own options become the
# command's parameters, so they are Python names that must not take a common option's place.
FAMILY_NAME = re.compile(r"[a-z][a-z0-9_-]*")
SELECT_OPTION = re.compile(r"--[a-z][a-z0-9_]*")
COMMON_RUN_OPTIONS = frozenset(f.name for f in fields(RunRequest)) - {"select"}


def check_family(fam: Family) -> list[str]:
    """What is wrong with a family's declarations, one phrase each (none: it can be registered)."""
    problems = []
    name, title = getattr(fam, "name", None), getattr(fam, "title", None)
    if not isinstance(name, str) or not FAMILY_NAME.fullmatch(name):
        problems.append(f"name {name!r} is not a command name (lower-case letters, digits, '-' and '_')")
    if not isinstance(title, str) or not title.strip():
        problems.append("title is not set (what people call the benchmark)")
    select = fam.select_option
    if not isinstance(select, str) or not SELECT_OPTION.fullmatch(select) or select[2:] in COMMON_RUN_OPTIONS:
        problems.append(f"select_option {select!r} is not an option of its own such as '--categories' or '--tasks'")
    taken = sorted(o for o in fam.options if not o.isidentifier() or o in COMMON_RUN_OPTIONS or f"--{o}" == select)
    if taken:
        problems.append(
            f"options {taken} are not Python names of their own (every run has {sorted(COMMON_RUN_OPTIONS)})"
        )
    if isinstance(fam.export_options, str):
        problems.append(f"export_options is the string {fam.export_options!r}, not a set of ExportOptions fields")
    elif unknown := sorted(set(fam.export_options) - EXPORT_OPTIONS):
        problems.append(
            f"export_options names {unknown}, which are not ExportOptions fields ({sorted(EXPORT_OPTIONS)})"
        )
    return problems


def check_export_options(fam: Family, given: Collection[str], where: str) -> None:
    """``perceptforge export``'s options given on the command line (``ExportOptions`` field names) that the family's
    export would not read: one line naming them and the family, rather than an export that ignored them."""
    ignored = sorted(set(given) - set(fam.export_options))
    if not ignored:
        return
    flags = ", ".join(export_flag(o) for o in ignored)
    honoured = ", ".join(export_flag(o) for o in sorted(fam.export_options)) or "none of them"
    them = "it" if len(ignored) == 1 else "them"
    raise InputError(
        where,
        f"the {fam.name} family's export ({fam.title}) does not use {flags}; leave {them} out (it reads {honoured})",
    )
