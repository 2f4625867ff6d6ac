"""Local HTTP servers that misbehave as real endpoints do: an HTML login page, a refused or truncated reply, a
request never answered, an answer trickled a byte at a time, an error that quotes the request's key. Each answers
by what the request asks, so a case can spoil one question of many."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HTML = (200, b"<html><body>Please log in</body></html>", "text/html")


@dataclass(frozen=True)
class Trickle:
    """``reply`` sent one byte every ``interval`` seconds, its status line and headers included: every read
    gets a byte long before any per-read timeout."""

    reply: tuple[int, bytes, str]
    interval: float = 1.0


# status, body, content type; None: never answer; a function of the request's headers: an answer made from them
Reply = tuple[int, bytes, str] | Trickle | Callable[[Message], "Reply"] | None


def echoes_key(headers: Message) -> tuple[int, bytes, str]:
    """A 401 whose message quotes the Authorization header it refused, as some gateways' do."""
    said = {"error": {"message": f"Incorrect API key provided: {headers.get('Authorization')}", "code": 401}}
    return 401, json.dumps(said).encode(), "application/json"


def completion(content: str | None) -> tuple[int, bytes, str]:
    """A chat completion whose answer is ``content`` (None: ``content: null``, nothing answered)."""
    body = {
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }  # fmt: skip
    return 200, json.dumps(body).encode(), "application/json"


def refused(status: int, message: str) -> tuple[int, bytes, str]:
    return status, json.dumps({"error": {"message": message}}).encode(), "application/json"


@contextlib.contextmanager
def serving(answer: Callable[[str], Reply]) -> Iterator[tuple[str, list[str]]]:
    """A server on 127.0.0.1 whose reply to each request is ``answer(request body)``; yields its base URL and the
    bodies it received (to tell what was sent). A request never answered is held until the server stops."""
    received: list[str] = []
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
            received.append(body)
            reply = answer(body)
            if callable(reply):
                reply = reply(self.headers)
            if reply is None:
                stop.wait()
                return
            if isinstance(reply, Trickle):
                self.trickle(reply)
                return
            status, data, content_type = reply
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def trickle(self, reply: Trickle) -> None:
            status, data, content_type = reply.reply
            head = f"HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n"
            for k, byte in enumerate(head.encode() + data):
                if stop.wait(0 if k == 0 else reply.interval):
                    return
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:  # the client gave up: what the case wants
                    return
            self.close_connection = True

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        stop.set()
        time.sleep(0.05)
        server.shutdown()
        server.server_close()
