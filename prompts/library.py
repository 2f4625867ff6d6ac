"""Prompt files: ``prompts/<stage>/<name>.v<N>.txt`` with ``{named}`` placeholders.

A prompt's id is ``<stage>/<name>``; its version is the ``vN`` in the file name (the highest wins unless
one is asked for); its hash is the SHA-256 of the text. Rendering checks that exactly the prompt's
placeholders are given, so a renamed field fails at once, not as a silently odd prompt. Literal braces
are written ``{{`` and ``}}``.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources

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


@cache
def available() -> dict[str, dict[int, str]]:
    """prompt id → {version: resource path}."""
    root = resources.files("perceptforge.prompts")
    found: dict[str, dict[int, str]] = {}
    for stage in root.iterdir():
        if not stage.is_dir() or stage.name.startswith(("_", ".")):
            continue
        for entry in stage.iterdir():
            match = _FILE.match(entry.name)
            if match:
                found.setdefault(f"{stage.name}/{match['name']}", {})[int(match["version"])] = (
                    f"{stage.name}/{entry.name}"
                )
    return found


def load_prompt(prompt_id: str, version: int | None = None) -> Prompt:
    versions = available().get(prompt_id)
    if not versions:
        raise PerceptforgeError(f"unknown prompt {prompt_id!r} (prompts/<stage>/<name>.vN.txt)")
    chosen = version if version is not None else max(versions)
    if chosen not in versions:
        raise PerceptforgeError(f"prompt {prompt_id} has no version {chosen} (has {sorted(versions)})")
    text = resources.files("perceptforge.prompts").joinpath(versions[chosen]).read_text(encoding="utf-8")
    prompt = Prompt(prompt_id, chosen, text.rstrip("\n"))
    try:
        _ = prompt.placeholders
    except ValueError as exc:
        raise PerceptforgeError(f"prompt {prompt_id} v{chosen}: bad placeholder syntax: {exc}") from None
    return prompt
