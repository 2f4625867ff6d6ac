import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from perceptforge.data import schema as s
from perceptforge.errors import describe_validation_error

SHA = "a" * 64


def errors_of(model, **kwargs) -> list[str]:
    with pytest.raises(ValidationError) as exc:
        model(**kwargs)
    return describe_validation_error(exc.value)


def test_box_converters():
    box = s.Box.from_norm([0.1, 0.3, 0.7, 0.9], 640, 480)
    assert box.xyxy == (64.0, 144.0, 448.0, 432.0)
    assert box.to_norm(640, 480) == (0.1, 0.3, 0.7, 0.9)
    assert s.Box.from_ls_percent(box.to_ls_percent(640, 480), 640, 480) == box
    assert s.Box.from_xywh([10, 20, 30, 40]).xyxy == (10.0, 20.0, 40.0, 60.0)


def test_bad_box_names_field():
    assert errors_of(s.Box, x0=-1, y0=0, x1=5, y1=5) == ["x0: Input should be greater than or equal to 0"]
    assert errors_of(s.Box, x0=5, y0=0, x1=5, y1=5)[0].startswith("(top level): empty box")


def test_source_image_sha_and_size():
    errs = errors_of(s.SourceImage, id="1", path="a.jpg", sha256="xyz", width=0, height=5, licence="CC0")
    assert errs[0].startswith("sha256: String should match pattern")
    assert errs[1].startswith("width: Input should be greater than 0")


def test_yes_no_pair_needs_opposite_answers():
    ok = s.YesNoPair(question="Is the woman holding a gun?", level="low", answer_natural="no", answer_manipulated="yes")
    assert ok.kind == "yes_no_pair"
    errs = errors_of(s.YesNoPair, question="Q?", level="low", answer_natural="yes", answer_manipulated="yes")
    assert errs == ["(top level): answer_manipulated: must be opposite to answer_natural ('yes')"]


def test_mcq_invariants():
    q = s.SingleImageMCQ(
        question="What is she holding?", options=["a gun", "a helmet", "a cup", "a book", "a phone"], answer="A"
    )
    assert q.answer_text == "a gun"
    assert "duplicates" in errors_of(s.SingleImageMCQ, question="Q", options=["a", "A ", "b"], answer="A")[0]
    assert (
        "not one of the option letters ['A', 'B']"
        in errors_of(s.CrossImageMCQ, question="Q", options=["a", "b"], answer="C", level="low")[0]
    )
    assert "an option is empty" in errors_of(s.SingleImageMCQ, question="Q", options=["a", " "], answer="A")[0]


def test_absent_and_context_kinds():
    s.AbsentOptionMCQ(
        question="What colour is the car?",
        options=["red", "blue", "green", "white", "The image does not feature the car."],
        answer="E",
    )
    assert (
        "option E must state absence"
        in errors_of(s.AbsentOptionMCQ, question="Q", options=list("abcde"), answer="A")[0]
    )
    assert (
        "different answers" in errors_of(s.ContextPair, question="Q", contexts=("x", "y"), answers=("Left", "left"))[0]
    )


def test_item_discriminates_question_kind_and_rejects_unknown_field():
    ref = {"path": f"images/{SHA}.png", "sha256": SHA, "width": 4, "height": 4}
    item = {
        "id": "x",
        "category": {"high": "behaviour", "low": "B3", "name": "Behaviour-Object Association"},
        "question": {
            "kind": "cross_mcq",
            "question": "How have the pair of images been modified?",
            "options": ["a", "b"],
            "answer": "B",
            "level": "low",
        },
        "pair": {"natural": ref, "manipulated": ref},
        "lineage": {"source_id": "1", "source_sha256": SHA, "template_id": "B3", "template_version": 1, "seed": 0},
    }
    parsed = s.BenchmarkItem.model_validate(item)
    assert isinstance(parsed.question, s.CrossImageMCQ)
    with pytest.raises(ValidationError) as exc:
        s.BenchmarkItem.model_validate({**item, "lineage": {**item["lineage"], "sead": 1}})
    assert describe_validation_error(exc.value) == ["lineage.sead: unknown key"]


def test_pair_sizes_must_match():
    a = {"path": f"images/{SHA}.png", "sha256": SHA, "width": 4, "height": 4}
    assert "differ in size" in errors_of(s.ImagePair, natural=a, manipulated={**a, "width": 5})[0]


def test_image_paths_are_content_addressed_names_only():
    for bad in ("../../../../etc/hostname", "images/x' onerror='alert(7).png", f"/abs/images/{SHA}.png"):
        assert "should match pattern" in errors_of(s.ImageRef, path=bad, sha256=SHA, width=4, height=4)[0]


def test_exported_json_schema_is_current():
    committed = json.loads((Path(s.__file__).parent / "schema.json").read_text())
    assert committed == s.json_schema(), "run `perceptforge schema --out data/schema.json`"
    assert {"BenchmarkItem", "YesNoPair", "SplitManifest"} <= set(committed["$defs"])


def test_atomic_writes_give_files_the_users_umask(tmp_path):
    """A run or a split is shared: its files are created as open() would create them, not 0600."""
    import os
    import stat
    import subprocess
    import sys

    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        path = tmp_path / f"f{umask:o}.txt"
        code = f"import os; os.umask({umask}); from perceptforge.fileio import atomic_write_text; atomic_write_text({str(path)!r}, 'x')"
        subprocess.run([sys.executable, "-c", code], check=True)
        assert stat.S_IMODE(os.stat(path).st_mode) == mode


def test_a_whole_image_edit_has_no_mask_and_its_record_reads_back():
    # Records are written without None fields: a direct alteration's mask record must still validate.
    from perceptforge.data.schema import BackendRef, MaskRecord

    record = MaskRecord(unit="1-E2", mask=None, segmenter=BackendRef(name="sam", model_id="vit_h:sam.pth"))
    written = record.model_dump(mode="json", exclude_none=True)
    assert "mask" not in written and MaskRecord.model_validate(written).mask is None
