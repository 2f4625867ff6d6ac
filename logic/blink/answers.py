"""How BLINK-style tasks (BLINK §3.2) draw their correct answer and distractors: pure functions of an
image or an annotation and a seeded generator, so each is tested on tiny inputs and every item can be
rebuilt byte for byte from its unit's seed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True)
class Jigsaw:
    reference: Image.Image  # the upper-left 2×2 cells, the grid's centre (their lower-right cell) blanked
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
    """BLINK's Jigsaw on a 3×3 grid: the reference is the upper-left 2×2 cells with the grid's centre cut out
    (BLINK keeps "the three segments from the upper left corner"); the options are the centre cell and one
    other cell of the same size, in a seeded order."""
    image = image.convert("RGB")
    cells = grid_cells(image.size)
    centre = cells[4]
    cw, ch = int(centre[2] - centre[0]), int(centre[3] - centre[1])
    # A distractor of the centre's exact size, so size gives nothing away (the middle row or column).
    same_size = [k for k, c in enumerate(cells) if k != 4 and (c[2] - c[0], c[3] - c[1]) == (cw, ch)]
    other = cells[int(rng.choice(same_size or [k for k in range(9) if k != 4]))]
    reference = image.crop((0, 0, int(centre[2]), int(centre[3])))
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


def localization_margin(labelled: Box, candidate: Box, tolerance: float = 0.1) -> float:
    """How clearly the labelled box beats ``candidate`` as the object's box, allowing for the annotation's slack:
    the least, over every true box whose edges lie within ``tolerance`` of the labelled box's width or height of
    its edges (each edge in, out or kept: 81 boxes), of IoU(true, labelled) − IoU(true, candidate). A distractor
    that a slightly shifted truth would favour (the rocket whose box stops short of its base) scores low."""
    x0, y0, x1, y1 = labelled
    dx, dy = tolerance * (x1 - x0), tolerance * (y1 - y0)
    worst = 1.0
    for a in (-dx, 0.0, dx):
        for b in (-dy, 0.0, dy):
            for c in (-dx, 0.0, dx):
                for d in (-dy, 0.0, dy):
                    truth = (x0 + a, y0 + b, x1 + c, y1 + d)
                    worst = min(worst, iou(truth, labelled) - iou(truth, candidate))
    return worst


def localization_distractors(
    box: Box,
    size: tuple[int, int],
    rng: np.random.Generator,
    band: tuple[float, float] = (0.3, 0.6),
    tries: int = 1000,
    margin: float = 0.0,
    tolerance: float = 0.1,
) -> Iterator[Box]:
    """Gaussian-noised copies of ``box`` (BLINK §3.2) inside the image whose IoU with it falls in ``band`` (close
    enough to be plausible) and whose ``localization_margin`` is at least ``margin`` (clearly wrong, even if the
    labelled box is off by ``tolerance``), in the order drawn; at most ``tries`` draws."""
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
        if band[0] <= iou(box, cand) <= band[1] and localization_margin(box, cand, tolerance) >= margin:
            yield cand


def counting_options(count: int, rng: np.random.Generator, n: int = 4) -> tuple[list[int], int]:
    """``n`` distinct positive counts, the true one among them at a seeded place: (options, answer index).
    Distractors are near the truth (±1…3), as a person's miscount would be."""
    if count < 1:
        raise ValueError(f"a counting item needs at least one object, got {count}")
    near = [c for c in range(count - 3, count + 4) if c >= 1 and c != count]
    distractors = [int(c) for c in rng.choice(near, size=n - 1, replace=False)]
    options = [count, *distractors]
    order = rng.permutation(n)  # not sorted: with small counts the truth would always come first
    return [options[i] for i in order], int(np.flatnonzero(order == 0)[0])


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


def point_pairs(
    shape: tuple[int, ...], rng: np.random.Generator, margin: int, tries: int, min_distance: int
) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """Up to ``tries`` random pairs of points at least ``min_distance`` apart, ``margin`` from the edges."""
    h, w = shape[:2]
    for _ in range(tries):
        (x0, x1), (y0, y1) = rng.integers(margin, w - margin, size=2), rng.integers(margin, h - margin, size=2)
        if np.hypot(x1 - x0, y1 - y0) >= min_distance:
            yield (int(x0), int(y0)), (int(x1), int(y1))


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
    for a, b in point_pairs(disparity.shape, rng, margin, tries, min_distance):
        d0, d1 = float(disparity[a[1], a[0]]), float(disparity[b[1], b[0]])
        if np.isfinite(d0) and np.isfinite(d1) and d0 > 0 and d1 > 0 and max(d0, d1) / min(d0, d1) >= min_ratio:
            return DepthPair((a, b), 0 if d0 > d1 else 1)
    raise ValueError(f"no two points with a disparity ratio ≥ {min_ratio} after {tries} tries")


def separated(a: Box, b: Box, min_gap: float) -> str | None:
    """The relation of box ``a`` to box ``b`` when it is unambiguous: 'left of', 'right of', 'above' or
    'below', with at least ``min_gap`` px between them on that axis and no doubt on the other; else None."""
    horizontal = "left of" if a[2] + min_gap <= b[0] else "right of" if b[2] + min_gap <= a[0] else None
    vertical = "above" if a[3] + min_gap <= b[1] else "below" if b[3] + min_gap <= a[1] else None
    if (horizontal is None) == (vertical is None):  # overlapping, or apart on both axes (diagonal): skip
        return None
    return horizontal or vertical


OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


Frame = tuple[float, float, float]  # a crop: its scale and its left and top as shares of the room left


def random_frame(rng: np.random.Generator) -> Frame:
    """A crop of 75–95 % of a picture, placed at random."""
    return float(rng.uniform(0.75, 0.95)), float(rng.uniform()), float(rng.uniform())


def augmented_view(
    image: Image.Image, rng: np.random.Generator, size: tuple[int, int], frame: Frame | None = None
) -> Image.Image:
    """A view of one photo: the crop ``frame`` (a random one when None), a small colour shift, resized."""
    w, h = image.size
    scale, fx, fy = frame or random_frame(rng)
    cw, ch = int(w * scale), int(h * scale)
    x, y = int(round(fx * (w - cw))), int(round(fy * (h - ch)))
    view = np.asarray(image.convert("RGB").crop((x, y, x + cw, y + ch)).resize(size), np.float32)
    shifted = view * rng.uniform(0.9, 1.1, size=3) + rng.uniform(-12, 12, size=3)
    return Image.fromarray(np.clip(shifted, 0, 255).round().astype(np.uint8))


Counts = tuple[int, int]  # shapes in a panel's top half and in its bottom half


@dataclass(frozen=True)
class IqPuzzle:
    counts: tuple[Counts, Counts, Counts]  # the three panels shown
    options: tuple[Counts, ...]  # each candidate panel
    answer: int
    shapes: tuple[str, str]  # the top half's shape, the bottom half's
    ink: str  # a name of IQ_INKS: every shape of the puzzle is drawn in it
    size: float = 0.3  # a shape's radius as a share of its cell's width
    layout: int = 0  # seeds where each shape sits in its cell, so the picture too is the unit's own


IQ_SHAPES = ("circle", "square", "triangle", "diamond", "hexagon", "star")
IQ_INKS = {
    "black": (30, 30, 30),
    "blue": (30, 60, 150),
    "red": (170, 30, 30),
    "green": (20, 110, 50),
    "purple": (100, 40, 140),
    "brown": (120, 70, 20),
}
IQ_MAX = 10  # shapes in a half panel: two rows of five
IQ_STEPS = (-2, -1, 0, 1, 2)


def iq_rows() -> list[tuple[int, int]]:
    """Every (first count, step) of one half whose four counts lie in 1..9 (a distractor may add one)."""
    return [(a, s) for s in IQ_STEPS for a in range(1, IQ_MAX) if 1 <= a + 3 * s <= IQ_MAX - 1]


def iq_rules() -> list[tuple[tuple[int, int], tuple[int, int], str, str]]:
    """Every (top row, bottom row, top shape, bottom shape) a puzzle can have, never both halves constant: 19,440,
    so two runs' puzzles, each drawn from its own unit's generator, rarely share one (a handful of repeats in a
    hundred thousand pairs), and never a picture (``layout``)."""
    rows = iq_rows()
    return [
        (top, bottom, a, b)
        for top in rows
        for bottom in rows
        if top[1] or bottom[1]
        for a in IQ_SHAPES
        for b in IQ_SHAPES
        if a != b
    ]


def iq_puzzle(rng: np.random.Generator, n_options: int = 4) -> IqPuzzle:
    """A puzzle whose rule, shapes, ink and layout all come from ``rng``, the unit's own generator."""
    rules = iq_rules()
    return iq_puzzle_of(rules[int(rng.integers(len(rules)))], rng, n_options)


def iq_puzzle_of(
    rule: tuple[tuple[int, int], tuple[int, int], str, str], rng: np.random.Generator, n_options: int = 4
) -> IqPuzzle:
    """Two counting sequences in one row of panels: the top half's shapes go k, k+s, k+2s, the bottom half's
    j, j+t, j+2t (a step may be negative or, in one half, zero); the answer panel has k+3s and j+3t. Each distractor
    gets one half wrong or both: a count one or two off, the last panel repeated, one half not moved on, both moved
    one step too far. All in an order and a layout drawn from ``rng``."""
    (k, s), (j, t), top, bottom = rule
    counts = tuple((k + n * s, j + n * t) for n in range(3))
    truth = (k + 3 * s, j + 3 * t)
    last = counts[2]
    near = {(truth[0] + d, truth[1]) for d in (-1, 1, 2)} | {(truth[0], truth[1] + d) for d in (-1, 1, 2)}
    near |= {last, (truth[0], last[1]), (last[0], truth[1]), (truth[0] + s, truth[1] + t), (truth[0] + 1, truth[1] + 1)}
    pool = sorted(c for c in near - {truth} if 1 <= min(c) and max(c) <= IQ_MAX)
    picked = rng.choice(len(pool), size=n_options - 1, replace=False)
    options = [truth, *(pool[int(i)] for i in picked)]
    order = rng.permutation(n_options)
    return IqPuzzle(
        (counts[0], counts[1], counts[2]),
        tuple(options[i] for i in order),
        int(np.flatnonzero(order == 0)[0]),
        (top, bottom),
        str(rng.choice(sorted(IQ_INKS))),
        float(rng.uniform(0.24, 0.32)),
        int(rng.integers(2**31)),
    )


def shape_points(shape: str, cx: float, cy: float, r: float) -> np.ndarray:
    """The polygon of a shape other than a circle, centred on (cx, cy) with radius ``r``."""
    if shape == "square":
        angles, radii = np.radians([45, 135, 225, 315]), [r * np.sqrt(2)] * 4
    elif shape == "triangle":
        angles, radii = np.radians([270, 30, 150]), [r * 1.15] * 3
    elif shape == "diamond":
        angles, radii = np.radians([0, 90, 180, 270]), [r * 1.1] * 4
    elif shape == "hexagon":
        angles, radii = np.radians(np.arange(0, 360, 60)), [r] * 6
    else:  # a five-pointed star
        angles, radii = np.radians(np.arange(270, 630, 36)), [r * 1.2, r * 0.5] * 5
    return np.array([[cx + q * np.cos(a), cy + q * np.sin(a)] for a, q in zip(angles, radii)]).round().astype(np.int32)


def draw_shapes(
    panel: np.ndarray,
    count: int,
    shape: str,
    area: Box,
    ink: tuple[int, int, int],
    radius: float,
    rng: np.random.Generator,
) -> None:
    """``count`` identical shapes in ``area`` of ``panel``, at most five to a row, centred; each moved within its
    cell by ``rng``, never out of it, so shapes never touch and each is counted once. A cell is as wide for one
    shape as for ten: the size of the shapes tells nothing of their number."""
    import cv2

    x0, y0, x1, y1 = area
    per_row = (IQ_MAX + 1) // 2
    cell_w, cell_h = (x1 - x0) / per_row, (y1 - y0) / 2
    r = max(3.0, cell_w * radius)
    slack = max(0.0, min(cell_w, cell_h) / 2 - r * 1.2 - 1)  # the star and triangle reach 1.2 r from their centre
    rows = [min(per_row, count - first) for first in range(0, count, per_row)]
    top = y0 + (y1 - y0 - len(rows) * cell_h) / 2
    for row, n in enumerate(rows):
        left = x0 + (x1 - x0 - n * cell_w) / 2
        for col in range(n):
            dx, dy = rng.uniform(-slack, slack, 2)
            cx, cy = left + cell_w * (col + 0.5) + dx, top + cell_h * (row + 0.5) + dy
            if shape == "circle":
                cv2.circle(panel, (round(cx), round(cy)), round(r), ink, -1, cv2.LINE_AA)
            else:
                cv2.fillPoly(panel, [shape_points(shape, cx, cy, r)], ink, cv2.LINE_AA)


def draw_panel(counts: Counts, puzzle: IqPuzzle, size: int, rng: np.random.Generator) -> np.ndarray:
    """A white panel with a black frame: the top half's shapes above a thin grey line, the bottom half's below."""
    import cv2

    panel = np.full((size, size, 3), 255, np.uint8)
    cv2.rectangle(panel, (1, 1), (size - 2, size - 2), (0, 0, 0), 2)
    cv2.line(panel, (8, size // 2), (size - 9, size // 2), (190, 190, 190), 1)
    ink = IQ_INKS[puzzle.ink]
    halves = ((6.0, 6.0, size - 6.0, size / 2 - 2), (6.0, size / 2 + 2, size - 6.0, size - 6.0))
    for count, shape, area in zip(counts, puzzle.shapes, halves):
        draw_shapes(panel, count, shape, area, ink, puzzle.size, rng)
    return panel


def draw_iq_puzzle(puzzle: IqPuzzle, panel: int = 160, gap: int = 24) -> tuple[Image.Image, list[Box]]:
    """The puzzle as one picture: the row of panels and a '?' on top, the candidate panels below, each with
    its letter centred underneath; returns the picture and each candidate panel's box."""
    import cv2

    n = len(puzzle.options)
    width = gap + n * (panel + gap)
    label_h = 44
    height = 2 * panel + 3 * gap + 30 + label_h
    canvas = np.full((height, width, 3), 255, np.uint8)
    layout = np.random.default_rng(puzzle.layout)
    for k, counts in enumerate(puzzle.counts):
        x = gap + k * (panel + gap)
        canvas[gap : gap + panel, x : x + panel] = draw_panel(counts, puzzle, panel, layout)
    qx = gap + 3 * (panel + gap)
    cv2.rectangle(canvas, (qx, gap), (qx + panel - 1, gap + panel - 1), (0, 0, 0), 2)
    cv2.putText(canvas, "?", (qx + panel // 2 - 18, gap + panel // 2 + 20), cv2.FONT_HERSHEY_SIMPLEX, 2.0, (0, 0, 0), 4)
    boxes: list[Box] = []
    top = 2 * gap + panel + 30
    for k, counts in enumerate(puzzle.options):
        x = gap + k * (panel + gap)
        canvas[top : top + panel, x : x + panel] = draw_panel(counts, puzzle, panel, layout)
        boxes.append((float(x), float(top), float(x + panel), float(top + panel)))
        letter = "ABCDE"[k]
        (tw, th), _ = cv2.getTextSize(letter, cv2.FONT_HERSHEY_SIMPLEX, 1.2, 3)
        cv2.putText(
            canvas, letter, (x + (panel - tw) // 2, top + panel + 8 + th), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (0, 0, 0), 3
        )
    return Image.fromarray(canvas), boxes


def relative_depth_pair(
    nearness: np.ndarray,
    rng: np.random.Generator,
    min_gap: float = 0.25,
    margin: int = 16,
    tries: int = 2000,
    min_distance: int = 40,
) -> DepthPair:
    """Two points whose order is clear on a relative nearness map (a depth model's output, known up to scale
    and shift): their values differ by at least ``min_gap`` of the map's 5–95 % spread."""
    low, high = np.percentile(nearness, [5, 95])
    spread = float(high - low)
    if not np.isfinite(spread) or spread <= 0:
        raise ValueError("the depth map is flat: no clear depth order anywhere")
    for a, b in point_pairs(nearness.shape, rng, margin, tries, min_distance):
        d0, d1 = float(nearness[a[1], a[0]]), float(nearness[b[1], b[0]])
        if abs(d0 - d1) >= min_gap * spread:
            return DepthPair((a, b), 0 if d0 > d1 else 1)
    raise ValueError(f"no two points {min_gap:.0%} of the depth spread apart after {tries} tries")
