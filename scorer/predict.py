"""Run an OpenAI-compatible vision model over a benchmark release, with each paper's prompt.

Each request becomes one JSON line in the output, in the prediction format the scorer reads back:
MVP-Bench ``{question_id, output}``, BLINK ``{idx, output}``, CODIS ``{id, context, output}``,
MME-RealWorld ``{Question_id, output}``. Lines are appended and flushed one by one, so a killed run
keeps what it finished; re-running skips ids already in the output (a torn last line is dropped).
"""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.prompts.library import load_prompt
from perceptforge.scorer.predictions import iter_records
from perceptforge.backends.chat import ChatClient
from PIL import Image


@dataclass(frozen=True)
class Request:
    key: dict  # the id fields written with the output
    text: str
    images: tuple[Path | bytes, ...]

    @property
    def uid(self) -> str:
        return json.dumps(self.key, sort_keys=True)


def _image(root: Path, rel: str, where: str) -> Path:
    path = (root / rel).resolve()
    if not path.exists():
        raise InputError(where, f"image {rel} not found under {root}")
    return path


def mvp_bench_requests(data: Path, images: Path) -> Iterator[Request]:
    for where, rec in iter_records(data):
        yield Request({"question_id": rec["question_id"]}, rec["question"], (_image(images, rec["image"], where),))


def blink_requests(data: Path, images: Path) -> Iterator[Request]:
    if data.suffix != ".parquet":
        raise InputError(str(data), "BLINK prediction needs the Hugging Face parquet (it holds the prompts and images)")
    import pyarrow.parquet as pq

    table = pq.read_table(data)
    for row in table.to_pylist():
        imgs = tuple(row[f"image_{k}"]["bytes"] for k in range(1, 5) if row.get(f"image_{k}"))
        yield Request({"idx": row["idx"]}, row["prompt"], imgs)


def codis_requests(data: Path, images: Path) -> Iterator[Request]:
    prompt = load_prompt("predict/codis_di_cot")
    for where, rec in iter_records(data):
        img = _image(images, rec["image_id"], where)
        for c in (1, 2):
            text = prompt.render(context=rec["context"][f"context_{c}"], question=rec["question"])
            yield Request({"id": rec["id"], "context": c}, text, (img,))


def mme_realworld_requests(data: Path, images: Path) -> Iterator[Request]:
    prompt = load_prompt("predict/mme_realworld")
    for where, rec in iter_records(data):
        text = prompt.render(question=rec["Text"], choices="\n".join(rec["Answer choices"]))
        yield Request({"Question_id": rec["Question_id"]}, text, (_image(images, rec["Image"], where),))


def perceptforge_requests(data: Path, images: Path) -> Iterator[Request]:
    """Our exported split (val.jsonl / test.jsonl): Yes/No pairs asked on each image, MCQs with lettered options."""
    prompt_mcq, prompt_yes_no, prompt_context = (load_prompt(f"predict/{n}") for n in ("mcq", "yes_no", "codis_di_cot"))
    for where, rec in iter_records(data):
        q, pair = rec["question"], rec["pair"]
        natural, manipulated = _image(images, pair["natural"]["path"], where), _image(images, pair["manipulated"]["path"], where)
        if q["kind"] == "yes_no_pair":
            for name, img in (("natural", natural), ("manipulated", manipulated)):
                yield Request({"id": rec["id"], "image": name}, prompt_yes_no.render(question=q["question"]), (img,))
        elif q["kind"] == "context_pair":
            for c, context in enumerate(q["contexts"], start=1):
                yield Request({"id": rec["id"], "context": str(c)}, prompt_context.render(context=context, question=q["question"]), (manipulated,))
        else:
            options = "\n".join(f"{'ABCDE'[k]}. {o}" for k, o in enumerate(q["options"]))
            imgs = (natural, manipulated) if q["kind"] == "cross_mcq" else (manipulated,)
            yield Request({"id": rec["id"]}, prompt_mcq.render(question=q["question"], options=options), imgs)


BUILDERS: dict[str, Callable[[Path, Path], Iterator[Request]]] = {
    "perceptforge": perceptforge_requests,
    "mvp-bench": mvp_bench_requests,
    "blink": blink_requests,
    "codis": codis_requests,
    "mme-realworld": mme_realworld_requests,
}


def image_bytes(images: tuple[Path | bytes, ...], concat: bool) -> list[bytes]:
    loaded = [Image.open(io.BytesIO(i) if isinstance(i, bytes) else i).convert("RGB") for i in images]
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
    benchmark: str, data: Path, images: Path, client: ChatClient, out: Path, concurrency: int = 4,
    concat_images: bool = False, progress: Callable[[int, int], None] | None = None,
) -> dict:
    if benchmark not in BUILDERS:
        raise PerceptforgeError(f"predict supports {', '.join(BUILDERS)}, not {benchmark!r}")
    requests = list(BUILDERS[benchmark](Path(data), Path(images)))
    done = done_keys(out)
    todo = [r for r in requests if r.uid not in done]
    out.parent.mkdir(parents=True, exist_ok=True)
    client.load()
    finished = 0
    with open(out, "a", encoding="utf-8") as sink, ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(client.complete, r.text, image_bytes(r.images, concat_images)): r for r in todo}
        for future in as_completed(futures):
            request = futures[future]
            output = future.result()
            sink.write(json.dumps({**request.key, "output": output}, ensure_ascii=False) + "\n")
            sink.flush()
            finished += 1
            if progress:
                progress(finished, len(todo))
    return {"requests": len(requests), "skipped": len(requests) - len(todo), "answered": finished,
            "prompt_tokens": client.usage.prompt_tokens, "completion_tokens": client.usage.completion_tokens}
