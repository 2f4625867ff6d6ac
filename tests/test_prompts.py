import json
import os
from pathlib import Path

import pytest

from perceptforge.errors import PerceptforgeError
from perceptforge.prompts import library
from perceptforge.prompts.library import available, load_prompt


def test_prompt_files_are_discovered_with_versions():
    ids = set(available())
    assert {
        "predict/mme_realworld",
        "predict/codis_di_cot",
        "predict/mcq",
        "predict/yes_no",
        "judge/codis",
        "judge/choice",
    } <= ids


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


SNAPSHOT = Path(__file__).parent / "snapshots" / "prompts.json"


def test_prompt_snapshots():
    """Every prompt file's hash is pinned: a change must be deliberate (bump the version, then
    regenerate with UPDATE_SNAPSHOTS=1)."""
    # the bundled prompts only: a prompt root another test registered in this process is not ours to pin
    bundled = library._bundled()
    current = {pid: {str(v): load_prompt(pid, v).sha256 for v in sorted(vs)} for pid, vs in sorted(bundled.items())}
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    assert current == json.loads(SNAPSHOT.read_text())


APPENDIX_D = {
    ("grounding/caption", ()): "Describe the image in detail. Include the boxes of the items you reference.",
    ("grounding/behaviour", ("main_subject",)): "Briefly describe the behaviour of woman.",
    ("grounding/background", ()): "Briefly describe the background of the image.",
    (
        "grounding/held_object",
        ("main_subject",),
    ): "What is the object held by woman? Include the boxes of the items you reference.",
    ("grounding/emotion", ("main_subject",)): "Briefly describe the emotion of woman.",
    (
        "grounding/facial_expression",
        ("main_subject",),
    ): "What is the facial expression of woman? Include the boxes of the items you reference.",
}


def test_appendix_d_prompts_are_reproduced():
    for (pid, keys), expected in APPENDIX_D.items():
        assert load_prompt(pid).render(**{k: "woman" for k in keys}) == expected
    subject = load_prompt("idea/extract_subject").render(original_caption="A woman [0.1,0.1,0.5,0.9].")
    assert subject == (
        "I have a caption of an image. For some subjects, their coordinates are appended in ‘[]’. Help me extract the main "
        "subject and its coordinates. Format your answer as ‘### main subject ### [coordinates] ###’.\nCaption: A woman [0.1,0.1,0.5,0.9]."
    )
    idea = load_prompt("idea/background_substitution").render(
        main_subject="man", original_caption="C", original_behaviour="filming", original_background="a field"
    )
    assert idea.startswith(
        "I have an image and need help generating an idea to manipulate it. Change the man to engage in a "
        "completely different and potentially malicious behavior by altering the background."
    )
    assert idea.endswith("Original Caption: C\nOriginal Behaviour: filming\nOriginal Background: a field")
    facial = load_prompt("questions/yes_no_facial").render(
        original_caption="A", new_caption="B", original_facial="smiling", new_facial="crying"
    )
    assert facial.endswith(
        "Manipulation: The object is changed from smiling to crying."
    )  # sic, as printed in the paper
    assert (
        load_prompt("editing/instruction").render(main_subject="woman", old="smile", new="frown")
        == "Change the woman's smile into frown."
    )


def test_no_prompt_text_in_python():
    """Prompt wording lives in prompts/ and templates; Python only names prompt ids."""
    root = Path(__file__).resolve().parents[1]
    phrases = [
        "Describe the image in detail",
        "need help generating an idea",
        "Select the best answer",
        "Please evaluate the output",
    ]
    for path in root.rglob("*.py"):
        if "tests" in path.parts or ".venv" in str(path):
            continue
        text = path.read_text()
        assert not any(p in text for p in phrases), path


def test_extra_prompt_roots_are_seen_when_added_and_may_not_redefine_a_prompt(tmp_path, monkeypatch):
    from perceptforge.prompts import library

    monkeypatch.setattr(library, "_registered", [])
    monkeypatch.delenv(library.ENV, raising=False)
    bundled = {pid: sorted(vs) for pid, vs in available().items()}  # the bundled root is scanned (and cached) first
    with pytest.raises(PerceptforgeError, match="unknown prompt 'ext/hello'"):
        load_prompt("ext/hello")
    mine = tmp_path / "mine"
    (mine / "ext").mkdir(parents=True)
    (mine / "ext" / "hello.v2.txt").write_text("Hello {name}.\n")
    library.register_prompt_root(mine)
    hello = load_prompt("ext/hello")
    assert (hello.version, hello.render(name="you")) == (2, "Hello you.")
    theirs = tmp_path / "theirs"
    (theirs / "ext").mkdir(parents=True)
    (theirs / "ext" / "bye.v1.txt").write_text("Bye.\n")
    monkeypatch.setenv(library.ENV, str(theirs))
    assert load_prompt("ext/bye").text == "Bye."
    assert {pid: sorted(vs) for pid, vs in available().items() if pid not in ("ext/hello", "ext/bye")} == bundled
    (theirs / "predict").mkdir()
    (theirs / "predict" / "mcq.v1.txt").write_text("another mcq\n")
    library._scan.cache_clear()
    with pytest.raises(
        PerceptforgeError, match=r"mcq.v1.txt: prompt predict/mcq v1 is already defined in .*mcq.v1.txt"
    ):
        load_prompt("predict/mcq")
    monkeypatch.setenv(library.ENV, str(tmp_path / "nowhere"))
    with pytest.raises(PerceptforgeError, match="nowhere: prompt folder not found"):
        load_prompt("predict/mcq")


def test_a_prompt_folder_that_outranks_a_bundled_prompt_is_said_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(library, "_registered", [])
    monkeypatch.setattr(library, "_told", set())
    ours = tmp_path / "ours"
    (ours / "predict").mkdir(parents=True)
    (ours / "predict" / "mcq.v9.txt").write_text("Pick one.\n")
    monkeypatch.setenv(library.ENV, str(ours))
    with caplog.at_level("WARNING", logger="perceptforge"):
        assert load_prompt("predict/mcq").version == 9
        load_prompt("predict/mcq")
    said = [r.getMessage() for r in caplog.records if "outranks the bundled" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{ours / 'predict' / 'mcq.v9.txt'}: prompt predict/mcq v9 outranks")
