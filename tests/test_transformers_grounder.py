"""The transformers grounder on a tiny random LLaVA that the test builds and saves: real loader, real generate()."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from PIL import Image  # noqa: E402
from tiny_models import ForceText, save_tiny_llava  # noqa: E402

from perceptforge.backends.grounders import TransformersGrounder  # noqa: E402
from perceptforge.errors import PerceptforgeError  # noqa: E402
from perceptforge.logic.templates import templates  # noqa: E402
from perceptforge.store.sources import read_source_dir  # noqa: E402


def test_tiny_llava_grounding_through_from_pretrained(tmp_path, sample_dir):
    folder = save_tiny_llava(tmp_path / "tiny-llava")
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    image = Image.open(sample_dir / entry.file_name).convert("RGB")
    grounder = TransformersGrounder(str(folder), max_new_tokens=64).load()
    forced = ForceText(grounder.processor.tokenizer, "### woman ### [0.125,0.250,0.500,1.000] ###")
    grounder.generate_kwargs = {"logits_processor": [forced]}
    g = grounder.ground(image, entry, [templates()["B1"]])
    assert g.subject.label == "woman" and g.subject.box.xyxy == (64.0, 128.0, 256.0, 512.0)
    assert g.backend == "transformers" and g.model_id == str(folder)


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(PerceptforgeError, match="transformers grounder model folder not found"):
        TransformersGrounder(str(tmp_path / "nope")).load()
