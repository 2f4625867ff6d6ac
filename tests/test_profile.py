import subprocess

import pytest
from helpers import perceptforge_cmd

from perceptforge.configs.profile import load_profile
from perceptforge.errors import InputError


def test_bundled_profiles_load():
    local = load_profile("local")
    assert local.backend_names() == {
        "grounder": "annotations",
        "segmenter": "selfie",
        "inpainter": "composite+recolour",
        "editor": "filters",
        "llm": "template",
        "depth": "none",
        "generator": "none",
        "embedder": "none",
    }
    gpu = load_profile("gpu")
    assert gpu.segmenter.backend == "sam" and [i.backend for i in gpu.inpainter] == ["sd-inpaint"]
    assert gpu.editor.backend == "instruct-pix2pix" and gpu.llm.backend == "openai"
    assert gpu.depth.backend == "transformers-depth" and gpu.generator.backend == "sd-text2image"
    assert gpu.embedder.backend == "transformers-embedding"


def test_typo_names_the_key(tmp_path):
    text = load_profile_text("local").replace("iterations: 5", "iteratons: 5")
    path = tmp_path / "typo.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_profile(path)
    assert str(exc.value) == f"{path}: segmenter.selfie.iteratons: unknown key"


def test_bad_value_and_bad_backend(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        load_profile_text("local")
        .replace("feather_px: 7", "feather_px: -3")
        .replace("backend: template", "backend: gpt")
    )
    with pytest.raises(InputError) as exc:
        load_profile(path)
    msg = str(exc.value)
    assert "inpainter.0.composite.feather_px: Input should be greater than or equal to 0" in msg  # a list
    assert "llm: Input tag 'gpt' found using 'backend' does not match" in msg


def test_one_inpainter_may_be_written_without_a_list(tmp_path):
    one = load_profile_text("gpu").replace("strength: 1.0", "strength: 3.0")
    path = tmp_path / "one.yaml"
    path.write_text(one)
    with pytest.raises(InputError) as exc:
        load_profile(path)
    assert "inpainter.sd-inpaint.strength: Input should be less than or equal to 1" in str(exc.value)
    assert [i.backend for i in load_profile("gpu").inpainter] == ["sd-inpaint"]


def test_secret_is_never_in_profile(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    gpu = load_profile("gpu")
    assert gpu.llm.api_key() == "sk-very-secret-123"
    assert "sk-very-secret" not in gpu.model_dump_json()


def test_cli_typo_is_one_line(tmp_path, cli_env):
    path = tmp_path / "typo.yaml"
    path.write_text(load_profile_text("local").replace("seed: 0", "sede: 0"))
    proc = subprocess.run(
        [*perceptforge_cmd(), "profile", "check", str(path)], capture_output=True, text=True, env=cli_env
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {path}: sede: unknown key"]


def load_profile_text(name: str) -> str:
    from perceptforge.configs.profile import resolve_profile_path

    return resolve_profile_path(name).read_text()
