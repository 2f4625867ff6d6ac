"""The BLINK-style construction flow (BLINK §3.2): classic vision tasks as multiple-choice questions with
visual prompts, one template file per task (``flows/blink_templates/``).

ingest → build, one unit per source image × task (× visual-prompt variant), on the shared stage runner:
resume by files, quarantine with reasons, progress. A task none of the sources can serve is skipped with
the reason; the summary gives items and random-choice accuracy per task.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perceptforge.backends.registry import Runtime
from perceptforge.configs.profile import Profile
from perceptforge.errors import InputError
from perceptforge.flows.family import (
    Exported,
    ExportOptions,
    Family,
    Inputs,
    RunPlan,
    RunRequest,
    SourceCheck,
    StagesResult,
    check_selection,
    plan_inputs,
)
from perceptforge.logic.blink import needs
from perceptforge.logic.blink.build import builders, style_of
from perceptforge.logic.blink.templates import PerceptionTemplate, TaskFiles, read_tasks
from perceptforge.logic.marks import MarkStyle
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry

if TYPE_CHECKING:  # the stages load with the run, not with the CLI: `perceptforge --help` stays quick
    from perceptforge.tasks.blink import PerceptionUnit
    from perceptforge.tasks.runner import StageRunner

log = logging.getLogger("perceptforge")
_WARNED: set[str] = set()

# BLINK §4.3's ablation: circle radius 5 / 10 / 15 px at 1024 px height, red or grey.
COLOURS = {"red": (255, 0, 0), "grey": (128, 128, 128)}


@dataclass(frozen=True)
class Variant:
    name: str
    radius: float | None = None
    colour: tuple[int, int, int] | None = None


def parse_variants(spec: str | None) -> list[Variant]:
    """``None`` → the templates' own style; ``"5,10,15:red,grey"`` → every radius × colour (BLINK §4.3). A part
    left out (``":grey"``, ``"5"``) takes its default (10 px, red); a part given that names nothing (``","``), a
    radius that is not a positive number of pixels up to ``MAX_RADIUS``, or one named twice is one line: each
    would otherwise give the default silently, a mark no one can see or place, or two variants writing one file."""
    if not spec:
        return [Variant("default")]
    radii_text, _, colours_text = spec.partition(":")
    radii = [parse_radius(r) for r in listed(radii_text, "radii")] or [10.0]
    colours = listed(colours_text, "colours") or ["red"]
    unknown = [c for c in colours if c not in COLOURS]
    if unknown:
        raise InputError("--prompt-variants", f"unknown colour(s) {unknown}; choose from {', '.join(COLOURS)}")
    variants = [Variant(f"r{r:g}-{c}", r, COLOURS[c]) for r in radii for c in colours]
    names = [v.name for v in variants]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(
            "--prompt-variants", f"{spec!r} names the variant(s) {twice} twice: list each radius and colour once"
        )
    return variants


MAX_RADIUS = 200.0  # px at 1024 px height; BLINK's ablation uses 5 to 15, and a larger circle hides the photo


def listed(text: str, what: str) -> list[str]:
    """The comma-separated values of one part of ``--prompt-variants``; a part given that names none is an error."""
    values = [v.strip() for v in text.split(",") if v.strip()]
    if text.strip() and not values:
        raise InputError("--prompt-variants", f"the {what} part {text!r} names no value: e.g. 5,10,15:red,grey")
    return values


def parse_radius(text: str) -> float:
    try:
        radius = float(text)
    except ValueError:
        raise InputError("--prompt-variants", f"radii must be numbers, got {text!r}") from None
    if not 0 < radius <= MAX_RADIUS:  # also refuses nan and inf, which compare false
        raise InputError(
            "--prompt-variants", f"a radius must be more than 0 and at most {MAX_RADIUS:g} px, got {text!r}"
        )
    return radius


def has(entry: SourceEntry, need: str) -> bool:
    """Whether the source itself gives ``need`` (``logic/blink/needs``)."""
    return needs.source_gives(entry, need)


def serves(
    template: PerceptionTemplate, entry: SourceEntry, n_sources: int, models: Collection[str] = ()
) -> str | None:
    """Why ``entry`` cannot serve ``template`` in a run of ``n_sources`` whose profile has ``models`` (None: it can)."""
    return needs.unmet(template.needs, entry, n_sources, models)


def companions(
    template: PerceptionTemplate, sid: str, sources: dict[str, tuple[SourceEntry, Any]], models: Collection[str] = ()
) -> list:
    """The other sources a unit needs besides its own (``logic/blink/needs.companions``)."""
    ids = needs.companions(template.needs, sid, {k: entry for k, (entry, _) in sources.items()}, models)
    return [sources[k] for k in ids]


@dataclass(frozen=True)
class BlinkPlan:
    """What a BLINK-style run decided beyond every family's inputs: its task templates and prompt variants."""

    inputs: Inputs
    templates: dict[str, PerceptionTemplate]
    variants: list[Variant]
    identity: dict[str, Any]

    @property
    def profile(self) -> Profile:
        return self.inputs.profile

    @property
    def seed(self) -> int:
        return self.inputs.seed

    @property
    def source_dir(self) -> Path:
        return self.inputs.source_dir

    @property
    def entries(self) -> list[SourceEntry]:
        return self.inputs.entries


def plan_blink(request: RunRequest, family: Family | None = None) -> BlinkPlan:
    """Everything the run is decided by, checked before any stage; each problem is one line. ``family`` says which
    sources ``--limit`` keeps (``BlinkFamily``: not the second views it counts; none: every source counts)."""
    templates = selected_tasks(read_tasks(builders=builders()), request.select)
    variants = parse_variants(request.options.get("prompt_variants"))
    inputs = plan_inputs(request, family)
    # task templates as "categories" (id@version): resume serves more of them, as in the MVP flow
    categories = [f"{k}@v{t.version}" for k, t in sorted(templates.items())]
    identity = inputs.identity("blink", categories, variants=[v.name for v in variants])
    return BlinkPlan(inputs, templates, variants, identity)


def selected_tasks(found: TaskFiles, select: list[str] | None) -> dict[str, PerceptionTemplate]:
    """The tasks a run builds (all that load, or those ``select`` names). A broken task file stops the run only
    when it is asked for by name; otherwise it is one warning line and the run goes on without it."""
    unknown = sorted(set(select or ()) - set(found.broken) - set(found.templates))
    if unknown and found.unreadable:  # the task asked for may live in a file whose id could not be read
        first = found.unreadable[0]
        raise InputError(first.where, f"{first.what} (and --tasks asks for {unknown}, which no readable file defines)")
    chosen = check_selection(select, {**found.broken, **found.templates}, "--tasks", "task(s)") if select else []
    chosen = chosen or sorted(found.templates)
    for tid in chosen:
        if tid in found.broken:
            raise found.broken[tid]
    for error in found.problems():
        if str(error) not in _WARNED:  # the CLI plans before the flow plans again: one line per process
            _WARNED.add(str(error))
            log.warning("BLINK task file skipped: %s", error)
    return {k: found.templates[k] for k in chosen}


def draws(template: PerceptionTemplate, entry: SourceEntry) -> int:
    """How many items a unit's source gives the template: ``items_per_source``, and never more than its needs
    allow (one item per reflectance judgement)."""
    wanted = int(template.params.get("items_per_source", 1))  # type: ignore[arg-type]
    return needs.items_per_source(template.needs, wanted, entry)


def plan_units(
    plan: BlinkPlan, sources: dict[str, tuple[SourceEntry, Any]], models: Collection[str] = ()
) -> tuple[list[PerceptionUnit], dict[str, str]]:
    """Every (source × task × variant) unit a source can serve when the profile has ``models`` (their names), and
    each task no source serves, with why."""
    from perceptforge.tasks.blink import PerceptionUnit

    ids = sorted(sources)
    units: list[PerceptionUnit] = []
    skipped: dict[str, str] = {}
    for tid, template in sorted(plan.templates.items()):
        reasons: Counter[str] = Counter()
        for sid in ids:
            entry, _ = sources[sid]
            why = serves(template, entry, len(ids), models)
            if why:
                reasons[why] += 1
                continue
            extra = companions(template, sid, sources, models)
            # a template may draw several items from one source (``items_per_source``: points of one depth map)
            for draw in range(draws(template, entry)):
                for variant in plan.variants:
                    style: MarkStyle = style_of(template, variant.radius, variant.colour)
                    suffix = ("" if draw == 0 else f"-{draw + 1}") + (
                        "" if variant.name == "default" else f"-{variant.name}"
                    )
                    units.append(
                        PerceptionUnit(
                            f"{sid}-{tid}{suffix}",
                            template,
                            (sources[sid], *extra),
                            variant.name,
                            style,
                            plan.source_dir,
                            draw,
                        )
                    )
        if not any(u.template.id == tid for u in units):
            skipped[tid] = "; ".join(f"{n} sources: {why}" for why, n in sorted(reasons.items())) or "no sources"
    return units, skipped


def profile_models(prof: Profile, runtime: Runtime) -> dict[str, Any]:
    """The profile's models a task may use, by the names ``logic/blink/needs`` gives them; each worker loads
    those its units use, once (backends/loaded)."""
    # a perceptual embedding for Visual Similarity: the profile's embedder (DINOv2 …), else its CLIP gate model
    embedder = prof.spec("embedder", runtime) or prof.clip_gate_spec(runtime)
    # the profile's grounder counts for Counting when it is an open-vocabulary detector (a VLM that boxes things)
    grounder = prof.spec("grounder", runtime)
    detector = grounder if hasattr(grounder.build(), "detect") else None
    specs = {
        "embedder": embedder,
        "depth": prof.spec("depth", runtime),
        "generator": prof.spec("generator", runtime),
        "detector": detector,
    }
    return {name: spec for name, spec in specs.items() if spec is not None}


def blink_stages(plan: BlinkPlan, runner: StageRunner, runtime: Runtime) -> StagesResult:
    """ingest → build; the summary's figures: items and random-choice accuracy per task, skipped tasks."""
    from perceptforge.tasks import ingest
    from perceptforge.tasks.blink import build_stage

    sources = ingest.ingest_stage(runner, plan.entries, plan.source_dir, max_pixels=plan.profile.ingest.max_pixels)
    models = profile_models(plan.profile, runtime)
    units, skipped = plan_units(plan, sources, frozenset(models))
    items = build_stage(runner, units, plan.seed, models)
    per_task = dict(sorted(Counter(i.task for i in items).items()))
    random_choice = {t.task: t.random_choice for t in plan.templates.values() if t.task in per_task}
    figures = {
        "variants": [v.name for v in plan.variants],
        "items_per_task": per_task,
        "random_choice_per_task": dict(sorted(random_choice.items())),
        # BLINK's random row: the mean over tasks of each task's random-choice accuracy
        "random_choice_overall": round(sum(random_choice.values()) / len(random_choice), 2) if random_choice else None,
        "skipped_tasks": skipped,
        "prompts": sorted({f"{t.prompt} v{load_prompt(t.prompt).version}" for t in plan.templates.values()}),
    }
    counts = {"sources": len(plan.entries), "units": len(units), "items": len(items)}
    return StagesResult(counts, per_task, figures)


class BlinkShapedFamily(Family[BlinkPlan]):
    """A family whose items are BLINK-shaped (``PerceptionItem`` records in ``items/``): BLINK's report, export
    (its layout, ``tasks.json``, items.jsonl with decisions), Label Studio verification, audit and scorer serve
    them as they are. A subclass sets ``name`` and ``title`` and implements ``plan`` and ``stages``."""

    audit_benchmark = "blink"
    scorer_benchmark = "blink"
    # BLINK's layout has no val/test split of ours and one format: --formats, --seed and --val-fraction are refused
    export_options = frozenset({"license", "only_verified"})

    def write_report(self, run: RunDir) -> Path:
        from perceptforge.outputs.blink_report import write_blink_report

        return Path(write_blink_report(run))

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> Exported:
        """BLINK's official layout, with tasks.json, items.jsonl (lineage, decisions), verification.json once
        pulled, the data card and the manifest."""
        from perceptforge.outputs.blink_export import export_blink

        manifest = export_blink(run_dir, out, options.license, options.only_verified)
        return Exported(
            f"BLINK layout: {manifest['items']} items, {len(manifest['files'])} files → [bold]{out}[/] (score with "
            f"`perceptforge score blink --data {out}/<Task>/val-00000-of-00001.parquet …` or --data "
            f"{out}/val_answers.json)",
            [out / "val_answers.json"],
            manifest=manifest,
        )

    def push(self, run_dir: Path, ls: Any, document_root: Path, checks: Any = None) -> dict:
        """One Label Studio project per task: two annotators accept, reject with a reason, or correct the answer."""
        from perceptforge.annotation.blink import push

        return push(run_dir, ls, document_root)

    def pull(self, run_dir: Path, ls: Any, checks: Any = None) -> dict:
        from perceptforge.annotation.blink import pull

        return pull(run_dir, ls)

    def strata(self, run_dir: Path) -> dict[str, list[str]]:
        """By BLINK task: each is scored apart."""
        from perceptforge.outputs.blink_export import load_perception_items

        by: dict[str, list[str]] = {}
        for item in load_perception_items(run_dir):
            by.setdefault(item.task, []).append(item.id)
        return by


class BlinkFamily(BlinkShapedFamily):
    name = "blink"
    title = "BLINK"
    summary = "Build BLINK-style items (BLINK §3.2: vision tasks as MCQs with visual prompts) from SOURCE into OUT."
    select_option = "--tasks"
    options = {
        "prompt_variants": "BLINK §4.3's visual-prompt ablation as variants of one split: RADII:COLOURS, "
        "e.g. 5,10,15:red,grey"
    }

    def plan(self, request: RunRequest) -> RunPlan[BlinkPlan]:
        blink = plan_blink(request, self)
        return RunPlan(self.name, blink.inputs, blink.identity, request.fresh, blink)

    def counts_toward_limit(self, entry: SourceEntry) -> bool:
        """Not a secondary view of a pose sequence: it is a companion of its sequence's other views."""
        return not needs.secondary_view(entry)

    def comes_along(self, entry: SourceEntry, kept: list[SourceEntry]) -> bool:
        """A second view comes with a kept photo of its pose sequence or scene, whose Multi-view and Visual
        Similarity units take it along (without that photo, its own units would pair it with fewer views)."""
        return needs.accompanies(entry, kept)

    def stages(self, plan: RunPlan[BlinkPlan], run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        return blink_stages(plan.details, runner, runtime)

    def table(self, summary: dict) -> tuple[str, list[str], list[list[str]]]:
        rows = [
            [t, str(n), f"{summary['random_choice_per_task'][t]:.1f}"] for t, n in summary["items_per_task"].items()
        ]
        title = f"blink run · seed {summary['seed']} · variants {', '.join(summary['variants'])}"
        return title, ["task", "items", "random choice %"], rows

    def notes(self, summary: dict) -> list[str]:
        return [f"[dim]skipped {t}: {why}[/]" for t, why in summary["skipped_tasks"].items()]

    def source_check(self, plan: RunPlan[BlinkPlan]) -> SourceCheck:
        """Per task, why each source cannot serve it with this profile's models."""
        blink: BlinkPlan = plan.details
        models = frozenset(profile_models(blink.profile, blink.profile.runtime()))
        n = len(blink.entries)
        return SourceCheck(
            {
                tid: {e.source_id: serves(t, e, n, models) for e in blink.entries}
                for tid, t in sorted(blink.templates.items())
            }
        )


FAMILY = BlinkFamily()
