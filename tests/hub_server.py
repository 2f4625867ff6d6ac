"""A local server on 127.0.0.1 that speaks the parts of the Hugging Face Hub's HTTP API that ``huggingface_hub``'s
downloads use (``HF_ENDPOINT`` points the real client at it), serving folders the tests build, and plain files with
Range requests (a published checkpoint's URL). It logs each request, and can send a file slowly (so a test can kill a
pull half way) or break the connection half way through it once.

- ``GET /api/models/{repo}/revision/{rev}``: the repository's info (``sha`` is the commit the revision names);
- ``GET /api/models/{repo}/tree/{rev}[/{path}]``: every file with its size and ids (``recursive`` implied);
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: a file, with ``X-Repo-Commit``, ``ETag`` / ``X-Linked-Etag``;
- ``HEAD|GET /files/{name}``: a published file.

Unknown repositories, revisions and files answer 404 with the ``X-Error-Code`` the hub sends (``RepoNotFound``,
``RevisionNotFound``, ``EntryNotFound``), which ``huggingface_hub`` turns into its typed errors.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

LFS_FROM = 1024  # files at least this large are served as LFS files (the hub's X-Linked-* headers, sha256 ids)


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    commit: str
    files: dict[str, bytes]
    branches: dict[str, str] = field(default_factory=dict)  # name → commit

    @classmethod
    def from_folder(cls, folder: Path, commit: str) -> Repo:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return cls(commit, files, {"main": commit})


@dataclass
class HubState:
    repos: dict[str, Repo] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)  # /files/{name}
    slow: dict[str, float] = field(default_factory=dict)  # path → seconds to sleep per 64 KiB sent
    drop: dict[str, int] = field(default_factory=dict)  # path → bytes after which the connection breaks, once
    log: list[tuple[str, str, str]] = field(default_factory=list)  # (method, path, Range header)
    sent: dict[str, int] = field(default_factory=dict)  # path → bytes sent so far


def entry(path: str, data: bytes) -> dict:
    item = {"type": "file", "path": path, "size": len(data), "oid": git_blob_id(data)}
    if len(data) >= LFS_FROM:
        item["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
    return item


class Handler(BaseHTTPRequestHandler):
    state: HubState
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the state's log is what tests read
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _error(self, code: int, error_code: str, message: str) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(code)
        self.send_header("X-Error-Code", error_code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, value) -> None:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _repo_rev(self, repo_id: str, rev: str) -> tuple[Repo, str] | None:
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository not found: {repo_id}")
            return None
        commit = repo.branches.get(rev, rev)
        if commit != repo.commit:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo, commit

    def _serve(self, body: bool) -> None:
        path = unquote(urlparse(self.path).path)
        self.state.log.append((self.command, path, self.headers.get("Range", "")))
        if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/([^/]+)", path):
            if found := self._repo_rev(m[1], m[2]):
                repo, commit = found
                self._json({"id": m[1], "sha": commit, "siblings": [{"rfilename": p} for p in repo.files]})
            return
        if m := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)(/.*)?", path):
            if found := self._repo_rev(m[1], m[2]):
                self._json([entry(p, data) for p, data in found[0].files.items()])
            return
        if m := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
            if (found := self._repo_rev(m[1], m[2])) is None:
                return
            repo, commit = found
            if m[3] not in repo.files:
                self._error(404, "EntryNotFound", f"{m[3]} not found in {m[1]}")
                return
            data = repo.files[m[3]]
            ids = entry(m[3], data)
            headers = {"X-Repo-Commit": commit, "ETag": f'"{ids["oid"]}"'}
            if "lfs" in ids:
                headers |= {"X-Linked-Etag": f'"{ids["lfs"]["oid"]}"', "X-Linked-Size": str(len(data))}
            self._send_file(path, data, headers, body)
            return
        if m := re.fullmatch(r"/files/(.+)", path):
            if m[1] not in self.state.files:
                self._error(404, "EntryNotFound", f"no file {m[1]}")
                return
            self._send_file(path, self.state.files[m[1]], {}, body)
            return
        self._error(404, "NotFound", f"no route {path}")

    def _send_file(self, path: str, data: bytes, headers: dict, body: bool) -> None:
        start = 0
        if body and (r := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))):
            start = int(r[1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if not body:
            return
        delay = self.state.slow.get(path, 0.0)
        step, drop_at = 64 * 1024, self.state.drop.pop(path, None)
        for at in range(start, len(data), step):
            if drop_at is not None and at >= drop_at:  # a connection lost half way: no more bytes, socket closed
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(data[at : at + step])
            self.wfile.flush()
            self.state.sent[path] = self.state.sent.get(path, 0) + len(data[at : at + step])
            if delay:
                time.sleep(delay)


class HubServer:
    """``with HubServer(state) as hub:`` serves ``state`` at ``hub.url`` until the block ends."""

    def __init__(self, state: HubState):
        self.state = state
        handler = type("BoundHandler", (Handler,), {"state": state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
