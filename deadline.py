"""A wall-clock deadline on every HTTP request, not on each read: httpx's timeouts bound one read or write, so
a server that accepts and never answers (or trickles a byte a second) holds a client for as long as it likes.
Here every connection httpcore opens ends its reads and writes by one deadline, ``total_s`` from when it was
opened, then from each request written after an answer was read. The chat client (``backends/chat.py``) and
the Label Studio client (``annotation/labelstudio.py``) both use it; a root module because neither folder may
import the other."""

from __future__ import annotations

import importlib
import time
from typing import Any


class DeadlineStream:
    """A connection whose every read and write ends by one deadline: ``total_s`` from when it was opened, then
    from each request written after an answer was read (a kept-alive connection serves one request at a time)."""

    def __init__(self, inner: Any, total_s: float, timed_out: type[Exception]):
        self._inner, self._total, self._timed_out = inner, total_s, timed_out
        self._deadline = time.monotonic() + total_s
        self._answered = False

    def _left(self, timeout: float | None) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out(f"no whole answer within {self._total:g} s")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._answered = True
        return self._inner.read(max_bytes, self._left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._answered:
            self._deadline, self._answered = time.monotonic() + self._total, False
        self._inner.write(buffer, self._left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args: Any, **kwargs: Any) -> DeadlineStream:
        tls = DeadlineStream(self._inner.start_tls(*args, **kwargs), self._total, self._timed_out)
        tls._deadline = self._deadline
        return tls

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend:
    """httpcore's network backend, its connections bounded by :class:`DeadlineStream`; ``timed_out`` is the
    ReadTimeout of the httpcore package the pool is from, which httpx turns into its own timeout (and the
    ``openai`` client into a retried APITimeoutError)."""

    def __init__(self, inner: Any, total_s: float, timed_out: type[Exception]):
        self._inner, self._total, self._timed_out = inner, total_s, timed_out

    def connect_tcp(self, *args: Any, **kwargs: Any) -> DeadlineStream:
        return DeadlineStream(self._inner.connect_tcp(*args, **kwargs), self._total, self._timed_out)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> DeadlineStream:
        return DeadlineStream(self._inner.connect_unix_socket(*args, **kwargs), self._total, self._timed_out)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bound_connections(client: Any, total_s: float) -> Any:
    """``client`` (an ``httpx.Client``) with every request, on its own transport and its proxies', ended
    ``total_s`` after it began. The pool's own package is asked for its timeout: httpx may be built on a fork of
    httpcore (``httpcore2``), whose exceptions are the ones it maps (to ``httpx.ReadTimeout``)."""
    for transport in [client._transport, *client._mounts.values()]:
        pool = getattr(transport, "_pool", None)
        if pool is not None and not isinstance(pool._network_backend, DeadlineBackend):
            core = importlib.import_module(type(pool).__module__.split(".")[0])
            pool._network_backend = DeadlineBackend(pool._network_backend, total_s, core.ReadTimeout)
    return client
