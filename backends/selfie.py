"""``selfie`` (the local profile's segmenter): MediaPipe's person segmenter for the subject of a background edit,
GrabCut for everything else.

The model is MediaPipe Selfie Segmentation (``data/models/selfie_segmentation.tflite``, 250 KB, Apache-2.0,
taken from the mediapipe 0.10.14 wheel), run by LiteRT (``ai-edge-litert``) on the CPU in about 2 ms an
image. Where GrabCut tells a person from the background by colour alone, and so takes a navy flag for a navy cap
or an orange sleeve for a red stripe, this model knows what a person looks like: it gives the whole person,
coarsely (256×256), and ``logic/matting`` refines the outline on the photo itself. Held objects, and every box
that is not the subject, still go to GrabCut (``box_mask``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np
from pydantic import Field

from perceptforge.backends.registry import BackendSettings, Runtime, register
from perceptforge.backends.segmenters import GrabCutSegmenter, check_image, grabcut_from_seed
from perceptforge.errors import PerceptforgeError
from perceptforge.logic.edit_region import Hints
from perceptforge.logic.mask_select import box_cells
from perceptforge.logic.matting import downscaled

NO_PERSON = (
    "the person segmenter sees no person in the subject's box (it knows people near the camera, facing it, as in "
    "a video call: a small or distant figure, one seen from behind, or not a person, it may miss); a drawn outline "
    "of the subject (the annotation's segmentation; `perceptforge sources outline push` draws it) needs no segmenter"
)


# What LiteRT's C++ logger writes to the process's stderr when an interpreter takes its default XNNPACK delegate:
# an INFO line in every run's output. LiteRT gives Python no log level for it (TF_CPP_MIN_LOG_LEVEL is not read by
# its minimal logger, which exports no setter), and the delegate cannot be left out: it runs the model's MediaPipe
# op Convolution2DTransposeBias ("unresolved custom op" without it).
DELEGATE_INFO = "INFO: Created TensorFlow Lite XNNPACK delegate for CPU."


def is_delegate_info(line: str) -> bool:
    return line.strip() == DELEGATE_INFO


@contextmanager
def native_stderr_without(noise: Callable[[str], bool]) -> Iterator[None]:
    """Native code's stderr (file descriptor 2) captured while the block runs, then written back less the lines
    ``noise`` names: a line another thread wrote meanwhile comes out late, not lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().decode("utf-8", "replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not noise(line))
            if kept:
                os.write(2, kept.encode("utf-8"))


def bundled(name: str) -> Path:
    """A model file shipped in ``data/models/`` (the selfie segmenter, the face referee's two)."""
    return Path(str(resources.files("perceptforge.data").joinpath("models", name)))


def bundled_model() -> Path:
    return bundled("selfie_segmentation.tflite")


def load_tflite(path: Path, what: str) -> Any:
    """A LiteRT interpreter for ``path``, tensors allocated: one thread (the same pixels on any machine), and the
    delegate's INFO line, which no log level reaches, kept off the terminal."""
    if not path.is_file():
        raise PerceptforgeError(f"{path}: the {what} model is not there")
    from ai_edge_litert.interpreter import Interpreter

    with native_stderr_without(is_delegate_info):  # the delegate is made here, and logs its INFO line
        interpreter = Interpreter(model_path=str(path), num_threads=1)
        interpreter.allocate_tensors()
    return interpreter


class SelfieSettings(BackendSettings):
    backend: Literal["selfie"]
    model_path: str | None = Field(
        None, description="the .tflite model; default: the bundled one", json_schema_extra={"model": "file"}
    )
    threshold: float = Field(0.5, gt=0, lt=1, description="person probability from which a pixel is the subject")
    sure: float = Field(
        0.9, gt=0, lt=1, description="the same within the boxes of what the old background names (its flag, its model)"
    )
    refine: bool = Field(True, description="refine the model's coarse outline by GrabCut at the image's size")
    iterations: int = Field(5, ge=1, le=50, description="GrabCut's, for held objects and other boxes")
    max_side: int = Field(512, ge=32, description="GrabCut's working size")


@register("segmenter", "selfie", SelfieSettings)
class SelfieSegmenter:
    name, model_id = "selfie", "mediapipe-selfie-segmentation"
    concurrent_calls = True  # its interpreter is called under its own lock, GrabCut keeps nothing

    @classmethod
    def from_settings(cls, settings: SelfieSettings, runtime: Runtime) -> SelfieSegmenter:
        return cls(
            settings.model_path,
            settings.threshold,
            settings.sure,
            settings.iterations,
            settings.max_side,
            settings.refine,
        )

    def __init__(
        self,
        model_path: str | None = None,
        threshold: float = 0.5,
        sure: float = 0.9,
        iterations: int = 5,
        max_side: int = 512,
        refine: bool = True,
    ):
        self.grabcut = GrabCutSegmenter(iterations, max_side)  # held objects, other boxes, and the refinement
        self.refine = refine
        self.model_path = Path(model_path).expanduser() if model_path else bundled_model()
        self.threshold, self.sure = threshold, sure
        self._interpreter: Any = None
        self._lock = threading.Lock()  # one interpreter, one call at a time

    def __getstate__(self) -> dict:  # a Dask worker loads its own interpreter
        return {k: v for k, v in self.__dict__.items() if k not in ("_interpreter", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _interpreter=None, _lock=threading.Lock())

    def load(self) -> SelfieSegmenter:
        if self._interpreter is None:
            self._interpreter = load_tflite(self.model_path, "selfie segmentation")
        return self

    def person(self, image: np.ndarray) -> np.ndarray:
        """(H, W) float in [0, 1]: how likely each pixel is a person's."""
        check_image(image)
        self.load()
        h, w = image.shape[:2]
        net = self._interpreter
        source, target = net.get_input_details()[0], net.get_output_details()[0]
        size = (int(source["shape"][2]), int(source["shape"][1]))
        small = cv2.resize(image, size, interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0
        with self._lock:
            net.set_tensor(source["index"], small[None])
            net.invoke()
            out = np.array(net.get_tensor(target["index"])[0, ..., 0], np.float32)
        return np.clip(cv2.resize(out, (w, h), interpolation=cv2.INTER_LINEAR), 0.0, 1.0)

    def box_mask(self, image: np.ndarray, box: Sequence[float]) -> np.ndarray:
        return self.grabcut.box_mask(image, box)

    def candidates(self, image: np.ndarray, box: Sequence[float]) -> list[np.ndarray]:
        x0, y0, x1, y1 = box
        return self.hinted_candidates(image, box, Hints(extent=(x0, y0, x1, y1)))

    def hinted_candidates(self, image: np.ndarray, box: Sequence[float], hints: Hints) -> list[np.ndarray]:
        """The person in the subject's own box (``hints.extent``; a jittered box would cut the person where it
        shrinks), with the hints' sure parts (the middle of the face, the body below it) kept. The model's 256×256
        answer is refined at the image's own size by GrabCut: what it is sure of seeds the colour models, and its
        uncertain rim (a cap's white crown, a tuft of white hair, a strip of the backdrop beside an arm) is
        decided by colour, pixel by pixel."""
        bx0, by0, bx1, by1 = box
        extent = hints.extent if hints.extent is not None else (bx0, by0, bx1, by1)
        h, w = image.shape[:2]
        inside = np.zeros((h, w), bool)
        inside[box_cells(extent, h, w)] = True
        person = self.person(image)
        if not ((person >= self.threshold) & inside).any():
            raise ValueError(NO_PERSON)
        seed = np.full((h, w), cv2.GC_BGD, np.uint8)
        seed[inside & (person > 0.05)] = cv2.GC_PR_BGD
        seed[inside & (person >= self.threshold)] = cv2.GC_PR_FGD
        seed[inside & (person >= 0.95)] = cv2.GC_FGD
        # where the old background's named things stand (the shuttle model beside her shoulder), the model's
        # coarse edge would keep a sliver of them, and their colours (a flag's red stripe) may pass for the
        # subject's (her ribbons): there only what the model is sure of may be the person
        body = hints.body_mask if hints.body_mask is not None else np.zeros((h, w), bool)
        for b in hints.outside:
            cells = box_cells(b, h, w)
            # but where the pose referee sees the body (a sleeve beside the flag, as red as its stripes), the model
            # and the colours decide, as everywhere else
            unsure = (person[cells] < self.sure) & ~body[cells]
            seed[cells][unsure] = cv2.GC_BGD
        for b in hints.inside:
            seed[box_cells(b, h, w)] = cv2.GC_FGD
        if hints.sure_mask is not None:  # the cores of the arms and the shoulder line the pose referee sees
            seed[hints.sure_mask] = cv2.GC_FGD
        if self.refine and (seed == cv2.GC_BGD).any() and (seed == cv2.GC_FGD).any():
            small, scale = downscaled(image, self.grabcut.max_side)
            sh, sw = small.shape[:2]
            work = cv2.resize(seed, (sw, sh), interpolation=cv2.INTER_NEAREST) if scale < 1 else seed.copy()
            try:
                grabcut_from_seed(small, work, self.grabcut.iterations)
                seed = cv2.resize(work, (w, h), interpolation=cv2.INTER_NEAREST) if scale < 1 else work
            except cv2.error:  # too few pixels of a kind for its colour models: the model's answer stands
                pass
        mask = (seed == cv2.GC_FGD) | (seed == cv2.GC_PR_FGD)
        if not mask[box_cells((bx0, by0, bx1, by1), h, w)].any():
            raise ValueError(NO_PERSON)
        return [mask]
