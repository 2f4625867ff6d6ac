import os
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
