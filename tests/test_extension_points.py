"""Each extension point, proved with an example kept outside the package: a backend in another importable
package selected from a profile, a scorer benchmark as one module, and `device: auto` without a GPU.
(A new category from one YAML file is in test_templates.py.) Plug-ins are found through real entry
points: the test writes a tiny distribution (package + .dist-info) onto PYTHONPATH."""

import json
import logging
import subprocess
import textwrap
from pathlib import Path

from helpers import perceptforge_cmd

BACKEND = '''
"""A segmenter that masks the box itself: a backend living outside perceptforge."""
from typing import Literal

import numpy as np

from perceptforge.backends.registry import BackendSettings, Runtime, register


class BoxFillSettings(BackendSettings):
    backend: Literal["boxfill"]
    margin: int = 0


@register("segmenter", "boxfill", BoxFillSettings)
class BoxFill:
    name, model_id = "boxfill", "boxfill-1"

    def __init__(self, margin):
        self.margin = margin

    @classmethod
    def from_settings(cls, settings, runtime: Runtime):
        return cls(settings.margin)

    def load(self):
        return self

    def box_mask(self, image, box):
        mask = np.zeros(image.shape[:2], bool)
        x0, y0, x1, y1 = (int(v) for v in box)
        mask[max(0, y0 - self.margin):y1 + self.margin, max(0, x0 - self.margin):x1 + self.margin] = True
        return mask

    def candidates(self, image, box):
        return [self.box_mask(image, box)]
'''

BENCHMARK = '''
"""Exact-match accuracy over {id, answer} records: a scorer benchmark as one module."""
import json

from perceptforge.scorer import metrics as m
from perceptforge.scorer.result import ScoredItem, ScoreResult, Table


def score(data, predictions, protocol="strict", judge=None):
    truth = {r["id"]: r["answer"] for p in data for r in json.loads(p.read_text())}
    said = {r["id"]: r["output"] for p in predictions for r in map(json.loads, p.read_text().splitlines())}
    result = ScoreResult("exact", protocol, {})
    for qid, answer in truth.items():
        out = said.get(qid)
        result.items.append(ScoredItem(qid, "all", out, out, "exact", out == answer))
    acc = 100.0 * sum(i.correct for i in result.items) / len(truth)
    result.metrics["accuracy"] = acc
    result.tables.append(Table("exact", ["group", "accuracy"], [["all", acc]]))
    return result
'''


def distribution(root: Path, entry_points: str, modules: dict[str, str]) -> Path:
    package = root / "pf_ext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, text in modules.items():
        (package / f"{name}.py").write_text(text)
    info = root / "pf_ext-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pf-ext\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return root


def test_a_backend_in_another_package_is_selected_from_a_profile(tmp_path, sample_dir, cli_env):
    ext = distribution(tmp_path / "ext", "[perceptforge.backends]\nboxfill = pf_ext.boxfill\n", {"boxfill": BACKEND})
    profile = tmp_path / "mine.yaml"
    local = (Path(__file__).resolve().parents[1] / "configs" / "local.yaml").read_text()
    profile.write_text(
        local.replace(
            "backend: selfie\n  threshold: 0.5\n  iterations: 5\n  max_side: 512", "backend: boxfill\n  margin: 2"
        )
    )
    env = dict(cli_env, PYTHONPATH=str(ext))
    check = subprocess.run(
        [*perceptforge_cmd(), "profile", "check", str(profile)], capture_output=True, text=True, env=env
    )
    assert check.returncode == 0 and "segmenter=boxfill" in check.stdout, check.stderr
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            *perceptforge_cmd(),
            "run",
            "mvp",
            "--source",
            str(sample_dir),
            "--profile",
            str(profile),
            "--out",
            str(out),
            "--categories",
            "I1",
            "--limit",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    item = json.loads(next((out / "items").glob("*.json")).read_text())
    assert item["lineage"]["backends"]["segmenter"] == {"name": "boxfill", "model_id": "boxfill-1"}
    # without the plug-in the same profile names the backends it may use
    bad = subprocess.run(
        [*perceptforge_cmd(), "profile", "check", str(profile)], capture_output=True, text=True, env=cli_env
    )
    assert bad.returncode == 2 and "segmenter: Input tag 'boxfill'" in bad.stderr


def test_a_scorer_benchmark_is_one_module(tmp_path, cli_env):
    ext = distribution(tmp_path / "ext", "[perceptforge.benchmarks]\nexact = pf_ext.exact\n", {"exact": BENCHMARK})
    data, preds = tmp_path / "data.json", tmp_path / "preds.jsonl"
    data.write_text(json.dumps([{"id": "1", "answer": "cat"}, {"id": "2", "answer": "dog"}]))
    preds.write_text('{"id": "1", "output": "cat"}\n{"id": "2", "output": "cow"}\n')
    env = dict(cli_env, PYTHONPATH=str(ext))
    help_text = subprocess.run([*perceptforge_cmd(), "score", "--help"], capture_output=True, text=True, env=env).stdout
    assert "exact" in help_text
    proc = subprocess.run(
        [
            *perceptforge_cmd(),
            "score",
            "exact",
            "--data",
            str(data),
            "--predictions",
            str(preds),
            "--json",
            str(tmp_path / "m.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())["accuracy"] == 50.0


def test_device_auto_without_a_gpu_runs_on_the_cpu_with_a_warning(tmp_path, caplog):
    import torch

    from perceptforge.configs.profile import load_profile

    if torch.cuda.is_available():
        import pytest

        pytest.skip("a GPU is present")
    path = tmp_path / "auto.yaml"
    path.write_text(
        (Path(__file__).resolve().parents[1] / "configs" / "local.yaml")
        .read_text()
        .replace("device: cpu", "device: auto")
    )
    prof = load_profile(path)
    with caplog.at_level(logging.WARNING, logger="perceptforge"):
        runtime = prof.runtime()
        segmenter = prof.build("segmenter", runtime)
    assert runtime.device == "cpu" and "device auto requested but no GPU is available" in caplog.text
    assert segmenter.name == "selfie"
