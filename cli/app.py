"""The Typer application object and the error boundary every command shares."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

from perceptforge.errors import Interrupted, PerceptforgeError, shown

console = Console()
err_console = Console(stderr=True)


class App(typer.Typer):
    """A Typer app that prints input errors as one line, without a traceback, and exits with 2."""

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except Interrupted as exc:  # SIGTERM / SIGINT: its line, and the shell's status for the signal
            err_console.print(f"[bold red]error:[/] {escape(shown(exc))}", highlight=False, soft_wrap=True)
            sys.exit(exc.exit_status)
        except PerceptforgeError as exc:
            err_console.print(f"[bold red]error:[/] {escape(shown(exc))}", highlight=False, soft_wrap=True)
            sys.exit(2)
        except OSError as exc:  # a full disk, a read-only folder: the place and the reason, not a traceback
            where = f"{exc.filename}: " if exc.filename else ""
            text = escape(shown(f"{where}{exc.strerror or exc}"))
            err_console.print(f"[bold red]error:[/] {text}", highlight=False, soft_wrap=True)
            sys.exit(2)


@contextmanager
def waiting(text: str) -> Iterator[None]:
    """A long wait, said: a spinner with ``text`` on a terminal, the line printed once otherwise (a spinner shows
    nothing in a log or a pipe), as the stage runner's progress bars do. ``text`` is plain (paths, e-mails)."""
    if console.is_terminal:
        with console.status(escape(text)):
            yield
    else:
        console.print(escape(text), highlight=False, soft_wrap=True)
        yield


def new_app(help: str) -> App:
    return App(help=help, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
