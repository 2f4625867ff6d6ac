"""The BLINK-style construction flow (BLINK §3.2): classic vision tasks as multiple-choice questions with
visual prompts, one template file per task (``flows/blink_templates/``).

ingest → build, one unit per source image × task (× visual-prompt variant), on the shared stage runner:
resume by files, quarantine with reasons, progress. A task none of the sources can serve is skipped with
the reason; the summary gives items and random-choice accuracy per task.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    StagesResult,
    check_selection,
    plan_inputs,
)
from perceptforge.logic.marks import MarkStyle
from perceptforge.logic.perception_build import style_of
from perceptforge.logic.perception_templates import PerceptionTemplate, load_perception_templates
from perceptforge.outputs.blink_report import write_blink_report
from perceptforge.prompts.library import load_prompt
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import SourceEntry
from perceptforge.tasks import ingest
from perceptforge.tasks.perception import PerceptionUnit, build_stage
from perceptforge.tasks.runner import StageRunner

# BLINK §4.3's ablation: circle radius 5 / 10 / 15 px at 1024 px height, red or grey.
COLOURS = {"red": (255, 0, 0), "grey": (128, 128, 128)}


@dataclass(frozen=True)
class Variant:
    name: str
    radius: float | None = None
    colour: tuple[int, int, int] | None = None


def parse_variants(spec: str | None) -> list[Variant]:
    """``None`` → the templates' own style; ``"5,10,15:red,grey"`` → every radius × colour (BLINK §4.3)."""
    if not spec:
        return [Variant("default")]
    radii_text, _, colours_text = spec.partition(":")
    try:
        radii = [float(r) for r in radii_text.split(",") if r.strip()] or [10.0]
    except ValueError:
        raise InputError("--prompt-variants", f"radii must be numbers, got {radii_text!r}") from None
    colours = [c.strip() for c in colours_text.split(",") if c.strip()] or ["red"]
    unknown = [c for c in colours if c not in COLOURS]
    if unknown:
        raise InputError("--prompt-variants", f"unknown colour(s) {unknown}; choose from {', '.join(COLOURS)}")
    return [Variant(f"r{r:g}-{c}", r, COLOURS[c]) for r in radii for c in colours]


# what a source must give for the tasks that pair it with other sources giving the same (style labels, keypoints)
PAIRED_NEEDS = {
    "style": "no art style label",
    "keypoints": "no keypoints",
    "functional_keypoints": "no functional keypoints",
    "reflectance": "no reflectance judgements",
}


def has(entry: SourceEntry, need: str) -> bool:
    if need == "style":
        return entry.style is not None
    if need == "reflectance":
        return bool(entry.reflectance)
    return any(r.get(need) for r in entry.regions)


def serves(
    template: PerceptionTemplate,
    entry: SourceEntry,
    n_sources: int,
    depth_model: bool = False,
    generator: bool = False,
    detector: bool = False,
) -> str | None:
    """Why ``entry`` cannot serve ``template`` (None: it can)."""
    if "generator" in template.needs and not generator:
        return "the profile names no text-to-image generator"
    if "caption" in template.needs and not entry.caption:
        return "no caption"
    if "photograph" in template.needs and entry.synthetic:
        return "a rendered image, not a photograph"
    labelled = [r for r in entry.regions if "bbox" in r and r.get("label")]
    if "labelled_boxes" in template.needs and not labelled:
        return "no labelled boxes"
    if "countable" in template.needs and not labelled and not (detector and entry.count_labels):
        return "no labelled boxes" + ("" if detector else " (and the profile's grounder is no detector)")
    if "second_image" in template.needs and n_sources < 2:
        return "needs a second source image"
    if "disparity" in template.needs and "disparity" not in entry.extras and not depth_model:
        return "no disparity map (and the profile names no depth model)"
    if "pose" in template.needs and not entry.pose:
        return "no camera pose"
    for need, why in PAIRED_NEEDS.items():
        if need in template.needs and not has(entry, need):
            return why
    if entry.pose and not entry.pose["reference"] and "pose" not in template.needs:
        return "a secondary view of a pose sequence (it serves Multi-view tasks only)"
    return None


def companions(
    template: PerceptionTemplate, sid: str, sources: dict[str, tuple[SourceEntry, Any]], pool: bool = False
) -> list:
    """The other sources a unit needs besides its own: every other view of its pose sequence, or the next
    source in id order that is not a view of the same scene (a different picture)."""
    entry = sources[sid][0]
    if "pose" in template.needs:
        sequence = entry.pose["sequence"] if entry.pose else None
        return [
            sources[k] for k in sorted(sources) if k != sid and (sources[k][0].pose or {}).get("sequence") == sequence
        ]
    paired = [n for n in ("style", "keypoints", "functional_keypoints") if n in template.needs]
    if paired:  # every other source that gives the same; the builder picks its partners among them
        return [sources[k] for k in sorted(sources) if k != sid and has(sources[k][0], paired[0])]
    if "second_image" in template.needs:
        scene = (entry.pose or {}).get("sequence")
        ids = sorted(sources)
        later = ids[ids.index(sid) + 1 :] + ids[: ids.index(sid)]
        other = [
            k
            for k in later
            if (scene is None or (sources[k][0].pose or {}).get("sequence") != scene)
            and (sources[k][0].pose or {}).get("reference", True)
        ]
        # with a perceptual embedding every other photo is a candidate; without, the next one is the "other"
        return [sources[k] for k in (other if pool else other[:1])]
    return []


@dataclass(frozen=True)
class BlinkPlan:
    profile: Profile
    seed: int
    templates: dict[str, PerceptionTemplate]
    variants: list[Variant]
    source_dir: Path
    entries: list[SourceEntry]
    out: Path
    identity: dict[str, Any]
    inputs: Inputs


def plan_blink(
    source: str | Path,
    out: str | Path,
    profile: str = "local",
    seed: int | None = None,
    limit: int | None = None,
    tasks: list[str] | None = None,
    prompt_variants: str | None = None,
    fresh: bool = False,
) -> BlinkPlan:
    """Everything the run is decided by, checked before any stage; each problem is one line."""
    found = load_perception_templates()
    templates = {k: found[k] for k in check_selection(tasks, found, "--tasks")}
    variants = parse_variants(prompt_variants)
    request = RunRequest(str(source), str(out), profile, seed, limit, tasks, fresh)
    inputs = plan_inputs(request)
    # task templates as "categories" (id@version): resume serves more of them, as in the MVP flow
    categories = [f"{k}@v{t.version}" for k, t in sorted(templates.items())]
    identity = inputs.identity("blink", categories, variants=[v.name for v in variants])
    return BlinkPlan(
        inputs.profile, inputs.seed, templates, variants, inputs.source_dir, inputs.entries, Path(out), identity, inputs
    )


def draws(template: PerceptionTemplate, entry: SourceEntry) -> int:
    """How many items a unit's source gives the template: ``items_per_source``, and never more than the
    source's reflectance judgements for a task drawn from them (one item each)."""
    wanted = int(template.params.get("items_per_source", 1))  # type: ignore[arg-type]
    return min(wanted, len(entry.reflectance)) if "reflectance" in template.needs else wanted


def plan_units(
    plan: BlinkPlan,
    sources: dict[str, tuple[SourceEntry, Any]],
    embedder: Any = None,
    depth: Any = None,
    generator: Any = None,
    detector: Any = None,
) -> tuple[list[PerceptionUnit], dict[str, str]]:
    """Every (source × task × variant) unit a source can serve, and each task no source serves, with why."""
    ids = sorted(sources)
    units: list[PerceptionUnit] = []
    skipped: dict[str, str] = {}
    for tid, template in sorted(plan.templates.items()):
        reasons: Counter[str] = Counter()
        for sid in ids:
            entry, _ = sources[sid]
            why = serves(template, entry, len(ids), depth is not None, generator is not None, detector is not None)
            if why:
                reasons[why] += 1
                continue
            extra = companions(template, sid, sources, pool=embedder is not None)
            index = len({u.sources[0][0].source_id for u in units if u.template.id == tid})
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
                            index,
                            embedder,
                            depth,
                            generator,
                            draw,
                            detector if "countable" in template.needs else None,
                        )
                    )
        if not any(u.template.id == tid for u in units):
            skipped[tid] = "; ".join(f"{n} sources: {why}" for why, n in sorted(reasons.items())) or "no sources"
    return units, skipped


def blink_stages(plan: BlinkPlan, runner: StageRunner, runtime: Runtime) -> StagesResult:
    """ingest → build; the summary's figures: items and random-choice accuracy per task, skipped tasks."""
    sources = ingest.ingest_stage(runner, plan.entries, plan.source_dir, max_pixels=plan.profile.ingest.max_pixels)
    # a perceptual embedding for Visual Similarity: the profile's embedder (DINOv2 …), else its CLIP gate model
    embedder = plan.profile.build("embedder", runtime) or plan.profile.build_clip_gate(runtime)
    depth = plan.profile.build("depth", runtime)
    generator = plan.profile.build("generator", runtime)
    # the profile's grounder counts for Counting when it is an open-vocabulary detector (a VLM that boxes things)
    grounder = plan.profile.build("grounder", runtime)
    detector = grounder if hasattr(grounder, "detect") else None
    units, skipped = plan_units(plan, sources, embedder, depth, generator, detector)
    # Models load here, once, before the units run in threads (a diffusers pipeline loaded by two threads
    # at once breaks), and only when some unit's task asks for them.
    asked = {need for u in units for need in u.template.needs}
    for model, need in (
        (embedder, "second_image"),
        (depth, "disparity"),
        (generator, "generator"),
        (detector, "countable"),
    ):
        if model is not None and need in asked:
            model.load()
    models = tuple(m for m in (embedder, depth, generator, detector) if m is not None)
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


class BlinkFamily(Family):
    name = "blink"
    title = "BLINK"
    summary = "Build BLINK-style items (BLINK §3.2: vision tasks as MCQs with visual prompts) from SOURCE into OUT."
    select_option = "--tasks"
    options = {
        "prompt_variants": "BLINK §4.3's visual-prompt ablation as variants of one split: RADII:COLOURS, "
        "e.g. 5,10,15:red,grey"
    }
    audit_benchmark = "blink"
    scorer_benchmark = "blink"

    def plan(self, request: RunRequest) -> RunPlan:
        blink = plan_blink(
            request.source,
            request.out,
            request.profile,
            request.seed,
            request.limit,
            request.select,
            request.options.get("prompt_variants"),
            request.fresh,
        )
        return RunPlan(self.name, blink.inputs, blink.identity, request.fresh, blink)

    def stages(self, plan: RunPlan, run: RunDir, runner: StageRunner, runtime: Runtime) -> StagesResult:
        return blink_stages(plan.details, runner, runtime)

    def write_report(self, run: RunDir) -> Path:
        return Path(write_blink_report(run))

    def table(self, summary: dict) -> tuple[str, list[str], list[list[str]]]:
        rows = [
            [t, str(n), f"{summary['random_choice_per_task'][t]:.1f}"] for t, n in summary["items_per_task"].items()
        ]
        title = f"blink run · seed {summary['seed']} · variants {', '.join(summary['variants'])}"
        return title, ["task", "items", "random choice %"], rows

    def notes(self, summary: dict) -> list[str]:
        return [f"[dim]skipped {t}: {why}[/]" for t, why in summary["skipped_tasks"].items()]

    def export(self, run_dir: Path, out: Path, options: ExportOptions) -> Exported:
        from perceptforge.outputs.blink_export import export_blink

        written = export_blink(run_dir, out)
        return Exported(
            f"BLINK layout: {len(written)} files → [bold]{out}[/] (score with `perceptforge score blink "
            f"--data {out}/<Task>/val-00000-of-00001.parquet …` or --data {out}/val_answers.json)",
            [out / "val_answers.json"],
        )


FAMILY = BlinkFamily()
