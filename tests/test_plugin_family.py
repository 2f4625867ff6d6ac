"""Extension without editing the repository: a package written by the test brings a whole benchmark family
(`perceptforge.families`) and a BLINK-style task (`perceptforge.blink_tasks`) through entry points. Both run
through `perceptforge run`, are verified by two annotators on the real Label Studio server, exported and
scored, and `git status` of the repository is the same afterwards."""

import json
import subprocess
from pathlib import Path

import pytest
from helpers import annotate, dist_info, perceptforge_cmd

from perceptforge.annotation.labeling import choice, text
from perceptforge.flows.registry import family_of_run, registered

REPO = Path(__file__).resolve().parents[1]

ROTATION = '''
"""Which way was the photo turned? A benchmark family in one module, from another package."""
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from perceptforge.data.schema import Lineage, PerceptionItem
from perceptforge.flows.blink import BlinkFamily
from perceptforge.flows.family import Family, RunPlan, StagesResult, plan_inputs
from perceptforge.logic.ids import unit_rng
from perceptforge.prompts.library import load_prompt, register_prompt_root
from perceptforge.store.images import load_rgb
from perceptforge.store.rundir import RunDir
from perceptforge.tasks.ingest import ingest_stage
from perceptforge.tasks.runner import Unit, unit_record

register_prompt_root(Path(__file__).parent / "prompts")
TURNS = ["not turned", "a quarter turn clockwise", "half a turn", "a quarter turn anticlockwise"]


def make_item(source, seed, run):
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
            source_id=source.id, source_sha256=source.sha256, template_id="rotation", template_version=1,
            prompts=[prompt.ref()], seed=seed,
        ),
    )


@task(name="rotate", cache_policy=NO_CACHE)
def rotate(source, seed, run_path):
    run = RunDir(run_path)
    return unit_record(run, f"rotation/{source.id}.json", lambda: make_item(source, seed, run), PerceptionItem)


class RotationFamily(Family):
    name = "rotation"
    title = "Rotation"
    summary = "Which way was the photo turned? One item per source image."
    audit_benchmark = scorer_benchmark = "blink"
    run_folders = ("rotation",)  # what --fresh removes besides the shared layout
    # BLINK-shaped items: BLINK's Label Studio verification, export and report serve them as they are
    export, push, pull, write_report = BlinkFamily.export, BlinkFamily.push, BlinkFamily.pull, BlinkFamily.write_report
    export_options = BlinkFamily.export_options  # what that export reads (--license, --only-verified)

    def plan(self, request):
        inputs = plan_inputs(request, self)  # --limit as this family counts (every image)
        return RunPlan(self.name, inputs, inputs.identity(self.name, ["rotation@v1"]), request.fresh)

    def stages(self, plan, run, runner, runtime):
        sources = ingest_stage(runner, plan.inputs.entries, plan.inputs.source_dir, max_pixels=None)
        units = [Unit(sid, entry.file_name, record) for sid, (entry, record) in sorted(sources.items())]
        items = [item for _, item in runner.map("rotate", rotate, units, seed=plan.inputs.seed)]
        for item in items:
            run.write_record(f"items/{item.id}.json", item.model_dump(mode="json"))
        return StagesResult({"sources": len(plan.inputs.entries), "items": len(items)}, {"Rotation": len(items)})


FAMILY = RotationFamily()
'''
PIECE_FIT = """\
id: piece_fit
version: 1
task: Piece_Fit
builder: jigsaw
needs: [image]
prompt: blink_ext/piece_fit
choices: 2
random_choice: 50.0
"""


def package(root: Path) -> Path:
    """A distribution on PYTHONPATH: the family module with its prompt, a task package with its prompt."""
    pkg = root / "pf_fam"
    (pkg / "prompts" / "rotation").mkdir(parents=True)
    (pkg / "tasks" / "prompts" / "blink_ext").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rotation.py").write_text(ROTATION)
    (pkg / "prompts" / "rotation" / "question.v1.txt").write_text("Which way was this photo turned from upright?\n")
    (pkg / "tasks" / "__init__.py").write_text("")
    (pkg / "tasks" / "piece_fit.yaml").write_text(PIECE_FIT)
    (pkg / "tasks" / "prompts" / "blink_ext" / "piece_fit.v1.txt").write_text(
        "The first image lacks its lower-right part. Which of the next two images fits the gap?\n"
    )
    return dist_info(
        root,
        "pf-fam",
        """\
        [perceptforge.families]
        rotation = pf_fam.rotation:FAMILY
        [perceptforge.blink_tasks]
        pf = pf_fam.tasks
        """,
    )


def cli(env, *args):
    return subprocess.run([*perceptforge_cmd(), *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


def repository_state() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True, text=True
    ).stdout


def test_a_family_and_a_task_from_another_package(label_studio, tmp_path, sample_dir, cli_env, monkeypatch, request):
    before = repository_state()
    ext = package(tmp_path / "ext")
    env = dict(cli_env, PYTHONPATH=str(ext))
    root = label_studio.document_root  # the session's temporary root: tmp_path lies under it
    runs = {"rotation": tmp_path / "rotation", "blink": tmp_path / "piece_fit"}

    listed = cli(env, "run", "--help")
    assert listed.returncode == 0 and "rotation" in listed.stdout
    made = cli(env, "run", "rotation", "--source", sample_dir, "--out", runs["rotation"], "--limit", "3")
    assert made.returncode == 0, made.stderr[-2000:]
    made = cli(
        env, "run", "blink", "--source", sample_dir, "--out", runs["blink"], "--tasks", "piece_fit", "--limit", "3"
    )
    assert made.returncode == 0, made.stderr[-2000:]
    # every rotation item is true of its picture: the stored image is the source turned as the answer says
    for path in sorted((runs["rotation"] / "items").glob("*.json")):
        item = json.loads(path.read_text())
        assert item["task"] == "Rotation" and item["lineage"]["prompts"][0]["id"] == "rotation/question"

    # the plug-ins load in this process too: what they register (a prompt root, a family) goes with the test
    from perceptforge.prompts import library

    monkeypatch.setattr(library, "_registered", [])
    monkeypatch.syspath_prepend(str(ext))
    registered.cache_clear()
    request.addfinalizer(registered.cache_clear)
    ls = label_studio.client()
    ann1, ann2 = (label_studio.client(a) for a in label_studio.annotators)
    for name, run in runs.items():
        fam = family_of_run(run)
        assert fam.name == name
        pushed = fam.push(run, ls, root)
        assert pushed["imported"] == 3 and fam.push(run, ls, root)["imported"] == 0
        tasks = sorted(
            (t for pid in pushed["projects"].values() for t in ls.export(pid)), key=lambda t: t["data"]["item_id"]
        )
        # both accept the first item, disagree on the second, both reject the third
        plan = [("Accept", "Accept"), ("Accept", "Reject"), ("Reject", "Reject")]
        for task, verdicts in zip(tasks, plan):
            for who, verdict in zip((ann1, ann2), verdicts):
                result = [choice("verdict", "image_1", verdict)]
                if verdict == "Reject":
                    result.append(text("reject_reason", "image_1", "the answer does not follow from the picture"))
                annotate(who, task["id"], result)
        summary = fam.pull(run, ls)
        assert summary["items"] == 3 and summary["status"].get("kept") == 1, summary
        overall = summary["agreement"]["overall"]
        assert overall["items"] == 3 and overall["percent_agreement"] == pytest.approx(66.67, abs=0.01)

        out = tmp_path / f"{name}-export"
        exported = cli(env, "export", run, "--out", out)
        assert exported.returncode == 0, exported.stderr[-2000:]
        manifest = json.loads((out / "manifest.json").read_text())
        on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {"manifest.json"}
        assert set(manifest["files"]) >= on_disk - {"audit.json", "audit.html"}
        assert "66.67" in (out / "README.md").read_text()
        answers = json.loads((out / "val_answers.json").read_text())
        preds = tmp_path / f"{name}.jsonl"
        preds.write_text("".join(json.dumps({"idx": idx, "output": a}) + "\n" for idx, a in answers.items()))
        scored = cli(
            env,
            "score",
            "blink",
            "--data",
            out / "val_answers.json",
            "--predictions",
            preds,
            "--json",
            tmp_path / f"{name}.json",
        )
        assert scored.returncode == 0, scored.stderr[-2000:]
        task = "Rotation" if name == "rotation" else "Piece_Fit"
        assert json.loads((tmp_path / f"{name}.json").read_text())["tasks"] == {task: 100.0}

    assert repository_state() == before  # nothing in the repository was touched
