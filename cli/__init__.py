"""The ``perceptforge`` command line. ``app`` (the whole Typer application) is built on first use, so that
``perceptforge score`` can start with its own command alone (``perceptforge.cli.__main__``)."""

from typing import Any

__all__ = ["app"]


def __getattr__(name: str) -> Any:
    if name == "app":
        from perceptforge.cli.main import app

        globals()["app"] = app  # importing cli.main bound the submodule cli.app to this name: the app wins
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
