"""SAM works once per source image: one encoder run (``set_image``) and one automatic-mask run per image,
however many units ask, in memory and across a resumed run; the masks are the same bytes as recomputing."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.importorskip("segment_anything")

from helpers import photo  # noqa: E402
from tiny_models import save_tiny_sam  # noqa: E402

from perceptforge.backends.sam import SamSegmenter, image_key  # noqa: E402

BOXES = [(10, 10, 60, 50), (0, 0, 40, 40), (30, 20, 90, 70)]


@pytest.fixture(scope="module")
def tiny_sam(tmp_path_factory):
    return save_tiny_sam(tmp_path_factory.mktemp("sam"))


@pytest.fixture
def calls(monkeypatch):
    """Counts of the encoder and generator runs, by a spy on segment-anything's own classes."""
    from segment_anything import SamAutomaticMaskGenerator, SamPredictor

    counted = {"set_image": 0, "generate": 0}

    def spy(cls, name):
        real = getattr(cls, name)

        def counting(self, *a, **kw):
            counted[name] += 1
            return real(self, *a, **kw)

        monkeypatch.setattr(cls, name, counting)

    spy(SamPredictor, "set_image")
    spy(SamAutomaticMaskGenerator, "generate")
    return counted


def images():
    return [np.asarray(photo(96, 80, seed=s)) for s in (1, 2)]


def fresh_box_mask(tiny_sam, image, box):
    """What the segmenter gave before: a new predictor and a new embedding per call."""
    model_type, checkpoint = tiny_sam
    return SamSegmenter(str(checkpoint), model_type).box_mask(image, box)


def test_one_set_image_per_source_image_and_the_same_masks(tiny_sam, calls, tmp_path):
    model_type, checkpoint = tiny_sam
    a, b = images()
    expected = {(i, box): fresh_box_mask(tiny_sam, img, box) for i, img in enumerate((a, b)) for box in BOXES}
    calls["set_image"] = 0

    seg = SamSegmenter(str(checkpoint), model_type, cache_dir=tmp_path / "cache")
    # units of two images, interleaved as worker threads may take them
    for i, box in [(0, BOXES[0]), (0, BOXES[1]), (1, BOXES[0]), (0, BOXES[2]), (1, BOXES[1]), (1, BOXES[2])]:
        mask = seg.box_mask((a, b)[i], box)
        assert mask.tobytes() == expected[(i, box)].tobytes()
    assert calls["set_image"] == 2
    assert seg.stats()["encoder_runs"] == 2 and seg.stats()["precision"] == "float32"

    # a resumed run (a new process: a new segmenter) reads the embeddings back from the run directory
    again = SamSegmenter(str(checkpoint), model_type, cache_dir=tmp_path / "cache")
    for i, img in enumerate((a, b)):
        for box in BOXES:
            assert again.box_mask(img, box).tobytes() == expected[(i, box)].tobytes()
    assert calls["set_image"] == 2
    assert again.counts["embeddings_read_back"] == 2
    assert sorted(p.suffix for p in (tmp_path / "cache").rglob("*.pt")) == [".pt", ".pt"]


def test_automatic_masks_once_per_image(tiny_sam, calls, tmp_path):
    model_type, checkpoint = tiny_sam
    a, _ = images()
    open_filters = {"pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "points_per_side": 4}
    seg = SamSegmenter(str(checkpoint), model_type, mode="automatic", cache_dir=tmp_path, **open_filters)
    first = seg.candidates(a, BOXES[0])
    first[0][:] = ~first[0]  # a caller changing its copy changes nothing kept
    for box in BOXES:
        again = seg.candidates(a, box)
        assert len(again) == len(first) > 1
    assert calls["generate"] == 1

    resumed = SamSegmenter(str(checkpoint), model_type, mode="automatic", cache_dir=tmp_path, **open_filters)
    reference = SamSegmenter(str(checkpoint), model_type, mode="automatic", **open_filters).candidates(a, BOXES[0])
    assert [m.tobytes() for m in resumed.candidates(a, BOXES[0])] == [m.tobytes() for m in reference]
    assert calls["generate"] == 2  # the reference (no cache) ran; the resumed one read its masks back
    assert resumed.counts["automatic_read_back"] == 1


def test_precision_auto_is_float32_on_the_cpu_and_bfloat16_runs(tiny_sam):
    model_type, checkpoint = tiny_sam
    a, _ = images()
    fp32 = SamSegmenter(str(checkpoint), model_type, precision="float32").box_mask(a, BOXES[0])
    auto = SamSegmenter(str(checkpoint), model_type, precision="auto").box_mask(a, BOXES[0])
    assert auto.tobytes() == fp32.tobytes()  # the selected mask is unchanged where autocast is off
    # the autocast path itself (bf16 on CUDA) runs through, here under the CPU's bf16 autocast
    bf16 = SamSegmenter(str(checkpoint), model_type, precision="bfloat16")
    mask = bf16.box_mask(a, BOXES[0])
    assert mask.shape == a.shape[:2] and mask.dtype == bool
    assert bf16.stats()["precision"] == "torch.bfloat16"
    auto_bf16 = SamSegmenter(
        str(checkpoint),
        model_type,
        mode="automatic",
        precision="bfloat16",
        pred_iou_thresh=0.0,
        stability_score_thresh=0.0,
        points_per_side=4,
    )
    assert all(m.shape == a.shape[:2] for m in auto_bf16.candidates(a, BOXES[0]))


def test_image_key_is_the_pixels_and_shape():
    a, b = images()
    assert image_key(a) == image_key(a.copy()) != image_key(b)
    assert image_key(a[:, :48]) != image_key(np.ascontiguousarray(a[:, :48]).reshape(80, 48, 3)[:40])
