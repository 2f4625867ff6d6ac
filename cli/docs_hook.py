"""MkDocs hook (mkdocs.yml ``hooks:``): the command reference page is written from the commands at build time."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- perceptforge-cli-reference -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from perceptforge.cli.reference import markdown as reference

    return markdown.replace(MARKER, reference())
