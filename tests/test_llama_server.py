"""The `openai` LLM backend against a real OpenAI-compatible inference server: llama-cpp-python serving a
tiny random GGUF that the test writes. Random weights write random text; the JSON-schema response format
(llama.cpp's grammar) constrains it, so the reply must parse."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from perceptforge.backends.chat import ChatClient, DiskCache
from perceptforge.backends.writers import DistractorsReply, OpenAIWriter
from perceptforge.prompts.library import load_prompt

REPO = Path(__file__).resolve().parents[1]
SERVER_PYTHON = Path(os.environ.get("PERCEPTFORGE_LLAMA_PYTHON", REPO / ".venv-llama" / "bin" / "python"))

pytestmark = pytest.mark.skipif(
    not SERVER_PYTHON.exists(), reason=f"llama-cpp-python server venv not found at {SERVER_PYTHON} (make llama-server)"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    pytest.importorskip("gguf")
    from tiny_gguf import write_tiny_llama

    model = write_tiny_llama(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    port = free_port()
    proc = subprocess.Popen(
        [
            str(SERVER_PYTHON),
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--model_alias",
            "tiny",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("llama server did not start in 60 s")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_json_schema_reply_parses(llama_server, tmp_path):
    client = ChatClient(base_url=llama_server, model="tiny", seed=0, max_tokens=600, timeout_s=120)
    writer = OpenAIWriter(client, max_validation_retries=0, cache=DiskCache(tmp_path), response_format="json_object")
    prompt = load_prompt("questions/mcq_distractors")
    reply = writer.ask(prompt, "Three wrong options for: What is she holding?", DistractorsReply)
    assert len(reply.distractors) == 3 and all(1 <= len(d) <= 60 for d in reply.distractors)
    assert client.usage.requests == 1 and client.usage.completion_tokens > 0
