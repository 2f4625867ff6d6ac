"""The BLINK tasks that need annotations the bundled photos lack — Art Style (style labels), Semantic and
Functional Correspondence (keypoints), Relative Reflectance (pairwise judgements) — on a hand-made source
folder: every item is true of the annotations it was built from."""

import json

import numpy as np
import pytest
from PIL import Image

from perceptforge.data.schema import PerceptionItem
from perceptforge.errors import InputError
from perceptforge.flows.run import run as run_flow
from perceptforge.store.sources import read_source_dir

BIRD = {"beak": [40, 60], "eye": [60, 50], "tail": [200, 120], "left foot": [110, 200], "right foot": [150, 205]}
TOOLS = {
    "toothbrush": {"brush": {"grip": [30, 120], "bristles": [210, 110], "neck": [150, 115], "end": [10, 125]}},
    "hammer": {"brush": {"grip": [120, 220], "bristles": [120, 40], "neck": [120, 90], "end": [120, 250]}},
}


def source_folder(folder):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images, annotations = [], []

    def add(name, **fields):
        Image.fromarray(rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)).save(folder / f"{name}.png")
        images.append({"id": name, "file_name": f"{name}.png", "width": 256, "height": 256, "license": 1, **fields})

    for name, style in (("monet", "Impressionism"), ("renoir", "Impressionism"), ("picasso", "Cubism")):
        add(name, style=style)
    for k, shift in enumerate((0, 20)):
        add(f"bird{k}")
        points = {n: [x + shift, y + shift // 2] for n, (x, y) in BIRD.items()}
        annotations.append(
            {"id": 10 + k, "image_id": f"bird{k}", "label": "bird", "bbox": [0, 0, 250, 250], "keypoints": points}
        )
    for k, (tool, parts) in enumerate(TOOLS.items()):
        add(tool)
        annotations.append(
            {"id": 20 + k, "image_id": tool, "label": tool, "bbox": [0, 0, 250, 250], "functional_keypoints": parts}
        )
    add(
        "room",
        reflectance=[
            {"a": [40, 40], "b": [200, 200], "darker": "b"},
            {"a": [40, 200], "b": [200, 40], "darker": "equal"},
        ],
    )
    doc = {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": 1, "name": "object"}],
        "licenses": [{"id": 1, "name": "CC0-1.0"}],
    }
    (folder / "annotations.json").write_text(json.dumps(doc))
    return folder


TASKS = ["art_style", "semantic_correspondence", "functional_correspondence", "relative_reflectance"]


@pytest.fixture(scope="module")
def run(prefect_api, tmp_path_factory):
    root = tmp_path_factory.mktemp("annotated")
    source = source_folder(root / "src")
    summary = run_flow("blink", source=str(source), out=str(root / "run"), tasks=TASKS)
    items = [PerceptionItem.model_validate_json(p.read_text()) for p in sorted((root / "run" / "items").glob("*.json"))]
    return source, summary, items


def marks_of(item, image):
    return {m.label: tuple(m.at) for m in item.marks if m.image == image}


def test_all_four_tasks_are_built_with_their_random_choice(run):
    source, summary, _ = run
    assert summary["items_per_task"] == {
        "Art_Style": 2,  # the cubist painting has no partner of its style: quarantined, with why
        "Functional_Correspondence": 2,
        "Relative_Reflectance": 2,  # one item per judgement
        "Semantic_Correspondence": 2,
    }
    assert summary["random_choice_per_task"]["Relative_Reflectance"] == 33.33
    assert summary["skipped_tasks"] == {}
    quarantined = [json.loads(line) for line in (source.parent / "run" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["unit"], q["detail"]) for q in quarantined] == [
        ("picasso-art_style", "needs another painting in the style 'Cubism' and one in another style")
    ]


def test_art_style_answer_is_the_painting_of_the_reference_style(run):
    _, _, items = run
    styles = {"monet": "Impressionism", "renoir": "Impressionism", "picasso": "Cubism"}
    for item in (i for i in items if i.task == "Art_Style"):
        ref, *options = item.sources
        chosen = options["AB".index(item.answer)]
        other = options[1 - "AB".index(item.answer)]
        assert styles[ref] == "Impressionism"  # the only cubist painting has no partner of its style
        assert styles[chosen] == styles[ref] and styles[other] != styles[ref]


def test_correspondence_answers_sit_on_the_point_of_the_same_name(run):
    _, _, items = run
    shift = {"bird0": (0, 0), "bird1": (20, 10)}
    for item in (i for i in items if i.task == "Semantic_Correspondence"):
        (ref,) = marks_of(item, 0).values()
        name = next(
            n for n, (x, y) in BIRD.items() if (x + shift[item.sources[0]][0], y + shift[item.sources[0]][1]) == ref
        )
        dx, dy = shift[item.sources[1]]
        assert marks_of(item, 1)[item.answer] == (BIRD[name][0] + dx, BIRD[name][1] + dy)
        assert len(set(marks_of(item, 1).values())) == 4
    for item in (i for i in items if i.task == "Functional_Correspondence"):
        assert '"brush"' in item.question
        first, second = item.sources
        (ref,) = marks_of(item, 0).values()
        part = next(p for p, xy in TOOLS[first]["brush"].items() if tuple(xy) == ref)
        assert marks_of(item, 1)[item.answer] == tuple(TOOLS[second]["brush"][part])


def test_reflectance_answer_follows_the_judgement(run):
    _, _, items = run
    judgements = {((40, 40), (200, 200)): "B is darker", ((40, 200), (200, 40)): "About the same"}
    built = [i for i in items if i.task == "Relative_Reflectance"]
    assert len(built) == 2
    for item in built:
        marks = marks_of(item, 0)
        assert item.choices == ["A is darker", "B is darker", "About the same"]
        assert item.choices["ABC".index(item.answer)] == judgements.pop((marks["A"], marks["B"]))


def test_bad_annotations_name_the_place(tmp_path):
    folder = source_folder(tmp_path / "src")
    doc = json.loads((folder / "annotations.json").read_text())
    doc["annotations"][0]["keypoints"]["beak"] = [400, 10]
    (folder / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(
        InputError, match=r"annotation 10 keypoints.beak: point \[400.0, 10.0\] lies outside the 256x256"
    ):
        read_source_dir(folder)
    doc["annotations"][0]["keypoints"]["beak"] = [10, 10]
    doc["images"][-1]["reflectance"][0]["darker"] = "lighter"
    (folder / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"reflectance\[0\].*'a', 'b' or 'equal'"):
        read_source_dir(folder)


def test_the_four_tasks_export_in_blink_layout_and_score(run, tmp_path):
    from perceptforge.outputs.blink_export import export_blink
    from perceptforge.scorer.benchmarks import blink as blink_scorer

    source, summary, _ = run
    out = tmp_path / "blink"
    export_blink(source.parent / "run", out)
    answers = json.loads((out / "val_answers.json").read_text())
    assert {p.parent.name for p in out.glob("*/val-00000-of-00001.parquet")} == set(summary["items_per_task"])
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"idx": k, "output": v}) + "\n" for k, v in answers.items()))
    scored = blink_scorer.score(data=[out / "val_answers.json"], predictions=[preds])
    assert all(v == 100.0 for k, v in scored.metrics["tasks"].items()), scored.metrics["tasks"]


def test_counting_by_the_grounder_as_an_open_vocabulary_detector(prefect_api, tmp_path):
    """A profile whose grounder is a VLM endpoint (here a local server speaking the chat-completions API) counts
    what a source names in count_labels, with no boxes annotated; the item names the model that counted."""
    import yaml
    from chat_server import ChatServer

    from perceptforge.configs.profile import resolve_profile_path

    folder = tmp_path / "src"
    folder.mkdir()
    Image.new("RGB", (200, 200), (30, 90, 30)).save(folder / "balls.png")
    doc = {
        "images": [{"id": "balls", "file_name": "balls.png", "width": 200, "height": 200, "count_labels": ["ball"]}],
        "annotations": [],
    }
    (folder / "annotations.json").write_text(json.dumps(doc))
    asked = []

    def detector(request):
        content = request["messages"][-1]["content"]
        asked.append(" ".join(p.get("text", "") for p in content) if isinstance(content, list) else content)
        return "ball [10, 10, 50, 50]; ball [60, 60, 100, 100]; ball [120, 10, 160, 50]; ball [10, 10, 50, 50]"

    with ChatServer(detector) as server:
        profile = yaml.safe_load(resolve_profile_path("local").read_text())
        profile["grounder"] = {
            "backend": "openai-vlm",
            "base_url": server.base_url,
            "model": "tiny-vlm",
            "box_format": "pixel",
        }
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(profile))
        summary = run_flow(
            "blink", source=str(folder), out=str(tmp_path / "run"), profile=str(tmp_path / "p.yaml"), tasks=["counting"]
        )
    assert summary["items_per_task"] == {"Counting": 1}
    (item,) = [PerceptionItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "items").glob("*.json")]
    assert item.choices["ABCD".index(item.answer)] == "3"  # the repeated box counts once
    assert item.question == "How many balls are in the image?"
    assert (item.lineage.backends["counter"].name, item.lineage.backends["counter"].model_id) == (
        "openai-vlm",
        "tiny-vlm",
    )
    assert any("Find every balls" in text for text in asked)
