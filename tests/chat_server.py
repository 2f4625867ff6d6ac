"""A standard-library HTTP server that speaks the OpenAI chat-completions API, for tests only.

``script`` is a list of (status, body-or-None) consumed one per request; when it runs out, ``answer``
(a function of the request JSON) writes the reply text, or answers otherwise: ``(status, message)`` is an
HTTP error, ``ChatServer.HTML`` a web page under HTTP 200, ``ChatServer.HANG`` no answer for ``hang_s`` seconds.
An HTTP error says ``retry-after-ms: retry_after_ms`` (10 unless given; None: no such header), which the openai
client honours before it retries instead of its own backoff from 0.5 s: the retry tests stay quick.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    HTML = "<html><body>502 Bad Gateway (a proxy's page)</body></html>"
    HANG = "(no answer)"

    def __init__(
        self,
        answer: Callable[[dict], Any] = lambda req: "A",
        script: list[tuple[int, str | None]] | None = None,
        delay_s: float = 0.0,
        hang_s: float = 5.0,
        retry_after_ms: int | None = 10,
    ):
        self.answer, self.script, self.delay_s, self.hang_s = answer, list(script or []), delay_s, hang_s
        self.retry_after_ms = retry_after_ms
        self.requests: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "tiny", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    step = server.script.pop(0) if server.script else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                finally:
                    with server._lock:
                        server.in_flight -= 1
                if step and step[0] != 200:
                    self._send(step[0], {"error": {"message": step[1] or "scripted error", "type": "test"}})
                    return
                text = step[1] if step else server.answer(body)
                if isinstance(text, tuple):
                    self._send(text[0], {"error": {"message": text[1], "type": "test"}})
                    return
                if text == ChatServer.HTML:
                    self._send(200, text)
                    return
                if text == ChatServer.HANG:
                    time.sleep(server.hang_s)
                    return
                self._send(
                    200,
                    {
                        "id": "cmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "tiny"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
                    },
                )

            def _send(self, status, payload):
                page = isinstance(payload, str)
                data = payload.encode() if page else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if page else "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status >= 400 and server.retry_after_ms is not None:
                    self.send_header("retry-after-ms", str(server.retry_after_ms))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
                    return  # a late answer to a client that timed out and left
                super().handle_error(request, client_address)

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
