"""Diffusers and segment-anything backends on tiny random models the tests build and save, loaded through
the same from_pretrained / checkpoint path real weights take. No downloads (HF_HUB_OFFLINE=1)."""

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from helpers import photo  # noqa: E402
from tiny_models import save_tiny_sam, save_tiny_sd  # noqa: E402

from perceptforge.backends.editors import InstructPix2PixEditor
from perceptforge.backends.inpainters import SDInpainter
from perceptforge.backends.protocols import EditRequest  # noqa: E402
from perceptforge.backends.sam import SamSegmenter  # noqa: E402
from perceptforge.errors import PerceptforgeError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_sd(tmp_path_factory):
    root = tmp_path_factory.mktemp("sd")
    return {"inpaint": save_tiny_sd(root, "inpaint"), "ip2p": save_tiny_sd(root, "ip2p")}


def test_sd_inpaint_batched_seeded_and_resized(tiny_sd):
    mask = np.zeros((60, 70), bool)
    mask[10:40, 20:50] = True
    reqs = [EditRequest(photo(70, 60, s), mask, "a red car", seed=s) for s in (1, 2)]
    inpainter = SDInpainter(str(tiny_sd["inpaint"]), steps=2, batch_size=2, max_side=64)
    out = inpainter.edit(reqs)
    assert [o.size for o in out] == [(70, 60), (70, 60)]  # run at 64x56, restored to the source size
    again = SDInpainter(str(tiny_sd["inpaint"]), steps=2, batch_size=1, max_side=64).edit(reqs)
    for a, b in zip(out, again):  # same seeds: batched equals one at a time (float tolerance)
        assert np.abs(np.asarray(a, int) - np.asarray(b, int)).max() <= 2
    assert np.asarray(out[0]).tobytes() != np.asarray(out[1]).tobytes()


def test_instruct_pix2pix(tiny_sd):
    out = InstructPix2PixEditor(str(tiny_sd["ip2p"]), steps=2, max_side=64).edit(
        [EditRequest(photo(64, 64), None, "Change the woman's smile into frown.", seed=0)]
    )
    assert out[0].size == (64, 64) and out[0].mode == "RGB"


def test_bad_inputs(tiny_sd, tmp_path):
    with pytest.raises(PerceptforgeError, match="model folder not found"):
        SDInpainter(str(tmp_path / "nope")).load()
    inpainter = SDInpainter(str(tiny_sd["inpaint"]), steps=1, max_side=64)
    with pytest.raises(ValueError, match="mask is 8x8 but the image is 64x64"):
        inpainter.edit([EditRequest(photo(64, 64), np.ones((8, 8), bool), "x", 0)])
    with pytest.raises(ValueError, match="mask is empty"):
        inpainter.edit([EditRequest(photo(64, 64), np.zeros((64, 64), bool), "x", 0)])
    with pytest.raises(ValueError, match="must be RGB"):
        inpainter.edit([EditRequest(photo(64, 64).convert("L"), np.ones((64, 64), bool), "x", 0)])


def test_sam_box_and_automatic(tmp_path):
    pytest.importorskip("segment_anything")
    model_type, checkpoint = save_tiny_sam(tmp_path)
    image = np.asarray(photo(96, 80))
    box_mask = SamSegmenter(str(checkpoint), model_type).box_mask(image, (10, 10, 60, 50))
    assert box_mask.shape == (80, 96) and box_mask.dtype == bool
    # Random weights: the quality filters must be opened or nothing survives them.
    auto = SamSegmenter(
        str(checkpoint),
        model_type,
        mode="automatic",
        pred_iou_thresh=0.0,
        stability_score_thresh=0.0,
        points_per_side=4,
    )
    masks = auto.candidates(image, (10, 10, 60, 50))
    assert masks and all(m.shape == (80, 96) for m in masks)
    with pytest.raises(PerceptforgeError, match="SAM checkpoint not found"):
        SamSegmenter(str(tmp_path / "missing.pth"), model_type).load()
    with pytest.raises(PerceptforgeError, match="unknown SAM model type 'vit_q'"):
        SamSegmenter(str(checkpoint), "vit_q").load()


def test_attention_on_sdpa_and_unet_layout_and_compile(tiny_sd):
    import torch

    plain = SDInpainter(str(tiny_sd["inpaint"]), steps=1, max_side=64).load()
    assert plain.attention == ["AttnProcessor2_0"]
    tuned = SDInpainter(str(tiny_sd["inpaint"]), steps=1, max_side=64, channels_last=True, compile=True).load()
    conv = next(m for m in tuned.pipe.unet.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert isinstance(tuned.pipe.unet, torch._dynamo.eval_frame.OptimizedModule)  # compiled on its first call


def test_batch_size_auto_is_recorded_and_halves_on_out_of_memory(tiny_sd, tmp_path):
    import torch

    mask = np.zeros((64, 64), bool)
    mask[8:40, 8:40] = True
    reqs = [EditRequest(photo(64, 64, s), mask, "a red car", seed=s) for s in range(5)]
    inpainter = SDInpainter(str(tiny_sd["inpaint"]), steps=1, max_side=64, batch_size="auto", cache_dir=tmp_path)
    # on the CPU there is no memory to fill: auto is 4, recorded for a resumed run to plan the same batches
    assert inpainter.choose_batch_size(reqs[0]) == 4
    assert json.loads((tmp_path / "batch_sizes.json").read_text()) == {"sd-inpaint 64x64 cpu": 4}
    (tmp_path / "batch_sizes.json").write_text(json.dumps({"sd-inpaint 64x64 cpu": 5}))
    assert inpainter.choose_batch_size(reqs[0]) == 5  # what the interrupted run chose, not a new measure

    real, sizes = inpainter._call, []

    def small_card(batch, images):  # a card with room for two images at a time
        sizes.append(len(batch))
        if len(batch) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(batch, images)

    inpainter._call = small_card
    out = inpainter.edit(reqs)
    assert len(out) == 5 and all(o.size == (64, 64) for o in out)
    assert sizes == [5, 2, 2, 1]  # halved 5 → 2, then the rest in twos
    assert inpainter.edit(reqs[:3]) and sizes[4:] == [2, 1]  # later calls start at the size that fitted
    stats = inpainter.stats()
    assert stats["batch_size"] == {"64x64": 5} and stats["halved_to"] == {"64x64": 2}
    assert stats["halved_on_out_of_memory"] == 1 and stats["attention"] == ["AttnProcessor2_0"]


def test_batch_that_fits():
    from perceptforge.backends.diffusion import batch_that_fits

    gb = 10**9
    assert batch_that_fits(per_image=2 * gb, free=60 * gb) == 27  # 90% of 60 GB in 2 GB images
    assert batch_that_fits(per_image=gb, free=200 * gb) == 32  # capped where throughput stops growing
    assert batch_that_fits(per_image=8 * gb, free=4 * gb) == 1  # never below one
