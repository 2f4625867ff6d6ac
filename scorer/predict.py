"""Run an OpenAI-compatible vision model over a benchmark release, with each paper's prompt.

Each benchmark module builds its requests (``requests(data, images)``, with the paper's prompt); each
becomes one JSON line in the output, in the prediction format the scorer reads back. Lines are appended
and flushed one by one as answers arrive, so a killed run keeps what it finished; re-running skips ids
already in the output (a torn last line is dropped). A request that fails (an HTTP error, a page that is not
a chat completion, an endpoint that kept timing out after its retries) is recorded with its key and reason in
``<out>.failed.jsonl`` and the run goes on; a rerun asks only what is missing, failed ones included.
"""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from PIL import Image

from perceptforge.backends.chat import ChatClient
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import write_jsonl
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
    for lineno, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip():
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict):
                raise PerceptforgeError(
                    f"{out}:{lineno}: not a prediction line (a JSON object); this file holds other content: choose "
                    "another --out, or remove the line"
                )
            rec.pop("output", None)
            keys.add(json.dumps(rec, sort_keys=True))
    return keys


def _said(failure: dict) -> str:
    key = {k: v for k, v in failure.items() if k != "reason"}
    return f"{key}: {failure['reason']}"


def failed_path(out: Path) -> Path:
    """Where a predict run lists the requests that failed, beside its output."""
    return out.with_name(out.name + ".failed.jsonl")


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
    strict: bool = False,
) -> dict:
    """Ask ``client`` every request of ``data`` not yet answered in ``out``; the summary counts what was asked,
    skipped, answered and failed (``failed_file`` lists the failures, with their reasons). ``strict``: a failure
    is an error once every other request was asked (a check that needs every answer)."""
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

    order = {r.uid: k for k, r in enumerate(requests)}

    def ask(request: Any) -> str:
        return client.complete(request.text, image_bytes(request.images, concat_images, blind))

    finished, failures = 0, []  # failures: (the request's place in the data, what the failed file says)
    with open(out, "a", encoding="utf-8") as sink, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(ask, r): r for r in todo}
        for future in as_completed(futures):
            request = futures[future]
            try:
                output = future.result()
            except Exception as exc:  # this request alone: recorded, and the others go on
                reason = str(exc) if isinstance(exc, PerceptforgeError) else f"{type(exc).__name__}: {exc}"
                failures.append((order[request.uid], {**request.key, "reason": reason}))
            else:
                sink.write(json.dumps({**request.key, "output": output}, ensure_ascii=False) + "\n")
                sink.flush()
                finished += 1
            if progress:
                progress(finished + len(failures), len(todo))
    failed_file = failed_path(out)
    if failures:
        listed = [record for _, record in sorted(failures, key=lambda f: f[0])]
        write_jsonl(failed_file, listed)
        if strict:
            raise PerceptforgeError(
                f"{len(listed)} of {len(todo)} request(s) to {client.base_url} ({client.model}) failed, e.g. "
                f"{_said(listed[0])}; the answers are kept in {out}, the failures listed in {failed_file}"
            )
    else:
        failed_file.unlink(missing_ok=True)  # an earlier run's failures were asked again and answered
    return {
        "requests": len(requests),
        "skipped": len(requests) - len(todo),
        "answered": finished,
        "failed": len(failures),
        "failed_file": str(failed_file) if failures else None,
        "first_failure": _said(min(failures, key=lambda f: f[0])[1]) if failures else None,
        "prompt_tokens": client.usage.prompt_tokens,
        "completion_tokens": client.usage.completion_tokens,
    }
