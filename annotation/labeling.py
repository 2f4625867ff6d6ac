"""Labeling configs (one XML file per item kind under ``annotation/configs/``) and client-side checks of
annotation results against them: Label Studio stores a result whose control name it does not know, so pull
validates every result before it counts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib import resources
from typing import Any

KINDS = ("yes_no_pair", "single_mcq", "cross_mcq", "context_pair", "absent_mcq")
# the human-authored flows: one project to write items in, one to cross-check them, per benchmark
AUTHORING_KINDS = ("codis_author", "codis_review", "mme_realworld_author", "mme_realworld_review")
# BLINK-style items: one config for every task, its image slots cut to the project's items (``perception_config``)
PERCEPTION_KINDS = ("perception_mcq",)
MAX_PERCEPTION_IMAGES = 4
# a source folder's regions outlined by hand (``annotation/outlines.py``), not items
SOURCE_KINDS = ("outline",)
CONTROL_TYPES = {"Choices": "choices", "TextArea": "textarea", "RectangleLabels": "rectanglelabels"}


@dataclass(frozen=True)
class Control:
    name: str
    type: str  # the result ``type``: choices / textarea
    to_name: str
    choices: tuple[str, ...] = ()
    required: bool = False


def config_text(kind: str) -> str:
    known = KINDS + AUTHORING_KINDS + PERCEPTION_KINDS + SOURCE_KINDS
    if kind not in known:
        raise ValueError(f"no labeling config for item kind {kind!r}; known: {', '.join(known)}")
    return resources.files("perceptforge.annotation").joinpath("configs", f"{kind}.xml").read_text()


def perception_config(images: int) -> str:
    """``perception_mcq`` showing ``images`` image slots (1-4): Label Studio needs every slot's data in every
    task and draws each slot, so a project of one-image items gets one slot, a Jigsaw project three."""
    if not 1 <= images <= MAX_PERCEPTION_IMAGES:
        raise ValueError(f"a BLINK-style item has 1 to {MAX_PERCEPTION_IMAGES} images, not {images}")
    unused = tuple(f'name="image_{k}"' for k in range(images + 1, MAX_PERCEPTION_IMAGES + 1))
    return "".join(
        line for line in config_text("perception_mcq").splitlines(keepends=True) if not any(u in line for u in unused)
    )


def config_version(text: str) -> int:
    """The ``vN`` in the config's leading comment (bumped whenever a control changes)."""
    match = re.search(r"\bv(\d+)\b", text.split("-->", 1)[0])
    if match:
        return int(match.group(1))
    raise ValueError("labeling config has no version (expected 'kind vN' in its first comment)")


def controls(text: str) -> dict[str, Control]:
    """The config's control tags by name."""
    root = ET.fromstring(text)
    found: dict[str, Control] = {}
    for el in root.iter():
        if el.tag not in CONTROL_TYPES:
            continue
        name = el.attrib["name"]
        choices = tuple(c.attrib["value"] for c in el.iter("Choice" if el.tag == "Choices" else "Label"))
        found[name] = Control(
            name, CONTROL_TYPES[el.tag], el.attrib.get("toName", ""), choices, el.attrib.get("required") == "true"
        )
    return found


def result_errors(result: list[dict], known: dict[str, Control]) -> list[str]:
    """What is wrong with one annotation's result list (empty: it is valid)."""
    errors: list[str] = []
    seen: set[str] = set()
    for r in result:
        name: Any = r.get("from_name")
        control = known.get(name)
        if control is None:
            errors.append(f"unknown control {name!r}")
            continue
        if name in seen:
            errors.append(f"control {name!r} answered twice")
        seen.add(name)
        if r.get("type") != control.type:
            errors.append(f"{name}: type {r.get('type')!r}, expected {control.type!r}")
            continue
        value = r.get("value") or {}
        if control.type == "choices":
            picked = value.get("choices") or []
            bad = [c for c in picked if c not in control.choices]
            if bad or len(picked) != 1:
                errors.append(f"{name}: expected one of {list(control.choices)}, got {picked}")
        elif control.type == "rectanglelabels":
            sizes = [value.get(k) for k in ("x", "y", "width", "height")]
            numbers = [float(v) for v in sizes if isinstance(v, int | float)]
            if len(numbers) != 4 or numbers[2] <= 0 or numbers[3] <= 0:
                errors.append(f"{name}: expected a rectangle (x, y, width, height in %), got {value!r}")
        elif not isinstance(value.get("text"), list) or not all(isinstance(t, str) for t in value["text"]):
            errors.append(f"{name}: expected a list of texts, got {value.get('text')!r}")
    for control in known.values():
        if control.required and control.name not in seen:
            errors.append(f"required control {control.name!r} is missing")
    return errors


def answers(result: list[dict]) -> dict[str, str]:
    """A valid result as {control name: chosen value or entered text} (text fields stripped, empty dropped)."""
    out: dict[str, str] = {}
    for r in result:
        value = r["value"]
        if r["type"] == "rectanglelabels":
            continue  # a rectangle is not text: ``rectangle`` reads it
        text = value["choices"][0] if r["type"] == "choices" else "\n".join(value["text"]).strip()
        if text:
            out[r["from_name"]] = text
    return out


def choice(from_name: str, to_name: str, value: str) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [value]}}


def text(from_name: str, to_name: str, value: str) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "textarea", "value": {"text": [value]}}


def rectangle(result: list[dict], name: str, width: int, height: int) -> tuple[float, float, float, float] | None:
    """The result's rectangle ``name`` in image pixels (x0, y0, x1, y1), from Label Studio's percentages,
    rounded to 0.01 px so pulls stay byte-stable; None when it was not drawn."""
    for r in result:
        if r.get("from_name") == name and r.get("type") == "rectanglelabels":
            v = r["value"]
            x0, y0 = v["x"] * width / 100, v["y"] * height / 100
            x1, y1 = x0 + v["width"] * width / 100, y0 + v["height"] * height / 100
            return (round(max(0.0, x0), 2), round(max(0.0, y0), 2), round(min(width, x1), 2), round(min(height, y1), 2))
    return None


def rectangle_result(
    name: str, to_name: str, box: tuple[float, float, float, float], width: int, height: int, label: str
) -> dict:
    """A rectangle in image pixels as a Label Studio result (percentages of the original size)."""
    x0, y0, x1, y1 = box
    return {
        "from_name": name,
        "to_name": to_name,
        "type": "rectanglelabels",
        "original_width": width,
        "original_height": height,
        "value": {
            "x": 100 * x0 / width,
            "y": 100 * y0 / height,
            "width": 100 * (x1 - x0) / width,
            "height": 100 * (y1 - y0) / height,
            "rotation": 0,
            "rectanglelabels": [label],
        },
    }
