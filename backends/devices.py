"""Device and dtype choice for model backends, with a CPU fallback that says so."""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref

log = logging.getLogger("perceptforge")

# One model call at a time per accelerator in this process: threads share a GPU's memory, and two
# pipelines filling it at once is how an overnight run dies of out-of-memory.
_DEVICE_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
# One call at a time per model on the CPU: a diffusers pipeline keeps its scheduler's step index between steps and
# SAM keeps the image it was set to, so two threads in one copy change each other's pixels (a CI run's items
# differed from the same run's on two worker processes); different models still run side by side.
_MODEL_LOCKS: weakref.WeakKeyDictionary[object, threading.RLock] = weakref.WeakKeyDictionary()
_MODEL_LOCKS_BY_ID: dict[int, threading.RLock] = {}


def resolve_device(requested: str) -> str:
    """``cpu`` / ``cuda`` / ``cuda:N`` / ``auto`` → the device every backend of the run uses.

    ``auto`` and ``cuda`` without a usable GPU (or without torch) fall back to the CPU with a warning, so a
    gpu profile still runs, slowly, on a laptop."""
    if requested == "cpu":
        return "cpu"
    try:
        import torch
    except ImportError:
        log.warning("device %s requested but torch is not installed: running on the CPU", requested)
        return "cpu"
    if torch.cuda.is_available():
        return "cuda" if requested == "auto" else requested
    log.warning("device %s requested but no GPU is available: running on the CPU", requested)
    return "cpu"


def device_lock(device: str):
    """A lock shared by every caller on ``device`` (``cuda``, ``cuda:1``, ``mps``); the CPU needs none."""
    if device == "cpu":
        return contextlib.nullcontext()
    with _LOCKS_GUARD:
        return _DEVICE_LOCKS.setdefault(device, threading.Lock())


def pick_dtype(name: str, device: str):
    """float16 / bfloat16 only on a GPU; on the CPU they are slow or unsupported, so float32 is used."""
    import torch

    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]
    if device == "cpu" and dtype != torch.float32:
        log.warning("dtype %s requested on the CPU: using float32", name)
        return torch.float32
    return dtype


def is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def release(*models) -> None:
    """Free GPU memory between stages (profile: release_models_between_stages)."""
    import gc

    import torch

    for m in models:
        del m
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_batched(fn, items: list, batch_size: int, halved=None) -> list:
    """Call ``fn`` on slices of ``items``; on CUDA out-of-memory, halve the batch and retry the slice
    (``halved(size)`` is told each new size)."""
    out: list = []
    start, size = 0, max(1, batch_size)
    while start < len(items):
        chunk = items[start : start + size]
        try:
            out.extend(fn(chunk))
        except Exception as exc:
            if not is_oom(exc) or size == 1:
                raise
            size = max(1, size // 2)
            log.warning("CUDA out of memory: retrying with batch size %d", size)
            if halved is not None:
                halved(size)
            release()
            continue
        start += len(chunk)
    return out


def call_lock(device: str, model: object):
    """The lock a call into ``model`` holds: on an accelerator the device's (``device_lock``); on the CPU the
    model's own, unless it declares ``concurrent_calls`` (no state between calls, or its own lock inside)."""
    if device != "cpu":
        return device_lock(device)
    if getattr(model, "concurrent_calls", False):
        return contextlib.nullcontext()
    with _LOCKS_GUARD:
        try:
            return _MODEL_LOCKS.setdefault(model, threading.RLock())
        except TypeError:  # no weak reference to it (``__slots__``), or unhashable: by identity, while it lives
            return _MODEL_LOCKS_BY_ID.setdefault(id(model), threading.RLock())
