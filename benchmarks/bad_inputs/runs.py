"""Bad source folders, run directories and a disk that fills up: ``perceptforge run``, ``export``, ``audit``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import numpy as np
from PIL import Image

from . import SAMPLE, Outcome, case, cli, last_line, small_run, source_copy, verdict


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
    (
        "an annotation for an image the file does not list",
        lambda d: d["annotations"].append({**d["annotations"][0], "id": 999, "image_id": "no-such-photo"}),
        "names no image",
    ),
]


def annotation_case(edit: Callable[[dict], None], must_say: str) -> Callable[[Path, dict], Outcome]:
    def run(tmp: Path, env: dict) -> Outcome:
        src = source_copy(tmp, edit)
        return verdict(cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run")), must_say)

    return run


for _name, _edit, _says in ANNOTATION_CASES:
    case(_name)(annotation_case(_edit, _says))


# --- 2. re-export ------------------------------------------------------------------------------------------
@case("export twice, then after an interrupted export", expect="handled")
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
@case("a unit that fails, then succeeds on resume", expect="handled")
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


@case("an item path with an HTML attribute in it", expect="handled")
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


@contextlib.contextmanager
def small_disk(tmp: Path, size: str) -> Iterator[Path | None]:
    """A file system of ``size`` mounted at ``tmp/small`` (None where this machine cannot mount one)."""
    mnt = tmp / "small"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


NO_MOUNT = ("skipped", "cannot mount a small tmpfs here (mount needs root)")


def run_fills_disk(tmp: Path, env: dict, size: str, *args: str) -> Outcome:
    with small_disk(tmp, size) as mnt:
        if mnt is None:
            return NO_MOUNT
        return verdict(cli(env, "run", *args, "--out", str(mnt / "run")), "No space left on device")


@case("the disk fills up (run mvp)")
def disk_full(tmp, env):
    return run_fills_disk(tmp, env, "400k", "mvp", "--source", str(SAMPLE), "--categories", "I1")


@case("the disk fills up (run codis)")
def disk_full_codis(tmp, env):
    return run_fills_disk(tmp, env, "400k", "codis", "--source", str(SAMPLE))


@case("the disk fills up (run blink, at its build stage)")
def disk_full_blink(tmp, env):
    return run_fills_disk(tmp, env, "3m", "blink", "--source", str(SAMPLE), "--tasks", "counting,jigsaw")


@case("the disk fills up while the summary and report are written")
def disk_full_report(tmp, env):
    args = ["run", "codis", "--source", str(SAMPLE)]
    with small_disk(tmp, "4m") as mnt:
        if mnt is None:
            return NO_MOUNT
        run = mnt / "run"
        cli(env, *args, "--out", str(run))
        for name in ("report.html", "summary.json"):
            (run / name).unlink()
        with open(mnt / "filler", "wb", buffering=0) as f:  # what the stages wrote stays, and room for two pages:
            with contextlib.suppress(OSError):  # run.json and profile.yaml are rewritten, the summary fits, the
                while f.write(b"\0" * 4096):  # report (8 kB) does not
                    pass
            f.truncate(f.tell() - 8192)
        outcome, detail = verdict(cli(env, *args, "--out", str(run)), "writing the summary and report")
        # the run itself is whole: freeing the room and running again finishes it
        (mnt / "filler").unlink()
        if outcome == "clear error" and cli(env, *args, "--out", str(run)).returncode:
            return "data lost", "the run did not finish after the disk was freed"
        return outcome, detail


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


def png_header(path: Path, width: int, height: int) -> None:
    """A PNG that declares its size and holds no pixels: what a reader that looks at the header first sees."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def authored_run_of_one_png(tmp: Path, env: dict, width: int, height: int) -> subprocess.CompletedProcess:
    """``run mme-realworld`` on the sample with its first photo replaced by a PNG of ``width`` x ``height``."""

    def bigger(doc: dict) -> None:
        doc["images"][0].update(width=width, height=height)

    src = source_copy(tmp, bigger)
    png_header(src / "images" / "astronaut.jpg", width, height)
    return cli(env, "run", "mme-realworld", "--source", str(src), "--out", str(tmp / "run"), "--limit", "1")


@case("run mme-realworld: a 20000x20000 PNG (Pillow's decompression-bomb cap)")
def authored_bomb(tmp, env):
    return verdict(authored_run_of_one_png(tmp, env, 20000, 20000), "decompression bomb")


@case("run mme-realworld: a 54 MP PNG under the default ingest.max_pixels of 40 MP")
def authored_max_pixels(tmp, env):
    return verdict(authored_run_of_one_png(tmp, env, 9000, 6000), "above the profile's ingest.max_pixels (40.0 MP)")


@case("temporary files a killed run left are removed on resume", expect="handled")
def orphan_temporaries(tmp, env):
    run = tmp / "run"
    shutil.copytree(small_run(tmp, env), run)
    orphans = [run / "items" / ".x.json.tmp", run / "quarantine" / ".y.json.tmp"]
    long_ago = time.time() - 3600  # a killed run's: older than any live writer's
    for orphan in orphans:
        orphan.parent.mkdir(exist_ok=True)
        orphan.write_text("half a fi")
        os.utime(orphan, (long_ago, long_ago))
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(run), "--categories", "I1", "--limit", "1")
    left = [str(o.relative_to(run)) for o in orphans if o.exists()]
    if proc.returncode or left:
        return ("traceback" if "Traceback" in proc.stderr else "silently wrong"), f"left {left}; exit {proc.returncode}"
    return "handled", "both removed"


# --- issue 43: selections that name nothing, loops a user can size -------------------------------------------------
@case("--categories ',' (a selection that names no category)")
def empty_selection(tmp, env):
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(tmp / "run"), "--categories", ",", timeout=120)
    if (tmp / "run").exists():
        return "silently wrong", "the run started"
    return verdict(proc, "--categories ',' names no id")


@case("score --bootstrap 1000000000")
def huge_bootstrap(tmp, env):
    data, preds = tmp / "data.jsonl", tmp / "preds.jsonl"
    question = {"question_id": 0, "id": 7, "image": "x.jpg", "question": "Which?\nA. a\nB. b", "answer": "A",
                "type": "mcq-e", "level": "high"}  # fmt: skip
    data.write_text(json.dumps(question) + "\n")
    preds.write_text(json.dumps({"question_id": 0, "output": "A"}) + "\n")
    args = ["score", "mvp-bench", "--data", str(data), "--predictions", str(preds), "--bootstrap", "1000000000"]
    proc = cli(env, *args, timeout=120)
    outcome, detail = verdict(proc, "Invalid value for '--bootstrap'")
    if outcome == "clear error" and "100000" not in proc.stderr:
        return "silently wrong", "the refusal does not name the limit"
    return outcome, detail


@case("a named pipe as a source image", expect="handled")
def fifo_source(tmp, env):
    src = source_copy(tmp)
    pipe = src / "images" / "coffee.jpg"
    pipe.unlink()
    os.mkfifo(pipe)
    args = ["run", "mvp", "--source", str(src), "--out", str(tmp / "run"), "--categories", "I1"]
    proc = cli(env, *args, timeout=300)
    if "Traceback" in proc.stderr:
        return "traceback", last_line(proc)
    quarantined = [json.loads(p.read_text()) for p in (tmp / "run" / "quarantine").glob("*.json")]
    refused = [q for q in quarantined if "coffee.jpg" in q.get("detail", "") and "not a regular file" in q["detail"]]
    if not refused or "not a regular file" not in proc.stdout + proc.stderr:
        return "silently wrong", f"exit {proc.returncode}; quarantined {[q.get('detail') for q in quarantined]}"
    return "handled", f"quarantined, the others went on: {refused[0]['detail']}"


# --- issue 43: a task folder's text files ---------------------------------------------------------------------------
PIECE_FIT = (
    b"# A Jigsaw-built task from a folder of its own.\nid: piece_fit\nversion: 1\ntask: Piece_Fit\nbuilder: jigsaw\n"
    b"needs: [image]\nprompt: blink_ext/piece_fit\nchoices: 2\nrandom_choice: 50.0\n"
)
PIECE_FIT_PROMPT = b"The first image lacks its lower-right part.\nWhich of the next two images fits the gap?\n"

# (case, the task YAML's bytes, the prompt's bytes, what the line must say)
TASK_FOLDER_CASES = [
    ("a task YAML that is not UTF-8 (Latin-1)", PIECE_FIT.replace(b"own.", b"own, caf\xe9."), PIECE_FIT_PROMPT,
     "piece_fit.yaml:1: not UTF-8 text (byte 0xe9"),
    ("a task YAML with a key given twice", PIECE_FIT + b"choices: 3\n", PIECE_FIT_PROMPT,
     "piece_fit.yaml:10: key 'choices' is given twice"),
    ("a prompt file that is not UTF-8 (Latin-1)", PIECE_FIT, PIECE_FIT_PROMPT.replace(b"gap", b"g\xe2p"),
     "piece_fit.v1.txt:2: not UTF-8 text (byte 0xe2"),
    ("a prompt with an empty {} placeholder", PIECE_FIT, PIECE_FIT_PROMPT.replace(b"gap?", b"gap in {}?"),
     "piece_fit.v1.txt:2: the placeholder {} has no name"),
]  # fmt: skip


def task_folder_case(task: bytes, prompt: bytes, must_say: str) -> Callable[[Path, dict], Outcome]:
    def run(tmp: Path, env: dict) -> Outcome:
        (tmp / "tasks" / "prompts" / "blink_ext").mkdir(parents=True)
        (tmp / "tasks" / "piece_fit.yaml").write_bytes(task)
        (tmp / "tasks" / "prompts" / "blink_ext" / "piece_fit.v1.txt").write_bytes(prompt)
        env = {**env, "PERCEPTFORGE_BLINK_TASKS": str(tmp / "tasks")}
        proc = cli(env, "sources", "check", str(SAMPLE), "--flow", "blink", "--only", "piece_fit", timeout=300)
        return verdict(proc, must_say)

    return run


for _name, _task, _prompt, _says in TASK_FOLDER_CASES:
    case(_name)(task_folder_case(_task, _prompt, _says))


# --- issue 43: two sources, one file name --------------------------------------------------------------------------
@case("two image ids that make one file name ('a b' and 'a_b')")
def ids_one_file_name(tmp, env):
    def rename(doc: dict) -> None:
        for img, new in zip(doc["images"][:2], ("a b", "a_b"), strict=True):
            for ann in doc["annotations"]:
                if ann["image_id"] == img["id"]:
                    ann["image_id"] = new
            img["id"] = new

    src = source_copy(tmp, rename)
    proc = cli(env, "run", "mvp", "--source", str(src), "--out", str(tmp / "run"), timeout=300)
    if (tmp / "run" / "items").exists():
        return "data lost", "the run started"
    return verdict(proc, "id 'a_b' makes the file name 'a_b', as images[0]'s id 'a b' does")


@case("ten copies of one photo under ten ids: every item counted is on disk once", expect="handled")
def copies_of_one_photo(tmp, env):
    def copies(doc: dict) -> None:
        first = doc["images"][0]
        regions = [a for a in doc["annotations"] if a["image_id"] == first["id"]]
        doc["images"], doc["annotations"] = [], []
        for k in range(10):
            doc["images"].append({**first, "id": f"copy{k}", "file_name": f"images/copy{k}.jpg"})
            doc["annotations"] += [{**a, "id": f"{k}-{a['id']}", "image_id": f"copy{k}"} for a in regions]

    src = source_copy(tmp, copies)
    for k in range(10):
        shutil.copyfile(src / "images" / "astronaut.jpg", src / "images" / f"copy{k}.jpg")
    run = tmp / "run"
    proc = cli(env, "run", "mvp", "--source", str(src), "--out", str(run), "--categories", "I1", timeout=1200)
    if proc.returncode or "Traceback" in proc.stderr:
        return ("traceback" if "Traceback" in proc.stderr else "silently wrong"), last_line(proc)
    counted = json.loads((run / "summary.json").read_text())["counts"]["items"]
    items = [json.loads(p.read_text()) for p in (run / "items").glob("*.json")]
    per_source = Counter(item["lineage"]["source_id"] for item in items)
    quarantined = [json.loads(p.read_text()) for p in (run / "quarantine").glob("*.json")]
    without_reason = [q["unit"] for q in quarantined if not q.get("detail")]
    if counted != len(items) or len({i["id"] for i in items}) != len(items) or without_reason:
        return "data lost", f"summary counts {counted} items, items/ holds {len(items)}; no reason: {without_reason}"
    accounted = set(per_source) | {f"copy{k}" for k in range(10) for q in quarantined if f"copy{k}" in q["unit"]}
    if len(accounted) != 10:
        return "data lost", f"{len(per_source)} copies have items, {len(quarantined)} are quarantined, of 10"
    return "handled", f"{counted} items, all on disk, from {len(per_source)} copies; {len(quarantined)} quarantined"


# --- issue 43: runner options, BLINK's prompt variants, export --out --------------------------------------------------
@case("--dask-address with --runner threads")
def dask_address_with_threads(tmp, env):
    args = ["--out", str(tmp / "run"), "--runner", "threads", "--dask-address", "tcp://127.0.0.1:9", "--limit", "1"]
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), *args, timeout=300)
    if (tmp / "run" / "items").exists():
        return "silently wrong", "the run started on threads"
    return verdict(proc, "--dask-address: names a Dask scheduler, but --runner threads was given")


@case("--dask-address alone, naming no scheduler (it implies --runner dask)")
def dask_address_alone(tmp, env):
    args = ["--out", str(tmp / "run"), "--dask-address", "tcp://127.0.0.1:9", "--categories", "I1", "--limit", "1"]
    proc = cli(env, "run", "mvp", "--source", str(SAMPLE), *args, timeout=300)
    if (tmp / "run" / "items").exists():
        return "silently wrong", "the run went on without the scheduler (on threads)"
    return verdict(proc, "--dask-address: no Dask scheduler answers at tcp://127.0.0.1:9")


@case("run blink --prompt-variants ','")
def blink_variants_comma(tmp, env):
    args = ["--out", str(tmp / "run"), "--prompt-variants", ",", "--tasks", "counting", "--limit", "1"]
    proc = cli(env, "run", "blink", "--source", str(SAMPLE), *args, timeout=300)
    if (tmp / "run").exists():
        return "silently wrong", "the run started (with the default radius)"
    return verdict(proc, "--prompt-variants: the radii part ',' names no value")


def user_folder(tmp: Path) -> tuple[Path, bytes]:
    """A folder of the user's holding their own ``val.jsonl`` (a name an export writes)."""
    folder, mine = tmp / "mine", b'{"my": "own data"}\n'
    folder.mkdir()
    (folder / "val.jsonl").write_bytes(mine)
    return folder, mine


@case("export --out into a folder holding the user's val.jsonl")
def export_over_user_files(tmp, env):
    run = small_run(tmp, env)
    folder, mine = user_folder(tmp)
    proc = cli(env, "export", str(run), "--out", str(folder))
    if (folder / "val.jsonl").read_bytes() != mine or (folder / "manifest.json").exists():
        return "data lost", "the user's val.jsonl was written over"
    return verdict(proc, "--out is not empty and holds no export (manifest.json)")


@case("export --out equal to the run directory")
def export_into_run(tmp, env):
    run = tmp / "run"
    shutil.copytree(small_run(tmp, env), run)
    proc = cli(env, "export", str(run), "--out", str(run))
    if (run / "val.jsonl").exists() or (run / "manifest.json").exists():
        return "data lost", "the split was written into the run directory"
    return verdict(proc, "--out is inside the run directory")


@case("export --out equal to the source folder")
def export_into_source(tmp, env):
    src = source_copy(tmp)
    before = sorted(p.name for p in src.iterdir())
    proc = cli(env, "export", str(small_run(tmp, env)), "--out", str(src))
    if sorted(p.name for p in src.iterdir()) != before:
        return "data lost", "the split was written into the source folder"
    return verdict(proc, "--out is not empty and holds no export")


@case("export --out holding an export of another family")
def export_over_other_kind(tmp, env):
    split = tmp / "split"
    split.mkdir()
    blink = {"benchmark": "blink", "run": {"flow": "blink"}, "files": {"val_answers.json": "0" * 64}}
    (split / "manifest.json").write_text(json.dumps(blink))
    (split / ".perceptforge-export").write_text("blink\n")  # what `perceptforge export` writes first
    proc = cli(env, "export", str(small_run(tmp, env)), "--out", str(split))
    if json.loads((split / "manifest.json").read_text()) != blink:
        return "data lost", "the BLINK export's manifest was replaced"
    return verdict(proc, "--out holds a blink export, and this is a mvp run")


@case("a source photo changed (same size) between a killed run and its resume")
def source_changed_before_resume(tmp, env):
    src = source_copy(tmp)
    run = tmp / "run"
    args = ["run", "mvp", "--source", str(src), "--out", str(run), "--categories", "I1", "--limit", "1"]
    first = cli(env, *args)
    if first.returncode:
        return ("traceback" if "Traceback" in first.stderr else "silently wrong"), last_line(first)
    photo = src / "images" / "astronaut.jpg"
    data = bytearray(photo.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte of the picture: the same size, so the run's identity is the same
    photo.write_bytes(bytes(data))
    items = sorted(p.name for p in (run / "items").glob("*.json"))
    proc = cli(env, *args)
    if sorted(p.name for p in (run / "items").glob("*.json")) != items:
        return "silently wrong", "the resume went on over the changed photo"
    outcome, line = verdict(proc, "astronaut.jpg: changed since the run in")
    if outcome != "clear error":
        return outcome, line
    fresh = cli(env, *args, "--fresh")  # the explicit way to start over
    if fresh.returncode:
        return ("traceback" if "Traceback" in fresh.stderr else "silently wrong"), f"--fresh: {last_line(fresh)}"
    return outcome, line
