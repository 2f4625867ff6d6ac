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
CONTROL_TYPES = {"Choices": "choices", "TextArea": "textarea"}


@dataclass(frozen=True)
class Control:
    name: str
    type: str  # the result ``type``: choices / textarea
    to_name: str
    choices: tuple[str, ...] = ()
    required: bool = False


def config_text(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"no labeling config for item kind {kind!r}; known: {', '.join(KINDS)}")
    return resources.files("perceptforge.annotation").joinpath("configs", f"{kind}.xml").read_text()


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
        choices = tuple(c.attrib["value"] for c in el.iter("Choice"))
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
        text = value["choices"][0] if r["type"] == "choices" else "\n".join(value["text"]).strip()
        if text:
            out[r["from_name"]] = text
    return out


def choice(from_name: str, to_name: str, value: str) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [value]}}


def text(from_name: str, to_name: str, value: str) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "textarea", "value": {"text": [value]}}
