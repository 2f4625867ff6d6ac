import os
import shutil
from importlib import resources
from pathlib import Path

import pytest

# No hub: an accidental download fails loudly instead of hanging or succeeding on a dev machine.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
# The official release files are test material beside the checkout (../shared/reference), not shipped;
# PERCEPTFORGE_REFERENCE points elsewhere.
SHARED_REFERENCE = Path(os.environ.get("PERCEPTFORGE_REFERENCE", REPO.parent / "shared" / "reference"))


@pytest.fixture(autouse=True)
def _no_prompt_roots_left_behind(monkeypatch):
    """A task folder read in one test registers its prompt root for the process; the next test starts without it."""
    from perceptforge.prompts import library

    monkeypatch.setattr(library, "_registered", list(library._registered))


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return Path(str(resources.files("perceptforge.data").joinpath("sample")))


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One temporary Prefect API for the whole session (it takes ~10 s to come up)."""
    os.environ["PERCEPTFORGE_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    from perceptforge.settings import configure_prefect

    configure_prefect()
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture
def cli_env(tmp_path) -> dict:
    env = dict(os.environ)
    env["PERCEPTFORGE_STATE_DIR"] = str(tmp_path / "state")
    env.pop("PREFECT_API_URL", None)
    return env


@pytest.fixture(scope="session")
def demo_run(prefect_api, sample_dir, tmp_path_factory):
    """The demo, built once per session: the local profile on the bundled sample, seed 0 → (run dir, summary).
    A test that writes into a run copies it first (``copy_run``)."""
    from perceptforge.flows.run import run as run_flow

    out = tmp_path_factory.mktemp("demo") / "run"
    return out, run_flow("mvp", source=str(sample_dir), profile="local", out=str(out), seed=0)


def copy_run(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


# --- Label Studio: a real server from its own venv (make label-studio-venv), one per test session -------------
LABEL_STUDIO_VENV = Path(os.environ.get("PERCEPTFORGE_LABEL_STUDIO_VENV", REPO / ".venv-label-studio"))


class LabelStudioSession:
    """The running server, its accounts (admin plus two annotators) and a way to stop and restart it."""

    def __init__(self, data_dir: Path, document_root: Path):
        from perceptforge.annotation.server import Account

        self.data_dir, self.document_root = data_dir, document_root
        self.admin = Account.generate("admin@example.com")
        self.annotators = [Account.generate("ann1@example.com"), Account.generate("ann2@example.com")]
        # two more, each on a server of its own (the independent_servers fixture): independent review
        self.independent = [Account.generate("solo1@example.com"), Account.generate("solo2@example.com")]
        self.template: Path | None = None  # a copy of the data folder holding only the admin account
        self.server = None
        self.personal_tokens: dict[str, str] = {}  # by e-mail, made on first use (one per account)

    def start(self):
        from perceptforge.annotation.server import start

        self.server = start(LABEL_STUDIO_VENV, self.data_dir, self.document_root)
        return self

    def stop(self):
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, account=None, kind: str = "legacy") -> str:
        """The account's legacy token, or its personal access token (a JWT the SDK refreshes), which the
        account makes for itself through the API the first time."""
        from perceptforge.annotation.labelstudio import LabelStudio

        account = account or self.admin
        if kind == "legacy":
            return account.token
        if account.email not in self.personal_tokens:
            sdk = LabelStudio(self.url, account.token).sdk()
            self.personal_tokens[account.email] = sdk.tokens.create().token
        return self.personal_tokens[account.email]

    def client(self, account=None, kind: str = "legacy"):
        from perceptforge.annotation.labelstudio import LabelStudio

        return LabelStudio(self.url, self.token(account, kind))

    def secrets(self) -> list[str]:
        return [
            *(s for a in (self.admin, *self.annotators, *self.independent) for s in (a.password, a.token)),
            *self.personal_tokens.values(),
        ]


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory):
    if not (LABEL_STUDIO_VENV / "bin" / "label-studio").exists():
        pytest.skip(f"no Label Studio server venv at {LABEL_STUDIO_VENV} (make label-studio-venv builds it)")
    from perceptforge.annotation.server import add_account

    # Images are served from under the session's temporary root, where every test's run directory lives.
    session = LabelStudioSession(tmp_path_factory.mktemp("label-studio") / "data", tmp_path_factory.getbasetemp())
    for account in (session.admin, *session.annotators):  # the first owns the organisation, the others join it
        add_account(LABEL_STUDIO_VENV, session.data_dir, session.document_root, account)
        if account is session.admin:  # a server of one's own starts from this copy in seconds, not a minute
            session.template = session.data_dir.parent / "template"
            shutil.copytree(session.data_dir, session.template)
    session.start()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def independent_servers(label_studio):
    """One more Label Studio server per independent annotator (solo1, solo2), each holding the admin's account
    and that annotator's only; yields the admin's clients of them."""
    from perceptforge.annotation.labelstudio import LabelStudio
    from perceptforge.annotation.server import add_account, start

    servers = []
    try:
        for k, account in enumerate(label_studio.independent):
            data_dir = label_studio.data_dir.parent / f"solo{k + 1}" / "data"
            shutil.copytree(label_studio.template, data_dir)
            add_account(LABEL_STUDIO_VENV, data_dir, label_studio.document_root, account)
            servers.append(start(LABEL_STUDIO_VENV, data_dir, label_studio.document_root))
        # the annotators' servers; a test joins them to the main server by its URL *now* (a test restarts it)
        yield tuple(LabelStudio(s.url, label_studio.admin.token) for s in servers)
    finally:
        for server in servers:
            server.stop()
