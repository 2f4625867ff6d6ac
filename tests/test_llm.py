"""The `openai` LLM backend through the real `openai` client against a local chat-completions server."""

import json

import numpy as np
import pytest
from chat_server import ChatServer

from perceptforge.backends.chat import ChatClient, DiskCache
from perceptforge.backends.writers import (
    DistractorsReply,
    IdeaReply,
    LLMReplyError,
    OpenAIWriter,
    QuestionReply,
    parse_reply,
)
from perceptforge.errors import PerceptforgeError
from perceptforge.logic import context
from perceptforge.logic.renderings import from_alternatives
from perceptforge.logic.templates import templates
from perceptforge.store.sources import grounding_from_entry, read_source_dir


@pytest.fixture
def astronaut(sample_dir):
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    return grounding_from_entry(entry)


def writer(server, tmp_path, **kw):
    client = ChatClient(base_url=server.base_url, model="tiny", seed=0, **kw)
    return OpenAIWriter(client, max_validation_retries=1, cache=DiskCache(tmp_path / "cache"))


IDEA = json.dumps(
    {"new_value": "a microphone", "new_high": "singing", "new_caption": "A woman astronaut holds a microphone."}
)


def choices(template_id):
    return from_alternatives(templates()[template_id], "sd-inpaint")


def test_valid_json_idea_uses_the_paper_prompt_is_held_to_the_renderable_values_and_cached(astronaut, tmp_path):
    b3 = templates()["B3"]
    with ChatServer(lambda req: IDEA) as server:
        w = writer(server, tmp_path)
        idea = w.idea(b3, astronaut, choices("B3"), np.random.default_rng(0))
        # the high level is the one declared with the value, not the model's free text
        assert (idea.old, idea.new, idea.high_level_value) == ("a space helmet", "a microphone", "giving a speech")
        assert idea.rendering is not None and idea.rendering.value == "a microphone"
        sent = server.requests[0]["messages"][0]["content"]
        assert sent.startswith(
            "I have an image and need help generating an idea to manipulate it. Change the woman to engage"
        )
        assert "Original Object: a space helmet" in sent
        assert "Choose the New value from this list only" in sent and "a tennis racket; a paintbrush" in sent
        schema = server.requests[0]["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["new_value"]["enum"] == [a.value for a in b3.writer.alternatives]
        assert server.requests[0]["response_format"]["type"] == "json_schema" and server.requests[0]["seed"] == 0
        w.idea(b3, astronaut, choices("B3"), np.random.default_rng(0))
        assert len(server.requests) == 1  # the second answer came from the disk cache
        assert w.client.usage.requests == 1 and w.client.usage.prompt_tokens == 10


def test_a_value_no_backend_can_render_is_sent_back(astronaut, tmp_path):
    invented = json.dumps({"new_value": "a gun", "new_caption": "A woman astronaut holds a gun."})
    with ChatServer(script=[(200, invented), (200, IDEA)]) as server:
        idea = writer(server, tmp_path).idea(templates()["B3"], astronaut, choices("B3"), np.random.default_rng(0))
        assert idea.new == "a microphone"
        assert "new_value" in server.requests[1]["messages"][2]["content"]


def test_malformed_then_valid_sends_the_error_back(astronaut, tmp_path):
    with ChatServer(script=[(200, "New Behaviour: robbing"), (200, IDEA)]) as server:
        idea = writer(server, tmp_path).idea(templates()["B3"], astronaut, choices("B3"), np.random.default_rng(0))
        assert idea.new == "a microphone"
        follow_up = server.requests[1]["messages"]
        assert follow_up[1] == {"role": "assistant", "content": "New Behaviour: robbing"}
        assert "did not validate" in follow_up[2]["content"] and "new_caption" in follow_up[2]["content"]


def test_still_malformed_is_quarantined_with_raw_text(astronaut, tmp_path):
    with ChatServer(lambda req: "I'd rather not.") as server:
        with pytest.raises(LLMReplyError) as exc:
            writer(server, tmp_path).idea(templates()["B3"], astronaut, choices("B3"), np.random.default_rng(0))
        assert exc.value.raw == "I'd rather not." and "failed validation after 2 tries" in str(exc.value)


def test_rate_limit_then_success_and_timeout(astronaut, tmp_path):
    b3 = templates()["B3"]
    ctx = context.build(b3, astronaut)
    with ChatServer(lambda req: '{"question": "Is the woman holding a gun?"}', script=[(429, "slow down")]) as server:
        w = writer(server, tmp_path)
        ctx_new = ctx | {"new_value": "a gun", "new_caption": "c", "new_object": "a gun"}
        assert w.yes_no(b3, ctx_new, "low", "threatening") == "Is the woman holding a gun?"
        assert len(server.requests) == 2
        assert (
            "Manipulation: The object is changed from a space helmet to a gun."
            in server.requests[1]["messages"][0]["content"]
        )
    with ChatServer(delay_s=0.5) as server:
        w = writer(server, tmp_path / "t", timeout_s=0.1, max_retries=1)
        with pytest.raises(PerceptforgeError, match="APITimeoutError"):
            w.mcq_question(b3, ctx_new)


def test_distractors_and_labelled_replies():
    assert parse_reply("Question: Is she holding a gun?", QuestionReply).question == "Is she holding a gun?"
    reply = parse_reply("New Behaviour: threatening\nNew Object: a gun\nNew Caption: A woman holds a gun.", IdeaReply)
    assert (reply.new_value, reply.new_high, reply.new_caption) == ("a gun", "threatening", "A woman holds a gun.")
    assert parse_reply("Distractors:\n- a cup\n- a book\n- a phone", DistractorsReply).distractors == [
        "a cup",
        "a book",
        "a phone",
    ]
    assert parse_reply('```json\n{"distractors": ["a", "b", "c"]}\n```', DistractorsReply).distractors == [
        "a",
        "b",
        "c",
    ]


def test_client_keeps_at_most_concurrency_requests_in_flight():
    from concurrent.futures import ThreadPoolExecutor

    with ChatServer(delay_s=0.2) as server:
        client = ChatClient(base_url=server.base_url, model="tiny", concurrency=2)
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda i: client.complete(f"q{i}"), range(8)))
    assert replies == ["A"] * 8 and client.usage.requests == 8
    assert server.max_in_flight == 2


def test_client_pickles_for_dask_workers():
    import pickle

    client = ChatClient(base_url="http://127.0.0.1:9/v1", model="tiny", concurrency=3).load()
    copy = pickle.loads(pickle.dumps(client))
    assert copy.concurrency == 3 and copy._client is None and copy._slots.acquire(blocking=False)
