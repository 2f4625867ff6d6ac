"""Run an OpenAI-compatible vision model over a benchmark release, with each paper's prompt.

Each benchmark module builds its requests (``requests(data, images)``, with the paper's prompt); each
becomes one JSON line in the output, in the prediction format the scorer reads back. Lines are appended
and flushed one by one, so a killed run keeps what it finished; re-running skips ids already in the
output (a torn last line is dropped).
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from PIL import Image

from perceptforge.backends.chat import ChatClient
from perceptforge.errors import PerceptforgeError
from perceptforge.scorer import benchmarks

BLIND = ("grey", "none", "no_context")
GREY = (128, 128, 128)


def image_bytes(images: tuple[Path | bytes, ...], concat: bool, blind: str | None = None) -> list[bytes]:
    """PNG bytes of the request's images. ``blind``: ``grey`` sends a grey image of each one's size, ``none``
    sends none (BLINK's caption-only test: what can be answered without looking); ``no_context`` changes the
    text, not the images."""
    if blind == "none":
        return []
    loaded = [Image.open(io.BytesIO(i) if isinstance(i, bytes) else i).convert("RGB") for i in images]
    if blind == "grey":
        loaded = [Image.new("RGB", im.size, GREY) for im in loaded]
    if concat and len(loaded) > 1:
        # Side by side at a common height, for models that take one image per request.
        height = min(im.height for im in loaded)
        scaled = [im.resize((round(im.width * height / im.height), height)) for im in loaded]
        canvas = Image.new("RGB", (sum(im.width for im in scaled), height), "white")
        x = 0
        for im in scaled:
            canvas.paste(im, (x, 0))
            x += im.width
        loaded = [canvas]
    out = []
    for im in loaded:
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        out.append(buf.getvalue())
    return out


def done_keys(out: Path) -> set[str]:
    """Ids already answered; a torn last line (a killed run) is cut off so appending stays valid JSONL."""
    if not out.exists():
        return set()
    raw = out.read_bytes()
    if raw and not raw.endswith(b"\n"):
        raw = raw[: raw.rfind(b"\n") + 1]
        out.write_bytes(raw)
    keys = set()
    for line in raw.decode("utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            rec.pop("output", None)
            keys.add(json.dumps(rec, sort_keys=True))
    return keys


def predict(
    benchmark: str,
    data: Path,
    images: Path,
    client: ChatClient,
    out: Path,
    concurrency: int = 4,
    concat_images: bool = False,
    progress: Callable[[int, int], None] | None = None,
    blind: str | None = None,
) -> dict:
    if blind is not None and blind not in BLIND:
        raise PerceptforgeError(f"blind must be one of {', '.join(BLIND)}, got {blind!r}")
    module = benchmarks.get(benchmark)
    if not hasattr(module, "requests"):
        raise PerceptforgeError(f"predict supports {', '.join(benchmarks.predictable())}, not {benchmark!r}")
    if blind == "no_context":
        if "with_context" not in inspect.signature(module.requests).parameters:
            raise PerceptforgeError(
                f"{benchmark} questions have no context to leave out (--blind no_context is for CODIS)"
            )
        requests = list(module.requests(Path(data), Path(images), with_context=False))
    else:
        requests = list(module.requests(Path(data), Path(images)))
    done = done_keys(out)
    todo = [r for r in requests if r.uid not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    client.load()
    finished = 0
    with open(out, "a", encoding="utf-8") as sink, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(client.complete, r.text, image_bytes(r.images, concat_images, blind)): r for r in todo}
        for future in as_completed(futures):
            request = futures[future]
            output = future.result()
            sink.write(json.dumps({**request.key, "output": output}, ensure_ascii=False) + "\n")
            sink.flush()
            finished += 1
            if progress:
                progress(finished, len(todo))
    return {
        "requests": len(requests),
        "skipped": len(requests) - len(todo),
        "answered": finished,
        "prompt_tokens": client.usage.prompt_tokens,
        "completion_tokens": client.usage.completion_tokens,
    }
