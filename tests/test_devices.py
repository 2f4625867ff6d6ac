import logging

import pytest

torch = pytest.importorskip("torch")

from perceptforge.backends.devices import pick_dtype, resolve_device, run_batched  # noqa: E402


def test_cuda_request_falls_back_to_cpu_with_a_warning(caplog):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with caplog.at_level(logging.WARNING, logger="perceptforge"):
        assert resolve_device("cuda") == "cpu"
    assert "no GPU is available" in caplog.text
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    assert pick_dtype("float16", "cpu") == torch.float32


def test_oom_halves_the_batch_and_keeps_order():
    calls = []

    def fn(chunk):
        calls.append(len(chunk))
        if len(chunk) > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [x * 10 for x in chunk]

    assert run_batched(fn, list(range(7)), batch_size=8) == [0, 10, 20, 30, 40, 50, 60]
    assert calls[:3] == [7, 4, 2]  # 8 → 4 → 2, then the rest at 2


def test_other_errors_are_not_retried():
    def fn(chunk):
        raise ValueError("bad mask")

    with pytest.raises(ValueError, match="bad mask"):
        run_batched(fn, [1, 2], 2)
