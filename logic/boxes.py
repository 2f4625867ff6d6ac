"""Boxes as vision-language models print them, parsed once at the edge into pixel xyxy.

Formats:
- ``norm``: Shikra's normalised ``[0.120,0.300,0.580,0.910]`` (several boxes for one phrase: ``[..;..]``);
- ``grid1000``: Qwen-VL's ``<|box_start|>(x0,y0),(x1,y1)<|box_end|>`` on a 0–1000 grid, with the phrase in
  ``<|object_ref_start|>…<|object_ref_end|>`` before it;
- ``pixel``: plain pixel ``[x0, y0, x1, y1]``.
``auto`` picks per box: Qwen tags → grid1000; all four numbers in [0, 1] → norm; else pixel.
Boxes that are malformed, empty, or outside the image are skipped and reported, never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from perceptforge.data import geometry
from perceptforge.data.schema import Box

BoxFormat = Literal["auto", "norm", "grid1000", "pixel"]

_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_QWEN = re.compile(
    r"(?:<\|object_ref_start\|>(.*?)<\|object_ref_end\|>\s*)?<\|box_start\|>\("
    + _NUM
    + ","
    + _NUM
    + r"\),\("
    + _NUM
    + ","
    + _NUM
    + r"\)<\|box_end\|>"
)
_BRACKET = re.compile(r"\[((?:" + _NUM + r",){3}" + _NUM + r"(?:;(?:" + _NUM + r",){3}" + _NUM + r")*)\]")


@dataclass(frozen=True)
class ParsedBox:
    phrase: str  # the words just before the box ("a dog"), may be empty
    box: Box


def _phrase_before(text: str, end: int) -> str:
    before = re.split(r"[.,;:!?\]\)>\n]", text[:end])[-1]
    return " ".join(before.split()[-4:])


def _to_pixels(values: list[float], fmt: BoxFormat, width: int, height: int) -> Box:
    if fmt == "auto":
        fmt = "norm" if all(0 <= v <= 1 for v in values) else "pixel"
    if fmt == "norm":
        return Box.from_xyxy(geometry.norm_to_xyxy(values, width, height))
    if fmt == "grid1000":
        return Box.from_xyxy(geometry.grid1000_to_xyxy(values, width, height))
    box = Box.from_xyxy(values)
    if not box.within(width, height):
        raise ValueError(f"pixel box {values} lies outside the {width}x{height} image")
    return box


def parse_boxes(
    text: str | None, width: int, height: int, fmt: BoxFormat = "auto"
) -> tuple[list[ParsedBox], list[str]]:
    """(boxes found, problems) in the order they appear in ``text``."""
    if not text:
        return [], []
    found: list[tuple[int, ParsedBox]] = []
    problems: list[str] = []
    for m in _QWEN.finditer(text):
        values = [float(v) for v in m.groups()[1:]]
        try:
            box = _to_pixels(values, "grid1000" if fmt == "auto" else fmt, width, height)
            found.append((m.start(), ParsedBox((m.group(1) or _phrase_before(text, m.start())).strip(), box)))
        except ValueError as exc:
            problems.append(f"{m.group(0)}: {exc}")
    for m in _BRACKET.finditer(text):
        phrase = _phrase_before(text, m.start())
        for part in m.group(1).split(";"):
            values = [float(v) for v in part.split(",")]
            try:
                found.append((m.start(), ParsedBox(phrase, _to_pixels(values, fmt, width, height))))
            except ValueError as exc:
                problems.append(f"[{part}]: {exc}")
    return [p for _, p in sorted(found, key=lambda x: x[0])], problems


def parse_subject_reply(text: str, width: int, height: int, fmt: BoxFormat = "auto") -> tuple[str, Box]:
    """The extract-subject prompt's answer: ``### main subject ### [coordinates] ###``."""
    m = re.search(r"###\s*(.+?)\s*###\s*(.+?)\s*###", text or "", re.S)
    if not m:
        raise ValueError(f"expected '### main subject ### [coordinates] ###', got {text!r:.120}")
    boxes, problems = parse_boxes(m.group(2), width, height, fmt)
    if not boxes:
        raise ValueError(
            f"no usable box for the main subject in {m.group(2)!r}" + (f" ({problems[0]})" if problems else "")
        )
    return m.group(1).strip(), boxes[0].box
