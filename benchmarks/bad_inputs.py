"""Bad inputs and faults a careful new user tries, each run for real, with counts by outcome.

    python benchmarks/bad_inputs.py            # every case; prints one line per case, then the counts

Outcomes: ``clear error`` (exit status 1 or 2, one ``error:`` line, no traceback), ``handled`` (the
right result), and the failures ``traceback``, ``silently wrong``, ``data lost``. ``tests/test_bad_inputs.py``
runs the same cases and fails on any failure outcome. The concurrent ``annotate push`` case needs a Label
Studio server and lives in ``tests/test_label_studio.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

FAILURES = ("traceback", "silently wrong", "data lost")
SAMPLE = Path(str(resources.files("perceptforge.data").joinpath("sample")))
CASES: dict[str, Callable[[Path, dict], tuple[str, str]]] = {}


def case(name: str):
    def register(fn):
        CASES[name] = fn
        return fn

    return register


def cli(env: dict, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "perceptforge.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def verdict(proc: subprocess.CompletedProcess, must_say: str) -> tuple[str, str]:
    """A clear error: a non-zero exit, an ``error:`` (or usage) line naming the problem, no traceback."""
    text = proc.stderr + proc.stdout
    last = next((line.strip("│╰─╯ ") for line in reversed(proc.stderr.strip().splitlines()) if line.strip("│╰─╯ ")), "")
    if "Traceback" in text:
        return "traceback", last
    if proc.returncode not in (1, 2):
        return "silently wrong", f"exit {proc.returncode}"
    return ("clear error" if must_say in text else "silently wrong"), last


def source_copy(tmp: Path, edit: Callable[[dict], None] | None = None) -> Path:
    src = tmp / "src"
    shutil.copytree(SAMPLE, src)
    if edit:
        doc = json.loads((src / "annotations.json").read_text())
        edit(doc)
        (src / "annotations.json").write_text(json.dumps(doc))
    return src


_RUN: dict[str, Path] = {}


def small_run(tmp: Path, env: dict) -> Path:
    """One real run (I1 on the astronaut), shared by the cases that need a run directory."""
    if "run" not in _RUN:
        out = tmp.parent / "shared-run"
        proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(out), "--categories", "I1", "--limit", "1")
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        _RUN["run"] = out
    return _RUN["run"]


# --- 1. a run directory holding another run --------------------------------------------------------------
@case("rerun with another seed")
def other_seed(tmp, env):
    run = small_run(tmp, env)
    return verdict(cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(run), "--seed", "7"), "seed 0 → 7")


@case("rerun with other categories")
def other_categories(tmp, env):
    run = small_run(tmp, env)
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(run), "--categories", "R1", "--limit", "1")
    return verdict(proc, "categories ['I1'] → ['R1']")


# --- 3, 6, 7, 12: an annotation file with one thing wrong: (case, what to change, what the error must say) ---
ANNOTATION_CASES = [
    ("ids 1 and '1'", lambda d: d["images"][1].update(id="1"), "is already used"),
    ("two images with id 1", lambda d: d["images"][1].update(id=1), "is already used"),
    ("images: []", lambda d: d.update(images=[]), "lists no images"),
    ("NUL in a label", lambda d: d["annotations"][2].update(label="hel\x00met"), "U+0000"),
    ("a bidirectional override in a caption", lambda d: d["images"][0].update(caption="A woman \u202e.gnp"), "U+202E"),
    ("attributes given as a list", lambda d: d["images"][0].update(attributes=["a", "b"]), "must be a mapping"),
]


def annotation_case(edit: Callable[[dict], None], must_say: str) -> Callable[[Path, dict], tuple[str, str]]:
    def run(tmp: Path, env: dict) -> tuple[str, str]:
        src = source_copy(tmp, edit)
        return verdict(cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run")), must_say)

    return run


for _name, _edit, _says in ANNOTATION_CASES:
    case(_name)(annotation_case(_edit, _says))


# --- 2. re-export ------------------------------------------------------------------------------------------
@case("export twice, then after an interrupted export")
def re_export(tmp, env):
    run, split = small_run(tmp, env), tmp / "split"
    manifests = []
    for _ in range(2):
        cli(env, "export", str(run), "--out", str(split))
        manifests.append((split / "manifest.json").read_bytes())
    shutil.rmtree(split / "images")  # an export killed before its images were copied
    (split / "val.jsonl").unlink()
    cli(env, "export", str(run), "--out", str(split))
    manifests.append((split / "manifest.json").read_bytes())
    images = [f for f in json.loads(manifests[0])["files"] if f["path"].startswith("images/")]
    ok = len(set(manifests)) == 1 and images and all((split / f["path"]).is_file() for f in images)
    return ("handled" if ok else "data lost"), f"{len(images)} images listed each time"


# --- 4. stale quarantine records ----------------------------------------------------------------------------
@case("a unit that fails, then succeeds on resume")
def stale_quarantine(tmp, env):
    src = source_copy(tmp)
    coffee = src / "images" / "coffee.jpg"
    good = coffee.read_bytes()
    coffee.write_bytes(b"\0" * len(good))  # same size: the same sources for the run's identity
    args = ["run", "mvp", "--source", str(src), "--out", str(tmp / "run"), "--categories", "I1", "--limit", "1"]
    first = cli(env, *args)
    coffee.write_bytes(good)
    second = cli(env, *args)
    if first.returncode or second.returncode:
        return "traceback" if "Traceback" in first.stderr + second.stderr else "silently wrong", second.stderr[-200:]
    summary = json.loads((tmp / "run" / "summary.json").read_text())
    stale = (tmp / "run" / "quarantine" / "source-4.json").exists()
    return ("silently wrong" if stale else "handled"), f"quarantined after resume: {summary['counts']['quarantined']}"


# --- 6. runs that build nothing -----------------------------------------------------------------------------
@case("--seed -1")
def negative_seed(tmp, env):
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "run"), "--seed", "-1")
    return verdict(proc, "Invalid value for '--seed'")


@case("a run that builds no items")
def zero_items(tmp, env):
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "run"), "--categories", "E2")
    return verdict(proc, "the run built no items")


# --- 8. credentials in a URL ----------------------------------------------------------------------------------
@case("--url with user:password")
def url_credentials(tmp, env):
    run = small_run(tmp, env)
    proc = cli(
        {**env, "LABEL_STUDIO_API_KEY": "t0ken"},
        "annotate",
        "push",
        str(run),
        "--url",
        "http://user:s3cret@127.0.0.1:9",
    )
    outcome, line = verdict(proc, "carries credentials")
    return ("silently wrong" if "s3cret" in proc.stdout + proc.stderr else outcome), line


# --- 9. item paths -------------------------------------------------------------------------------------------
def tampered_run(tmp, env, path: str) -> Path:
    run = tmp / "tampered"
    shutil.copytree(small_run(tmp, env), run)
    item = next((run / "items").iterdir())
    record = json.loads(item.read_text())
    record["pair"]["natural"]["path"] = path
    item.write_text(json.dumps(record))
    return run


@case("an item path ../../../../etc/hostname")
def traversal_path(tmp, env):
    run = tampered_run(tmp, env, "../../../../etc/hostname")
    proc = cli(env, "export", str(run), "--out", str(tmp / "split"))
    leaked = any(p.name == "hostname" for p in tmp.rglob("*"))
    outcome, line = verdict(proc, "should match pattern")
    return ("data lost" if leaked else outcome), line


@case("an item path with an HTML attribute in it")
def html_path(tmp, env):
    from perceptforge.outputs.report import write_report
    from perceptforge.store.rundir import RunDir

    run = tampered_run(tmp, env, "images/x' onerror='alert(7)")
    html = Path(write_report(RunDir(run))).read_text()
    return ("silently wrong" if "onerror='alert" in html else "handled"), "escaped in report.html"


# --- 10. the annotation file named by the profile ---------------------------------------------------------------
@case("grounder.file: ../../../../etc/passwd")
def annotation_file_escape(tmp, env):
    profile = tmp / "p.yaml"
    text = (Path(str(resources.files("perceptforge.configs").joinpath("local.yaml")))).read_text()
    profile.write_text(text.replace("file: annotations.json", "file: ../../../../etc/passwd"))
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--profile", str(profile), "--out", str(tmp / "run"))
    return verdict(proc, "points outside the source directory")


# --- 11. a huge image -------------------------------------------------------------------------------------------
@case("a 12000x12000 PNG of a few hundred kB")
def huge_image(tmp, env):
    src = source_copy(tmp)
    Image.fromarray(np.zeros((12000, 12000), np.uint8)).save(src / "images" / "astronaut.jpg", format="PNG")
    doc = json.loads((src / "annotations.json").read_text())
    doc["images"][0].update(width=12000, height=12000)
    (src / "annotations.json").write_text(json.dumps(doc))
    proc = cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run"), "--categories", "I1", "--limit", "1")
    return verdict(proc, "ingest.max_pixels")


# --- 12. one-line errors ------------------------------------------------------------------------------------------
@case("--out is a file")
def out_is_file(tmp, env):
    (tmp / "f").write_text("x")
    return verdict(cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "f")), "is a file")


@case("--out not writable")
def out_read_only(tmp, env):
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", "/proc/perceptforge-run")
    return verdict(proc, "cannot create or write the run directory")


@case("the disk fills up")
def disk_full(tmp, env):
    mnt = tmp / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], capture_output=True).returncode:
        return "handled", "skipped: cannot mount a small tmpfs here"
    try:
        proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(mnt / "run"), "--categories", "I1")
        return verdict(proc, "No space left on device")
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@case("JSON nested 200k deep in annotations.json")
def deep_source(tmp, env):
    src = tmp / "src"
    src.mkdir()
    (src / "annotations.json").write_text("[" * 200_000 + "]" * 200_000)
    return verdict(cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run")), "nested too deeply")


@case("JSON nested 200k deep in a predictions file")
def deep_predictions(tmp, env):
    run = small_run(tmp, env)
    split = tmp / "split"
    cli(env, "export", str(run), "--out", str(split))
    (tmp / "pred.jsonl").write_text('{"id": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    # one source: export keeps its questions on one side, so one of the two files is empty
    data = max((split / "val.jsonl", split / "test.jsonl"), key=lambda p: p.stat().st_size)
    proc = cli(env, "score", "perceptforge", "--data", str(data), "--predictions", str(tmp / "pred.jsonl"))
    return verdict(proc, "nested too deeply")


@case("--source is a file")
def source_is_file(tmp, env):
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE / "annotations.json"), "--out", str(tmp / "run"))
    return verdict(proc, "must be a directory")


@case("missing annotations.json")
def no_annotations(tmp, env):
    (tmp / "src").mkdir()
    proc = cli(env, "run", "mvp", "--source", str(tmp / "src"), "--out", str(tmp / "run"))
    outcome, line = verdict(proc, "file not found")
    return ("traceback" if "prefect" in proc.stderr.lower() else outcome), line


@case("an item image missing at export")
def missing_image(tmp, env):
    run = tmp / "run"
    shutil.copytree(small_run(tmp, env), run)
    item = json.loads(next((run / "items").iterdir()).read_text())
    (run / item["pair"]["manipulated"]["path"]).unlink()
    return verdict(cli(env, "export", str(run), "--out", str(tmp / "split")), "is missing from the run directory")


class _Quiet(BaseHTTPRequestHandler):
    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Html(_Quiet):
    def do_GET(self):  # noqa: N802
        self.reply(200, b"<html><body>Please log in</body></html>", "text/html")

    do_POST = do_GET  # noqa: N815


def html_server() -> tuple[HTTPServer, str]:
    server = HTTPServer(("127.0.0.1", 0), _Html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@case("Label Studio URL answering 200 with an HTML page")
def html_label_studio(tmp, env):
    server, url = html_server()
    try:
        run = small_run(tmp, env)
        proc = cli(
            {**env, "LABEL_STUDIO_API_KEY": "t"},
            "annotate",
            "push",
            str(run),
            "--url",
            url,
            "--document-root",
            str(run.parent),
        )
        return verdict(proc, "not JSON")
    finally:
        server.shutdown()


@case("chat endpoint answering 200 with an HTML page")
def html_chat(tmp, env):
    server, url = html_server()
    try:
        data = tmp / "mcq.jsonl"
        data.write_text(
            json.dumps({"question_id": "1", "image": "x.png", "question": "Q?\nA. a\nB. b", "answer": "A"}) + "\n"
        )
        Image.new("RGB", (4, 4)).save(tmp / "x.png")
        proc = cli(
            env,
            "predict",
            "mvp-bench",
            "--data",
            str(data),
            "--images",
            str(tmp),
            "--endpoint",
            f"{url}/v1",
            "--model",
            "m",
            "--out",
            str(tmp / "pred.jsonl"),
        )
        return verdict(proc, "not a chat completion")
    finally:
        server.shutdown()


def tiny_release(tmp: Path, n: int = 3) -> Path:
    """An MVP-Bench question file of ``n`` single-image questions, its image beside it."""
    Image.new("RGB", (4, 4)).save(tmp / "x.png")
    data = tmp / "mcq.jsonl"
    rows = [
        {"question_id": str(k), "image": "x.png", "question": f"Q{k}?\nA. a\nB. b", "answer": "A"} for k in range(n)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def predict_cli(env: dict, data: Path, url: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["predict", "mvp-bench", "--data", str(data), "--endpoint", url, "--model", "m", "--out", str(out)]
    return cli(env, *args, *extra)


class _OneFails(_Quiet):
    """A chat server that refuses question Q1 with HTTP 400 and answers the others."""

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        refused = "Q1?" in json.dumps(body)
        payload = (
            {"error": {"message": "image too large"}}
            if refused
            else {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}]}
        )  # fmt: skip
        self.reply(400 if refused else 200, json.dumps(payload).encode(), "application/json")


@case("predict: the endpoint refuses one request of three")
def predict_one_refused(tmp, env):
    server = HTTPServer(("127.0.0.1", 0), _OneFails)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp / "pred.jsonl"
        proc = predict_cli(env, tiny_release(tmp), f"http://127.0.0.1:{server.server_port}/v1", out)
    finally:
        server.shutdown()
    kept = sorted(json.loads(line)["question_id"] for line in out.read_text().splitlines()) if out.exists() else []
    failed = (tmp / "pred.jsonl.failed.jsonl").read_text() if (tmp / "pred.jsonl.failed.jsonl").exists() else ""
    if kept != ["0", "2"] or '"question_id": "1"' not in failed.replace('":"', '": "'):
        return "data lost", f"kept {kept}, failed file {failed[:80]!r}"
    return verdict(proc, "1 request(s) failed, e.g. {'question_id': '1'}")


@case("predict --out is the --data file")
def predict_into_data(tmp, env):
    data = tmp_release = tiny_release(tmp)
    before = data.read_bytes()
    proc = predict_cli(env, tmp_release, "http://127.0.0.1:9/v1", data)
    if data.read_bytes() != before:
        return "data lost", "the question file changed"
    return verdict(proc, "is also read as --data")


@case("predict: an image path outside --images")
def predict_image_outside(tmp, env):
    (tmp / "imgs").mkdir()
    data = tmp / "mcq.jsonl"
    data.write_text(json.dumps({"question_id": "1", "image": "/etc/hostname", "question": "Q?", "answer": "A"}) + "\n")
    proc = predict_cli(env, data, "http://127.0.0.1:9/v1", tmp / "p.jsonl", "--images", str(tmp / "imgs"))
    return verdict(proc, "is outside")


@case("score --items is the --predictions file")
def score_into_predictions(tmp, env):
    data = tiny_release(tmp)
    preds = tmp / "preds.jsonl"
    preds.write_text(json.dumps({"question_id": "0", "output": "A"}) + "\n")
    before = preds.read_bytes()
    proc = cli(env, "score", "mvp-bench", "--data", str(data), "--predictions", str(preds), "--items", str(preds))
    if preds.read_bytes() != before:
        return "data lost", "the predictions file changed"
    return verdict(proc, "is also read as --predictions")


@case("--fresh on a folder with a hand-made run.json")
def fresh_on_own_folder(tmp, env):
    folder = tmp / "thesis"
    folder.mkdir()
    (folder / "thesis.tex").write_text("precious")
    (folder / "run.json").write_text('{"mine": true}')
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(folder), "--fresh", "--limit", "1")
    if not (folder / "thesis.tex").exists():
        return "data lost", "thesis.tex was removed"
    return verdict(proc, "not a perceptforge run's")


@case("audit thresholds with min_p_value: .nan")
def nan_threshold(tmp, env):
    (tmp / "t.yaml").write_text("balance:\n  min_p_value: .nan\n")
    run = small_run(tmp, env)
    proc = cli(env, "audit", str(run), "--thresholds", str(tmp / "t.yaml"))
    return verdict(proc, "must be a finite number")


@case("a profile YAML with a key given twice")
def profile_key_twice(tmp, env):
    (tmp / "p.yaml").write_text("name: a\nname: b\n")
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "run"), "--profile", str(tmp / "p.yaml"))
    return verdict(proc, "p.yaml:2: key 'name' is given twice")


@case("a subject given as a list")
def subject_as_list(tmp, env):
    src = source_copy(tmp, lambda doc: doc["images"][0].update(subject=["woman"]))
    proc = cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run"), "--limit", "1")
    return verdict(proc, "subject: must be text, got list ['woman']")


def run_all(root: Path, env: dict, only: list[str] | None = None) -> dict[str, tuple[str, str]]:
    results = {}
    for name, fn in CASES.items():
        if only and name not in only:
            continue
        tmp = root / f"case-{len(results):02d}"
        tmp.mkdir(parents=True)
        try:
            results[name] = fn(tmp, env)
        except Exception as exc:  # a case that could not even be set up is a failure to look at
            results[name] = ("traceback", f"{type(exc).__name__}: {exc}"[:300])
    return results


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PERCEPTFORGE_STATE_DIR=str(Path(tmp) / "state"))
        env.pop("PREFECT_API_URL", None)
        results = run_all(Path(tmp), env)
    for name, (outcome, detail) in results.items():
        print(f"{outcome:15s} {name}: {detail}")
    counts = Counter(outcome for outcome, _ in results.values())
    print("\n" + ", ".join(f"{k}: {counts.get(k, 0)}" for k in ("clear error", "handled", *FAILURES)))
    sys.exit(1 if any(counts.get(k) for k in FAILURES) else 0)


if __name__ == "__main__":
    main()
