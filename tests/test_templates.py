import json
import re
import subprocess

import numpy as np
import pytest
from helpers import candidate_for, perceptforge_cmd

from perceptforge.backends.writers import TemplateWriter
from perceptforge.errors import InputError
from perceptforge.logic.questions import high_options
from perceptforge.logic.templates import check, discover, option_clashes, scaffold, templates
from perceptforge.store.sources import grounding_from_entry, read_source_dir

PAPER_EDIT_KINDS = {"background_substitution": {"B1", "R1", "S1"}, "direct_alteration": {"E2", "S2"}}


def test_thirteen_templates_with_the_paper_edit_kinds():
    found = templates()
    assert list(found) == ["B1", "B2", "B3", "B4", "E1", "E2", "I1", "I2", "R1", "R2", "R3", "S1", "S2"]
    for kind, ids in PAPER_EDIT_KINDS.items():
        assert {t.id for t in found.values() if t.edit_kind.value == kind} == ids
    assert {t.high for t in found.values()} == {"behaviour", "role", "identity", "emotion", "scenario"}
    descriptions = {t.cross_description for t in found.values()}
    assert (
        len(descriptions) == 12 and "Change the appearence of the main subject." in descriptions
    )  # the release's wording, sic
    assert all(check(t) == [] for t in found.values())


def test_cli_check_passes(cli_env):
    proc = subprocess.run([*perceptforge_cmd(), "templates", "check"], capture_output=True, text=True, env=cli_env)
    assert proc.returncode == 0, proc.stderr
    assert "13 templates ok" in proc.stdout


def test_new_category_from_scaffold_needs_no_code(tmp_path, monkeypatch, sample_dir, cli_env):
    folder = tmp_path / "mine"
    folder.mkdir()
    proc = subprocess.run(
        [*perceptforge_cmd(), "templates", "new", "B5", "--name", "Behaviour-Tool Use", "--out", str(folder)],
        capture_output=True,
        text=True,
        env=cli_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert (folder / "B5.yaml").read_text() == scaffold("B5", "Behaviour-Tool Use")
    monkeypatch.setenv("PERCEPTFORGE_TEMPLATES", str(folder))
    found = templates()
    assert "B5" in found and found["B5"].name == "Behaviour-Tool Use" and check(found["B5"]) == []
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("cameraman.png"))
    record = candidate_for(found["B5"], grounding_from_entry(entry), "a" * 64, TemplateWriter(), found, seed=0)
    assert record["category"]["low"] == "B5" and len(record["questions"]) == 5
    assert record["questions"][0]["question"]["question"].startswith("Is the man holding ")
    env = dict(cli_env, PERCEPTFORGE_TEMPLATES=str(folder))
    listed = subprocess.run([*perceptforge_cmd(), "templates", "check"], capture_output=True, text=True, env=env)
    assert "14 templates ok" in listed.stdout


def test_bad_and_duplicate_templates_are_named(tmp_path, monkeypatch):
    (tmp_path / "X1.yaml").write_text(
        scaffold("X1", "X").replace("edit_kind: partial_substitution", "edit_kind: repaint")
    )
    monkeypatch.setenv("PERCEPTFORGE_TEMPLATES", str(tmp_path))
    with pytest.raises(InputError, match=r"X1.yaml: edit_kind: Input should be"):
        discover()
    (tmp_path / "X1.yaml").write_text(scaffold("B1", "copy of B1"))
    with pytest.raises(InputError, match=r"template id B1 is already defined in .*B1.yaml"):
        discover()


def test_no_cross_image_high_question_has_two_defensible_options():
    """Issue 41: S1's "Which aspect of the man has been altered?" (a new background) offered scenario and behaviour,
    and B1 calls a new background a change of behaviour. Of each question's options, the only high level that a
    category making the same change claims is the question's own answer."""
    found = templates()
    for t in (t for t in found.values() if t.cross_high):
        same_change = {o.high for o in found.values() if o.attribute == t.attribute}
        assert same_change & set(high_options(t.cross_high_exclude)) == {t.high}, t.id
    assert high_options(found["S1"].cross_high_exclude) == ["identity", "emotion", "scenario", "role"]
    assert option_clashes(found) == []
    was = found | {"S1": found["S1"].model_copy(update={"cross_high_exclude": []})}  # S1 as the issue found it
    assert option_clashes(was) == [
        (
            ("S1", "B1"),
            "template S1's cross-image high-level options hold both 'scenario' and 'behaviour', and template B1 calls "
            "the same change (background) 'behaviour': add 'behaviour' to S1's cross_high_exclude",
        )
    ]


def test_a_category_whose_options_clash_with_another_is_refused_at_load(tmp_path, monkeypatch):
    """A new category that calls a held object's change a role, beside B3 (a held object: behaviour): either
    question would have two right answers. The error names the new file, not the bundled one."""
    (tmp_path / "X1.yaml").write_text(scaffold("X1", "X").replace("high: behaviour ", "high: role      "))
    monkeypatch.setenv("PERCEPTFORGE_TEMPLATES", str(tmp_path))
    with pytest.raises(InputError, match=r"X1.yaml: template B3's cross-image high-level options hold both "):
        discover()
    (tmp_path / "X1.yaml").write_text(scaffold("X1", "X"))  # held object: behaviour, as B3 says
    assert "X1" in discover()


def test_a_photo_filters_cross_image_options_hold_one_right_answer(tmp_path, monkeypatch, sample_dir):
    """A photo turned into a cartoon (S2): "Substitute the main subject with virtual character" (R3) and "Change the
    appearence of the main subject" (I1) were second answers a careful annotator could defend, and identity beside
    scenario; S2 leaves them out, whatever the seed. A template id nobody defines is an error naming the file."""
    found = templates()
    s2 = found["S2"]
    assert s2.cross_low_exclude == ["R3", "I1"] and "identity" not in high_options(s2.cross_high_exclude)
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    barred = {found["R3"].cross_description, found["I1"].cross_description}
    for seed in range(8):
        candidate = candidate_for(s2, grounding_from_entry(entry), "a" * 64, TemplateWriter(), found, seed)
        crosses = [q["question"] for q in candidate["questions"] if q["question"]["kind"] == "cross_mcq"]
        assert crosses and all(not barred & set(c["options"]) and "identity" not in c["options"] for c in crosses)
    (tmp_path / "X1.yaml").write_text(scaffold("X1", "X") + "cross_low_exclude: [Z9]\n")
    monkeypatch.setenv("PERCEPTFORGE_TEMPLATES", str(tmp_path))
    with pytest.raises(InputError, match=r"X1.yaml: cross_low_exclude names 'Z9', which is no template's id"):
        discover()


@pytest.mark.parametrize("template_id", ["B1", "B2", "B3", "B4", "E1", "E2", "I1", "I2", "R1", "R2", "R3", "S1", "S2"])
def test_template_writer_gives_every_kind_for_every_category(template_id, sample_dir):
    found = templates()
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    record = candidate_for(found[template_id], grounding_from_entry(entry), "a" * 64, TemplateWriter(), found, seed=3)
    kinds = [(q["question"]["kind"], q["question"].get("level")) for q in record["questions"]]
    # the single-image MCQ asks for the low-level value; I1's and S2's high-level Yes/No (is this hair dyed? does
    # it look historical?) is asked only of a source that annotates it (the astronaut's file does not); B1 asks
    # no "which aspect has been altered?"
    high_pair = [("yes_no_pair", "high")] if found[template_id].natural_high == "inferred" else []
    idea = record["idea"]
    # and a hair colour none (dyed hair does not change who someone is)
    cross_high = [("cross_mcq", "high")] if found[template_id].asks_cross_high(idea["new"]) else []
    assert kinds == [("yes_no_pair", "low"), *high_pair, ("single_mcq", "low"), ("cross_mcq", "low"), *cross_high]
    assert found[template_id].cross_high == (template_id != "B1")
    assert idea["old"] != idea["new"] and idea["new"] in record["questions"][0]["question"]["question"]
    mcq = next(q["question"] for q in record["questions"] if q["question"]["kind"] == "single_mcq")
    assert mcq["options"]["ABCDE".index(mcq["answer"])] == idea["new"] and idea["old"] in mcq["options"]
    assert len({q["id"] for q in record["questions"]}) == len(kinds)
    assert (
        record["lineage"]["template_id"] == template_id and record["lineage"]["backends"]["llm"]["name"] == "template"
    )
    again = candidate_for(found[template_id], grounding_from_entry(entry), "a" * 64, TemplateWriter(), found, seed=3)
    assert json.dumps(again, sort_keys=True) == json.dumps(record, sort_keys=True)
    if found[template_id].edit_kind.value == "direct_alteration":
        said = "Turn this image from" if found[template_id].target == "whole" else "Change the woman's"
        assert record["instruction"] == f"{said} {idea['old']} into {idea['new']}."


def test_unit_rng_is_independent_of_order():
    from perceptforge.logic.ids import unit_rng

    assert unit_rng(0, "1-B1").integers(0, 1000) == unit_rng(0, "1-B1").integers(0, 1000)
    assert np.array_equal(unit_rng(0, "1-B1").random(3), unit_rng(0, "1-B1").random(3))
    assert not np.array_equal(unit_rng(0, "1-B1").random(3), unit_rng(1, "1-B1").random(3))


# The release's cross-image wordings (MVP-Bench mcq_questions.json, every cross-image MCQ option), byte
# for byte, typos included: the official scorer matches them.
RELEASE_CROSS_WORDINGS = {
    "Substitute the background.",
    "Replace the content in the paper or sign.",
    "Introduce a group of people.",
    "Substitute the main subject with celebrities.",
    "Change the appearence of the main subject.",
    "Alter the main subject's movement.",
    "Change the main subject's clothes.",
    "Change the main subject's facial expression.",
    "Change the main subject's gesture.",
    "Change aesthetic features (including style and lightness).",
    "Replace the object held by the main subject.",
    "Substitute the main subject with virtual character.",
}
PRONOUNS = re.compile(r"\b(he|she|his|her|hers|him|they|them|their|theirs)\b", re.I)
BAD_ARTICLE = re.compile(r"\ba [aeiou]|\ban [^aeiou\W]|\b(a|an|the) (a|an|the)\b", re.I)
# High-level values may not infer character, crime or a social group from how someone looks.
STEREOTYPES = re.compile(
    r"gang|criminal|crime|thie|robb|terror|prison|punk|monk|riot|threat|attack|trespass|trial|\bfighter|alcohol|"
    r"dangerous|violent|suspect|illegal|poor|rich|religio",
    re.I,
)


def test_cross_wordings_are_the_releases_byte_for_byte():
    assert {t.cross_description for t in templates().values()} == RELEASE_CROSS_WORDINGS


@pytest.mark.parametrize("subject", ["woman", "man"])
def test_every_question_of_every_template_with_every_value_is_sound(subject, sample_dir):
    """Renders each template's questions with each of its values for a woman and a man: wording, grammar,
    no pronouns to get wrong, no stereotyping high level, and single-image options that are all values of
    the question's own attribute."""
    from perceptforge.data.schema import Idea, IdeaRecord
    from perceptforge.logic.renderings import from_alternatives
    from perceptforge.tasks.questions import make_candidate

    found = templates()
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    grounding = grounding_from_entry(entry)
    grounding = grounding.model_copy(update={"subject": grounding.subject.model_copy(update={"label": subject})})
    writer, descriptions = TemplateWriter(), {tid: t.cross_description for tid, t in found.items()}
    checked = 0
    for template in found.values():
        old = grounding.attributes[template.attribute]
        attribute_values = {a.value for a in template.writer.alternatives} | {old}
        for rendering in from_alternatives(template, "sd-inpaint"):
            assert not STEREOTYPES.search(rendering.high), f"{template.id}: {rendering.high!r}"
            idea = Idea(
                category=template.id,
                subject=subject,
                attribute=template.attribute,
                old=old,
                new=rendering.value,
                new_caption="c",
                high_level_value=rendering.high,
                rendering=rendering,
            )
            record = IdeaRecord(unit=f"1-{template.id}", idea=idea)
            candidate = make_candidate(template, grounding, "a" * 64, record, writer, descriptions, seed=0)
            for entry_ in candidate.questions:
                q = entry_.question
                text = q.question
                where = f"{template.id} / {rendering.value!r}: {text!r}"
                assert text.endswith("?") and text[0].isupper() and "  " not in text, where
                if q.kind != "cross_mcq":  # the release's fixed wordings are kept as they are
                    assert not PRONOUNS.search(text) and not BAD_ARTICLE.search(text), where
                if q.kind == "single_mcq":
                    assert set(q.options) <= attribute_values and len(set(q.options)) == 5, where
                    assert q.answer_text == rendering.value, where
                if q.kind == "yes_no_pair":
                    wanted = rendering.value if q.level == "low" else rendering.high
                    assert wanted in text, where
                checked += 1
    # I1: no "is it dyed?"; B1 and I1's hair colours: no cross-image high-level MCQ
    asked = sum(
        3 + (t.natural_high == "inferred") + t.asks_cross_high(a.value)
        for t in found.values()
        for a in t.writer.alternatives
    )
    assert checked == asked


def test_a_high_level_yes_no_the_photo_cannot_show_is_asked_only_where_annotated(sample_dir):
    found = templates()
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    grounding = grounding_from_entry(entry)
    told = grounding.model_copy(
        update={"attributes": {**grounding.attributes, "physical_feature_high": "natural hair"}}
    )
    record = candidate_for(found["I1"], told, "a" * 64, TemplateWriter(), found, seed=3)
    levels = [(q["question"]["kind"], q["question"].get("level")) for q in record["questions"]]
    # the local profile's I1 values are hair colours: no "which aspect … altered?" → identity for them
    assert ("yes_no_pair", "high") in levels and len(levels) == 4 and ("cross_mcq", "high") not in levels
