"""Prompt files: ``prompts/<stage>/<name>.v<N>.txt`` with ``{named}`` placeholders.

A prompt's id is ``<stage>/<name>``; its version is the ``vN`` in the file name (the highest wins unless
one is asked for); its hash is the SHA-256 of the text. Rendering checks that exactly the prompt's
placeholders are given, so a renamed field fails at once, not as a silently odd prompt. Literal braces
are written ``{{`` and ``}}``.

Prompts are found under roots laid out the same way: the bundled ``prompts/`` folder, folders registered with
``register_prompt_root`` (a BLINK-style task folder's ``prompts/``, by the task loader) and folders named in
``PERCEPTFORGE_PROMPTS`` (``os.pathsep``-separated). A prompt id and version given by two roots is an error.
"""

from __future__ import annotations

import logging
import os
import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import sha256_bytes

_FILE = re.compile(r"^(?P<name>[a-z0-9_]+)\.v(?P<version>\d+)\.txt$")


@dataclass(frozen=True)
class Prompt:
    id: str
    version: int
    text: str

    @property
    def sha256(self) -> str:
        return sha256_bytes(self.text.encode("utf-8"))

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(name for _, name, _, _ in string.Formatter().parse(self.text) if name)

    def render(self, **values: object) -> str:
        missing = self.placeholders - set(values)
        extra = set(values) - self.placeholders
        if missing or extra:
            raise PerceptforgeError(
                f"prompt {self.id} v{self.version}: missing placeholders {sorted(missing)}, unexpected {sorted(extra)}"
            )
        return self.text.format(**values)

    def ref(self) -> dict:
        return {"id": self.id, "version": self.version, "sha256": self.sha256}


ENV = "PERCEPTFORGE_PROMPTS"
_registered: list[Path] = []


def register_prompt_root(root: str | Path) -> None:
    """Prompts under ``root`` (``<stage>/<name>.vN.txt``) are found from now on, besides the bundled ones."""
    root = Path(root).resolve()
    if root not in _registered:
        _registered.append(root)


def prompt_roots() -> list[Path]:
    """The extra roots, registered first, then ``PERCEPTFORGE_PROMPTS``'s, each once."""
    roots = [*_registered, *(Path(p).resolve() for p in os.environ.get(ENV, "").split(os.pathsep) if p)]
    return list(dict.fromkeys(roots))


def _read(root: Traversable) -> dict[str, dict[int, Traversable]]:
    """prompt id → {version: file} under one root."""
    found: dict[str, dict[int, Traversable]] = {}
    for stage in root.iterdir():
        if not stage.is_dir() or stage.name.startswith(("_", ".")):
            continue
        for entry in stage.iterdir():
            match = _FILE.match(entry.name)
            if match:
                found.setdefault(f"{stage.name}/{match['name']}", {})[int(match["version"])] = entry
    return found


# Each root is read once: its files are fixed while we run. Which roots there are is asked on every call.
@cache
def _bundled() -> dict[str, dict[int, Traversable]]:
    return _read(resources.files("perceptforge.prompts"))


@cache
def _scan(root: Path) -> dict[str, dict[int, Traversable]]:
    return _read(root)


def available() -> dict[str, dict[int, Traversable]]:
    """prompt id → {version: file}, over the bundled root and every extra one as they are now."""
    found = {k: dict(v) for k, v in _bundled().items()}
    for root in prompt_roots():
        if not root.is_dir():
            raise PerceptforgeError(f"{root}: prompt folder not found")
        for prompt_id, versions in _scan(root).items():
            known = found.setdefault(prompt_id, {})
            for version, entry in versions.items():
                if version in known:
                    raise PerceptforgeError(
                        f"{entry}: prompt {prompt_id} v{version} is already defined in {known[version]}"
                    )
                known[version] = entry
    bundled = _bundled()
    for prompt_id, versions in bundled.items():
        newest = max(found[prompt_id])
        if newest > max(versions):
            _tell_once(
                f"{found[prompt_id][newest]}: prompt {prompt_id} v{newest} outranks the bundled v{max(versions)}: "
                "it is used wherever no version is pinned (each item's lineage names the version it used)"
            )
    return found


_told: set[str] = set()


def _tell_once(line: str) -> None:
    """A prompt folder that replaces a bundled prompt changes every run's wording: said once per process."""
    if line not in _told:
        _told.add(line)
        logging.getLogger("perceptforge").warning(line)


def load_prompt(prompt_id: str, version: int | None = None) -> Prompt:
    versions = available().get(prompt_id)
    if not versions:
        raise PerceptforgeError(f"unknown prompt {prompt_id!r} (prompts/<stage>/<name>.vN.txt)")
    chosen = version if version is not None else max(versions)
    if chosen not in versions:
        raise PerceptforgeError(f"prompt {prompt_id} has no version {chosen} (has {sorted(versions)})")
    entry = versions[chosen]
    raw = entry.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise PerceptforgeError(
            f"{entry}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    prompt = Prompt(prompt_id, chosen, text.rstrip("\n"))
    try:
        _ = prompt.placeholders
    except ValueError as exc:
        raise PerceptforgeError(f"prompt {prompt_id} v{chosen}: bad placeholder syntax: {exc}") from None
    unnamed = _unnamed_placeholder(prompt.text)
    if unnamed:
        line, field = unnamed
        raise PerceptforgeError(
            f"{entry}:{line}: the placeholder {{{field}}} has no name: name it ({{name}}), or write a literal brace "
            "as {{ or }}"
        )
    return prompt


_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def _unnamed_placeholder(text: str) -> tuple[int, str] | None:
    """The line and text of the first ``{}`` or ``{0}`` placeholder: rendering fills placeholders by name, so one
    without a name would fail at the first render, mid-run, and ``placeholders`` would never list it."""
    for match in _FIELD.finditer(text):
        field = match.group(1)
        if field is not None:
            name = re.split(r"[.\[!:]", field, maxsplit=1)[0]
            if not name or name.isdigit():
                return text.count("\n", 0, match.start()) + 1, field
    return None
