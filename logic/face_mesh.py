"""Pure steps of the face referee (``backends/referees.py``): MediaPipe's face detector → a rotated square crop →
its 468-point face mesh → the parts an annotator checks (the face oval, the eyebrows, the ears' places).

These are the steps MediaPipe's own graphs run (``face_detection_short_range_cpu``, ``face_landmark_cpu``),
written out so that the ``.tflite`` files run under LiteRT alone, without the 1 GB ``mediapipe`` package. Every
function is NumPy (and OpenCV for warps and polygons), knows nothing of a model, and is tested on small arrays.
Points are ``(x, y)`` in the image's pixels unless a docstring says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

# MediaPipe's face mesh topology (mediapipe/python/solutions/face_mesh_connections.py), as ordered outlines.
# The oval runs from the top of the forehead (10) clockwise on the photo, down the subject's left side to the chin
# (152) and back up; its top is about the hairline.
FACE_OVAL = (
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377, 152, 148, 176, 149,
    150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
)  # fmt: skip
# each eyebrow as a closed outline: its upper edge outwards-in, then its lower edge back
RIGHT_EYEBROW = (70, 63, 105, 66, 107, 55, 65, 52, 53, 46)
LEFT_EYEBROW = (300, 293, 334, 296, 336, 285, 295, 282, 283, 276)
# the oval's outermost points at the ears' height: the subject's right (the photo's left) and left cheek edge,
# where the ear joins the head
RIGHT_EAR_ROOT, LEFT_EAR_ROOT = 234, 454
MESH_POINTS = 468


@dataclass(frozen=True)
class Detection:
    """A face found by the detector: its box ``(x0, y0, x1, y1)``, its score in [0, 1] and its six key points
    (right eye, left eye, nose tip, mouth, right ear tragion, left ear tragion: the subject's right and left),
    in the coordinates of the image it was decoded for."""

    box: tuple[float, float, float, float]
    score: float
    keypoints: np.ndarray  # (6, 2)


@dataclass(frozen=True)
class Roi:
    """A rotated square: its centre ``(cx, cy)``, its side and its rotation (radians, clockwise on the photo)."""

    cx: float
    cy: float
    side: float
    angle: float


def ssd_anchors(input_size: int = 128, strides: tuple[int, ...] = (8, 16, 16, 16), per_layer: int = 2) -> np.ndarray:
    """(N, 2) anchor centres in [0, 1] of MediaPipe's SSD face detector (``SsdAnchorsCalculator`` with fixed
    anchor sizes, so only centres matter): consecutive layers of one stride share a grid, ``per_layer`` anchors
    each, cell by cell in row-major order. The short-range model's defaults give its 896 anchors."""
    if input_size <= 0 or not strides or per_layer <= 0:
        raise ValueError(f"anchors need a positive input size, strides and anchors per layer, got {input_size}, "
                         f"{strides}, {per_layer}")  # fmt: skip
    out: list[np.ndarray] = []
    i = 0
    while i < len(strides):
        stride, repeat = strides[i], 0
        while i < len(strides) and strides[i] == stride:
            repeat, i = repeat + 1, i + 1
        n = -(-input_size // stride)  # ceil: a partial cell still gets anchors
        ys, xs = np.mgrid[0:n, 0:n]
        centres = np.stack([(xs.ravel() + 0.5) / n, (ys.ravel() + 0.5) / n], 1)
        out.append(np.repeat(centres, repeat * per_layer, axis=0))
    return np.concatenate(out).astype(np.float32)


def letterbox(image: np.ndarray, size: int) -> tuple[np.ndarray, float, tuple[float, float]]:
    """The image padded with black to a centred square and resized to ``size``: the detector's view, with the
    scale and the ``(left, top)`` padding that take its normalised coordinates back to the image's pixels
    (``x = u * scale - left``)."""
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) == 0:
        raise ValueError(f"letterbox needs an (H, W, 3) image, got shape {image.shape}")
    h, w = image.shape[:2]
    side = max(h, w)
    top, left = (side - h) // 2, (side - w) // 2
    square = np.zeros((side, side, 3), image.dtype)
    square[top : top + h, left : left + w] = image
    return cv2.resize(square, (size, size), interpolation=cv2.INTER_AREA), float(side), (float(left), float(top))


def decode_faces(
    raw: np.ndarray,
    logits: np.ndarray,
    anchors: np.ndarray,
    input_size: int = 128,
    min_score: float = 0.5,
    keypoints: int = 6,
) -> list[Detection]:
    """The detector's raw outputs → faces in the detector's normalised [0, 1] square, best first, each one kept
    only where no better one overlaps it by more than 0.3 (IoU). ``raw``: (N, 16), per anchor the box's centre
    offset and size then six key points' offsets, in input pixels; ``logits``: (N,) or (N, 1) scores before the
    sigmoid (clipped to ±100, as MediaPipe does). ``keypoints``: how many key points follow the box (the face
    detector's six; the pose detector's four, ``logic/pose``)."""
    raw = np.asarray(raw, np.float32).reshape(len(anchors), -1)
    logits = np.asarray(logits, np.float64).reshape(-1)  # float64: exp(100) overflows float32
    if raw.shape[1] < 4 + 2 * keypoints or len(logits) != len(anchors):
        raise ValueError(f"detector outputs do not match {len(anchors)} anchors: {raw.shape}, {logits.shape}")
    scores = 1.0 / (1.0 + np.exp(-np.clip(logits, -100, 100)))
    found: list[Detection] = []
    for i in np.argsort(-scores, kind="stable"):
        if scores[i] < min_score:
            break
        ax, ay = anchors[i]
        cx, cy = raw[i, 0] / input_size + ax, raw[i, 1] / input_size + ay
        w, h = raw[i, 2] / input_size, raw[i, 3] / input_size
        box = (float(cx - w / 2), float(cy - h / 2), float(cx + w / 2), float(cy + h / 2))
        if any(iou(box, d.box) > 0.3 for d in found):
            continue
        points = raw[i, 4 : 4 + 2 * keypoints].reshape(keypoints, 2) / input_size + anchors[i]
        found.append(Detection(box, float(scores[i]), points))
    return found


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Intersection over union of two ``(x0, y0, x1, y1)`` boxes; 0 for empty ones."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def to_pixels(face: Detection, scale: float, offset: tuple[float, float]) -> Detection:
    """A detection in the letterboxed square's [0, 1] coordinates → the image's pixels (``letterbox``'s scale and
    padding; ``offset`` may also add where a crop sat in the photo)."""
    ox, oy = offset
    x0, y0, x1, y1 = face.box
    return Detection(
        (x0 * scale - ox, y0 * scale - oy, x1 * scale - ox, y1 * scale - oy),
        face.score,
        face.keypoints * scale - np.array([ox, oy], np.float32),
    )


def face_roi(face: Detection, scale: float = 1.5) -> Roi:
    """The square the face mesh model reads (MediaPipe's ``face_detection_front_detection_to_roi``): the
    detection's box centre, its longer side × ``scale``, turned so that the line from the right eye to the left
    eye is level."""
    x0, y0, x1, y1 = face.box
    (rx, ry), (lx, ly) = face.keypoints[0], face.keypoints[1]
    angle = -np.arctan2(-(ly - ry), lx - rx)
    angle = float((angle + np.pi) % (2 * np.pi) - np.pi)
    return Roi((x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * scale, angle)


def crop_to_image(roi: Roi, size: int) -> np.ndarray:
    """(2, 3) affine matrix from a ``size``×``size`` crop's pixels to the image's: the crop's centre is the ROI's,
    its axes turned by the ROI's angle, ``size`` pixels spanning its side."""
    if roi.side <= 0 or size <= 0:
        raise ValueError(f"a crop needs a positive side and size, got {roi.side} and {size}")
    c, s = np.cos(roi.angle), np.sin(roi.angle)
    a = roi.side / size * np.array([[c, -s], [s, c]])
    t = np.array([roi.cx, roi.cy]) - a @ np.array([size / 2, size / 2])
    return np.hstack([a, t[:, None]]).astype(np.float64)


def crop(image: np.ndarray, roi: Roi, size: int) -> np.ndarray:
    """The ROI of the image as a ``size``×``size`` crop (black beyond the image's edges)."""
    return cv2.warpAffine(
        image, crop_to_image(roi, size), (size, size), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT, borderValue=0,
    )  # fmt: skip


def mesh_to_image(raw: np.ndarray, roi: Roi, size: int) -> np.ndarray:
    """The mesh model's output (468 × (x, y, z), x and y in crop pixels) → (468, 2) points in the image."""
    points = np.asarray(raw, np.float64).reshape(-1, 3)
    if len(points) != MESH_POINTS:
        raise ValueError(f"a face mesh has {MESH_POINTS} points, got {len(points)}")
    m = crop_to_image(roi, size)
    return points[:, :2] @ m[:, :2].T + m[:, 2]


@dataclass(frozen=True)
class FaceParts:
    """What the referees see of one face, in the image's pixels: its oval (hairline to chin), its two eyebrows (as
    closed outlines), the two places where the ears join the head, and the mesh's score."""

    oval: np.ndarray  # (36, 2)
    eyebrows: tuple[np.ndarray, np.ndarray]
    ears: np.ndarray  # (2, 2): the subject's right then left
    score: float


def face_parts(mesh: np.ndarray, score: float = 1.0) -> FaceParts:
    """The parts of a (468, 2) mesh an annotator checks."""
    mesh = np.asarray(mesh, np.float64)
    if mesh.shape != (MESH_POINTS, 2):
        raise ValueError(f"a face mesh is ({MESH_POINTS}, 2) points, got {mesh.shape}")
    return FaceParts(
        mesh[list(FACE_OVAL)],
        (mesh[list(RIGHT_EYEBROW)], mesh[list(LEFT_EYEBROW)]),
        mesh[[RIGHT_EAR_ROOT, LEFT_EAR_ROOT]],
        score,
    )
