"""The openai-vlm grounder through the real `openai` client, and a whole flow on endpoint backends."""

import json

import pytest
from chat_server import ChatServer
from PIL import Image

from perceptforge.backends.chat import ChatClient
from perceptforge.backends.grounders import OpenAIVLMGrounder
from perceptforge.logic.templates import templates
from perceptforge.store.sources import read_source_dir

SHIKRA = {
    "Describe the image": "A woman [0.039,0.029,0.723,1.000] in an orange spacesuit stands beside a helmet [0.537,0.674,0.986,1.000].",
    "Help me extract the main subject": "### woman ### [0.039,0.029,0.723,1.000] ###",
    "What is the object held by": "She holds a helmet [0.537,0.674,0.986,1.000].",
}
QWEN = {
    "Describe the image": "<|object_ref_start|>A woman<|object_ref_end|><|box_start|>(39,29),(723,1000)<|box_end|> poses.",
    "Help me extract the main subject": "### woman ### <|box_start|>(39,29),(723,1000)<|box_end|> ###",
    "What is the object held by": "<|object_ref_start|>a helmet<|object_ref_end|><|box_start|>(537,674),(986,1000)<|box_end|>",
}


def vlm_answer(table):
    def answer(req):
        content = req["messages"][0]["content"]
        text = content[-1]["text"] if isinstance(content, list) else content
        for start, reply in table.items():
            if start in text:
                return reply
        if "New Caption" in text:
            return json.dumps(
                {
                    "new_value": "a starry sky full of galaxies",
                    "new_high": "in outer space",
                    "new_caption": "A woman poses in front of a starry sky.",
                }
            )
        if "Distractors" in text:
            return json.dumps({"distractors": ["a beach", "a forest", "a city street"]})
        if "multiple-choice question" in text:
            return json.dumps({"question": "What is behind the woman?"})
        if "Yes/No question" in text:
            return json.dumps({"question": "Is the woman in front of a starry sky full of galaxies?"})
        return "posing for a portrait"

    return answer


@pytest.mark.parametrize("table", [SHIKRA, QWEN], ids=["shikra", "qwen"])
def test_openai_vlm_grounder(table, sample_dir):
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    image = Image.open(sample_dir / entry.file_name).convert("RGB")
    with ChatServer(vlm_answer(table)) as server:
        grounder = OpenAIVLMGrounder(ChatClient(base_url=server.base_url, model="qwen-vl")).load()
        g = grounder.ground(image, entry, [templates()["B3"]])
        assert server.requests[0]["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert g.subject.label == "woman"
    assert g.subject.box.xyxy == pytest.approx((19.968, 14.848, 370.176, 512.0))
    assert (
        g.attributes["held_object"]
        == {"shikra": "She holds a helmet.", "qwen": "a helmet"}["shikra" if table is SHIKRA else "qwen"]
    )
    held = [r for r in g.regions if r.role == "object"]
    assert held and held[0].box.xyxy == pytest.approx((274.944, 345.088, 504.832, 512.0))
    assert g.backend == "openai-vlm" and g.model_id == "qwen-vl"


def test_flow_on_endpoint_backends(prefect_api, sample_dir, tmp_path):
    from perceptforge.flows.run import run as run_flow

    with ChatServer(vlm_answer(SHIKRA)) as server:
        profile = tmp_path / "endpoints.yaml"
        profile.write_text(
            f"name: endpoints\ngrounder: {{backend: openai-vlm, base_url: '{server.base_url}', model: shikra}}\n"
            "segmenter: {backend: grabcut}\ninpainter: {backend: composite}\n"
            f"llm: {{backend: openai, base_url: '{server.base_url}', model: tiny}}\n"
        )
        summary = run_flow(
            "mvp", source=str(sample_dir), profile=str(profile), out=str(tmp_path / "run"), limit=1, categories=["S1"]
        )
    assert summary["counts"]["candidates"] == 1, summary
    assert summary["token_use"]["llm"]["requests"] >= 4 and summary["token_use"]["grounder"]["prompt_tokens"] > 0
    versions = json.loads((tmp_path / "run" / "templates.json").read_text())
    assert versions["S1"]["version"] == 4 and {p["id"] for p in versions["S1"]["prompts"]} >= {
        "idea/background_substitution"
    }
    record = json.loads((tmp_path / "run" / "candidates" / "1-S1.json").read_text())
    # the model chose among the donor scenes the compositing editor can paste; the value is that entry
    assert (
        record["idea"]["new"] == "a starry sky full of galaxies"
        and record["idea"]["rendering"]["donor"] == "deep-space"
    )
    assert record["lineage"]["backends"]["llm"] == {"name": "openai", "model_id": "tiny"}
    assert {p["id"] for p in record["lineage"]["prompts"]} >= {"idea/background_substitution", "idea/choose_value"}
    assert record["questions"][2]["question"]["options"].count("a starry sky full of galaxies") == 1
