"""The local profile's person segmenter: the bundled MediaPipe model, run by LiteRT, on the bundled photos."""

import numpy as np
import pytest

from perceptforge.backends.selfie import SelfieSegmenter, bundled_model
from perceptforge.logic.edit_region import Hints, subject_hints
from perceptforge.store.images import load_rgb
from perceptforge.store.sources import grounding_from_entry, read_source_dir


@pytest.fixture(scope="module")
def photos(sample_dir):
    return {
        e.file_name.split("/")[-1]: (np.asarray(load_rgb(sample_dir / e.file_name)), grounding_from_entry(e))
        for e in read_source_dir(sample_dir)
        if e.subject
    }


def test_the_model_ships_with_the_package_and_loads_once():
    segmenter = SelfieSegmenter()
    assert segmenter.model_path == bundled_model() and bundled_model().stat().st_size > 200_000
    assert segmenter.load()._interpreter is segmenter.load()._interpreter


@pytest.mark.parametrize("photo", ["astronaut.jpg", "grace_hopper.jpg"])
def test_the_subject_is_whole_and_the_flag_is_not_kept(photos, photo):
    """The person, not the flag beside her: GrabCut took her navy cap's neighbour, the flag's navy canton, for her
    (and an orange sleeve for a red stripe); the model knows a person's shape."""
    image, grounding = photos[photo]
    (mask,) = SelfieSegmenter().hinted_candidates(
        image, grounding.subject.box.xyxy, subject_hints(grounding, grounding.attributes["background"])
    )
    h, w = mask.shape
    face = next(r for r in grounding.regions if r.role == "face").box.xyxy
    x0, y0, x1, y1 = (int(v) for v in face)
    dx, dy = (x1 - x0) // 4, (y1 - y0) // 4
    assert mask[y0 + dy : y1 - dy, x0 + dx : x1 - dx].all()  # the face's middle, all of it
    assert mask[y0:y1, x0:x1].mean() > 0.85  # its box's corners may show the background
    flag = next(r for r in grounding.regions if r.label == "flag").box.xyxy
    fx0, fy0, fx1, fy1 = (int(v) for v in flag)
    sx0 = int(grounding.subject.box.xyxy[0])
    beside = mask[fy0 : min(fy1, y0), max(fx0, sx0) : min(fx1, x0)]  # the flag beside her head, within her box
    assert beside.size and beside.mean() < 0.05
    assert not mask[:, : max(0, sx0 - 1)].any()  # nothing outside her box


def test_a_box_without_a_person_is_a_reason_not_an_empty_mask(photos):
    image, _ = photos["astronaut.jpg"]
    with pytest.raises(ValueError, match="sees no person in the subject's box"):
        SelfieSegmenter().hinted_candidates(image, (440, 10, 500, 60), Hints(extent=(440.0, 10.0, 500.0, 60.0)))


def test_a_segmenter_pickled_for_a_worker_loads_its_own_interpreter(photos):
    import pickle

    image, grounding = photos["astronaut.jpg"]
    first = SelfieSegmenter().load()
    copy = pickle.loads(pickle.dumps(first))
    assert copy._interpreter is None
    assert (copy.person(image) == first.person(image)).all()  # the same pixels: deterministic on the CPU


def test_loading_the_model_prints_nothing_but_other_native_lines_still_come_out(capfd):
    """LiteRT's XNNPACK INFO line, which every run printed, is dropped where the interpreter is made; anything else
    written to the process's stderr meanwhile is written back."""
    import os
    import subprocess
    import sys

    from perceptforge.backends.selfie import DELEGATE_INFO, is_delegate_info, native_stderr_without

    # a fresh process: LiteRT logs the line once per process
    code = "from perceptforge.backends.selfie import SelfieSegmenter; SelfieSegmenter().load(); print('loaded')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode == 0 and done.stdout == "loaded\n" and done.stderr == "", done.stderr

    with native_stderr_without(is_delegate_info):
        os.write(2, f"{DELEGATE_INFO}\nE0000 a native error\n".encode())
    assert capfd.readouterr().err == "E0000 a native error\n"


def test_white_hair_below_the_ears_is_kept_where_the_flags_box_reaches_over_it(photos):
    """Grace Hopper's white hair below her right ear lies inside the flag's box, unsure for the model (0.4 to 0.9):
    forced to the old background's there, it was cut by the background swap. The zone beside the head below the
    ears (``logic/body_mask.beside_head``, passed as the body) leaves it to GrabCut's colours, which keep it."""
    image, grounding = photos["grace_hopper.jpg"]
    box = grounding.subject.box.xyxy
    hints = subject_hints(grounding, grounding.attributes["background"])
    ears = ((197.0, 220.0), (343.0, 225.0))  # what the pose referee sees on this photo
    from perceptforge.logic.body_mask import beside_head

    zone = beside_head(ears, 146.0, image.shape[:2])
    (before,) = SelfieSegmenter().hinted_candidates(image, box, hints)
    (after,) = SelfieSegmenter().hinted_candidates(image, box, Hints(hints.inside, hints.outside, box, None, zone))
    hair = np.zeros(before.shape, bool)
    hair[250:300, 160:200] = True  # the white hair below her right ear, in the flag's box (x < 200)
    assert after[hair].mean() > before[hair].mean() + 0.2
    assert after[hair].mean() > 0.5  # the box holds some of the flag too
    # the flag beside her head, above the ears, is still not kept
    assert after[30:150, 20:140].mean() < 0.05
