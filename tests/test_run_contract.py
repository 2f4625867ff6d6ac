"""The run contract: every family runs through `perceptforge run <family>` with the same options and the same
behaviour: the profile's runner and annotation file are honoured, a run directory holding another run is one
line unless --fresh, a bad input is one line with no traceback, and deployments take the same path."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from authored_sources import big_photo_source
from helpers import perceptforge_cmd

from perceptforge.flows.registry import families

REPO = Path(__file__).resolve().parents[1]
# each family's cheapest real run: a selection and a limit that still build something
CHEAP = {
    "mvp": ["--categories", "I1", "--limit", "1"],
    "blink": ["--tasks", "jigsaw", "--limit", "2"],
    "codis": ["--limit", "2"],
    "mme-realworld": [],
}


def relabelled(source: Path, dest: Path) -> Path:
    """The source folder with its annotation file renamed, as a profile's ``grounder.file`` may name it."""
    shutil.copytree(source, dest)
    (dest / "annotations.json").rename(dest / "labels.json")
    return dest


def profile(tmp_path: Path) -> Path:
    doc = yaml.safe_load((REPO / "configs" / "local.yaml").read_text())
    doc["name"] = "contract"
    doc["grounder"]["file"] = "labels.json"
    doc["runner"] = {"kind": "threads", "max_workers": 3}
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*perceptforge_cmd(), *args], capture_output=True, text=True, env=env, timeout=600)


def one_line_error(proc: subprocess.CompletedProcess, says: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_every_built_in_family_is_registered():
    assert set(CHEAP) <= set(families())


@pytest.fixture
def shared_api_env(prefect_api, cli_env) -> dict:
    """The CLI pointed at the session's Prefect API: one server for every run here, not one per command."""
    from prefect.settings import PREFECT_API_URL

    return cli_env | {"PREFECT_API_URL": str(PREFECT_API_URL.value())}


@pytest.mark.parametrize("name", sorted(CHEAP))
def test_every_family_runs_the_same_way(name, tmp_path, sample_dir, shared_api_env):
    cli_env = shared_api_env
    source = big_photo_source(tmp_path / "big") if name == "mme-realworld" else sample_dir
    source = relabelled(source, tmp_path / "src")
    prof, out = profile(tmp_path), tmp_path / "run"
    args = ["run", name, "--source", str(source), "--out", str(out), "--profile", str(prof), *CHEAP[name]]

    first = cli(cli_env, *args, "--seed", "0")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    # the profile reached the flow: its runner (read from the flow run's own task runner) and its annotation file
    assert summary["runner"]["kind"] == "ThreadPoolTaskRunner" and summary["runner"]["max_workers"] == 3
    assert summary["flow"] == name and summary["counts"]["sources"] >= 1
    assert yaml.safe_load((out / "profile.yaml").read_text())["runner"]["max_workers"] == 3
    assert json.loads((out / "run.json").read_text())["flow"] == name
    # --fresh removes what a run writes, by name: every entry this run wrote must be one of those names
    from perceptforge.flows.common import RUN_LAYOUT
    from perceptforge.flows.registry import family

    written = {p.name for p in out.iterdir()}
    assert written <= RUN_LAYOUT | set(family(name).run_folders), written - RUN_LAYOUT

    # another seed into the same directory: one line, unless --fresh
    one_line_error(cli(cli_env, *args, "--seed", "1"), "holds another run (seed 0 → 1)")
    again = cli(cli_env, *args, "--seed", "1", "--fresh")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert json.loads((out / "summary.json").read_text())["seed"] == 1
    assert {p.name for p in out.iterdir()} <= RUN_LAYOUT | set(family(name).run_folders)  # nothing stale kept

    # bad inputs: each one line, no traceback, before any flow starts
    one_line_error(cli(cli_env, *args[:3], str(tmp_path / "nowhere"), *args[4:]), "nowhere")
    one_line_error(cli(cli_env, *args, "--runner", "slurm", "--fresh"), "unknown runner 'slurm'")
    (source / "labels.json").write_text('{"images": [')
    one_line_error(cli(cli_env, *args, "--fresh"), "labels.json:1: invalid JSON")


def test_a_deployment_takes_the_same_path_and_honours_the_profile(prefect_api, tmp_path, sample_dir):
    from perceptforge.flows.family import RunRequest
    from perceptforge.flows.run import deployed_run

    source = relabelled(sample_dir, tmp_path / "src")
    request = RunRequest(source=str(source), out=str(tmp_path / "run"), profile=str(profile(tmp_path)), limit=2)
    summary = deployed_run(family="codis", request=request)
    assert summary["flow"] == "codis" and summary["counts"]["drafts"] >= 1
    assert summary["runner"] == {
        "kind": "ThreadPoolTaskRunner",
        "max_workers": 3,
        "cluster_kwargs": None,
        "address": None,
    }


def test_no_family_name_is_compared_outside_the_families_own_modules():
    """A family's name is data (run.json's flow, the registry's key), never a branch in shared code."""
    import re

    names = "|".join(re.escape(n) for n in sorted({*CHEAP, "mme_realworld"}))
    compared = re.compile(
        rf"""(==|!=)\s*["']({names})["']|["']({names})["']\s*(==|!=)|\bin\s*[(\[{{][^)\]}}]*["']({names})["']"""
    )
    own = {f"flows/{m}.py" for m in ("mvp", "blink", "codis", "mme_realworld", "authored", "registry")}
    found = []
    for path in sorted(REPO.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(("tests/", "build/", ".venv")) or rel in own or "/." in rel:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if compared.search(line) or re.search(r"""\[["']flow["']\]|get\(["']flow["']\)""", line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_command_line_loads_no_engine_to_list_the_families():
    """Families declare themselves cheaply: `perceptforge --help` imports neither Prefect nor torch."""
    code = "import sys, perceptforge.cli.main; print(sorted({'prefect', 'torch'} & set(sys.modules)))"
    proc = subprocess.run([perceptforge_cmd()[0], "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def run_files(run: Path) -> dict[str, bytes]:
    """What a run decides: its identity, settings, every record and image (not its timings or report)."""
    kept = ("run.json", "profile.yaml", "sources.jsonl")
    folders = ("groundings", "ideas", "candidates", "masks", "edits", "gates", "items", "images")
    return {
        p.relative_to(run).as_posix(): p.read_bytes()
        for p in sorted(run.rglob("*"))
        if p.is_file() and (p.name in kept or p.relative_to(run).parts[0] in folders)
    }


def test_a_deployment_and_the_command_line_build_byte_identical_runs(prefect_api, sample_dir, tmp_path, cli_env):
    """One request, the same fields with the same meaning: `perceptforge run` and the deployment's flow."""
    from perceptforge.flows.family import RunRequest
    from perceptforge.flows.run import deployed_run

    by_cli, by_deployment = tmp_path / "cli", tmp_path / "deployment"
    args = ["--source", str(sample_dir), "--limit", "1", "--categories", "S2", "--seed", "3"]
    done = cli(cli_env, "run", "mvp", *args, "--out", str(by_cli))
    assert done.returncode == 0, done.stderr[-3000:]
    request = RunRequest(source=str(sample_dir), out=str(by_deployment), limit=1, select=["S2"], seed=3)
    deployed_run(family="mvp", request=request)
    built = run_files(by_cli)
    assert any(k.startswith("items/") for k in built) and built == run_files(by_deployment)


def test_a_run_is_planned_once(prefect_api, sample_dir, tmp_path, monkeypatch):
    from perceptforge.flows.mvp import MvpFamily
    from perceptforge.flows.run import run

    plans = []
    plan = MvpFamily.plan
    monkeypatch.setattr(MvpFamily, "plan", lambda self, request: plans.append(request) or plan(self, request))
    run("mvp", sample_dir, tmp_path / "run", limit=1, categories=["S2"], seed=3)
    assert len(plans) == 1  # the flow takes the plan run_family made, not a second one
