"""Label Studio through its official client, ``label-studio-sdk``, behind the few calls push, pull and
add-annotator need.

The SDK takes either kind of token: a personal access token (a JWT refresh token, which it trades for
short-lived access tokens) or a legacy token. What this layer adds:
- one-line errors that name the server and what was being done, never the token (the SDK's ``ApiError``
  carries every response header in its message, and a server that is down surfaces as a raw ``httpx`` error);
- the task import is sent once: the SDK retries a POST whose answer was lost, which would import the same
  tasks twice, so push re-checks by item id on its next run instead;
- listing a project's tasks is one export call (about 3× faster than the SDK's pager on 250 tasks).

``label_studio_sdk`` is imported here only, and this module only by the annotation commands, so the other
commands start without it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from perceptforge.deadline import bound_connections
from perceptforge.errors import PerceptforgeError

T = TypeVar("T")
SEND_ONCE = {"max_retries": 0}


class ServerGone(PerceptforgeError):
    """The server did not answer (refused, reset or timed out)."""


class ServerRefused(PerceptforgeError):
    """The server answered with an HTTP error."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def plain(value: Any) -> Any:
    """An SDK model (or a list of them) as JSON-ready dicts."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_unset=False)
    return value


def token_kind(token: str) -> str:
    """``personal`` for a personal access token (a JWT), else ``legacy``."""
    parts = token.split(".")
    return "personal" if len(parts) == 3 and all(parts) and token.startswith("eyJ") else "legacy"


def _detail(body: Any) -> str:
    if isinstance(body, dict):
        body = body.get("validation_errors") or body.get("detail") or body
    if isinstance(body, str) and body.lstrip()[:1] == "<":
        return "an HTML page, not an API answer: is this URL the Label Studio server's root?"
    return str(body)[:500]


DEFAULT_TIMEOUT_S = 300.0  # a push's one import request of thousands of tasks, or a large project's export


def label_studio_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a Label Studio request may take, whole: PERCEPTFORGE_LABEL_STUDIO_TIMEOUT, else 300; a value that
    is not a positive number is one line naming the variable."""
    import math
    import os

    text = (os.environ if environ is None else environ).get("PERCEPTFORGE_LABEL_STUDIO_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value <= 86400):  # nan compares false
        raise PerceptforgeError(
            f"PERCEPTFORGE_LABEL_STUDIO_TIMEOUT: must be seconds, more than 0 and at most 86400, got {text!r}"
        )
    return value


@dataclass
class LabelStudio:
    url: str
    token: str = field(repr=False)
    # every request's whole answer, not each read (``perceptforge.deadline``): a server that accepts and never
    # answers, or trickles, is one line within it; PERCEPTFORGE_LABEL_STUDIO_TIMEOUT sets it
    timeout_s: float = field(default_factory=lambda: label_studio_timeout())
    httpx_client: httpx.Client | None = field(default=None, repr=False)  # tests put a transport in between
    _sdk: Any = field(default=None, repr=False)
    # The servers on which annotators label independently, one each, reached with the owner's token
    # (server.add_annotator says why one server each): push gives each the run's projects, pull reads them all.
    independent: tuple[LabelStudio, ...] = field(default=(), repr=False)

    def sdk(self) -> Any:
        if self._sdk is None:
            from label_studio_sdk.client import LabelStudio as Sdk

            self._sdk = self.call(
                "reading the API token",
                lambda: Sdk(
                    base_url=self.url.rstrip("/"),
                    api_key=self.token,
                    timeout=self.timeout_s,
                    httpx_client=self.httpx_client
                    or bound_connections(httpx.Client(timeout=self.timeout_s), self.timeout_s),
                ),
            )
        return self._sdk

    def call(self, doing: str, fn: Callable[[], T]) -> T:
        """Run one SDK call; its failures become one-line ``ServerGone`` / ``ServerRefused`` errors."""
        from label_studio_sdk.core.api_error import ApiError

        try:
            return fn()
        except httpx.TimeoutException:
            raise ServerGone(
                f"Label Studio at {self.url} did not answer while {doing} within {self.timeout_s:g} s (no whole "
                "answer); is the URL the server's, and is it overloaded? "
                "(PERCEPTFORGE_LABEL_STUDIO_TIMEOUT sets the wait)"
            ) from None
        except httpx.TransportError as exc:
            raise ServerGone(
                f"Label Studio at {self.url} did not answer while {doing}: {type(exc).__name__}; is it running? "
                "(`perceptforge annotate serve` starts the local one and the annotators' own, `make label-studio` "
                "in a checkout)"
            ) from None
        except ApiError as exc:
            status = exc.status_code or 0
            if status == 401:
                raise ServerRefused(
                    f"Label Studio at {self.url} refused the API token while {doing} (HTTP 401, "
                    f"{token_kind(self.token)} token): {_detail(exc.body)[:200]}; check LABEL_STUDIO_API_KEY",
                    401,
                ) from None
            if status < 400:  # a proxy's or a login page's HTML under HTTP 200
                kind = (exc.headers or {}).get("content-type", "no content type")
                raise ServerRefused(
                    f"Label Studio at {self.url} answered {doing} with {kind}, not JSON: "
                    "is this URL the Label Studio API?",
                    status,
                ) from None
            raise ServerRefused(
                f"Label Studio at {self.url}: HTTP {status} while {doing}: {_detail(exc.body)}", status
            ) from None

    # --- projects ------------------------------------------------------------------------------------
    def projects(self) -> list[dict]:
        return self.call("listing projects", lambda: [plain(p) for p in self.sdk().projects.list(page_size=100)])

    def project(self, project_id: int) -> dict | None:
        try:
            return self.call(f"reading project {project_id}", lambda: plain(self.sdk().projects.get(project_id)))
        except ServerRefused as exc:
            if exc.status == 404:  # deleted on the server, or a different server than last time
                return None
            raise

    def create_project(self, settings: dict) -> dict:
        return self.call(
            f"creating project {settings.get('title')!r}",
            lambda: plain(self.sdk().projects.create(**settings, request_options=SEND_ONCE)),
        )

    def update_project(self, project_id: int, settings: dict) -> dict:
        return self.call(
            f"updating project {project_id}", lambda: plain(self.sdk().projects.update(project_id, **settings))
        )

    # --- storage, tasks, annotations, users ------------------------------------------------------------
    def local_storages(self, project_id: int) -> list[dict]:
        return self.call(
            f"listing storages of project {project_id}",
            lambda: plain(self.sdk().import_storage.local.list(project=project_id)),
        )

    def add_local_storage(self, project_id: int, path: Path, title: str) -> dict:
        return self.call(
            f"registering {path} as local storage",
            lambda: plain(
                self.sdk().import_storage.local.create(
                    project=project_id, path=str(path), use_blob_urls=False, title=title, request_options=SEND_ONCE
                )
            ),
        )

    def import_tasks(self, project_id: int, tasks: list[dict]) -> list[int]:
        """Import once, never retried: a retry after a lost answer would import the tasks a second time."""
        body = self.call(
            f"importing {len(tasks)} tasks into project {project_id}",
            lambda: self.sdk().projects.import_tasks(
                project_id, request=tasks, return_task_ids=True, request_options=SEND_ONCE
            ),
        )
        return list(getattr(body, "task_ids", None) or [])

    def export(self, project_id: int) -> list[dict]:
        """Every task of the project with its data and annotations (Label Studio's JSON export, one call)."""

        def download() -> list[dict]:
            chunks = self.sdk().projects.exports.download_sync(project_id, export_type="JSON", download_all_tasks=True)
            return json.loads(b"".join(chunks))

        return self.call(f"exporting project {project_id}", download)

    def task_url(self, project_id: int, task_id: int) -> str:
        """Where a person opens the task in the labeling UI."""
        return f"{self.url.rstrip('/')}/projects/{project_id}/data?task={task_id}"

    def whoami(self) -> dict:
        return self.call("checking the API token", lambda: plain(self.sdk().users.whoami()))

    def user_emails(self) -> dict[int, str]:
        """Every account on the server by id (annotations name their annotator by id only)."""
        return self.call("listing users", lambda: {u.id: u.email for u in self.sdk().users.list()})


def connect(url: str | None = None, token: str | None = None) -> LabelStudio:
    """From arguments, else LABEL_STUDIO_URL / LABEL_STUDIO_API_KEY, else the local server's state file."""
    from perceptforge.annotation.server import local_setting

    url = local_setting(url, "LABEL_STUDIO_URL", "url")
    token = local_setting(token, "LABEL_STUDIO_API_KEY", "token")
    if not url or not token:
        raise PerceptforgeError(
            "no Label Studio server: start one with `perceptforge annotate serve` (`make label-studio` in a "
            "checkout), or set LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY (a personal access token or a legacy token)"
        )
    parts = urlsplit(url)
    if parts.username or parts.password:  # they would be printed in links and replace the token header
        shown = parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()
        raise PerceptforgeError(
            f"the Label Studio URL carries credentials: give {shown} and the token in LABEL_STUDIO_API_KEY"
        )
    return LabelStudio(url, token, independent=independent_annotators(url, token))


def independent_annotators(url: str, token: str) -> tuple[LabelStudio, ...]:
    """The servers of the annotators who label ``url``'s items independently, each reached with the owner's
    ``token``: those in LABEL_STUDIO_ANNOTATOR_URLS (comma-separated), else those `annotate add-annotator` made."""
    import os

    from perceptforge.annotation.server import independent_accounts

    given = [u.strip() for u in os.environ.get("LABEL_STUDIO_ANNOTATOR_URLS", "").split(",") if u.strip()]
    urls = given or [a["url"] for a in independent_accounts(url)]
    return tuple(LabelStudio(u, token) for u in urls)
