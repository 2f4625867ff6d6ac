"""Which way was the photo turned? A benchmark family in one module, from another package.

Its items are BLINK-shaped (``PerceptionItem``), so ``BlinkShapedFamily`` gives it BLINK's report, export,
Label Studio verification and scorer; it writes its plan and its one stage."""

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.plugin import (
    BlinkShapedFamily,
    Lineage,
    PerceptionItem,
    RunDir,
    RunPlan,
    StagesResult,
    load_prompt,
    load_rgb,
    plan_inputs,
    register_prompt_root,
    unit_rng,
)

register_prompt_root(Path(__file__).parent / "prompts")
TURNS = ["not turned", "a quarter turn clockwise", "half a turn", "a quarter turn anticlockwise"]


def make_item(source, seed, run):
    # the unit's own generator: a rerun draws the same turn, so the run is byte-identical
    turn = int(unit_rng(seed, f"{source.id}:turn").integers(0, 4))
    image = load_rgb(run.inside(source.stored)).rotate(-90 * turn, expand=True)
    prompt = load_prompt("rotation/question")
    return PerceptionItem(
        id=f"{source.sha256[:12]}-rotation-{seed}",
        task="Rotation",
        question=prompt.render(),
        choices=TURNS,
        answer="ABCD"[turn],
        images=[run.store_image(image)],
        random_choice=25.0,
        sources=[source.id],
        lineage=Lineage(
            source_id=source.id,
            source_sha256=source.sha256,
            template_id="rotation",
            template_version=1,
            prompts=[prompt.ref()],
            seed=seed,
        ),
    )


@task(name="rotate", cache_policy=NO_CACHE)
def rotate(source, seed, run_path):
    from perceptforge.plugin import unit_record

    run = RunDir(run_path)
    # one file per finished unit: a killed run resumes, a failing unit is quarantined with its reason
    return unit_record(run, f"rotation/{source.id}.json", lambda: make_item(source, seed, run), PerceptionItem)


class RotationFamily(BlinkShapedFamily):
    name = "rotation"
    title = "Rotation"
    summary = "Which way was the photo turned? One item per source image."
    run_folders = ("rotation",)  # what --fresh removes besides the shared layout

    def plan(self, request):
        inputs = plan_inputs(request, self)  # --limit as this family counts (every image)
        return RunPlan(self.name, inputs, inputs.identity(self.name, ["rotation@v1"]), request.fresh)

    def stages(self, plan, run, runner, runtime):
        # the stage machinery loads with the run, not with every CLI command that lists the families
        from perceptforge.plugin import Unit, ingest_stage

        sources = ingest_stage(runner, plan.inputs.entries, plan.inputs.source_dir, max_pixels=None)
        units = [Unit(sid, entry.file_name, record) for sid, (entry, record) in sorted(sources.items())]
        items = [item for _, item in runner.map("rotate", rotate, units, seed=plan.inputs.seed)]
        for item in items:
            run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
        return StagesResult({"sources": len(plan.inputs.entries), "items": len(items)}, {"Rotation": len(items)})


FAMILY = RotationFamily()
