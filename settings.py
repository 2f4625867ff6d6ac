"""Process-wide settings that must be in place before Prefect is imported."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Where perceptforge keeps Prefect's database, result cache and LLM caches (``PERCEPTFORGE_STATE_DIR``)."""
    return Path(os.environ.get("PERCEPTFORGE_STATE_DIR", Path.cwd() / ".state")).resolve()


def configure_prefect() -> None:
    """Point Prefect at our state directory and keep it offline and quiet.

    Only fills what the user has not set: an explicit ``PREFECT_API_URL`` (a real server) wins.
    Without analytics disabled Prefect looks up a telemetry host and prints DNS errors offline; the 20 s
    default startup timeout of the temporary API is too short on a loaded 2-core machine. The temporary API runs as
    a child process writing to our terminal; stopped at the end of a run, its event persister can log its own
    cancelled flush as a warning with a traceback (about 150 lines, reported in about 1 run of 10), which
    says nothing about the run: its server logs only errors.
    """
    defaults = {
        "PREFECT_HOME": str(state_dir() / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "ERROR",
        "PREFECT_UI_ENABLED": "false",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect creates only the last path component of its home.
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
