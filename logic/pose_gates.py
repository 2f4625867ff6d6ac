"""The pose referee's gate: a background edit keeps every body part the pose referee sees (the shoulder line, the
upper arms, the forearms to the wrists) whole and unchanged, whatever backend made it.

Each seen part is a capsule along its bones (``logic/body_mask.capsule``) of a radius a share of the shoulders'
width: the part's core, well inside its outline, which no clean cut reaches. ``body_changed:<part>`` is the share
of it the edit changed; a swap that cut off a forearm, replaced a wrist with the new scene, or bit into a shoulder
changes much of it.
"""

from __future__ import annotations

import numpy as np

from perceptforge.logic import pose as pl
from perceptforge.logic.body_mask import LIMB_VISIBLE, capsule

# part name → the landmarks its bones join (one landmark: a disc about it)
PARTS: dict[str, tuple[int, ...]] = {
    "shoulder line": (pl.LEFT_SHOULDER, pl.RIGHT_SHOULDER),
    "left upper arm": (pl.LEFT_SHOULDER, pl.LEFT_ELBOW),
    "right upper arm": (pl.RIGHT_SHOULDER, pl.RIGHT_ELBOW),
    # to the wrist, where the hand begins: the pose's finger points fall wide of a hand that grips a camera (in
    # the sky between it and the face), so a hand is judged by its wrist
    "left forearm and wrist": (pl.LEFT_ELBOW, pl.LEFT_WRIST),
    "right forearm and wrist": (pl.RIGHT_ELBOW, pl.RIGHT_WRIST),
}
PART_CORE = 0.05  # a part's core radius, a share of the shoulders' width (an upper arm is about a quarter of it)


def body_part_masks(
    pose: pl.Pose, shape: tuple[int, int], person: np.ndarray | None = None, core: float = PART_CORE
) -> dict[str, np.ndarray]:
    """(H, W) bool per seen part: its core along its bones. A part counts where the pose sees both its ends (in the
    photo, visibility at least ``LIMB_VISIBLE``) and, given the person segmenter's ``person`` probability, both
    ends lie on the person (a hidden arm the pose model guesses behind a podium is not a part the photo shows),
    and only its pixels on the person are judged."""
    h, w = shape
    ls, rs = pl.LEFT_SHOULDER, pl.RIGHT_SHOULDER
    if not (pose.seen(ls, h, w, LIMB_VISIBLE) and pose.seen(rs, h, w, LIMB_VISIBLE)):
        return {}
    span = float(np.hypot(*(pose.points[ls] - pose.points[rs])))
    out = {}
    for name, (i, j) in PARTS.items():
        if not (pose.seen(i, h, w, LIMB_VISIBLE) and pose.seen(j, h, w, LIMB_VISIBLE)):
            continue
        p, q = pose.points[i], pose.points[j]
        if person is not None and any(person[min(h - 1, int(y)), min(w - 1, int(x))] < 0.5 for x, y in (p, q)):
            continue
        part = capsule(shape, p, q, core * span)
        out[name] = part if person is None else part & (person >= 0.5)
    return out


def body_changed(changed: np.ndarray, parts: dict[str, np.ndarray]) -> dict[str, float]:
    """``body_changed:<part>``: the share of each part's core the edit ``changed`` ((H, W) bool)."""
    out = {}
    for name, part in parts.items():
        if part.shape != changed.shape:
            raise ValueError(f"a body part is {part.shape}, the pair's changed pixels {changed.shape}")
        if part.any():
            out[f"body_changed:{name}"] = round(float(changed[part].mean()), 6)
    return out


def body_verdict(measured: dict[str, float], limit: float) -> str | None:
    """Why a pair fails the body-part gate: the part most changed above ``limit``, said with both numbers."""
    worst = max(((v, k) for k, v in measured.items() if k.startswith("body_changed:")), default=None)
    if worst is None or worst[0] <= limit:
        return None
    value, key = worst
    return f"{value:.1%} of the {key.split(':', 1)[1]} changed (a body part cut or painted) (at most {limit:.1%})"
