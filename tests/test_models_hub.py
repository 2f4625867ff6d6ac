"""Models by hub id: `perceptforge models pull` fetches what a profile names from a hub (a local server on 127.0.0.1
that speaks the Hugging Face Hub's download API, ``tests/hub_server.py``, driven by the real ``huggingface_hub``)
into the Hugging Face cache; `run mvp --profile` then reads it offline and every item's lineage records each model's
id and commit. An interrupted pull resumes; a wrong revision and a missing model are one line each."""

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest
import yaml

pytest.importorskip("huggingface_hub")
pytest.importorskip("diffusers")
pytest.importorskip("segment_anything")

from helpers import OPEN_GATES, perceptforge_cmd  # noqa: E402
from hub_server import HubServer, HubState, Repo  # noqa: E402
from tiny_models import register_tiny_sam, save_tiny_clip, save_tiny_sam, save_tiny_sd  # noqa: E402

from perceptforge.backends import hub  # noqa: E402

INPAINT = "tiny-org/sd-inpaint"
CLIP = "tiny-org/clip"
BIG = "tiny-org/big-encoder"  # only pulled, never loaded: large enough for huggingface_hub to resume inside it
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"
CATEGORIES = ["B1", "S1"]  # both rendered by sd-inpaint, their masks from SAM's


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The hub's state: the tiny inpainting pipeline (plus a single-file checkpoint and a half-precision variant a
    pull must leave behind), a tiny CLIP and the tiny SAM checkpoint as a published file."""
    root = tmp_path_factory.mktemp("hub-models")
    inpaint = Repo.from_folder(save_tiny_sd(root, "inpaint"), COMMIT)
    inpaint.files["sd-inpainting-ema.ckpt"] = b"not for diffusers" * 100
    inpaint.files["unet/diffusion_pytorch_model.fp16.safetensors"] = b"half" * 400
    clip = Repo.from_folder(save_tiny_clip(root / "clip"), COMMIT)
    sam_type, sam_path = save_tiny_sam(root / "sam")
    # huggingface_hub writes what it received in 10 MB blocks: a break inside a file resumes from the last whole block
    big = Repo("big", {"config.json": b"{}", "model.safetensors": random.Random(0).randbytes(12 * 2**20)})
    big.commit, big.branches = COMMIT, {"main": COMMIT}
    repos = {INPAINT: inpaint, CLIP: clip, BIG: big}
    state = HubState(repos=repos, files={"sam_tiny.pth": sam_path.read_bytes()})
    with HubServer(state) as server:
        yield server, sam_type


def tiny_profile(folder, server, sam_type, revision=COMMIT, big=False):
    from perceptforge.configs.profile import load_profile

    sam_bytes = server.state.files["sam_tiny.pth"]
    profile = load_profile("local").model_dump(mode="json")
    profile |= {"name": "tiny-hub", "release_models_between_stages": False}
    profile["segmenter"] = {
        "backend": "sam",
        "checkpoint": f"{server.url}/files/sam_tiny.pth#sha256={hashlib.sha256(sam_bytes).hexdigest()}",
        "model_type": sam_type,
    }
    profile["inpainter"] = {
        "backend": "sd-inpaint",
        "model": f"{INPAINT}@{revision}",
        "steps": 2,
        "max_side": 64,
        "batch_size": 2,
    }
    profile["gates"] |= OPEN_GATES | {"min_phash_distance": 0, "min_inside_change": 0.0, "max_outside_change": 255.0}
    profile["gates"]["clip"] = {"model": f"{CLIP}@{revision}", "margin": -2.0}  # loaded and asked, never refusing
    if big:
        profile["embedder"] = {"backend": "transformers-embedding", "model_path": f"{BIG}@{revision}"}
    path = folder / f"tiny-{revision[:6]}.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def env_for(server, hf_home, cli_env, offline=False):
    env = dict(cli_env) | {"HF_ENDPOINT": server.url, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_XET": "1"}
    env["HF_HUB_OFFLINE"] = "1" if offline else "0"
    return env


def cli(args, env, timeout=300):
    return subprocess.run([*perceptforge_cmd(), *args], env=env, capture_output=True, text=True, timeout=timeout)


def boxes_only(sample_dir, tmp_path):
    """The sample photos annotated with boxes only (a user's folder): SAM draws every mask."""
    folder = tmp_path / "boxes-only"
    shutil.copytree(sample_dir, folder)
    coco = json.loads((folder / "annotations.json").read_text())
    for a in coco["annotations"]:
        a.pop("segmentation", None)
    (folder / "annotations.json").write_text(json.dumps(coco))
    return folder


def test_model_references_parse_as_users_write_them():
    ref = hub.parse_ref(f"org/name@{COMMIT}", "diffusers")
    assert (ref.where, ref.repo_id, ref.revision, ref.pinned) == ("hub", "org/name", COMMIT, True)
    assert hub.parse_ref("hf://org/name", "transformers").pinned is False  # the default branch: listed as unpinned
    digest = "a" * 64
    url = hub.parse_ref(f"https://example.org/x/sam.pth#sha256={digest}", "file")
    assert (url.where, url.filename, url.sha256) == ("url", "sam.pth", digest)
    assert hub.parse_ref("/abs/folder", "diffusers").where == "local"
    assert hub.parse_ref("~/models/sd", "diffusers").where == "local"
    with pytest.raises(hub.PerceptforgeError, match="needs its digest"):
        hub.parse_ref("https://example.org/sam.pth", "file")
    with pytest.raises(hub.PerceptforgeError, match="names one file"):
        hub.parse_ref("org/name", "file")


def test_a_profile_lists_each_model_field_once():
    from perceptforge.configs.profile import load_profile

    found = {m.where: (m.ref.where, m.ref.kind, m.ref.pinned) for m in hub.profile_models(load_profile("gpu"))}
    assert found == {
        "segmenter.checkpoint": ("url", "file", True),
        "inpainter[0].model": ("hub", "diffusers", True),
        "editor.model": ("hub", "diffusers", True),
        "depth.model_path": ("hub", "transformers", True),
        "generator.model": ("hub", "diffusers", True),
        "embedder.model_path": ("hub", "transformers", True),
        "gates.clip.model": ("hub", "transformers", True),
    }
    assert hub.profile_models(load_profile("local")) == []  # the embedded default needs no weights


def test_pull_then_an_offline_run_records_each_models_commit(
    prefect_api, sample_dir, served, tmp_path, cli_env, monkeypatch
):
    server, sam_type = served
    profile = tiny_profile(tmp_path, server, sam_type)
    hf_home = tmp_path / "hf"

    # Before the pull: the run stops in its plan, in one line that names the command.
    refused = cli(["run", "mvp", "--source", str(sample_dir), "--out", str(tmp_path / "early"), "--profile", str(profile)],
                  env_for(server, hf_home, cli_env, offline=True))  # fmt: skip
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"run `perceptforge models pull {profile}`" in refused.stderr
    listed = cli(["models", "list", str(profile)], env_for(server, hf_home, cli_env, offline=True))
    assert listed.returncode == 1 and "3 missing" in listed.stdout, listed.stdout

    pulled = cli(["models", "pull", str(profile)], env_for(server, hf_home, cli_env))
    assert pulled.returncode == 0, pulled.stderr[-3000:]
    assert f"{INPAINT}@{COMMIT}" in pulled.stdout and "sam_tiny.pth" in pulled.stdout
    snapshot = hf_home / "hub" / "models--tiny-org--sd-inpaint" / "snapshots" / COMMIT
    assert (snapshot / "unet" / "diffusion_pytorch_model.safetensors").is_file()
    assert not (snapshot / "sd-inpainting-ema.ckpt").exists()  # what the pipeline does not read stays on the hub
    assert not (snapshot / "unet" / "diffusion_pytorch_model.fp16.safetensors").exists()
    again = cli(["models", "list", str(profile)], env_for(server, hf_home, cli_env, offline=True))
    assert again.returncode == 0 and again.stdout.count("present") == 3, again.stdout

    # The run, as typed, offline (in this process: the tiny SAM's builder is the tests').
    from typer.testing import CliRunner

    from perceptforge.cli.main import app

    register_tiny_sam()
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    args = [
        "run",
        "mvp",
        "--source",
        str(boxes_only(sample_dir, tmp_path)),
        "--out",
        str(out),
        "--profile",
        str(profile),
    ]
    done = CliRunner().invoke(app, [*args, "--seed", "1", "--categories", ",".join(CATEGORIES)])
    assert done.exit_code == 0, done.output[-3000:]
    items = [json.loads(p.read_text()) for p in sorted((out / "items").glob("*.json"))]
    assert items, done.output
    for item in items:
        backends = item["lineage"]["backends"]
        assert backends["editor"]["model_id"] == f"{INPAINT}@{COMMIT}"
        assert backends["segmenter"]["model_id"].startswith(f"{sam_type}:sam_tiny.pth#sha256=")
    gates = [json.loads(p.read_text()) for p in sorted((out / "gates").glob("*.json"))]
    assert any("clip" in json.dumps(g) for g in gates)


def test_a_pull_resumes_a_broken_connection_and_a_killed_pull_keeps_what_it_finished(served, tmp_path, cli_env):
    """What huggingface_hub resumes, as a user meets it: a connection lost half way through a file is picked up at the
    byte it stopped (a Range request, same pull); a pull killed half way keeps every file it finished, and the next one
    fetches only the rest. (Since huggingface_hub 2, a killed process's partial file is not reused: it downloads to a
    file of its own per process.)"""
    server, sam_type = served
    profile = tiny_profile(tmp_path, server, sam_type, big=True)
    hf_home = tmp_path / "hf"
    env = env_for(server, hf_home, cli_env)
    weights = f"/{INPAINT}/resolve/{COMMIT}/unet/diffusion_pytorch_model.safetensors"
    big = f"/{BIG}/resolve/{COMMIT}/model.safetensors"
    size = len(server.state.repos[INPAINT].files["unet/diffusion_pytorch_model.safetensors"])
    assert size > 4 * 64 * 1024, size  # long enough to stop half way

    server.state.slow[weights] = 0.3
    server.state.sent.pop(weights, None)
    first = subprocess.Popen([*perceptforge_cmd(), "models", "pull", str(profile)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while server.state.sent.get(weights, 0) < 2 * 64 * 1024 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the small files, fetched beside it, are done by now
    os.killpg(first.pid, signal.SIGKILL)  # a closed laptop, a lost ssh session
    first.wait()
    assert 0 < server.state.sent[weights] < size
    half = cli(["models", "list", str(profile)], env_for(server, hf_home, cli_env, offline=True))
    assert half.returncode == 1 and "incomplete" in half.stdout, half.stdout  # a partial snapshot is not a model
    snapshot = hf_home / "hub" / "models--tiny-org--sd-inpaint" / "snapshots" / COMMIT
    finished = {p.relative_to(snapshot).as_posix() for p in snapshot.rglob("*") if p.is_file()}
    assert "model_index.json" in finished and "unet/diffusion_pytorch_model.safetensors" not in finished

    server.state.slow.pop(weights)
    server.state.drop[big] = 11 * 2**20
    server.state.log.clear()
    second = cli(["models", "pull", str(profile)], env)
    assert second.returncode == 0, second.stderr[-3000:]
    fetched = [(path, r) for method, path, r in server.state.log if method == "GET" and "/resolve/" in path]
    assert not any(path.endswith(tuple(finished)) for path, _ in fetched), fetched  # kept, not fetched again
    assert [r for path, r in fetched if path == weights] == [""]  # a killed pull's partial file is not reused
    assert [r for path, r in fetched if path == big] == ["", f"bytes={10 * 2**20}-"]  # broken, then resumed
    assert (
        hf_home / "hub" / "models--tiny-org--big-encoder" / "snapshots" / COMMIT / "model.safetensors"
    ).read_bytes() == (server.state.repos[BIG].files["model.safetensors"])
    got = (snapshot / "unet" / "diffusion_pytorch_model.safetensors").read_bytes()
    assert got == server.state.repos[INPAINT].files["unet/diffusion_pytorch_model.safetensors"]


def test_a_wrong_revision_is_refused_in_one_line(served, tmp_path, cli_env):
    server, sam_type = served
    profile = tiny_profile(tmp_path, server, sam_type, revision=OTHER)
    done = cli(["models", "pull", str(profile)], env_for(server, tmp_path / "hf", cli_env))
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"revision {OTHER} not found in {INPAINT}" in done.stderr
    offline = cli(["models", "pull", str(profile)], env_for(server, tmp_path / "hf", cli_env, offline=True))
    assert offline.returncode == 2 and "HF_HUB_OFFLINE is set" in offline.stderr


def test_a_published_file_resumes_and_is_checked_by_its_digest(served, tmp_path, monkeypatch):
    server, _ = served
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = server.state.files["sam_tiny.pth"]
    ref = hub.parse_ref(f"{server.url}/files/sam_tiny.pth#sha256={hashlib.sha256(data).hexdigest()}", "file")
    dest = hub.file_path(ref)
    dest.parent.mkdir(parents=True)
    dest.with_name(dest.name + ".incomplete").write_bytes(data[:1000])  # what a killed pull leaves
    server.state.log.clear()
    assert hub.pull(hub.plan_pull(ref)).path == dest and dest.read_bytes() == data
    assert ("GET", "/files/sam_tiny.pth", "bytes=1000-") in server.state.log
    bad = hub.parse_ref(f"{server.url}/files/sam_tiny.pth#sha256={'0' * 64}", "file")
    with pytest.raises(hub.PerceptforgeError, match="is not the expected 0000"):
        hub.pull(hub.plan_pull(bad))
    assert not hub.file_path(bad).exists() and not hub.file_path(bad).with_name("sam_tiny.pth.incomplete").exists()
