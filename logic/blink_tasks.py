"""How BLINK-style tasks (BLINK §3.2) draw their correct answer and distractors: pure functions of an
image or an annotation and a seeded generator, so each is tested on tiny inputs and every item can be
rebuilt byte for byte from its unit's seed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class Jigsaw:
    reference: Image.Image  # the image with its centre cell blanked
    options: tuple[Image.Image, Image.Image]
    answer: int  # index into options of the true centre cell
    cells: tuple[Box, Box]  # where each option was cut from


def grid_cells(size: tuple[int, int], n: int = 3) -> list[Box]:
    """The n×n grid's cells, row by row (integer edges, the last row and column absorb the remainder)."""
    w, h = size
    xs = [round(w * k / n) for k in range(n + 1)]
    ys = [round(h * k / n) for k in range(n + 1)]
    return [(xs[c], ys[r], xs[c + 1], ys[r + 1]) for r in range(n) for c in range(n)]


def jigsaw(image: Image.Image, rng: np.random.Generator, fill: tuple[int, int, int] = (255, 255, 255)) -> Jigsaw:
    """BLINK's Jigsaw on a 3×3 grid: the reference is the image with its centre cell cut out; the options
    are the centre cell and one other cell of the same size class, in a seeded order."""
    image = image.convert("RGB")
    cells = grid_cells(image.size)
    centre = cells[4]
    cw, ch = int(centre[2] - centre[0]), int(centre[3] - centre[1])
    # A distractor of the centre's exact size, so size gives nothing away (the middle row or column).
    same_size = [k for k, c in enumerate(cells) if k != 4 and (c[2] - c[0], c[3] - c[1]) == (cw, ch)]
    other = cells[int(rng.choice(same_size or [k for k in range(9) if k != 4]))]
    reference = image.copy()
    reference.paste(Image.new("RGB", (cw, ch), fill), (int(centre[0]), int(centre[1])))
    pieces = [image.crop(centre), image.crop(other).resize((cw, ch))]
    answer = int(rng.integers(2))
    ordered = (pieces[0], pieces[1]) if answer == 0 else (pieces[1], pieces[0])
    where = (centre, other) if answer == 0 else (other, centre)
    return Jigsaw(reference, ordered, answer, where)


def iou(a: Box, b: Box) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def localization_distractor(
    box: Box,
    size: tuple[int, int],
    rng: np.random.Generator,
    band: tuple[float, float] = (0.3, 0.6),
    tries: int = 1000,
) -> Box:
    """A Gaussian-noised copy of ``box`` inside the image whose IoU with it falls in ``band``: close enough
    to be plausible, far enough to be clearly wrong. Raises ValueError when none is found."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    for _ in range(tries):
        dx, dy = rng.normal(0, 0.35 * w), rng.normal(0, 0.35 * h)
        sw, sh = np.exp(rng.normal(0, 0.25, size=2))
        cx, cy = (x0 + x1) / 2 + dx, (y0 + y1) / 2 + dy
        cand: Box = (
            round(cx - w * sw / 2, 1),
            round(cy - h * sh / 2, 1),
            round(cx + w * sw / 2, 1),
            round(cy + h * sh / 2, 1),
        )
        if cand[0] < 0 or cand[1] < 0 or cand[2] > size[0] or cand[3] > size[1]:
            continue
        if band[0] <= iou(box, cand) <= band[1]:
            return cand
    raise ValueError(f"no distractor box with IoU in {band} for {box} in a {size} image after {tries} tries")


def counting_options(count: int, rng: np.random.Generator, n: int = 4) -> tuple[list[int], int]:
    """``n`` distinct positive counts, the true one among them at a seeded place: (options, answer index).
    Distractors are near the truth (±1…3), as a person's miscount would be."""
    if count < 1:
        raise ValueError(f"a counting item needs at least one object, got {count}")
    near = [c for c in range(count - 3, count + 4) if c >= 1 and c != count]
    distractors = [int(c) for c in rng.choice(near, size=n - 1, replace=False)]
    options = sorted([count, *distractors])
    return options, options.index(count)


def random_homography(size: tuple[int, int], rng: np.random.Generator, strength: float = 0.12) -> np.ndarray:
    """A plausible viewpoint change: each corner moved by up to ``strength`` of the image size."""
    import cv2

    w, h = size
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    dst = (src + rng.uniform(-strength, strength, size=(4, 2)) * np.array([w, h])).astype(np.float32)
    return cv2.getPerspectiveTransform(src, dst)


def warp_points(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (N×2) through a homography."""
    homogeneous = np.hstack([points, np.ones((len(points), 1))]) @ matrix.T
    return homogeneous[:, :2] / homogeneous[:, 2:3]


@dataclass(frozen=True)
class Correspondence:
    warped: Image.Image  # the second view
    reference_point: tuple[float, float]  # in the first view
    options: tuple[tuple[float, float], ...]  # candidate points in the second view
    answer: int  # index of the true correspondence
    matrix: tuple[tuple[float, ...], ...]  # the homography, first view → second


def correspondence(
    image: Image.Image,
    rng: np.random.Generator,
    n_options: int = 4,
    margin: float = 0.12,
    min_separation: float = 0.08,
) -> Correspondence:
    """BLINK's Visual Correspondence on a synthetic second view: a reference keypoint (ORB) in the photo,
    its true image under a random homography, and distractor keypoints of the second view that are far
    from it and from each other. Raises ValueError when the photo has too few keypoints."""
    import cv2

    rgb = image.convert("RGB")
    w, h = rgb.size
    matrix = random_homography((w, h), rng)
    warped = Image.fromarray(cv2.warpPerspective(np.asarray(rgb), matrix, (w, h), borderValue=(255, 255, 255)))
    orb = cv2.ORB_create(nfeatures=300)  # type: ignore[attr-defined]
    lo, hi = np.array([margin * w, margin * h]), np.array([(1 - margin) * w, (1 - margin) * h])

    def keypoints(img: Image.Image) -> np.ndarray:
        found = orb.detect(np.asarray(img.convert("L")), None)
        pts = np.array(sorted({(round(k.pt[0], 1), round(k.pt[1], 1)) for k in found}), np.float64).reshape(-1, 2)
        return pts[np.all((pts >= lo) & (pts <= hi), axis=1)]

    sources = keypoints(rgb)
    mapped = warp_points(matrix, sources) if len(sources) else sources
    usable = np.all((mapped >= lo) & (mapped <= hi), axis=1) if len(sources) else np.zeros(0, bool)
    if not usable.any():
        raise ValueError("no keypoint of the photo stays inside the second view")
    pick = int(rng.choice(np.flatnonzero(usable)))
    truth = mapped[pick]
    apart = min_separation * max(w, h)
    chosen = [truth]
    candidates = keypoints(warped)
    for k in rng.permutation(len(candidates)):
        if len(chosen) == n_options:
            break
        if all(np.hypot(*(candidates[k] - c)) > apart for c in chosen):
            chosen.append(candidates[k])
    if len(chosen) < n_options:
        raise ValueError(f"only {len(chosen) - 1} distractor keypoints at least {apart:.0f} px apart")
    order = rng.permutation(n_options)
    options = tuple((round(float(chosen[i][0]), 1), round(float(chosen[i][1]), 1)) for i in order)
    return Correspondence(
        warped,
        (float(sources[pick][0]), float(sources[pick][1])),
        options,
        int(np.flatnonzero(order == 0)[0]),
        tuple(tuple(float(v) for v in row) for row in matrix),
    )


@dataclass(frozen=True)
class DepthPair:
    points: tuple[tuple[int, int], tuple[int, int]]
    closer: int  # index of the point nearer the camera


def depth_pair(
    disparity: np.ndarray,
    rng: np.random.Generator,
    min_ratio: float = 1.3,
    margin: int = 16,
    tries: int = 2000,
    min_distance: int = 40,
) -> DepthPair:
    """Two points whose depth order is clear from a disparity map (larger disparity: nearer the camera):
    valid (positive, finite) disparities differing by at least ``min_ratio``, apart on the image."""
    h, w = disparity.shape
    for _ in range(tries):
        (x0, x1), (y0, y1) = rng.integers(margin, w - margin, size=2), rng.integers(margin, h - margin, size=2)
        d0, d1 = float(disparity[y0, x0]), float(disparity[y1, x1])
        if not (np.isfinite(d0) and np.isfinite(d1) and d0 > 0 and d1 > 0):
            continue
        if np.hypot(x1 - x0, y1 - y0) < min_distance or max(d0, d1) / min(d0, d1) < min_ratio:
            continue
        return DepthPair(((int(x0), int(y0)), (int(x1), int(y1))), 0 if d0 > d1 else 1)
    raise ValueError(f"no two points with a disparity ratio ≥ {min_ratio} after {tries} tries")
