"""predict and the LLM judge through the real `openai` client against a local chat-completions server."""

import json
import time

import numpy as np
import pytest
from chat_server import ChatServer
from PIL import Image

from perceptforge.backends.chat import ChatClient, EndpointUnavailable
from perceptforge.errors import PerceptforgeError
from perceptforge.scorer.benchmarks import codis, mvp_bench
from perceptforge.scorer.judge import Judge
from perceptforge.scorer.predict import failed_path, predict


@pytest.fixture
def mvp_release(tmp_path):
    (tmp_path / "Single_Images").mkdir()
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(tmp_path / "Single_Images" / "1_e.jpg")
    rows = [
        {
            "question_id": 0,
            "id": 1,
            "image": "Single_Images/1_e.jpg",
            "question": "What is she holding?\nA. a gun\nB. a cup\nAnswer with the option's letter.",
            "answer": "A",
            "type": "mcq-e",
            "level": "high",
        },
        {
            "question_id": 1,
            "id": 1,
            "image": "Single_Images/1_e.jpg",
            "question": "What is she holding?\nA. a cup\nB. a gun\nAnswer with the option's letter.",
            "answer": "B",
            "type": "mcq-e",
            "level": "high",
        },
    ]
    path = tmp_path / "all_questions.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def answer_gun(req: dict) -> str:
    text = req["messages"][0]["content"][-1]["text"]
    return "B" if "B. a gun" in text else "A"


def test_predict_retries_429_writes_scoreable_lines_and_resumes(mvp_release, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    out = tmp_path / "pred.jsonl"
    with ChatServer(answer_gun, script=[(429, "slow down")]) as server:
        client = ChatClient(base_url=server.base_url, model="tiny")
        summary = predict("mvp-bench", mvp_release, tmp_path, client, out, concurrency=2)
        assert summary["answered"] == 2 and summary["skipped"] == 0
        assert len(server.requests) == 3  # the 429 was retried
        content = server.requests[-1]["messages"][0]["content"]
        assert content[0]["image_url"]["url"].startswith("data:image/png;base64,")
        assert server.headers[0]["authorization"] == "Bearer sk-test-secret"
        # A killed run leaves a torn last line: it is cut and that id asked again; finished ids are skipped.
        lines = out.read_text().splitlines()
        out.write_text(lines[0] + "\n" + lines[1][:10])
        again = predict("mvp-bench", mvp_release, tmp_path, client, out)
        assert again == {**again, "skipped": 1, "answered": 1}
    result = mvp_bench.score([mvp_release], [out])
    assert result.metrics["mcq"]["vanilla"]["single_high"] == 100.0 and not result.missing
    assert "sk-test-secret" not in out.read_text()


def test_client_fails_clearly_on_400_and_gives_up_after_retries():
    with ChatServer(script=[(400, "bad request: image too large")]) as server:
        with pytest.raises(PerceptforgeError, match="HTTP 400: .*image too large"):
            ChatClient(base_url=server.base_url, model="tiny").complete("hi")
    with ChatServer(script=[(503, None)] * 3) as server:
        with pytest.raises(PerceptforgeError, match="gave up after 3 tries: InternalServerError"):
            ChatClient(base_url=server.base_url, model="tiny", max_retries=2).complete("hi")


def test_client_retries_as_the_openai_client_does_and_counts_its_tries():
    """408, 409, 429 and 5xx are retried after the server's Retry-After; a Retry-After beyond the client's two
    minutes is not waited for: EndpointUnavailable at once, saying it was one try."""
    script = [(status, "not now") for status in (408, 409, 429, 502)]
    with ChatServer(script=script, retry_after_ms=100) as server:
        started = time.monotonic()
        assert ChatClient(base_url=server.base_url, model="tiny", max_retries=4).complete("hi") == "A"
        assert time.monotonic() - started >= 0.4  # four waits of the 100 ms asked for
        assert [h["x-stainless-retry-count"] for h in server.headers] == ["0", "1", "2", "3", "4"]
    with ChatServer(script=[(429, "come back in an hour")], retry_after_ms=3_600_000) as server:
        with pytest.raises(EndpointUnavailable, match="gave up after 1 try: RateLimitError"):
            ChatClient(base_url=server.base_url, model="tiny").complete("hi")
        assert len(server.requests) == 1


def test_client_times_out_then_retries():
    with ChatServer(delay_s=0.5) as server:
        with pytest.raises(EndpointUnavailable, match="gave up after 2 tries: APITimeoutError"):
            ChatClient(base_url=server.base_url, model="tiny", timeout_s=0.1, max_retries=1).complete("hi")


def test_codis_judge_decides_unjudged_and_caches(tmp_path):
    data = tmp_path / "data.json"
    data.write_text(
        json.dumps(
            [
                {
                    "id": "000",
                    "image_id": "x.jpg",
                    "question": "Am I taking off or putting on my clothes?",
                    "context": {"context_1": "up", "context_2": "down"},
                    "answer": {"answer_1": "Putting on my clothes.", "answer_2": "Taking off my clothes."},
                    "category": "Attributes",
                }
            ]
        )
    )
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        '{"id": "000", "context": 1, "output": "I am getting dressed."}\n{"id": "000", "context": 2, "output": "Taking off my clothes."}\n'
    )
    assert codis.score([data], [preds]).metrics["unjudged"] == 1
    with ChatServer(lambda req: "right") as server:
        judge = Judge(ChatClient(base_url=server.base_url, model="judge"), cache_dir=tmp_path / "cache")
        r = codis.score([data], [preds], judge=judge)
        assert r.metrics["overall"] == {"Acc_p": 100.0, "Acc_q": 100.0} and r.metrics["unjudged"] == 0
        prompt = server.requests[0]["messages"][0]["content"]
        assert (
            prompt.startswith("Please evaluate the output of models")
            and "Here is the output: I am getting dressed." in prompt
        )
        codis.score([data], [preds], judge=judge)
        assert len(server.requests) == 1  # the second scoring came from the cache


def test_choice_judge_only_for_unparsed(tmp_path):
    from perceptforge.scorer.benchmarks import blink

    answers = tmp_path / "a.json"
    answers.write_text(json.dumps({"val_Counting_1": "(B)", "val_Counting_2": "(C)"}))
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        '{"idx": "val_Counting_1", "output": "Two dogs, I reckon."}\n{"idx": "val_Counting_2", "output": "(C) 3"}\n'
    )
    with ChatServer(lambda req: "B") as server:
        judge = Judge(ChatClient(base_url=server.base_url, model="judge"), cache_dir=tmp_path / "cache")
        r = blink.score([answers], [preds], judge=judge)
        assert [(i.extracted, i.method) for i in r.items] == [("B", "judge"), ("C", "leading")]
        assert len(server.requests) == 1 and "Valid letters: A, B, C, D" in server.requests[0]["messages"][0]["content"]
    with ChatServer(lambda req: "I think maybe B or C") as server:
        judge = Judge(ChatClient(base_url=server.base_url, model="other"), cache_dir=tmp_path / "cache2")
        assert blink.score([answers], [preds], judge=judge).items[0].method == "judge_unparsed"
    with pytest.raises(PerceptforgeError, match="openai:MODEL@BASE_URL"):
        Judge.from_spec("gpt-4o")


@pytest.fixture
def twelve_questions(tmp_path):
    """An MVP-Bench release of twelve single-image questions (ids 0–11)."""
    (tmp_path / "Single_Images").mkdir()
    Image.fromarray(np.full((8, 8, 3), 90, np.uint8)).save(tmp_path / "Single_Images" / "2_e.jpg")
    rows = [
        {
            "question_id": k,
            "id": 2,
            "image": "Single_Images/2_e.jpg",
            "question": f"Question {k}: what is it?\nA. a cup\nB. a gun\nAnswer with the option's letter.",
            "answer": "A",
            "type": "mcq-e",
            "level": "high",
        }
        for k in range(12)
    ]
    path = tmp_path / "all_questions.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def number(req: dict) -> int:
    return int(req["messages"][0]["content"][-1]["text"].split(":")[0].split()[-1])


def test_predict_keeps_every_answer_lists_failures_by_id_and_a_rerun_completes_the_file(twelve_questions, tmp_path):
    """One request in ten fails (HTTP 400), one gets an HTML page, one is never answered: the nine others are kept,
    the three are listed with their reasons, the exit is not a traceback; a rerun against a healthy server asks only
    those three, and the file then holds exactly what an uninterrupted healthy run writes."""

    def flaky(req):
        k = number(req)
        return {3: (400, "bad request: image too large"), 7: ChatServer.HTML, 9: ChatServer.HANG}.get(k, f"A{k}")

    out = tmp_path / "pred.jsonl"
    with ChatServer(flaky, hang_s=3) as server:
        client = ChatClient(base_url=server.base_url, model="tiny", timeout_s=0.5, max_retries=1)
        summary = predict("mvp-bench", twelve_questions, tmp_path, client, out, concurrency=3)
    assert summary == {**summary, "answered": 9, "failed": 3}
    failed = [json.loads(line) for line in failed_path(out).read_text().splitlines()]
    assert [f["question_id"] for f in failed] == [3, 7, 9]  # in the data's order
    assert "HTTP 400" in failed[0]["reason"] and "not a chat completion" in failed[1]["reason"]
    assert "gave up after 2 tries" in failed[2]["reason"]
    assert sorted(json.loads(line)["question_id"] for line in out.read_text().splitlines()) == [
        0, 1, 2, 4, 5, 6, 8, 10, 11,
    ]  # fmt: skip

    with ChatServer(lambda req: f"A{number(req)}") as healthy:
        again = predict(
            "mvp-bench", twelve_questions, tmp_path, ChatClient(base_url=healthy.base_url, model="tiny"), out
        )
        assert sorted(number(r) for r in healthy.requests) == [3, 7, 9]  # only what was missing
    assert again == {**again, "answered": 3, "failed": 0, "skipped": 9} and not failed_path(out).exists()
    whole = tmp_path / "whole.jsonl"
    with ChatServer(lambda req: f"A{number(req)}") as healthy:
        predict("mvp-bench", twelve_questions, tmp_path, ChatClient(base_url=healthy.base_url, model="tiny"), whole)
    records = lambda path: sorted(path.read_text().splitlines())  # noqa: E731
    assert records(out) == records(whole)


def test_predict_cli_says_how_many_failed_and_never_writes_into_its_input(twelve_questions, tmp_path, cli_env):
    import subprocess

    from helpers import perceptforge_cmd

    cmd = [*perceptforge_cmd(), "predict", "mvp-bench", "--data", str(twelve_questions), "--model", "tiny"]
    with ChatServer(lambda req: (400, "no") if number(req) in (1, 2) else "A") as server:
        done = subprocess.run(
            [*cmd, "--endpoint", server.base_url, "--out", str(tmp_path / "p.jsonl")],
            env=cli_env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert "2 request(s) failed, e.g. {'question_id': 1}: " in done.stderr and "HTTP 400" in done.stderr
        assert "Traceback" not in done.stderr
        before = twelve_questions.read_bytes()
        same = subprocess.run(
            [*cmd, "--endpoint", server.base_url, "--out", str(twelve_questions)],
            env=cli_env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert same.returncode == 2 and "is also read as --data" in same.stdout + same.stderr
    assert twelve_questions.read_bytes() == before


def test_predict_refuses_images_outside_the_images_folder(tmp_path):
    from perceptforge.errors import InputError
    from perceptforge.scorer.requests import image_under

    (tmp_path / "imgs").mkdir()
    (tmp_path / "secret.png").write_bytes(b"x")
    for rel in ("../secret.png", str(tmp_path / "secret.png")):
        with pytest.raises(InputError, match="is outside .* refused"):
            image_under(tmp_path / "imgs", rel, "data.json:1")
