"""Models by their settings: a stage names the model it needs (a ``ModelSpec``, a few hundred bytes), and each
process that runs the stage's tasks builds and loads it once, on first use, then reuses it for every later unit
and batch (NeMo Curator's load-in-``setup()`` actors; here a Dask worker process, or the flow's own process under
the threads runner). A loaded pipeline never rides in a task's arguments.

Each load is counted (``loads()``) and written to ``<cache_dir>/model_loads/<host>-<pid>.jsonl``, so a run can
show, and a test assert, how many times each worker loaded each model. What the loaded backends report of their
work (``stats()``, an endpoint client's token usage) is read per process and merged by the runner.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from perceptforge.backends import registry
from perceptforge.backends.registry import Runtime

# the CLIP faithfulness gate is configured under the profile's gates, not as a registered backend role
CLIP_GATE = "clip-gate"


@dataclass(frozen=True)
class ModelSpec:
    """What a worker needs to build and load a model itself: its role, its settings, the run's device and cache."""

    role: str
    settings: BaseModel
    runtime: Runtime

    @property
    def name(self) -> str:
        return str(getattr(self.settings, "backend", self.role))

    @property
    def key(self) -> str:
        """The same model for the same role, settings and runtime, in every process."""
        text = json.dumps(
            [self.role, self.settings.model_dump(mode="json"), self.runtime.device, self.runtime.dtype,
             str(self.runtime.cache_dir)],
            sort_keys=True,
        )  # fmt: skip
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def label(self) -> str:
        return f"{self.role}:{self.name}"

    def build(self) -> Any:
        """The backend, built but not loaded (cheap: what a flow asks of a backend before any unit runs)."""
        if self.role == CLIP_GATE:
            from perceptforge.backends.clip_gate import ClipScorer

            return ClipScorer(self.settings.model, self.runtime.device)  # type: ignore[attr-defined]
        return registry.build(self.role, self.settings, self.runtime)  # type: ignore[arg-type]


_MODELS: dict[str, Any] = {}
_SPECS: dict[str, ModelSpec] = {}
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()
_RELEASED: dict[str, tuple[ModelSpec, dict[str, Any]]] = {}  # what released models reported last, by key


def process_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def obtain(spec: ModelSpec | Any) -> Any:
    """The loaded model for ``spec`` in this process: built and loaded on first use (one thread loads, the others
    wait: a diffusers pipeline loaded by two threads at once breaks), the same object afterwards. A model object
    given instead of a spec is returned as it is (a test's hand-made segmenter; it stays in one process)."""
    if not isinstance(spec, ModelSpec):
        return spec
    model = _MODELS.get(spec.key)
    if model is not None:
        return model
    with _GUARD:
        lock = _LOCKS.setdefault(spec.key, threading.Lock())
    with lock:
        model = _MODELS.get(spec.key)
        if model is None:
            started = time.perf_counter()
            model = spec.build().load()  # every backend's load() returns the loaded backend (backends/protocols)
            _pin_threads(spec.runtime)
            _MODELS[spec.key], _SPECS[spec.key] = model, spec
            _record_load(spec, time.perf_counter() - started)
    return model


def _pin_threads(runtime: Runtime) -> None:
    """On the CPU a torch model's output depends on its intra-op thread count (float sums split differently), and a
    Dask worker process starts with one thread where the flow's process has one per core: every process that runs
    a model uses the run's ``cpu_threads``."""
    torch = sys.modules.get("torch")
    if torch is not None and runtime.device == "cpu" and torch.get_num_threads() != runtime.cpu_threads:
        torch.set_num_threads(runtime.cpu_threads)


def _record_load(spec: ModelSpec, seconds: float) -> None:
    if spec.runtime.cache_dir is None:
        return
    folder = spec.runtime.cache_dir / "model_loads"
    folder.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"model": spec.label, "key": spec.key, "process": process_id(), "seconds": round(seconds, 3)})
    with open(folder / f"{process_id()}.jsonl", "a", encoding="utf-8") as f:
        f.write(line + "\n")


def loads(cache_dir: Path) -> dict[str, dict[str, int]]:
    """model label → process → how many times that process loaded it, for the run whose ``cache/`` this is (read
    from the load records every process wrote there)."""
    counts: dict[str, Counter[str]] = {}
    for path in sorted((cache_dir / "model_loads").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                counts.setdefault(record["model"], Counter())[record["process"]] += 1
    return {label: dict(sorted(c.items())) for label, c in sorted(counts.items())}


def release(keys: list[str]) -> list[str]:
    """Unload the models of ``keys`` this process holds (the profile's ``release_models_between_stages``)."""
    freed = []
    for key in keys:
        with _GUARD:
            model, spec = _MODELS.pop(key, None), _SPECS.pop(key, None)
        if spec is not None:
            _RELEASED[key] = (spec, _report(model))
            freed.append(spec.label)
        if model is not None and hasattr(model, "unload"):
            model.unload()
    return freed


def process_report(cache_dir: Path | None) -> dict[str, Any]:
    """What this process's models of the run (its ``cache/``) report of their work: their ``stats()`` and token
    usage, by model label; released models by what they reported last."""
    out = {spec.label: report for spec, report in _RELEASED.values() if spec.runtime.cache_dir == cache_dir}
    for key, model in list(_MODELS.items()):
        if _SPECS[key].runtime.cache_dir == cache_dir:
            out[_SPECS[key].label] = _report(model)
    return out


def finish(cache_dir: Path | None) -> None:
    """The run is over: free this process's models of the run and forget what they reported."""
    release([k for k, s in list(_SPECS.items()) if s.runtime.cache_dir == cache_dir])
    for key in [k for k, (s, _) in _RELEASED.items() if s.runtime.cache_dir == cache_dir]:
        _RELEASED.pop(key, None)


def _report(model: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if hasattr(model, "stats"):
        entry["stats"] = model.stats()
    usage = getattr(getattr(model, "client", None), "usage", None)
    if usage is not None:
        entry["usage"] = {
            "requests": usage.requests,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        }
    return entry


_NOT_ADDED = {"batch_size", "seconds_per_image", "peak_gpu_memory_gb", "compile_s"}


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Several processes' reports as one: counts and seconds add up, settings and per-image figures keep the
    largest, mappings merge key by key, other values keep the first seen (a model's precision is the same on
    every worker)."""

    def merge(a: Any, b: Any, key: str = "") -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: merge(a[k], b[k], k) if k in a and k in b else a.get(k, b.get(k)) for k in {**a, **b}}
        if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
            return max(a, b) if key in _NOT_ADDED else a + b
        return a

    merged: dict[str, Any] = {}
    for report in reports:
        merged = merge(merged, report)
    return {k: merged[k] for k in sorted(merged)}
