"""A real Label Studio server on 127.0.0.1, run from its own virtual environment (it cannot share one with
Prefect: it pins an older redis and pytz).

Label Studio reads each setting as ``LABEL_STUDIO_X``, then ``HEARTEX_X``, then plain ``X``, so the server
gets a clean environment built from a short allow-list: a stray ``HOST``, ``PORT`` or ``USERNAME`` in the
caller's shell cannot leak in. Everything that would reach the internet (Sentry, version check, analytics)
is switched off. Credentials live in a state file readable only by its owner and are never printed.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_text

KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


@dataclass(frozen=True)
class Account:
    email: str
    password: str
    token: str  # legacy API token, > 5 characters

    @staticmethod
    def generate(email: str) -> Account:
        return Account(email, secrets.token_urlsafe(12), secrets.token_hex(20))


def state_folder() -> Path:
    from perceptforge.settings import state_dir

    return state_dir() / "label-studio"


def read_local_credentials() -> dict | None:
    path = state_folder() / "credentials.json"
    return json.loads(path.read_text()) if path.exists() else None


def local_setting(given: str | None, env_var: str, key: str) -> str | None:
    """``given``, else the environment variable, else what `annotate serve` recorded for this checkout."""
    return given or os.environ.get(env_var) or (read_local_credentials() or {}).get(key)


def write_local_credentials(url: str, account: Account, document_root: Path) -> Path:
    path = state_folder() / "credentials.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "url": url,
        "email": account.email,
        "password": account.password,
        "token": account.token,
        "document_root": str(document_root),
    }
    atomic_write_text(path, json.dumps(record, indent=1))
    path.chmod(0o600)
    return path


def server_env(data_dir: Path, document_root: Path, account: Account | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update(
        {
            "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
            "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(document_root),
            "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "LATEST_VERSION_CHECK": "false",
            "COLLECT_ANALYTICS": "false",
        }
    )
    if account:
        env.update(
            {
                "LABEL_STUDIO_USERNAME": account.email,
                "LABEL_STUDIO_PASSWORD": account.password,
                "LABEL_STUDIO_USER_TOKEN": account.token,
            }
        )
    return env


def executable(venv: Path) -> Path:
    exe = Path(venv).resolve() / "bin" / "label-studio"  # absolute: the server runs with its data folder as cwd
    if not exe.exists():
        raise PerceptforgeError(
            f"{exe}: no Label Studio server here; create its environment with `make label-studio-venv`"
        )
    return exe


def add_account(venv: Path, data_dir: Path, document_root: Path, account: Account) -> None:
    """Initialise the data directory if needed and create the account (``label-studio init`` does both;
    the first account made owns the organisation, later ones join it)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(executable(venv)), "init", "-q", "--no-browser"],
        env=server_env(data_dir, document_root, account),
        cwd=data_dir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 or "successfully initialized" not in done.stdout:
        raise PerceptforgeError(
            f"label-studio init failed in {data_dir} (exit {done.returncode}): {done.stderr[-500:]}"
        )
    if "already exists" in done.stdout:  # init leaves an existing account, and its password, as it was
        raise PerceptforgeError(f"{account.email} already has an account on the Label Studio server in {data_dir}")


def add_annotator(venv: Path, email: str, shared: bool = False) -> Path:
    """An annotator account for the local server (``annotate serve``); its password and token go to a file readable
    only by its owner, whose path is returned.

    By default the annotator gets a Label Studio server of their own (a data folder under the state folder and a
    port; ``annotate serve`` starts it beside the main one), holding the owner's account and theirs: push gives it
    the run's projects and pull reads them, and nothing another annotator did is on it. Label Studio 1.23's
    community edition cannot hide one member's annotations from another on one server: the labeling UI offers
    "Compare All", and ``/api/annotations/<id>/`` answers any signed-in account, whatever its organisation (its
    ``ProjectMixin.has_permission``: "LSO always runs a single organization"). ``shared`` puts the account on the
    main server instead (authors and reviewers of CODIS and MME-RealWorld items, who work on each other's text)."""
    local = read_local_credentials()
    data_dir = state_folder() / "data"
    if not local or not (data_dir / "label_studio.sqlite3").exists():
        raise PerceptforgeError(
            f"no local Label Studio server in {state_folder()}: start one first with `perceptforge annotate serve` "
            "(`make label-studio` in a checkout); annotators of another server are added in its own admin pages"
        )
    if "@" not in email or email.strip() != email:
        raise PerceptforgeError(f"{email!r} is not an e-mail address: annotators sign in with one")
    path = state_folder() / "annotators" / f"{email}.json"
    if path.exists():
        raise PerceptforgeError(f"{email} already has an account; its password is in {path}")
    account = Account.generate(email)
    root = Path(local["document_root"])
    record = {"url": local["url"], "email": email, "password": account.password, "token": account.token}
    if shared:
        add_account(venv, data_dir, root, account)
    else:
        own = path.parent / email / "data"
        owner = Account(local["email"], local["password"], local["token"])
        add_account(venv, own, root, owner)  # the first account owns the new server's organisation
        add_account(venv, own, root, account)
        port = free_port()
        record.update(url=f"http://127.0.0.1:{port}", main_url=local["url"], data_dir=str(own), port=port)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    atomic_write_text(path, json.dumps(record, indent=1))
    path.chmod(0o600)
    return path


def independent_accounts(url: str) -> list[dict]:
    """The annotators `add-annotator` gave servers of their own beside the main server at ``url``."""
    folder = state_folder() / "annotators"
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []
    return [r for r in records if r.get("main_url", "").rstrip("/") == url.rstrip("/")]


def move_annotators(old_url: str, new_url: str) -> None:
    """The annotators of the local server at ``old_url`` follow it to ``new_url`` (`annotate serve` started again
    on another port): their records name the main server they belong to, and push finds them by it."""
    folder = state_folder() / "annotators"
    for path in sorted(folder.glob("*.json")) if folder.exists() and old_url != new_url else []:
        record = json.loads(path.read_text())
        if record.get("main_url", "").rstrip("/") == old_url.rstrip("/"):
            atomic_write_text(path, json.dumps({**record, "main_url": new_url}, indent=1))
            path.chmod(0o600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        """SIGTERM by PID (Label Studio exits at once), SIGKILL if it lingers."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(venv: Path, data_dir: Path, document_root: Path, port: int | None = None, timeout_s: float = 120) -> Server:
    """Start the server on 127.0.0.1 and wait until ``/health`` answers."""
    port = port or free_port()
    log = data_dir.parent / f"server-{port}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(executable(venv)), "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(port)],
            env=server_env(data_dir, document_root),
            cwd=data_dir,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise PerceptforgeError(f"Label Studio exited with code {process.returncode} while starting; see {log}")
            try:
                if httpx.get(f"{server.url}/health", timeout=2).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.5)
    except BaseException:
        # a SIGTERM (SystemExit) or Ctrl-C while it starts: the caller never gets it to stop, so it stops here
        server.stop()
        raise
    server.stop()
    raise PerceptforgeError(f"Label Studio did not become healthy on {server.url} within {timeout_s:.0f} s; see {log}")
