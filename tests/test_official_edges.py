"""Issue 45's edges of ``--protocol official``, each on a tiny fixture: what the official script does there
(BLINK ``eval/evaluate.py``, MVP-Bench ``evaluate.py``, CODIS ``data/eval.py``), and the readers' errors."""

import json

import pytest

from perceptforge.errors import InputError
from perceptforge.scorer.benchmarks import blink, codis, mvp_bench
from perceptforge.scorer.judge import Judge, mvp_official_reading, process_punctuation
from perceptforge.scorer.report import missing_line


class Client:
    """A chat client that records each prompt with its temperature and replies from a function of both."""

    model = "judge"

    def __init__(self, reply, temperature=0.0):
        self.reply, self.temperature, self.asked = reply, temperature, []

    def complete(self, text):
        self.asked.append((text, self.temperature))
        return self.reply(text, self.temperature)


# --- BLINK: an idx repeated across task files, read in evaluate.py's task order ------------------------------


def test_blink_official_keeps_the_repeat_its_task_order_reads_last(tmp_path):
    (tmp_path / "val_answers.json").write_text(json.dumps({"val_Counting_1": "(A)", "val_Jigsaw_1": "(B)"}))
    out = tmp_path / "out"
    out.mkdir()
    # evaluate.py reads Counting before Jigsaw (its subtasks list), though "Jigsaw" < "Counting" is false and
    # a name order would read Counting first too: Visual_Similarity comes first in its list, last by name
    rows = {
        "Counting": [{"idx": "val_Counting_1", "prediction": "(B)"}],
        "Visual Similarity": [{"idx": "val_Counting_1", "prediction": "(A)"}],
        "Jigsaw": [{"idx": "val_Jigsaw_1", "prediction": "(B)"}],
    }
    for task, val in rows.items():
        (out / f"{task}.json").write_text(json.dumps({"val": val}))
    files = sorted(out.iterdir())  # name order, as the CLI lists a folder: Counting, Jigsaw, Visual Similarity
    assert [blink.official_file_order(files)[k].stem for k in range(3)] == ["Visual Similarity", "Counting", "Jigsaw"]
    r = blink.score([tmp_path / "val_answers.json"], files, "official")
    # the script's dict ends with Counting's "(B)" (read after Visual_Similarity's "(A)"): wrong, where the
    # name order would have kept "(A)"
    assert {i.id: i.correct for i in r.items} == {"val_Counting_1": False, "val_Jigsaw_1": True}
    assert any("Counting.json[0]: id val_Counting_1 repeats" in w and "the last is kept" in w for w in r.warnings)


def test_blink_official_record_error_names_the_file_and_line(tmp_path):
    (tmp_path / "val_answers.json").write_text(json.dumps({"val_Counting_1": "(A)"}))
    (tmp_path / "Counting.json").write_text(json.dumps({"val": [{"idx": "val_Counting_1", "full_prediction": "A"}]}))
    with pytest.raises(InputError) as err:
        blink.score([tmp_path / "val_answers.json"], [tmp_path / "Counting.json"], "official")
    assert str(err.value).startswith(f"{tmp_path / 'Counting.json'}[0]") and "'prediction' field" in str(err.value)


# --- MVP-Bench: its judge, its 5 asks, its reply reading, the empty output ----------------------------------

MVP_PROMPT_END = "Example 5: \nQuestion: Is it red??\nAnswer: {}\nYour output: "


def _mvp(tmp_path, outputs, qid_type=int):
    data, preds = [], []
    for k, (side, answer) in enumerate((("s", "yes"), ("e", "no"))):
        data.append({"question_id": 1838 + k, "id": 7, "image": f"Single_Images/7_{side}.jpg",
                     "question": "Is it red?", "answer": answer, "type": f"y/n-{side}", "level": "low"})  # fmt: skip
    for k, out in enumerate(outputs):
        if out is not ...:
            preds.append({"question_id": qid_type(1838 + k), "output": out})
    (tmp_path / "all.json").write_text("".join(json.dumps(r) + "\n" for r in data))
    (tmp_path / "pred.jsonl").write_text("".join(json.dumps(r) + "\n" for r in preds))
    return [tmp_path / "all.json"], [tmp_path / "pred.jsonl"]


def test_mvp_official_judge_is_the_scripts_prompt_asked_five_times_keeping_the_last(tmp_path):
    # a judge that says "Yes" at temperature 0 and "Unknown" at 2.0: the script keeps the last ask's reading
    client = Client(lambda text, t: "Unknown" if t == 2.0 else "Yes")
    data, preds = _mvp(tmp_path, ["I think it is", "Maybe"])
    r = mvp_bench.score(data, preds, "official", judge=Judge(client, tmp_path / "cache"))
    asked = [(text, t) for text, t in client.asked]
    assert [t for _, t in asked] == [0.0, 0.5, 1.0, 1.5, 2.0] * 2
    first = asked[0][0]
    assert first.startswith("You are an AI assistant who will help me to match an answer with two options")
    assert first.endswith(MVP_PROMPT_END.format("I think it is"))  # "{}?" after a question ending in "?"
    assert [i.extracted for i in r.items] == [None, None] and [i.method for i in r.items] == ["judge", "judge"]


def test_mvp_official_sends_an_empty_output_to_the_judge(tmp_path):
    client = Client(lambda text, t: "Yes")
    data, preds = _mvp(tmp_path, ["", ""])
    r = mvp_bench.score(data, preds, "official", judge=Judge(client, tmp_path / "cache"))
    assert client.asked[0][0].endswith(MVP_PROMPT_END.format(""))
    assert r.metrics["yes_no"]["aAcc"] == 50.0  # "Yes" to both: right on the natural image only
    without = mvp_bench.score(data, preds, "official")
    assert without.metrics["needs_judge"] == 2


@pytest.mark.parametrize(
    ("reply", "reading"),
    [
        ("Yes", "yes"), ("No.", "no"), ("I think yes", "yes"), ("Yes, no doubt.", None), ("Answer: Yes", "yes"),
        ("yes/no", None), ("Unknown", None), ("YES!", "yes"), ("No-one knows", "no"), ("not sure", None),
        ("Yes.No", None), ("No, it is not.", "no"),
    ],
)  # fmt: skip
def test_mvp_official_reads_the_judges_reply_as_the_script_does(reply, reading):
    # the readings are what evaluate.py's extract_yn returns for these replies (run on them, at 89cc622)
    assert mvp_official_reading(reply) == reading


def test_process_punctuation_keeps_the_scripts_quirks():
    # a mark touching a space anywhere is deleted everywhere; else it becomes a space
    assert process_punctuation("yes/no") == "yes no" and process_punctuation("yes/ no") == "yes no"
    # re.UNICODE passed as sub's count: only the first 32 full stops go
    assert process_punctuation("." * 40) == "." * 8


def test_mvp_official_matches_a_whole_float_question_id(tmp_path):
    data, preds = _mvp(tmp_path, ["Yes", "No"], qid_type=float)
    r = mvp_bench.score(data, preds, "official")
    assert not r.unknown and not r.missing and r.metrics["yes_no"]["aAcc"] == 100.0


def test_a_fractional_question_id_is_an_error_naming_the_line(tmp_path):
    data, preds = _mvp(tmp_path, ["Yes", "No"], qid_type=lambda q: q + 0.5)
    with pytest.raises(InputError) as err:
        mvp_bench.score(data, preds, "official")
    assert str(err.value).startswith(f"{preds[0]}:1") and "1838.5" in str(err.value)


def test_outputs_that_are_not_text_are_warned_with_a_count(tmp_path):
    data, preds = _mvp(tmp_path, [{"a": 1}, True])
    r = mvp_bench.score(data, preds, "strict")
    note = [w for w in r.warnings if "not text" in w]
    assert note == [f"2 outputs are not text (an object, a list, a number, true/false or NaN), first at "
                    f"{preds[0]}:1: each is scored as its JSON text"]  # fmt: skip


def test_mvp_official_footer_says_missing_predictions_are_left_out(tmp_path):
    data, preds = _mvp(tmp_path, ["Yes", ...])
    official = mvp_bench.score(data, preds, "official")
    assert (len(official.missing), official.left_out) == (1, 1)
    assert missing_line(1, official.left_out) == "missing predictions: 1 (left out, as the official script does)"
    strict = mvp_bench.score(data, preds, "strict")
    assert missing_line(len(strict.missing), strict.left_out) == "missing predictions: 1 (count as wrong)"


# --- CODIS: a null output is the text "None" in the judge's prompt --------------------------------------------

PAIR = {"id": "001", "image_id": "x.jpg", "question": "Where?", "context": {"context_1": "a", "context_2": "b"},
        "answer": {"answer_1": "Left.", "answer_2": "Right."}, "category": "Attributes"}  # fmt: skip


def test_codis_official_sends_a_null_output_as_none(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps([PAIR, {**PAIR, "id": "002"}]))
    outputs = [{"id": "001", "output": {"output_1": None, "output_2": "Right."}}]
    (tmp_path / "out.json").write_text(json.dumps(outputs))
    client = Client(lambda text, t: "right")
    r = codis.score([tmp_path / "data.json"], [tmp_path / "out.json"], "official", judge=Judge(client, tmp_path / "c"))
    assert client.asked[0][0].endswith("Here is the groundtruth: Left.\nHere is the output: None\n")
    assert len(client.asked) == 2 and r.metrics["overall"]["Acc_p"] == 100.0
    assert (len(r.missing), r.left_out) == (2, 2)  # pair 002, not submitted: left out
    strict = codis.score([tmp_path / "data.json"], [tmp_path / "out.json"], "strict")
    assert "001#1" in strict.missing and strict.left_out == 0


def test_codis_record_error_names_the_file_and_line(tmp_path):
    (tmp_path / "data.json").write_text(json.dumps([PAIR]))
    (tmp_path / "out.jsonl").write_text(json.dumps({"id": "001", "context": 3, "output": "x"}) + "\n")
    with pytest.raises(InputError) as err:
        codis.score([tmp_path / "data.json"], [tmp_path / "out.jsonl"], "strict")
    assert str(err.value).startswith(f"{tmp_path / 'out.jsonl'}:1") and "context must be 1 or 2" in str(err.value)


# --- strict reads the lone lower-case letters every official script reads -------------------------------------


@pytest.mark.parametrize(("output", "n", "letter"), [("b", 4, "B"), ("(e)", 5, "E"), ("c.", 4, "C"), ("[a]", 2, "A")])
def test_strict_reads_a_lone_lower_case_letter(output, n, letter):
    from perceptforge.scorer.extract import extract_choice

    assert extract_choice(output, n).value == letter


@pytest.mark.parametrize(("output", "n", "options"), [("e", 4, None), ("(f)", 5, None), ("a", 2, ["a", "b"])])
def test_strict_leaves_a_lower_case_letter_that_is_no_option_letter_unparsed(output, n, options):
    from perceptforge.scorer.extract import extract_choice

    assert extract_choice(output, n, options).value is None
