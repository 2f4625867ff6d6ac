"""The bundled depth scene (data/sample/images/depth_scene.png and its disparity map): a ground plane and
three pillars rendered by ray casting, so every pixel's depth is exact. Relative Depth items are built
from its disparity; ``test_blink_flow`` checks that the bundled files are what this renders."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

WIDTH, HEIGHT = 640, 480
FOCAL, CAMERA_HEIGHT, BASELINE = 500.0, 1.6, 0.1  # px, m, m: disparity = FOCAL * BASELINE / depth
HORIZON = 200
# pillars: x from, x to (m), height (m), depth of the front face (m), colour
PILLARS = [
    (-2.6, -1.4, 2.2, 4.0, (178, 60, 45)),
    (0.9, 2.4, 3.0, 7.5, (50, 90, 170)),
    (-1.2, 0.3, 4.0, 14.0, (210, 170, 40)),
]
SKY = np.array([170, 200, 230], np.float32)


def render(yaw: float = 0.0) -> tuple[Image.Image, np.ndarray]:
    """The picture and its disparity in px (0 where there is only sky), the camera turned ``yaw`` degrees
    to the right (negative: to the left) about the vertical axis."""
    with np.errstate(invalid="ignore", divide="ignore"):  # sky rays never meet the ground: masked out below
        image, disparity, _ = _render(np.radians(yaw))
    return image, disparity


def reflectance_judgements(seed: int = 0, equal: int = 2, darker: int = 3) -> list[dict]:
    """IIW-style judgements with exact answers: pairs of points on surfaces (never the sky), each inside a
    15x15 patch of one material, ``equal`` pairs of one albedo seen at different depths (fog makes the farther
    look paler: appearance differs, reflectance does not) and ``darker`` pairs whose albedo luminance differs
    by at least 1.3x."""
    with np.errstate(invalid="ignore", divide="ignore"):
        image, disparity, albedo = _render(0.0)
    lum = albedo @ np.array([0.2126, 0.7152, 0.0722])
    seen = np.asarray(image, np.float64) @ np.array([0.2126, 0.7152, 0.0722])
    points = [
        (x, y)
        for y in range(16, HEIGHT - 16, 8)
        for x in range(16, WIDTH - 16, 8)
        if disparity[y - 7 : y + 8, x - 7 : x + 8].min() > 0 and np.ptp(lum[y - 7 : y + 8, x - 7 : x + 8]) == 0
    ]
    rng = np.random.default_rng(seed)
    found: list[dict] = []
    want = {"equal": equal, "darker": darker}
    for k in rng.permutation(len(points) * len(points)):
        (ax, ay), (bx, by) = points[k // len(points)], points[k % len(points)]
        if abs(ax - bx) + abs(ay - by) < 120:
            continue
        la, lb = lum[ay, ax], lum[by, bx]
        if la == lb and want["equal"] and abs(seen[ay, ax] - seen[by, bx]) >= 3:
            verdict = "equal"
        elif max(la, lb) >= 1.3 * min(la, lb) and want["darker"]:
            verdict = "darker"
        else:
            continue
        want[verdict] -= 1
        found.append(
            {"a": [ax, ay], "b": [bx, by], "darker": "equal" if verdict == "equal" else ("a" if la < lb else "b")}
        )
        if not any(want.values()):
            break
    return found


def _render(yaw: float) -> tuple[Image.Image, np.ndarray, np.ndarray]:
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    cx, dy = (u - WIDTH / 2) / FOCAL, (v - HORIZON) / FOCAL
    # each ray in world axes per unit of camera depth: x to the right, z forward
    dx = cx * np.cos(yaw) + np.sin(yaw)
    dz = -cx * np.sin(yaw) + np.cos(yaw)
    depth = np.full((HEIGHT, WIDTH), np.inf)
    colour = np.broadcast_to(SKY, (HEIGHT, WIDTH, 3)).copy()
    below = dy > 1e-6
    z = np.where(below, CAMERA_HEIGHT / np.where(below, dy, 1), np.inf)  # the ground plane, Y = camera height
    gx, gz = dx * z, dz * z
    checker = ((np.floor(gx) + np.floor(gz)) % 2 == 0)[..., None]
    ground = np.where(checker, np.array([120, 150, 95], np.float32), np.array([85, 110, 70], np.float32))
    depth = np.where(below, z, depth)
    colour = np.where(below[..., None], ground, colour)
    for x0, x1, height, z0, rgb in PILLARS:
        t = np.where(dz > 1e-6, z0 / dz, np.inf)  # camera depth at which each ray meets the front face
        x, y = dx * t, dy * t
        hit = (x >= x0) & (x <= x1) & (y <= CAMERA_HEIGHT) & (y >= CAMERA_HEIGHT - height) & (t < depth)
        stripes = 0.85 + 0.15 * (np.floor((x - x0) * 5) % 2)[..., None]
        depth = np.where(hit, t, depth)
        colour = np.where(hit[..., None], np.array(rgb, np.float32) * stripes, colour)
    albedo = colour.copy()
    fog = np.exp(-np.where(np.isfinite(depth), depth, 1e9) / 40.0)[..., None]  # far things fade into the sky
    colour = colour * fog + SKY * (1 - fog)
    disparity = np.where(np.isfinite(depth), FOCAL * BASELINE / depth, 0.0)
    return Image.fromarray(np.clip(colour, 0, 255).round().astype(np.uint8)), disparity, albedo


def pillar_boxes() -> list[tuple[str, list[float]]]:
    """Each pillar's front face in the picture (x, y, w, h), clipped to it: exact by projection."""
    named = ("red pillar", "blue pillar", "yellow pillar")
    boxes = []
    for name, (x0, x1, height, z0, _) in zip(named, PILLARS):
        s = FOCAL / z0
        left, right = max(0.0, x0 * s + WIDTH / 2), min(float(WIDTH), x1 * s + WIDTH / 2)
        top, bottom = HORIZON + (CAMERA_HEIGHT - height) * s, HORIZON + CAMERA_HEIGHT * s
        boxes.append((name, [round(left, 1), round(top, 1), round(right - left, 1), round(bottom - top, 1)]))
    return boxes


def disparity_png(disparity: np.ndarray) -> bytes:
    """KITTI's convention: a 16-bit PNG of disparity × 256, 0 where unknown."""
    buf = io.BytesIO()
    Image.fromarray(np.clip(np.round(disparity * 256), 0, 65535).astype(np.uint16)).save(buf, format="PNG")
    return buf.getvalue()


VIEWS = {"depth_scene_left": -12.0, "depth_scene_right": 12.0}  # the same scene, the camera turned (Multi-view)


if __name__ == "__main__":  # regenerate the bundled files
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "data" / "sample"
    image, disparity = render()
    image.save(sample / "images" / "depth_scene.png")
    (sample / "depth").mkdir(exist_ok=True)
    (sample / "depth" / "depth_scene.png").write_bytes(disparity_png(disparity))
    for name, yaw in VIEWS.items():
        render(yaw)[0].save(sample / "images" / f"{name}.png")
    print("reflectance judgements for image 7 of annotations.json:", reflectance_judgements())
