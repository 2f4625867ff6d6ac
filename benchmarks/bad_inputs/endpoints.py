"""Endpoints that misbehave and questions that point elsewhere: ``predict`` and Label Studio URLs."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from importlib import resources
from pathlib import Path

from PIL import Image

from . import SAMPLE, Outcome, case, cli, small_run, verdict
from .servers import HTML, Reply, Trickle, completion, echoes_key, refused, serving


def tiny_release(tmp: Path, n: int = 3) -> Path:
    """An MVP-Bench question file of ``n`` single-image questions, its image beside it."""
    Image.new("RGB", (4, 4)).save(tmp / "x.png")
    data = tmp / "mcq.jsonl"
    rows = [
        {"question_id": str(k), "image": "x.png", "question": f"Q{k}?\nA. a\nB. b", "answer": "A"} for k in range(n)
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def predict_cli(
    env: dict, data: Path, url: str, out: Path, *extra: str, timeout: int = 600
) -> subprocess.CompletedProcess:
    args = ["predict", "mvp-bench", "--data", str(data), "--endpoint", url, "--model", "m", "--out", str(out)]
    return cli(env, *args, *extra, timeout=timeout)


def spoiled(question: str, reply: Reply):
    """An endpoint that gives ``reply`` to the request asking ``question`` and answers "A" to the others."""
    return lambda body: reply if question in body else completion("A")


def kept_and_failed(out: Path) -> tuple[list[str], str]:
    """The question ids ``predict`` kept in ``out``, and the text of its failed-requests file."""
    kept = sorted(json.loads(line)["question_id"] for line in out.read_text().splitlines()) if out.exists() else []
    failed = Path(f"{out}.failed.jsonl")
    return kept, failed.read_text().replace('":"', '": "') if failed.exists() else ""


def one_failed(tmp: Path, env: dict, reply: Reply, *extra: str, bound: int = 600) -> Outcome:
    """Three questions, the second spoiled by ``reply``: the other two answers kept, the second listed as failed,
    and one line that says so."""
    out = tmp / "pred.jsonl"
    with serving(spoiled("Q1?", reply)) as (url, _):
        proc = predict_cli(env, tiny_release(tmp), f"{url}/v1", out, *extra, timeout=bound)
    kept, failed = kept_and_failed(out)
    if kept != ["0", "2"] or '"question_id": "1"' not in failed:
        return "data lost", f"kept {kept}, failed file {failed[:80]!r}"
    return verdict(proc, "1 request(s) failed, e.g. {'question_id': '1'}")


@case("Label Studio URL answering 200 with an HTML page")
def html_label_studio(tmp, env):
    run = small_run(tmp, env)
    with serving(lambda body: HTML) as (url, _):
        args = ["annotate", "push", str(run), "--url", url, "--document-root", str(run.parent)]
        return verdict(cli({**env, "LABEL_STUDIO_API_KEY": "t"}, *args), "not JSON")


@case("chat endpoint answering 200 with an HTML page")
def html_chat(tmp, env):
    with serving(lambda body: HTML) as (url, _):
        proc = predict_cli(env, tiny_release(tmp, 1), f"{url}/v1", tmp / "pred.jsonl", "--retries", "0")
    return verdict(proc, "not a chat completion")


@case("predict: the endpoint refuses one request of three (HTTP 400)")
def predict_one_refused(tmp, env):
    return one_failed(tmp, env, refused(400, "image too large"))


@case("predict --concurrency 1: the answers after a refused request are kept")
def predict_refused_in_order(tmp, env):
    return one_failed(tmp, env, refused(400, "image too large"), "--concurrency", "1")


@case("predict: an HTML page for one request of three")
def predict_one_html(tmp, env):
    return one_failed(tmp, env, HTML, "--retries", "0")


@case("predict: a truncated JSON body for one request of three")
def predict_one_truncated(tmp, env):
    status, body, kind = completion("A")
    return one_failed(tmp, env, (status, body[: len(body) // 2], kind), "--retries", "0")


@case("predict: an endpoint that never answers one request (--timeout 1 --retries 1)")
def predict_never_answers(tmp, env):
    started = time.monotonic()
    outcome, detail = one_failed(tmp, env, None, "--timeout", "1", "--retries", "1", bound=90)
    return outcome, f"{detail} ({time.monotonic() - started:.0f} s)"


@case("predict: a rerun after failures asks only what failed and completes the file", expect="handled")
def predict_rerun_completes(tmp, env):
    data, out, healthy = tiny_release(tmp, 6), tmp / "pred.jsonl", tmp / "healthy.jsonl"
    with serving(spoiled("Q3?", refused(500, "overloaded"))) as (url, _):
        predict_cli(env, data, f"{url}/v1", out, "--retries", "0")
    with serving(lambda body: completion("A")) as (url, asked):
        predict_cli(env, data, f"{url}/v1", out)
        rerun_asked = len(asked)
        predict_cli(env, data, f"{url}/v1", healthy)
    same = sorted(out.read_text().splitlines()) == sorted(healthy.read_text().splitlines())
    if rerun_asked != 1 or not same:
        return "data lost", f"the rerun asked {rerun_asked} question(s); same lines as a healthy run: {same}"
    return "handled", "the rerun asked 1 question; the file equals an uninterrupted healthy run's"


@case("predict: a line that is not a prediction in an existing --out")
def predict_foreign_out(tmp, env):
    out = tmp / "pred.jsonl"
    out.write_text('{"question_id": "0", "output": "A"}\nmy notes\n')
    before = out.read_bytes()
    proc = predict_cli(env, tiny_release(tmp), "http://127.0.0.1:9/v1", out)
    if out.read_bytes() != before:
        return "data lost", "the --out file changed"
    return verdict(proc, "pred.jsonl:2: not a prediction line")


@case("predict --out is the --data file")
def predict_into_data(tmp, env):
    data = tiny_release(tmp)
    before = data.read_bytes()
    proc = predict_cli(env, data, "http://127.0.0.1:9/v1", data)
    if data.read_bytes() != before:
        return "data lost", "the question file changed"
    return verdict(proc, "is also read as --data")


def image_outside(tmp: Path, env: dict, image: str) -> Outcome:
    """A question whose image names a file outside ``--images``: refused in one line, and nothing of it sent."""
    (tmp / "imgs").mkdir()
    secret = tmp / "secret.png"
    Image.new("RGB", (4, 4), (1, 2, 3)).save(secret)
    data = tmp / "imgs" / "mcq.jsonl"
    row = {"question_id": "1", "image": image.format(secret=secret), "question": "Q?", "answer": "A"}
    data.write_text(json.dumps(row) + "\n")
    with serving(lambda body: completion("A")) as (url, asked):
        proc = predict_cli(env, data, f"{url}/v1", tmp / "p.jsonl", "--images", str(tmp / "imgs"))
    if asked:
        return "security", f"{len(asked)} request(s) sent with a file outside --images"
    return verdict(proc, "is outside")


@case("predict: an absolute image path outside --images")
def predict_image_absolute(tmp, env):
    return image_outside(tmp, env, "{secret}")


@case("predict: an image path ../ outside --images")
def predict_image_relative(tmp, env):
    return image_outside(tmp, env, "../secret.png")


def ls_request(env: dict, method: str, path: str, body: dict | None = None) -> object:
    """One Label Studio API call with the env's token (the benchmarks may not import the annotation client)."""
    request = urllib.request.Request(
        env["LABEL_STUDIO_URL"].rstrip("/") + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Authorization": f"Token {env['LABEL_STUDIO_API_KEY']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read() or b"null")


@case("annotate push/pull: a recorded project id that names another project", needs="label-studio")
def label_studio_foreign_id(tmp, env):
    run = tmp / "run"
    shutil.copytree(small_run(tmp, env), run)
    root = env.get("LS_DOCUMENT_ROOT") or str(tmp)
    url = env["LABEL_STUDIO_URL"]
    first = cli(env, "annotate", "push", str(run), "--url", url, "--document-root", root)
    if first.returncode:
        return verdict(first, "(the first push failed)")
    theirs = ls_request(env, "POST", "/api/projects", {"title": "someone else's project"})["id"]
    state = run / "annotation" / "projects.json"
    doc = json.loads(state.read_text())
    for record in doc.values():
        record["servers"] = {url.rstrip("/"): theirs}
    state.write_text(json.dumps(doc))
    pulled = cli(env, "annotate", "pull", str(run), "--url", url)
    cli(env, "annotate", "push", str(run), "--url", url, "--document-root", root)
    listed = ls_request(env, "GET", f"/api/tasks?project={theirs}")
    tasks = listed.get("tasks", []) if isinstance(listed, dict) else listed
    storages = ls_request(env, "GET", f"/api/storages/localfiles?project={theirs}")
    if tasks or storages:
        return "security", f"another project (id {theirs}) got {len(tasks)} task(s), {len(storages)} storage(s)"
    return verdict(pulled, f"recorded as id {theirs}, is not there")


# --- issue 43: secrets, deadlines, replies that answer nothing ------------------------------------------------------
KEY = "sk-perceptforge-test-7f3a9c"  # what a gateway's 401 quotes back


def leaked(tmp: Path, env: dict, proc: subprocess.CompletedProcess) -> list[str]:
    """Where the key was seen: the terminal, any file under ``tmp`` or in the state folder (Prefect's database and
    logs, the judge's cache)."""
    places = ["the terminal"] if KEY in proc.stdout + proc.stderr else []
    for folder in (tmp, Path(env["PERCEPTFORGE_STATE_DIR"])):
        places += [str(p) for p in folder.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    return places


@case("predict: an endpoint whose 401 error echoes the API key")
def predict_key_echoed(tmp, env):
    out = tmp / "pred.jsonl"
    with serving(lambda body: echoes_key) as (url, _):
        proc = predict_cli({**env, "OPENAI_API_KEY": KEY}, tiny_release(tmp, 2), f"{url}/v1", out, "--retries", "0")
    if where := leaked(tmp, env, proc):
        return "security", f"the key reached {', '.join(where)}"
    return verdict(proc, "Incorrect API key provided: Bearer ***")


def judged(tmp: Path, env: dict, url: str, model: str, *extra: str) -> subprocess.CompletedProcess:
    """``score mvp-bench`` of one answer the rules cannot read, so the judge at ``url`` is asked."""
    data, preds = tmp / "data.jsonl", tmp / "preds.jsonl"
    question = {"question_id": 0, "id": 7, "image": "x.jpg", "question": "Which?\nA. a\nB. b", "answer": "A",
                "type": "mcq-e", "level": "high"}  # fmt: skip
    data.write_text(json.dumps(question) + "\n")
    preds.write_text(json.dumps({"question_id": 0, "output": "the first one, I think"}) + "\n")
    args = ["score", "mvp-bench", "--data", str(data), "--predictions", str(preds), "--judge", f"openai:{model}@{url}"]
    return cli(env, *args, *extra, timeout=120)


@case("score --judge: a judge whose 401 error echoes the API key")
def judge_key_echoed(tmp, env):
    with serving(lambda body: echoes_key) as (url, _):
        proc = judged(tmp, {**env, "OPENAI_API_KEY": KEY}, f"{url}/v1", "judge-401")
    if where := leaked(tmp, env, proc):
        return "security", f"the key reached {', '.join(where)}"
    return verdict(proc, "Incorrect API key provided: Bearer ***")


@case("run mvp: an LLM endpoint whose 401 error echoes the API key")
def run_llm_key_echoed(tmp, env):
    profile = tmp / "openai.yaml"
    local = Path(str(resources.files("perceptforge.configs").joinpath("local.yaml"))).read_text()
    with serving(lambda body: echoes_key) as (url, _):
        llm = f"llm:\n  backend: openai\n  base_url: {url}/v1\n  model: m\n  max_retries: 0\n"
        profile.write_text(local.replace("llm:\n  backend: template\n", llm))
        args = ["run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "run"), "--profile", str(profile)]
        proc = cli({**env, "OPENAI_API_KEY": KEY}, *args, "--categories", "I1", "--limit", "1")
    if where := leaked(tmp, env, proc):
        return "security", f"the key reached {', '.join(where)}"
    return verdict(proc, "Incorrect API key provided: Bearer ***")


TRICKLED = Trickle(completion("A"), interval=1.0)  # about 250 bytes: four minutes of a byte a second


@case("predict --timeout 2: an endpoint that trickles one answer a byte a second")
def predict_trickle(tmp, env):
    started = time.monotonic()
    outcome, detail = one_failed(tmp, env, TRICKLED, "--timeout", "2", "--retries", "1", bound=60)
    return outcome, f"{detail} ({time.monotonic() - started:.0f} s)"


@case("score --judge --judge-timeout 2: a judge that trickles its answer a byte a second")
def judge_trickle(tmp, env):
    started = time.monotonic()
    with serving(lambda body: TRICKLED) as (url, _):
        proc = judged(tmp, env, f"{url}/v1", "judge-trickle", "--judge-timeout", "2")
    elapsed = time.monotonic() - started
    if elapsed > 60:  # five tries of 2 s and the client's backoff (at most 8 s each)
        return "hang", f"{elapsed:.0f} s"
    outcome, detail = verdict(proc, "gave up after 5 tries: APITimeoutError")
    return outcome, f"{detail} ({elapsed:.0f} s)"


@case("predict: a reply with content null for one request of three")
def predict_content_null(tmp, env):
    return one_failed(tmp, env, completion(None), "--retries", "0")


# --- issue 43: loops a user sizes, requests that are never answered ------------------------------------------------
@case("predict --concurrency 100000")
def huge_concurrency(tmp, env):
    proc = predict_cli(env, tiny_release(tmp, 1), "http://127.0.0.1:9/v1", tmp / "pred.jsonl", "--concurrency",
                       "100000", timeout=120)  # fmt: skip
    outcome, detail = verdict(proc, "Invalid value for '--concurrency'")
    if outcome == "clear error" and "256" not in proc.stderr:
        return "silently wrong", "the refusal does not name the limit"
    return outcome, detail


@case("predict --concurrency 0")
def zero_concurrency(tmp, env):
    proc = predict_cli(env, tiny_release(tmp, 1), "http://127.0.0.1:9/v1", tmp / "pred.jsonl", "--concurrency", "0")
    return verdict(proc, "Invalid value for '--concurrency'")


@case("Label Studio URL that takes the connection and never answers (PERCEPTFORGE_LABEL_STUDIO_TIMEOUT=3)")
def silent_label_studio(tmp, env):
    run = small_run(tmp, env)
    env = {**env, "LABEL_STUDIO_API_KEY": "t0ken", "PERCEPTFORGE_LABEL_STUDIO_TIMEOUT": "3"}
    with serving(lambda body: None) as (url, _):
        args = ["annotate", "push", str(run), "--url", url, "--document-root", str(run.parent)]
        proc = cli(env, *args, timeout=60)
    outcome, line = verdict(proc, "did not answer while")
    return ("security" if "t0ken" in proc.stdout + proc.stderr else outcome), line
