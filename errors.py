"""Errors users see: one line naming the file, line, item or field, and what is wrong."""

from __future__ import annotations

import traceback
import unicodedata
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from pydantic import ValidationError


class PerceptforgeError(Exception):
    """An error caused by input; the CLI prints its message alone, without a traceback."""


class InputError(PerceptforgeError):
    def __init__(self, where: str, what: str):
        self.where, self.what = where, what
        super().__init__(f"{where}: {what}")

    def __reduce__(self) -> tuple:
        # raised on a Dask worker, it crosses back as itself (the default would call __init__ with one argument)
        return (type(self), (self.where, self.what))


def shown(text: object) -> str:
    """``text`` (which may hold values read from input) as it may reach a terminal: control characters, and the
    invisible ones that reorder or hide text (bidirectional overrides such as U+202E), escaped as ``\\x1b`` or
    ``\\u202e``; newlines and tabs kept."""
    out = []
    for ch in str(text):
        if ch in "\n\t" or (unicodedata.category(ch) not in ("Cc", "Cf") and ch not in "\u2028\u2029"):
            out.append(ch)
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return "".join(out)


def describe_validation_error(exc: ValidationError) -> list[str]:
    """Each pydantic error as ``dotted.field: message``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{loc}: {msg}")
    return lines


class Interrupted(PerceptforgeError):
    """The run was asked to stop (SIGTERM, SIGINT): what was in progress finished or was left for the resume, every
    file written is whole (temporary file, then rename), and the same command resumes. The exit status is the
    shell's for the signal (128 + its number)."""

    def __init__(self, signum: int, name: str, at_once: bool = False):
        self.signum, self.name, self.at_once = signum, name, at_once
        how = "at once, a unit mid-way left for the resume" if at_once else "after the units in progress"
        super().__init__(
            f"interrupted by {name}: the run stopped {how}; every file written is whole — run the same command "
            "again to resume"
        )

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def __reduce__(self) -> tuple:
        return (type(self), (self.signum, self.name, self.at_once))


def entry_point_place(ep: EntryPoint, group: str) -> str:
    """Where a plug-in comes from, as its refusal names it: the group, the entry point and its package."""
    package = f" (package {ep.dist.name})" if ep.dist is not None else ""
    return f"{group} entry point {ep.name} = {ep.value}{package}"


def failed_at(exc: BaseException) -> str:
    """The plug-in's own line that raised (not importlib's frames), for a load error's one line."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename}:{exc.lineno})"
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and "importlib" not in Path(f.filename).parts and f.filename != __file__
    ]
    return f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def load_entry_point(ep: EntryPoint, group: str) -> Any:
    """What a plug-in's entry point names. One that fails to load (its import raised, or the name is missing) is
    one line naming the group, the entry point, its package and the plug-in's own line that raised."""
    try:
        return ep.load()
    except Exception as exc:  # any fault of the plug-in's code while it loads
        raise InputError(
            entry_point_place(ep, group), f"cannot be loaded: {type(exc).__name__}: {exc}{failed_at(exc)}"
        ) from None
