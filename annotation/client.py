"""A small client for the Label Studio REST API (the calls push and pull need, nothing else).

The token travels only in the Authorization header; errors name the server and what was being done, never
the token. A server that stops answering raises ``ServerGone`` so callers can say what was left undone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from perceptforge.errors import PerceptforgeError


class ServerGone(PerceptforgeError):
    """The server did not answer (refused, reset or timed out)."""


class ServerRefused(PerceptforgeError):
    """The server answered with an HTTP error."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass
class LabelStudio:
    url: str
    token: str = field(repr=False)
    timeout_s: float = 60.0
    _http: httpx.Client | None = field(default=None, repr=False)

    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.url.rstrip("/"), timeout=self.timeout_s, headers={"Authorization": f"Token {self.token}"}
            )
        return self._http

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def request(self, method: str, path: str, doing: str, **kwargs):
        try:
            response = self.http().request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServerGone(f"Label Studio at {self.url} did not answer while {doing}: {type(exc).__name__}") from None
        if response.status_code == 401:
            raise ServerRefused(
                f"Label Studio at {self.url} refused the API token while {doing} (HTTP 401): "
                "check LABEL_STUDIO_API_KEY",
                401,
            )
        if response.status_code >= 400:
            detail = response.text[:500]
            try:
                body = response.json()
                detail = str(body.get("validation_errors") or body.get("detail") or body)[:500]
            except ValueError:
                pass
            raise ServerRefused(
                f"Label Studio at {self.url}: HTTP {response.status_code} while {doing}: {detail}", response.status_code
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:  # a proxy's or a login page's HTML under HTTP 200
            kind = response.headers.get("content-type", "no content type")
            raise ServerRefused(
                f"Label Studio at {self.url} answered {doing} with {kind}, not JSON: is this URL the Label Studio API?",
                response.status_code,
            ) from None

    # --- projects ------------------------------------------------------------------------------------
    def projects(self) -> list[dict]:
        out, page = [], 1
        while True:
            body = self.request("GET", "/api/projects/", "listing projects", params={"page": page, "page_size": 100})
            out += body["results"]
            if not body.get("next"):
                return out
            page += 1

    def project(self, project_id: int) -> dict | None:
        try:
            return self.request("GET", f"/api/projects/{project_id}/", f"reading project {project_id}")
        except ServerRefused as exc:
            if exc.status == 404:  # deleted on the server, or a different server than last time
                return None
            raise

    def create_project(self, settings: dict) -> dict:
        return self.request("POST", "/api/projects/", f"creating project {settings.get('title')!r}", json=settings)

    def update_project(self, project_id: int, settings: dict) -> dict:
        return self.request("PATCH", f"/api/projects/{project_id}/", f"updating project {project_id}", json=settings)

    def validate_config(self, label_config: str) -> None:
        self.request(
            "POST", "/api/projects/validate/", "validating a labeling config", json={"label_config": label_config}
        )

    # --- storage, tasks, annotations -------------------------------------------------------------------
    def local_storages(self, project_id: int) -> list[dict]:
        return self.request(
            "GET",
            "/api/storages/localfiles/",
            f"listing storages of project {project_id}",
            params={"project": project_id},
        )

    def add_local_storage(self, project_id: int, path: Path, title: str) -> dict:
        return self.request(
            "POST",
            "/api/storages/localfiles/",
            f"registering {path} as local storage",
            json={"project": project_id, "path": str(path), "use_blob_urls": False, "title": title},
        )

    def import_tasks(self, project_id: int, tasks: list[dict]) -> list[int]:
        body = self.request(
            "POST",
            f"/api/projects/{project_id}/import",
            f"importing {len(tasks)} tasks into project {project_id}",
            params={"return_task_ids": "true"},
            json=tasks,
        )
        return body.get("task_ids", [])

    def export(self, project_id: int) -> list[dict]:
        """Every task of the project with its data and annotations (Label Studio's JSON export)."""
        return self.request(
            "GET",
            f"/api/projects/{project_id}/export",
            f"exporting project {project_id}",
            params={"exportType": "JSON", "download_all_tasks": "true"},
        )

    def annotate(self, task_id: int, result: list[dict]) -> dict:
        return self.request(
            "POST", f"/api/tasks/{task_id}/annotations/", f"annotating task {task_id}", json={"result": result}
        )

    def whoami(self) -> dict:
        return self.request("GET", "/api/current-user/whoami", "checking the API token")


def connect(url: str | None = None, token: str | None = None) -> LabelStudio:
    """From arguments, else LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY, else the local server's state file."""
    from perceptforge.annotation.server import local_setting

    url = local_setting(url, "LABEL_STUDIO_URL", "url")
    token = local_setting(token, "LABEL_STUDIO_API_KEY", "token")
    if not url or not token:
        raise PerceptforgeError(
            "no Label Studio server: start one with `make label-studio`, or set LABEL_STUDIO_URL and "
            "LABEL_STUDIO_API_KEY"
        )
    parts = urlsplit(url)
    if parts.username or parts.password:  # they would be printed in links and replace the token header
        shown = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()
        raise PerceptforgeError(
            f"the Label Studio URL carries credentials: give {shown} and the token in LABEL_STUDIO_API_KEY"
        )
    return LabelStudio(url, token)
