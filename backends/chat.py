"""A small client for any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp, hosted).

Images go as base64 data URLs. The ``openai`` client retries rate limits, timeouts, connection errors, 408,
409 and 5xx answers with exponential backoff, honouring Retry-After; when it gives up the error is
EndpointUnavailable (worth a later run), and anything else (a 400, a 401) fails at once with the server's
message. The key is read from the named environment variable when the client is built and never logged: an
error that echoes it (a 401 page quoting the header it refused) has it replaced by ``***`` before it leaves.

``timeout_s`` bounds each try as a whole, from connecting to the answer's last byte: the ``openai`` client's own
timeout applies to each read, so a server that trickles a byte a second would never time out.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from perceptforge.deadline import bound_connections
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_text, sha256_bytes


class EndpointSettings(BaseModel):
    """The part of a backend's settings that names an OpenAI-compatible endpoint (grounder and LLM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    base_url: str = Field(description="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    model: str
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the key")
    timeout_s: float = Field(60, gt=0)
    max_retries: int = Field(4, ge=0)
    concurrency: int = Field(4, ge=1, description="requests in flight at once to this endpoint (per process)")

    def api_key(self) -> str:
        # Local servers accept any key; the client library refuses an empty one.
        return os.environ.get(self.api_key_env, "") or "not-needed"


class EndpointUnavailable(PerceptforgeError):
    """The endpoint kept failing in ways that may pass (rate limits, timeouts, 5xx): worth a later retry."""


def data_url(image_bytes: bytes) -> str:
    kind = "png" if image_bytes[:8] == b"\x89PNG\r\n\x1a\n" else "jpeg"
    return f"data:image/{kind};base64,{base64.b64encode(image_bytes).decode()}"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, usage) -> None:
        with self._lock:
            self.requests += 1
            if usage is not None:
                self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
                self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0

    def __getstate__(self) -> dict:  # locks do not pickle; a Dask worker gets its own
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _lock=threading.Lock())


@dataclass
class ChatClient:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 4
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int | None = None
    concurrency: int = 4
    usage: Usage = field(default_factory=Usage)
    _client: Any = field(default=None, repr=False)
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Shared by every thread using this client: the server sees at most ``concurrency`` requests at once.
        self._slots = threading.BoundedSemaphore(self.concurrency)

    def __getstate__(self) -> dict:
        # Under Dask each worker process opens its own connection and enforces the limit for itself.
        return {k: v for k, v in self.__dict__.items() if k not in ("_client", "_slots")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _client=None)
        self.__post_init__()

    @classmethod
    def from_endpoint(cls, settings: EndpointSettings, temperature: float = 0.0, seed: int | None = 0) -> ChatClient:
        return cls(
            base_url=settings.base_url,
            model=settings.model,
            api_key_env=settings.api_key_env,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            temperature=temperature,
            seed=seed,
            concurrency=settings.concurrency,
        )

    def load(self) -> ChatClient:
        if self._client is None:
            from openai import OpenAI

            key = os.environ.get(self.api_key_env) or "not-needed"  # local servers accept any key
            # The client's own retries: connection errors, timeouts, 408, 409, 429 and 5xx, with exponential
            # backoff from 0.5 s (at most 8 s, less up to a quarter at random), or what Retry-After asks for.
            self._client = OpenAI(
                base_url=self.base_url,
                api_key=key,
                timeout=self.timeout_s,
                max_retries=self.max_retries,
                http_client=deadline_http_client(self.timeout_s),
            )
        return self

    def complete(self, text: str, images: Sequence[bytes] = (), response_format: dict | None = None) -> str:
        content: list[dict] | str = text
        if images:
            content = [
                *({"type": "image_url", "image_url": {"url": data_url(img)}} for img in images),
                {"type": "text", "text": text},
            ]
        return self.chat([{"role": "user", "content": content}], response_format)

    def chat(self, messages: list[dict], response_format: dict | None = None) -> str:
        """One completion for a message history (used to send a validation error back to the model). The
        ``openai`` client retries (``max_retries``); what it gives up on that may pass is EndpointUnavailable.
        No error leaves with the key in it, nor chained to one that has it."""
        try:
            return self._chat(messages, response_format)
        except PerceptforgeError as exc:
            said = self.redact(str(exc))
            if said == str(exc):
                raise
            raise (EndpointUnavailable if isinstance(exc, EndpointUnavailable) else PerceptforgeError)(said) from None
        except Exception as exc:  # the client library's own, whose text may quote the server's answer
            raise PerceptforgeError(f"{self.base_url}: {type(exc).__name__}: {self.redact(str(exc))}") from None

    def redact(self, text: str) -> str:
        """``text`` with the key (as the environment gives it) replaced by ``***``."""
        key = os.environ.get(self.api_key_env, "")
        return text.replace(key, "***") if key else text

    def _chat(self, messages: list[dict], response_format: dict | None) -> str:
        import openai

        self.load()
        kwargs = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
        if response_format:
            kwargs["response_format"] = response_format
        try:
            with self._slots:  # held through the client's retries: a slot is a request until it is answered
                reply = self._client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            if exc.status_code not in RETRIED_STATUSES:  # a 400, a 401: the client did not retry it
                raise PerceptforgeError(f"{self.base_url}: HTTP {exc.status_code}: {exc.message}") from None
            raise self._gave_up(exc) from None
        except openai.APIConnectionError as exc:  # APITimeoutError too
            raise self._gave_up(exc) from None
        if not getattr(reply, "choices", None):  # a web page or a proxy's answer under HTTP 200
            raise PerceptforgeError(f"{self.base_url}: the answer is not a chat completion: {str(reply)[:80]!r}")
        self.usage.add(getattr(reply, "usage", None))
        choice = reply.choices[0]
        content = getattr(getattr(choice, "message", None), "content", None)
        if content is None:  # not an empty answer: nothing was answered (a refusal, tool calls, a cut-off reasoning)
            raise PerceptforgeError(
                f"{self.base_url}: the reply has no content (content: null, finish_reason: "
                f"{getattr(choice, 'finish_reason', None)!r})"
            )
        return content

    def _gave_up(self, exc: Exception) -> EndpointUnavailable:
        # the client numbers each try in a header of the request it sends; the last one's is the count of retries
        request = getattr(exc, "request", None)
        retries = request.headers.get("x-stainless-retry-count") if request is not None else None
        tries = int(retries) + 1 if retries is not None else self.max_retries + 1
        said = f"{tries} tries" if tries > 1 else "1 try"
        return EndpointUnavailable(f"{self.base_url}: gave up after {said}: {type(exc).__name__}: {exc}")


def deadline_http_client(total_s: float) -> Any:
    """The ``openai`` client's HTTP client (its defaults) with every try ended ``total_s`` after it began
    (``perceptforge.deadline``: httpx has per-read timeouts only); proxies from the environment get it too."""
    from openai import DefaultHttpxClient

    return bound_connections(DefaultHttpxClient(), total_s)


# What the openai client retries by status (with connection errors and timeouts): request timeout, lock
# timeout, rate limit, server errors. Once it gives up on one of them the endpoint may still recover later.
RETRIED_STATUSES = frozenset({408, 409, 429, *range(500, 600)})


class DiskCache:
    """Replies stored by the hash of what produced them, so a re-run is free and gives the same text.

    Hand-written on purpose: the openai client keeps no replies, HTTP caches do not keep POST answers, and the
    key is ours (the model, the prompt file's hash, the text, the seed: ``key``), not the request's bytes; a
    cache library (diskcache) would be a new dependency for these few lines, which ``tests/test_llm.py`` and
    the judge's tests check (a second ask is answered from the folder)."""

    def __init__(self, folder: Path):
        self.folder = folder

    @staticmethod
    def key(*parts: object) -> str:
        return sha256_bytes(json.dumps(parts, sort_keys=True, default=str).encode())

    def get(self, key: str) -> dict | None:
        path = self.folder / f"{key}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, key: str, record: dict) -> None:
        atomic_write_text(self.folder / f"{key}.json", json.dumps(record, sort_keys=True))
