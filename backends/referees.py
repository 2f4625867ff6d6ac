"""Referee models: what the gates ask of a photo that an annotator sees at a glance (where the face is, up to the
hairline; where the eyebrows and the ears are), whatever backend made the edit.

The face referee is MediaPipe's short-range face detector (``face_detection_short_range.tflite``, 230 KB) and its
468-point face mesh (``face_landmark.tflite``, 1.2 MB), Apache-2.0, taken unchanged from the mediapipe 0.10.14
wheel like the selfie segmenter (``data/LICENSES``) and run by LiteRT on the CPU. The steps between the two models
(anchors, decoding, the rotated crop, projecting the mesh back) are ``logic/face_mesh``'s pure functions; this
module only loads each model once per process and runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from perceptforge.backends.selfie import bundled, load_tflite
from perceptforge.backends.wheel_models import wheel_model
from perceptforge.logic import face_mesh as fm
from perceptforge.logic import pose as pl

DETECTOR_SIZE, MESH_SIZE = 128, 192


def _interpreter(path: Path) -> Any:
    return load_tflite(path, "referee")


def _run(net: Any, tensor: np.ndarray) -> list[np.ndarray]:
    net.set_tensor(net.get_input_details()[0]["index"], tensor[None].astype(np.float32))
    net.invoke()
    return [np.array(net.get_tensor(d["index"])) for d in net.get_output_details()]


class _DetectorThenModel:
    """A detector and a second model run on the detector's crop, both loaded on first use, once per process (a Dask
    worker loads its own: the interpreters are not pickled); one interpreter call at a time."""

    def __init__(self, detector_path: Path, model_path: Path):
        self.detector_path, self._model_path = detector_path, model_path
        self._nets: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_nets", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _nets=None, _lock=threading.Lock())

    def _loaded(self) -> tuple[Any, Any]:
        if self._nets is None:
            self._nets = (_interpreter(self.detector_path), _interpreter(self._model_path))
        return self._nets

    def load(self) -> Self:
        self._loaded()
        return self

    def _detect_square(self, square: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The detector's raw boxes and logits for a letterboxed RGB square."""
        detector = self._loaded()[0]
        with self._lock:
            raw, logits = _run(detector, square.astype(np.float32) / 127.5 - 1.0)
        return raw[0], logits[0]


class FaceReferee(_DetectorThenModel):
    """Faces in a photo as ``logic/face_mesh.FaceParts`` (oval, eyebrows, ears), by detector then mesh."""

    name, model_id = "face-referee", "mediapipe-face-detection-short+face-mesh"

    def __init__(
        self,
        detector_path: str | Path | None = None,
        mesh_path: str | Path | None = None,
        min_score: float = 0.5,
        min_mesh_score: float = 0.5,
    ):
        self.mesh_path = Path(mesh_path) if mesh_path else bundled("face_landmark.tflite")
        super().__init__(
            Path(detector_path) if detector_path else bundled("face_detection_short_range.tflite"), self.mesh_path
        )
        self.min_score, self.min_mesh_score = min_score, min_mesh_score
        self._anchors = fm.ssd_anchors(DETECTOR_SIZE)

    def detect(self, image: np.ndarray, within: Sequence[float] | None = None) -> list[fm.Detection]:
        """Faces in the image (or in the box ``within``, which makes a small face large enough for the
        short-range detector), best first, in the image's pixels."""
        _check(image)
        ox = oy = 0
        view = image
        if within is not None:
            h, w = image.shape[:2]
            x0, y0 = max(0, int(within[0])), max(0, int(within[1]))
            x1, y1 = min(w, int(np.ceil(within[2]))), min(h, int(np.ceil(within[3])))
            if x1 <= x0 or y1 <= y0:
                raise ValueError(f"the box {tuple(within)} lies outside the {w}×{h} image")
            view, ox, oy = image[y0:y1, x0:x1], x0, y0
        square, scale, (left, top) = fm.letterbox(view, DETECTOR_SIZE)
        raw, logits = self._detect_square(square)
        found = fm.decode_faces(raw, logits, self._anchors, DETECTOR_SIZE, self.min_score)
        return [fm.to_pixels(f, scale, (left - ox, top - oy)) for f in found]

    def mesh(self, image: np.ndarray, face: fm.Detection) -> fm.FaceParts | None:
        """The face mesh's parts for one detection, or None where the mesh model says there is no face."""
        _check(image)
        roi = fm.face_roi(face)
        patch = fm.crop(image, roi, MESH_SIZE).astype(np.float32) / 255.0
        net = self._loaded()[1]
        with self._lock:
            points, flag = _run(net, patch)
        score = float(1.0 / (1.0 + np.exp(-np.clip(flag.reshape(-1)[0], -100, 100))))
        if score < self.min_mesh_score:
            return None
        return fm.face_parts(fm.mesh_to_image(points, roi, MESH_SIZE), score)

    def subject_face(self, image: np.ndarray, box: Sequence[float] | None = None) -> fm.FaceParts | None:
        """The subject's face: the best face the detector finds in the subject's box (the whole image without
        one), meshed; None when it finds none (a face turned away, too small, or not a person)."""
        faces = self.detect(image, box)
        for face in faces[:2]:  # the best, then the next: the mesh may refuse a detector's false face
            parts = self.mesh(image, face)
            if parts is not None:
                return parts
        return None


class PoseReferee(_DetectorThenModel):
    """The person's body as ``logic/pose.Pose`` (ears, shoulders, elbows, wrists, hands, each with its visibility),
    by MediaPipe's pose detector (``pose_detection.tflite``, 3 MB) then its full pose landmark model
    (``pose_landmark_full.tflite``, 6.4 MB), Apache-2.0, from the same mediapipe 0.10.14 wheel."""

    name, model_id = "pose-referee", "mediapipe-pose-detection+pose-landmark-full"

    def __init__(
        self,
        detector_path: str | Path | None = None,
        landmark_path: str | Path | None = None,
        min_score: float = 0.5,
        min_pose_score: float = 0.5,
    ):
        self.landmark_path = Path(landmark_path) if landmark_path else wheel_model("pose_landmark_full.tflite")
        super().__init__(Path(detector_path) if detector_path else bundled("pose_detection.tflite"), self.landmark_path)
        self.min_score, self.min_pose_score = min_score, min_pose_score
        self._anchors = pl.detector_anchors()

    def detect(self, image: np.ndarray) -> list[fm.Detection]:
        """People in the whole photo, best first, in its pixels (the detector reads the photo letterboxed)."""
        _check(image)
        square, scale, (left, top) = fm.letterbox(image, pl.DETECTOR_SIZE)
        raw, logits = self._detect_square(square)
        found = fm.decode_faces(raw, logits, self._anchors, pl.DETECTOR_SIZE, self.min_score, pl.DETECTOR_KEYPOINTS)
        return [fm.to_pixels(f, scale, (left, top)) for f in found]

    def landmarks(self, image: np.ndarray, person: fm.Detection) -> pl.Pose | None:
        """The 33 landmarks for one detection, or None where the landmark model says there is no person."""
        _check(image)
        roi = pl.body_roi(person)
        patch = fm.crop(image, roi, pl.LANDMARK_SIZE).astype(np.float32) / 255.0
        net = self._loaded()[1]
        with self._lock:
            net.set_tensor(net.get_input_details()[0]["index"], patch[None])
            net.invoke()
            outputs = {d["name"]: np.array(net.get_tensor(d["index"])) for d in net.get_output_details()}
        # by shape, not by order: LiteRT does not promise the outputs' order
        raw = next(v for v in outputs.values() if v.size == pl.LANDMARKS * pl.LANDMARK_VALUES)
        flag = next(v for v in outputs.values() if v.size == 1)
        pose = pl.landmarks_to_pose(raw, flag, roi)
        return pose if pose.score >= self.min_pose_score else None

    def subject_pose(self, image: np.ndarray, box: Sequence[float] | None = None) -> pl.Pose | None:
        """The subject's pose: of the people the detector finds, the one whose shoulders' middle (its key point 2)
        lies in the subject's box (the whole photo without one), landmarked; None when none is found."""
        h, w = image.shape[:2]
        x0, y0, x1, y1 = box if box is not None else (0.0, 0.0, float(w), float(h))
        for person in self.detect(image)[:3]:
            sx, sy = person.keypoints[2]
            if x0 <= sx <= x1 and y0 <= sy <= y1:
                return self.landmarks(image, person)
        return None


def _check(image: np.ndarray) -> None:
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        shape = getattr(image, "shape", None)
        raise ValueError(f"a referee reads an (H, W, 3) uint8 RGB image, got {type(image).__name__} {shape}")


_shared: dict[str, Any] = {}
_shared_lock = threading.Lock()


def face_referee() -> FaceReferee:
    """The process's one face referee (its models load on first use, once)."""
    with _shared_lock:
        if "face" not in _shared:
            _shared["face"] = FaceReferee()
        return _shared["face"]


def pose_referee() -> PoseReferee:
    """The process's one pose referee (its models load on first use, once)."""
    with _shared_lock:
        if "pose" not in _shared:
            _shared["pose"] = PoseReferee()
        return _shared["pose"]


def person_probability(image: np.ndarray) -> np.ndarray:
    """(H, W) float in [0, 1]: the bundled selfie segmenter's person probability, from the process's one copy."""
    from perceptforge.backends.selfie import SelfieSegmenter

    with _shared_lock:
        if "selfie" not in _shared:
            _shared["selfie"] = SelfieSegmenter()
        segmenter = _shared["selfie"]
    return segmenter.person(image)
