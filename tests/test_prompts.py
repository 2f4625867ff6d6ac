import pytest
from perceptforge.errors import PerceptforgeError
from perceptforge.prompts.library import available, load_prompt


def test_prompt_files_are_discovered_with_versions():
    ids = set(available())
    assert {"predict/mme_realworld", "predict/codis_di_cot", "predict/mcq", "predict/yes_no", "judge/codis", "judge/choice"} <= ids


def test_mme_realworld_table1_prompt_snapshot():
    p = load_prompt("predict/mme_realworld")
    assert p.version == 1 and p.placeholders == {"question", "choices"}
    assert p.render(question="What colour is the car?", choices="(A) red\n(B) blue") == (
        "What colour is the car?\nThe choices are listed below:\n(A) red\n(B) blue\n"
        "Select the best answer to the above multiple-choice question based on the image. "
        "Respond with only the letter (A, B, C, D, or E) of the correct option.\nThe best answer is:"
    )


def test_codis_judge_prompt_is_table12():
    p = load_prompt("judge/codis")
    text = p.render(question="Q?", groundtruth="G", output="O")
    assert text.startswith("Please evaluate the output of models based on the given question and groundtruth")
    assert text.endswith("Here is the question: Q? Here is the groundtruth: G Here is the output: O")


def test_placeholders_are_checked():
    p = load_prompt("predict/codis_di_cot")
    with pytest.raises(PerceptforgeError, match=r"missing placeholders \['question'\], unexpected \['questoin'\]"):
        p.render(context="c", questoin="q")
    with pytest.raises(PerceptforgeError, match="unknown prompt"):
        load_prompt("predict/nope")
    with pytest.raises(PerceptforgeError, match="has no version 9"):
        load_prompt("predict/mcq", version=9)
    assert len(p.sha256) == 64 and p.ref()["version"] == 1
