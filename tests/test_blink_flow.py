"""The BLINK-style flow on the bundled sources: at least 8 of BLINK's 14 tasks, byte-identical reruns, a
resumed run, the visual-prompt variants, BLINK's official layout, and `perceptforge score blink` on it with
hand-written predictions whose accuracy is known."""

import json
import subprocess
from collections import Counter

import numpy as np
import pytest
from helpers import perceptforge_cmd
from PIL import Image

from perceptforge.data.schema import PerceptionItem
from perceptforge.errors import InputError
from perceptforge.flows.blink import parse_variants
from perceptforge.flows.run import run as run_flow
from perceptforge.outputs.blink_export import export_blink
from perceptforge.scorer.benchmarks import blink as blink_scorer


@pytest.fixture(scope="module")
def blink_run(prefect_api, sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("blink") / "run"
    return out, run_flow("blink", source=str(sample_dir), out=str(out), seed=0)


def item_files(run):
    return {p.name: p.read_bytes() for p in sorted((run / "items").glob("*.json"))}


def test_builds_at_least_eight_blink_tasks_from_the_bundled_sources(blink_run):
    run, summary = blink_run
    assert len(summary["items_per_task"]) >= 9
    assert set(summary["items_per_task"]) <= set(blink_scorer.task_table())  # BLINK's own task names
    assert summary["random_choice_per_task"]["Jigsaw"] == 50.0 and summary["random_choice_per_task"]["Counting"] == 25.0
    rc = summary["random_choice_per_task"]
    assert summary["random_choice_overall"] == round(sum(rc.values()) / len(rc), 2)
    items = [PerceptionItem.model_validate_json(b) for b in item_files(run).values()]
    assert len(items) == summary["counts"]["items"]
    for item in items:
        assert item.lineage.template_id and item.lineage.prompts and item.sources
        for image in item.images:
            assert (run / image.path).is_file()
    # every quarantined unit says why
    for line in (run / "quarantine.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["stage"] == "build" and record["detail"]
    assert "Relative_Depth" in (run / "report.html").read_text()


def test_items_are_true_of_their_construction(blink_run, sample_dir):
    run, _ = blink_run
    items = [PerceptionItem.model_validate_json(b) for b in item_files(run).values()]
    disparity = np.asarray(Image.open(sample_dir / "depth" / "depth_scene.png"), np.float64) / 256
    depths = [i for i in items if i.task == "Relative_Depth"]
    assert len(depths) == 5  # items_per_source: 5 point pairs from the one depth map
    for depth in depths:
        a, b = ((round(m.at[0]), round(m.at[1])) for m in depth.marks)
        closer = "A" if disparity[a[1], a[0]] > disparity[b[1], b[0]] else "B"
        assert depth.answer == closer and depth.choices == ["A", "B"]
        marked = np.asarray(Image.open(run / depth.images[0].path).convert("RGB"))
        assert tuple(marked[a[1], a[0]]) != (255, 0, 0)  # the circle leaves its point visible
    yaws = {"7": 0.0, "8": -12.0, "9": 12.0}  # the bundled views of the pillar scene
    views = [i for i in items if i.task == "Multi-view_Reasoning"]
    # three views, each pair at most once (never also reversed): 7 pairs with one of 8 and 9, 8 with 9, 9 with none
    assert len(views) == 2 and len({frozenset(i.sources) for i in views}) == 2
    for item in views:
        first, second = (yaws[s] for s in item.sources)
        assert item.choices == ["left", "right"] and item.choices["AB".index(item.answer)] == (
            "right" if second > first else "left"
        )
    iq = [i for i in items if i.task == "IQ_Test"]
    assert len({i.images[0].sha256 for i in iq}) == len(iq)  # no puzzle twice
    # Visual Similarity pairs a photo only with another of its scene: the pillar scene's views, never a stranger
    similar = [i for i in items if i.task == "Visual_Similarity"]
    assert similar and all(i.sources[0] == "7" and i.sources[1] in {"8", "9"} for i in similar)
    # Counting counts only completely boxed labels; the rocket's four lightning towers give a count other than 1
    counted = {i.sources[0]: i.choices["ABCD".index(i.answer)] for i in items if i.task == "Counting"}
    assert counted["6"] == "4" and "lightning towers" in next(
        i.question for i in items if i.task == "Counting" and i.sources == ["6"]
    )
    # Object Localization: the labelled box beats the distractor by the template's margin, labels outside both boxes
    from perceptforge.logic.blink.answers import localization_margin

    for item in (i for i in items if i.task == "Object_Localization"):
        boxes = [tuple(m.at) for m in item.marks]
        right = "AB".index(item.answer)
        assert localization_margin(boxes[right], boxes[1 - right]) >= 0.3
    # Relative Reflectance from the rendered scene's exact albedo: the darker point by albedo luminance, or about
    # the same (one material seen at two depths: the fog makes them look different)
    from synthetic_scene import _render

    _, _, albedo = _render(0.0)
    lum = albedo @ np.array([0.2126, 0.7152, 0.0722])
    reflectance = [i for i in items if i.task == "Relative_Reflectance"]
    assert len(reflectance) == 5
    for item in reflectance:
        (ax, ay), (bx, by) = ((round(m.at[0]), round(m.at[1])) for m in item.marks)
        truth = (
            "About the same"
            if lum[ay, ax] == lum[by, bx]
            else ("A is darker" if lum[ay, ax] < lum[by, bx] else "B is darker")
        )
        assert item.choices["ABC".index(item.answer)] == truth
    answered = [i.choices["ABC".index(i.answer)] for i in reflectance]
    assert answered.count("About the same") == 2 and len(answered) - answered.count("About the same") == 3
    for item in items:
        assert len(item.choices) == {
            "Counting": 4,
            "IQ_Test": 4,
            "Visual_Correspondence": 4,
            "Relative_Reflectance": 3,
        }.get(item.task, 2)
        if item.task == "Counting":
            assert all(int(c) >= 1 for c in item.choices) and len(set(item.choices)) == 4


def test_rerun_is_byte_identical_and_a_killed_run_resumes(blink_run, sample_dir, tmp_path):
    run, _ = blink_run
    again = tmp_path / "again"
    run_flow("blink", source=str(sample_dir), out=str(again), seed=0)
    assert item_files(again) == item_files(run)
    # a run that lost some finished units (killed before they were written) builds only those again
    lost = sorted((again / "perception").glob("*.json"))[:5]
    for path in lost:
        path.unlink()
    for path in (again / "items").glob("*.json"):
        path.unlink()
    run_flow("blink", source=str(sample_dir), out=str(again), seed=0)
    assert item_files(again) == item_files(run)


def test_prompt_variants_are_the_same_questions_with_other_marks(prefect_api, sample_dir, tmp_path):
    assert [v.name for v in parse_variants("5,15:red,grey")] == ["r5-red", "r5-grey", "r15-red", "r15-grey"]
    with pytest.raises(InputError, match="unknown colour"):
        parse_variants("10:blue")
    summary = run_flow(
        "blink",
        source=str(sample_dir),
        out=str(tmp_path / "v"),
        seed=0,
        tasks=["relative_depth"],
        prompt_variants="5,15:red,grey",
    )
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "v" / "items").glob("*.json")]
    # the template draws 5 point pairs from the scene's depth map, each drawn four ways
    assert summary["items_per_task"] == {"Relative_Depth": 20}
    assert {i.variant for i in items} == {"r5-red", "r5-grey", "r15-red", "r15-grey"}
    points = Counter(tuple(tuple(m.at) for m in i.marks) for i in items)
    assert len(points) == 5 and set(points.values()) == {4}
    assert len({i.images[0].sha256 for i in items}) == 20


def test_the_audit_reads_a_blink_run_and_finds_no_duplicates(blink_run, tmp_path):
    from perceptforge.audit.run import audit

    run, summary = blink_run
    doc = audit([run], tmp_path / "audit")
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["items"] == summary["counts"]["items"] and checks["balance"]["passed"] is True
    # photos reused across tasks come from one source, so they are not duplicates; no two items repeat
    assert checks["duplicates"]["passed"] is True, checks["duplicates"]["flags"]


def test_blink_layout_scores_with_the_blink_scorer(blink_run, tmp_path, cli_env):
    run, summary = blink_run
    out = tmp_path / "blink"
    export_blink(run, out)
    answers = json.loads((out / "val_answers.json").read_text())
    assert len(answers) == summary["counts"]["items"]
    parquets = sorted(out.glob("*/val-00000-of-00001.parquet"))
    assert {p.parent.name for p in parquets} == set(summary["items_per_task"])
    import pyarrow.parquet as pq

    row = pq.read_table(parquets[0]).to_pylist()[0]
    assert (
        row["answer"] in {f"({c})" for c in "ABCD"}
        and row["image_1"]["bytes"]
        and row["prompt"].endswith(row["choices"][-1])
    )
    concat = pq.read_table(out / "concat" / "Jigsaw" / "val-00000-of-00001.parquet").to_pylist()[0]
    assert concat["image_2"] is None  # the three Jigsaw images joined into one
    # right on the first item of each task, wrong on every other
    preds = tmp_path / "preds.jsonl"
    with open(preds, "w") as f:
        for idx, answer in answers.items():
            letter = answer[1] if idx.endswith("_1") else ("B" if answer[1] == "A" else "A")
            f.write(json.dumps({"idx": idx, "output": f"The answer is ({letter})."}) + "\n")
    scored = subprocess.run(
        [
            *perceptforge_cmd(),
            "score",
            "blink",
            *(a for p in parquets for a in ("--data", str(p))),
            "--predictions",
            str(preds),
            "--json",
            str(tmp_path / "s.json"),
        ],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=300,
    )
    assert scored.returncode == 0, scored.stderr
    tasks = json.loads((tmp_path / "s.json").read_text())["tasks"]
    assert set(tasks) == set(summary["items_per_task"])
    assert all(tasks[t] == pytest.approx(100 / n, abs=0.01) for t, n in summary["items_per_task"].items())


def test_bundled_depth_scene_is_what_the_renderer_draws(sample_dir):
    from synthetic_scene import VIEWS, disparity_png, render

    image, disparity = render()
    assert np.array_equal(np.asarray(Image.open(sample_dir / "images" / "depth_scene.png")), np.asarray(image))
    assert (sample_dir / "depth" / "depth_scene.png").read_bytes() == disparity_png(disparity)
    for name, yaw in VIEWS.items():
        assert np.array_equal(np.asarray(Image.open(sample_dir / "images" / f"{name}.png")), np.asarray(render(yaw)[0]))
    from synthetic_scene import reflectance_judgements

    bundled = json.loads((sample_dir / "annotations.json").read_text())
    scene = next(i for i in bundled["images"] if i["id"] == 7)
    assert scene["reflectance"] == reflectance_judgements()


def test_cli_bad_task_is_one_line(sample_dir, tmp_path, cli_env):
    done = subprocess.run(
        [
            *perceptforge_cmd(),
            "run",
            "blink",
            "--source",
            str(sample_dir),
            "--out",
            str(tmp_path / "r"),
            "--tasks",
            "jigsaw,nope",
        ],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=300,
    )
    assert done.returncode == 2 and "unknown task(s) ['nope']" in done.stderr


def test_sigkill_mid_build_then_rerun_matches_uninterrupted(blink_run, sample_dir, tmp_path, cli_env):
    import os
    import signal
    import time

    run, _ = blink_run
    killed = tmp_path / "killed"
    cmd = [*perceptforge_cmd(), "run", "blink", "--source", str(sample_dir), "--out", str(killed), "--seed", "0"]

    def start():
        return subprocess.Popen(
            cmd, env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )

    proc = start()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list((killed / "perception").glob("*.json"))) < 5:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((killed / "perception").glob("*.json")))
    assert 5 <= done_before < len(list((run / "perception").glob("*.json"))), "the kill must land mid-build"
    for path in killed.rglob("*.json"):  # atomic writes: no torn file under a final name
        json.loads(path.read_text())
    proc = start()
    assert proc.wait(timeout=600) == 0, proc.stderr.read().decode()[-2000:]
    assert item_files(killed) == item_files(run)  # nothing lost, nothing duplicated, byte-identical


def test_visual_similarity_by_a_clip_embedding_when_the_profile_names_one(prefect_api, sample_dir, tmp_path):
    """The real backend path: a profile whose gates.clip names a (tiny, local) CLIP model. Each item's answer is
    the same photo's view, which the embedding also finds nearer the reference's than the other photo of its scene,
    and the item names the model."""
    from pathlib import Path

    from tiny_models import save_tiny_clip

    import perceptforge
    from perceptforge.backends.clip_gate import ClipScorer

    clip = save_tiny_clip(tmp_path / "clip")
    local = (Path(perceptforge.__file__).parent / "configs" / "local.yaml").read_text()
    profile = tmp_path / "clip.yaml"
    profile.write_text(local.replace("gates:\n", f"gates:\n  clip:\n    model: {clip}\n", 1))
    summary = run_flow(
        "blink",
        source=str(sample_dir),
        out=str(tmp_path / "run"),
        profile=str(profile),
        seed=0,
        tasks=["visual_similarity"],
    )
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "items").glob("*.json")]
    # a tiny random model may find the two candidates alike: then the unit is refused with the measured gap
    refused = [json.loads(line) for line in (tmp_path / "run" / "quarantine.jsonl").read_text().splitlines()]
    assert len(items) + len(refused) == 1 and all("nearer the reference" in r["detail"] for r in refused)
    assert summary["items_per_task"] == ({"Visual_Similarity": len(items)} if items else {})
    scorer = ClipScorer(str(clip)).load()
    for item in items:
        assert item.lineage.backends["similarity"].model_id == str(clip) and len(item.sources) == 2
        pictures = [Image.open(tmp_path / "run" / ref.path) for ref in item.images]
        reference, *candidates = np.asarray(scorer.image_embeddings(pictures))
        nearer = int(np.argmax(np.asarray(candidates) @ reference))
        assert "AB"[nearer] == item.answer


def test_visual_similarity_by_a_dino_embedding_when_the_profile_names_an_embedder(prefect_api, sample_dir, tmp_path):
    """The profile's embedder (a tiny local DINOv2 through transformers' AutoModel) checks the candidates instead
    of CLIP: each answer is the view nearer the reference by that model, and the item names it."""
    from pathlib import Path

    from tiny_models import save_tiny_dinov2

    import perceptforge
    from perceptforge.backends.embeddings import TransformersEmbedding

    dino = save_tiny_dinov2(tmp_path / "dino")
    local = (Path(perceptforge.__file__).parent / "configs" / "local.yaml").read_text()
    profile = tmp_path / "dino.yaml"
    profile.write_text(local + f"embedder:\n  backend: transformers-embedding\n  model_path: {dino}\n")
    summary = run_flow(
        "blink",
        source=str(sample_dir),
        out=str(tmp_path / "run"),
        profile=str(profile),
        seed=0,
        tasks=["visual_similarity"],
    )
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "items").glob("*.json")]
    refused = [json.loads(line) for line in (tmp_path / "run" / "quarantine.jsonl").read_text().splitlines()]
    assert len(items) + len(refused) == 1 and all("nearer the reference" in r["detail"] for r in refused)
    assert summary["items_per_task"] == ({"Visual_Similarity": len(items)} if items else {})
    model = TransformersEmbedding(str(dino)).load()
    for item in items:
        backend = item.lineage.backends["similarity"]
        assert (backend.name, backend.model_id) == ("transformers-embedding", str(dino))
        pictures = [Image.open(tmp_path / "run" / ref.path) for ref in item.images]
        reference, *candidates = np.asarray(model.image_embeddings(pictures))
        assert "AB"[int(np.argmax(np.asarray(candidates) @ reference))] == item.answer


def test_relative_depth_by_a_depth_model_when_the_profile_names_one(prefect_api, sample_dir, tmp_path):
    """Photos without a disparity map get Relative Depth items from the profile's depth model (a tiny local
    DPT through transformers' depth-estimation pipeline): the nearer point by the model's own output is the
    answer, and the item names the model; the rendered scene still uses its exact disparity."""
    from pathlib import Path

    from tiny_models import save_tiny_dpt

    import perceptforge
    from perceptforge.backends.depth import TransformersDepth

    dpt = save_tiny_dpt(tmp_path / "dpt")
    local = (Path(perceptforge.__file__).parent / "configs" / "local.yaml").read_text()
    profile = tmp_path / "depth.yaml"
    profile.write_text(local + f"depth:\n  backend: transformers-depth\n  model_path: {dpt}\n")
    run_flow(
        "blink",
        source=str(sample_dir),
        out=str(tmp_path / "run"),
        profile=str(profile),
        seed=0,
        tasks=["relative_depth"],
    )
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "items").glob("*.json")]
    by_model = [i for i in items if "depth" in i.lineage.backends]
    assert len(by_model) >= 3 and any(i.sources == ["7"] and not i.lineage.backends for i in items)
    model = TransformersDepth(str(dpt))
    sources = {
        json.loads(line)["id"]: json.loads(line)
        for line in (tmp_path / "run" / "sources.jsonl").read_text().splitlines()
    }
    for item in by_model:
        assert item.lineage.backends["depth"].model_id == str(dpt)
        nearness = model.nearness(Image.open(tmp_path / "run" / sources[item.sources[0]]["stored"]).convert("RGB"))
        (ax, ay), (bx, by) = ((round(m.at[0]), round(m.at[1])) for m in item.marks)
        assert item.answer == ("A" if nearness[ay, ax] > nearness[by, bx] else "B")


def test_forensic_detection_with_a_text_to_image_model_and_skipped_without(prefect_api, sample_dir, tmp_path):
    """With a generator in the profile (a tiny local Stable Diffusion through diffusers), each photograph stands
    among three images drawn from its caption and the answer is where it stands; rendered sources never play
    the photograph. The local profile has no generator: the task is skipped with the reason."""
    from pathlib import Path

    from tiny_models import save_tiny_sd

    import perceptforge

    skipped = run_flow(
        "blink", source=str(sample_dir), out=str(tmp_path / "plain"), seed=0, tasks=["forensic_detection"]
    )
    assert skipped["skipped_tasks"]["forensic_detection"].endswith("the profile names no text-to-image generator")
    model = save_tiny_sd(tmp_path / "sd", "t2i")
    local = (Path(perceptforge.__file__).parent / "configs" / "local.yaml").read_text()
    profile = tmp_path / "t2i.yaml"
    profile.write_text(local + f"generator:\n  backend: sd-text2image\n  model: {model}\n  steps: 2\n  max_side: 64\n")
    summary = run_flow(
        "blink",
        source=str(sample_dir),
        out=str(tmp_path / "run"),
        profile=str(profile),
        seed=0,
        tasks=["forensic_detection"],
    )
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "items").glob("*.json")]
    assert summary["items_per_task"] == {"Forensic_Detection": 6} and len(items) == 6  # the six photographs
    sources = {
        json.loads(line)["id"]: json.loads(line)
        for line in (tmp_path / "run" / "sources.jsonl").read_text().splitlines()
    }
    for item in items:
        assert item.choices == ["the first image", "the second image", "the third image", "the fourth image"]
        real = item.images["ABCD".index(item.answer)]
        assert real.path == sources[item.sources[0]]["stored"]  # the photograph itself, untouched
        assert len({i.sha256 for i in item.images}) == 4 and all(i.width == real.width for i in item.images)
        assert item.lineage.backends["generator"].model_id == str(model)
    assert {i.answer for i in items} != {"A"}  # the photograph's place is drawn


def iq_items(run) -> dict[str, PerceptionItem]:
    items = (PerceptionItem.model_validate_json(p.read_text()) for p in sorted((run / "items").glob("*.json")))
    return {i.id: i for i in items if i.task == "IQ_Test"}


def test_iq_puzzles_come_from_the_seed_and_the_photos(prefect_api, sample_dir, tmp_path):
    """Issue 41: the same 4 puzzles, byte for byte, came out of every BLINK run on any folder (a puzzle was drawn
    by its place in the run), so two runs merged held duplicates. A puzzle is now drawn from its unit's generator,
    keyed by the seed and its source's bytes: another seed or other photos give other puzzles, which the audit of
    the merged runs finds no duplicates among; the same photos and seed the same bytes (issue 28: the same picture
    under one id, whatever the photos are called)."""
    import shutil

    from perceptforge.audit.run import audit

    other = tmp_path / "photos"
    (other / "images").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in ("a", "b", "c"):  # tiny synthetic photos: an IQ puzzle needs nothing of its source's picture
        Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(other / "images" / f"{name}.png")
    shutil.copy(sample_dir / "images" / "coffee.jpg", other / "images" / "coffee.jpg")
    doc = json.loads((sample_dir / "annotations.json").read_text())
    coffee = next(i for i in doc["images"] if i["file_name"].endswith("coffee.jpg"))
    images = [{"id": n, "file_name": f"images/{n}.png", "width": 64, "height": 48, "license": 1} for n in "abc"]
    images.append(
        {k: coffee[k] for k in ("width", "height", "license")} | {"id": "d", "file_name": "images/coffee.jpg"}
    )
    (other / "annotations.json").write_text(
        json.dumps({"images": images, "annotations": [], "licenses": doc["licenses"]})
    )
    runs = {name: tmp_path / name for name in ("seed0", "seed0-again", "seed1", "other-photos")}
    for name, run in runs.items():
        source = other if name == "other-photos" else sample_dir
        run_flow("blink", source=str(source), out=str(run), seed=1 if name == "seed1" else 0, tasks=["iq_test"])
    assert item_files(runs["seed0-again"]) == item_files(runs["seed0"])  # the same inputs and seed: the same bytes
    seed0, seed1, mine = (iq_items(runs[n]) for n in ("seed0", "seed1", "other-photos"))
    assert len(seed0) == len(seed1) == 7 and len(mine) == 4

    def pictures(items):
        return {i.images[0].sha256 for i in items.values()}

    assert len(pictures(seed0)) == 7 and not pictures(seed0) & pictures(seed1)
    # the bundled coffee photo, under another id in another folder, gives the same puzzle (under an item id of its
    # own: ids name their source, issue 43) ...
    assert not set(seed0) & set(mine)
    shared = [(k, i) for k, i in mine.items() if i.images[0].sha256 in pictures(seed0)]
    assert len(shared) == 1 and shared[0][1].sources == ["d"]
    mine_id = shared[0][0]
    seed0_id = next(k for k, i in seed0.items() if i.images[0].sha256 == shared[0][1].images[0].sha256)
    # ... and the other photos other puzzles: merged, the runs hold no duplicate but the photo both folders hold
    audits = {
        name: {c["name"]: c for c in audit([runs["seed0"], runs[name]], tmp_path / f"audit-{name}")["checks"]}
        for name in ("seed1", "other-photos")
    }
    assert audits["seed1"]["duplicates"]["passed"] is True, audits["seed1"]["duplicates"]["flags"]
    flagged = audits["other-photos"]["duplicates"]["flags"]
    assert [(sorted((f["item"], f["other_item"])), f["hamming"]) for f in flagged] == [(sorted((seed0_id, mine_id)), 0)]
