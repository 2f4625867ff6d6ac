"""Pure steps of the pose referee (``backends/referees.PoseReferee``): MediaPipe's pose detector → a rotated square
around the body → its 33 pose landmarks (ears, shoulders, elbows, wrists, hands, hips) with how visible each is.

These are the steps of MediaPipe's graphs (``pose_detection_cpu``, ``pose_detection_to_roi``,
``pose_landmark_by_roi_cpu``) written out so that the two ``.tflite`` files run under LiteRT alone; the anchors,
letterbox, crop and decoding are the face referee's (``logic/face_mesh``), with the pose detector's settings.
Points are ``(x, y)`` in the image's pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perceptforge.logic import face_mesh as fm

DETECTOR_SIZE, LANDMARK_SIZE = 224, 256
# the pose detector's SSD layers (``pose_detection_cpu.pbtxt``): 2254 anchors
DETECTOR_STRIDES = (8, 16, 32, 32, 32)
DETECTOR_KEYPOINTS = 4  # hips' middle, a point above the head (the body's size and turn), shoulders' middle, face
LANDMARKS, LANDMARK_VALUES = 39, 5  # 33 body points and 6 for the next frame's crop; x, y, z, visibility, presence

# MediaPipe's pose landmark numbering (``PoseLandmark``); left and right are the subject's own
NOSE = 0
LEFT_EAR, RIGHT_EAR = 7, 8
LEFT_SHOULDER, RIGHT_SHOULDER = 11, 12
LEFT_ELBOW, RIGHT_ELBOW = 13, 14
LEFT_WRIST, RIGHT_WRIST = 15, 16
LEFT_PINKY, RIGHT_PINKY, LEFT_INDEX, RIGHT_INDEX, LEFT_THUMB, RIGHT_THUMB = 17, 18, 19, 20, 21, 22
LEFT_HIP, RIGHT_HIP = 23, 24
# the body parts a background edit must keep, by the name its gate and report use
BODY_PARTS: dict[str, tuple[int, ...]] = {
    "ears": (LEFT_EAR, RIGHT_EAR),
    "shoulders": (LEFT_SHOULDER, RIGHT_SHOULDER),
    "elbows": (LEFT_ELBOW, RIGHT_ELBOW),
    "wrists": (LEFT_WRIST, RIGHT_WRIST),
    "hands": (LEFT_PINKY, RIGHT_PINKY, LEFT_INDEX, RIGHT_INDEX, LEFT_THUMB, RIGHT_THUMB),
}


def detector_anchors() -> np.ndarray:
    """(2254, 2) anchor centres of the pose detector (224×224 input)."""
    return fm.ssd_anchors(DETECTOR_SIZE, DETECTOR_STRIDES)


def body_roi(person: fm.Detection, scale: float = 1.25) -> fm.Roi:
    """The square the landmark model reads (``pose_detection_to_roi``: ``AlignmentPointsRectsCalculator`` then
    ``RectTransformationCalculator``): centred on the hips' middle (key point 0), its side twice the distance to the
    point above the head (key point 1) × ``scale``, turned so that this line points up."""
    (x0, y0), (x1, y1) = person.keypoints[0], person.keypoints[1]
    side = 2.0 * float(np.hypot(x1 - x0, y1 - y0)) * scale
    if side <= 0:
        raise ValueError("a pose detection whose two alignment points coincide has no size")
    angle = np.pi / 2 - np.arctan2(-(y1 - y0), x1 - x0)
    angle = float((angle + np.pi) % (2 * np.pi) - np.pi)
    return fm.Roi(float(x0), float(y0), side, angle)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(np.asarray(x, np.float64), -100, 100))), np.float64)


@dataclass(frozen=True)
class Pose:
    """One person's 33 pose landmarks in the image's pixels, how visible each is (in [0, 1]: MediaPipe's
    ``visibility``, low where the point is hidden or outside the photo) and the landmark model's score."""

    points: np.ndarray  # (33, 2)
    visibility: np.ndarray  # (33,)
    score: float

    def seen(self, index: int, height: int, width: int, min_visibility: float = 0.5) -> bool:
        """Whether landmark ``index`` is visible and inside a ``height`` × ``width`` photo."""
        x, y = self.points[index]
        return bool(self.visibility[index] >= min_visibility and 0 <= x < width and 0 <= y < height)


def landmarks_to_pose(raw: np.ndarray, flag: np.ndarray, roi: fm.Roi) -> Pose:
    """The landmark model's outputs (195 values: 39 × (x, y, z, visibility, presence), x and y in crop pixels,
    visibility and presence before their sigmoid; the pose flag, a probability already) → the body's 33 points in
    the image."""
    values = np.asarray(raw, np.float64).reshape(-1)
    if values.size != LANDMARKS * LANDMARK_VALUES:
        raise ValueError(f"the pose landmark model gives {LANDMARKS * LANDMARK_VALUES} values, got {values.size}")
    table = values.reshape(LANDMARKS, LANDMARK_VALUES)[:33]
    m = fm.crop_to_image(roi, LANDMARK_SIZE)
    points = table[:, :2] @ m[:, :2].T + m[:, 2]
    visibility = sigmoid(table[:, 3]) * sigmoid(table[:, 4])
    return Pose(points, visibility, float(np.clip(np.asarray(flag, np.float64).reshape(-1)[0], 0.0, 1.0)))


def part_radius(pose: Pose, height: int, width: int) -> float:
    """How large a body part is drawn around its landmark: a fifth of the shoulders' width (a shoulder's round, an
    elbow, a wrist), or of the ears' spacing × 2 where a shoulder is not seen; at least 3 pixels."""
    if pose.seen(LEFT_SHOULDER, height, width) and pose.seen(RIGHT_SHOULDER, height, width):
        span = float(np.hypot(*(pose.points[LEFT_SHOULDER] - pose.points[RIGHT_SHOULDER])))
    elif pose.seen(LEFT_EAR, height, width) and pose.seen(RIGHT_EAR, height, width):
        span = 2.0 * float(np.hypot(*(pose.points[LEFT_EAR] - pose.points[RIGHT_EAR])))
    else:
        span = 0.1 * min(height, width)
    return max(3.0, span / 5.0)
