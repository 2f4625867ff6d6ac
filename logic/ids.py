"""Stable names and seeds: a unit's id, its own random generator, an item's id, an edit's seed.

Each depends only on what identifies the work (source, template, seed), never on scheduling order, so
reruns and resumed runs make the same draws and write the same bytes.
"""

from __future__ import annotations

import hashlib

import numpy as np

from perceptforge.logic.templates import Template


def unit_id(source_id: str, template: Template) -> str:
    return f"{source_id}-{template.id}"


def unit_rng(seed: int, unit: str) -> np.random.Generator:
    """The unit's own generator for one purpose (``unit`` may carry a suffix such as ``":edit"``)."""
    digest = int.from_bytes(hashlib.sha256(unit.encode()).digest()[:8], "big")
    return np.random.default_rng([seed, digest])


def question_id(source_id: str, source_sha256: str, template: Template, seed: int, index: int) -> str:
    """The item's id (its file name in ``items/``). The source's id is part of it: two copies of one photo under
    two ids are two sources, whose items must not share a file."""
    key = f"{source_sha256}:{template.id}:v{template.version}:{seed}:{index}:{source_id}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def edit_seed(seed: int, unit: str) -> int:
    """The seed of the unit's diffusion generator, recorded in its lineage so the edit can be redone alone."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{unit}:edit".encode()).digest()[:4], "big") >> 1
