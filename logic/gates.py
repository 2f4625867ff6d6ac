"""Quality gates before annotators see a pair: real change inside the edit region, little outside it,
matching sizes, and no two pairs whose manipulated images are near-duplicates (perceptual hash)."""

from __future__ import annotations

import numpy as np
from PIL import Image


def region_change(natural: np.ndarray, manipulated: np.ndarray, mask: np.ndarray) -> tuple[float, float]:
    """Mean absolute pixel change (0–255, averaged over channels) inside and outside the mask."""
    diff = np.abs(natural.astype(np.float32) - manipulated.astype(np.float32)).mean(axis=2)
    inside = float(diff[mask].mean()) if mask.any() else 0.0
    outside = float(diff[~mask].mean()) if (~mask).any() else 0.0
    return inside, outside


def phash(image: Image.Image, size: int = 8) -> int:
    """64-bit perceptual hash: DCT of a 32x32 grayscale, low 8x8 frequencies against their median."""
    import cv2

    small = np.asarray(image.convert("L").resize((4 * size, 4 * size), Image.Resampling.LANCZOS), dtype=np.float32)
    low = np.asarray(cv2.dct(small), np.float32)[:size, :size].flatten()
    bits = low > np.median(low[1:])
    return int("".join("1" if b else "0" for b in bits), 2)


def hamming(a: int, b: int) -> int:
    return bin(a ^ b).count("1")


def check_pair(natural: Image.Image, manipulated: Image.Image, mask: np.ndarray | None, gates) -> str | None:
    if natural.size != manipulated.size:
        return f"sizes differ: natural {natural.size}, manipulated {manipulated.size}"
    a, b = np.asarray(natural), np.asarray(manipulated)
    if mask is None:  # a whole-image edit: the whole image must change
        mask = np.ones(a.shape[:2], bool)
        inside, outside = region_change(a, b, mask)[0], 0.0
    else:
        inside, outside = region_change(a, b, mask)
    if inside < gates.min_inside_change:
        return f"too little change inside the edit region: {inside:.1f} < {gates.min_inside_change}"
    if outside > gates.max_outside_change:
        return f"too much change outside the edit region: {outside:.1f} > {gates.max_outside_change}"
    return None


def near_duplicates(hashes: list[tuple[str, int]], min_distance: int) -> dict[str, str]:
    """unit → the earlier unit whose manipulated image it nearly duplicates (units in the order given)."""
    kept: list[tuple[str, int]] = []
    dupes = {}
    for unit, h in hashes:
        twin = next((u for u, k in kept if hamming(h, k) < min_distance), None)
        if twin:
            dupes[unit] = twin
        else:
            kept.append((unit, h))
    return dupes
