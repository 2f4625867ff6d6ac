"""The BLINK-style needs table on hand-made sources: each need's reason when a source lacks it, the profile's
models standing in for a source, the order reasons are given in, companions, items per source, and the
models each task is given."""

import pytest

from perceptforge.logic.blink import needs
from perceptforge.store.sources import SourceEntry

BOX = {"bbox": [0, 0, 10, 10], "label": "cup"}


def entry(sid="a", **fields) -> SourceEntry:
    base = dict(
        source_id=sid,
        file_name=f"{sid}.png",
        width=64,
        height=64,
        licence="CC0-1.0",
        attribution="",
        caption="",
        subject=None,
        attributes={},
    )
    return SourceEntry(**(base | fields))


@pytest.mark.parametrize(
    "need, lacking, giving, reason",
    [
        ("caption", {}, {"caption": "a cup"}, "no caption"),
        ("photograph", {"synthetic": True}, {}, "a rendered image, not a photograph"),
        ("labelled_boxes", {"regions": [{"bbox": [0, 0, 5, 5]}]}, {"regions": [BOX]}, "no labelled boxes"),
        ("pose", {}, {"pose": {"sequence": "s", "yaw": 0.0, "reference": True}}, "no camera pose"),
        ("style", {}, {"style": "Cubism"}, "no art style label"),
        ("keypoints", {"regions": [BOX]}, {"regions": [BOX | {"keypoints": {"rim": [1, 1]}}]}, "no keypoints"),
        (
            "functional_keypoints",
            {"regions": [BOX]},
            {"regions": [BOX | {"functional_keypoints": {"drink": {"rim": [1, 1]}}}]},
            "no functional keypoints",
        ),
        (
            "reflectance",
            {},
            {"reflectance": [{"a": (1, 1), "b": (2, 2), "darker": "a"}]},
            "no reflectance judgements",
        ),
    ],
)
def test_each_source_need_gives_its_reason(need, lacking, giving, reason):
    assert needs.unmet(["image", need], entry(**lacking), 3) == reason
    assert needs.unmet(["image", need], entry(**giving), 3) is None
    assert needs.source_gives(entry(**giving), need) and not needs.source_gives(entry(**lacking), need)


def test_the_profile_s_models_stand_in_for_what_a_source_lacks():
    plain = entry()
    assert needs.unmet(["generator"], plain, 3) == "the profile names no text-to-image generator"
    assert needs.unmet(["generator"], plain, 3, {"generator"}) is None
    assert needs.unmet(["disparity"], plain, 3) == "no disparity map (and the profile names no depth model)"
    assert needs.unmet(["disparity"], plain, 3, {"depth"}) is None
    assert needs.unmet(["disparity"], entry(extras={"disparity": "d.png"}), 3) is None
    # counting: a label declared completely boxed, or labels to count when the profile's grounder is a detector
    without = f"{needs.COMPLETE_MISSING} (and the profile's grounder is no detector)"
    assert needs.unmet(["countable"], plain, 3) == without
    assert needs.unmet(["countable"], plain, 3, {"detector"}) == needs.COMPLETE_MISSING
    assert needs.unmet(["countable"], entry(count_labels=["ball"]), 3) == without
    assert needs.unmet(["countable"], entry(count_labels=["ball"]), 3, {"detector"}) is None
    assert needs.unmet(["countable"], entry(regions=[BOX], complete_labels=["cup"]), 3) is None
    assert needs.unmet(["second_image"], plain, 1) == "needs a second source image"
    assert needs.unmet(["second_image"], plain, 2) is None


def test_a_box_counts_only_where_its_label_is_declared_completely_boxed():
    """Issue 28: "How many wheels? → 2" with a third wheel unboxed. A labelled box alone says nothing of the
    instances nobody boxed; only a label in ``complete_labels`` (and a thing, not stuff) may be counted or be
    the one object of its label."""
    stuff = BOX | {"label": "hair", "isthing": 0}
    assert needs.unmet(["image", "countable"], entry(regions=[BOX]), 3) == needs.unmet(["countable"], entry(), 3)
    assert needs.unmet(["image", "complete_labels"], entry(regions=[BOX]), 3) == needs.COMPLETE_MISSING
    assert needs.unmet(["image", "complete_labels"], entry(regions=[stuff], complete_labels=["hair"]), 3) == (
        needs.COMPLETE_MISSING
    )
    assert needs.unmet(["image", "complete_labels"], entry(regions=[BOX], complete_labels=["cup"]), 3) is None


def test_visual_similarity_takes_only_photos_of_the_same_scene():
    """Issue 28: a stranger photo as the distractor makes Visual Similarity trivial. The companions are the other
    photos of its ``scene`` (or pose sequence, secondary views included); a photo of no scene cannot serve."""
    entries = {
        "a": entry("a", scene="kitchen"),
        "b": entry("b"),
        "c": entry("c", scene="kitchen"),
        "d": entry("d", pose={"sequence": "kitchen", "yaw": 5.0, "reference": False}),
        "e": entry("e", scene="garden"),
    }
    assert needs.companions(["image", "related_image"], "a", entries) == ["c", "d"]
    assert needs.companions(["image", "related_image"], "e", entries) == []
    assert needs.unmet(["image", "related_image"], entries["b"], 5) == (
        "no scene shared with another photo (scene, or a pose sequence)"
    )
    assert needs.unmet(["image", "related_image"], entries["a"], 5) is None


def test_the_first_unmet_need_in_the_table_s_order_is_the_reason():
    rendered = entry(synthetic=True)
    forensic = ["image", "caption", "photograph", "generator"]
    assert needs.unmet(forensic, rendered, 3) == "the profile names no text-to-image generator"
    assert needs.unmet(forensic, rendered, 3, {"generator"}) == "no caption"
    assert needs.unmet(forensic, entry(synthetic=True, caption="x"), 3, {"generator"}) == (
        "a rendered image, not a photograph"
    )


def test_a_secondary_view_serves_only_a_task_that_needs_the_pose():
    view = entry(pose={"sequence": "s", "yaw": 12.0, "reference": False})
    assert needs.unmet(["image"], view, 3) == needs.SECONDARY_VIEW
    assert needs.SECONDARY_VIEW == "a secondary view of a pose sequence (it serves Multi-view tasks only)"
    assert needs.unmet(["image", "pose"], view, 3) is None
    assert needs.unmet(["image"], entry(pose={"sequence": "s", "yaw": 0.0, "reference": True}), 3) is None


def test_companions_by_kind():
    def pose(seq, reference=True):
        return {"sequence": seq, "yaw": 0.0, "reference": reference}

    entries = {
        "a": entry("a", pose=pose("s"), style="Cubism"),
        "b": entry("b", pose=pose("s", reference=False)),
        "c": entry("c", style="Cubism"),
        "d": entry("d", pose=pose("t")),
        "e": entry("e", style="Impressionism"),
    }
    assert needs.companions(["image", "pose"], "a", entries) == ["b"]
    assert needs.companions(["image", "style"], "c", entries) == ["a", "e"]  # the builder picks among them
    # another picture: the next in id order that is no view of the same scene (nor a secondary view) ...
    assert needs.companions(["image", "second_image"], "a", entries) == ["c"]
    assert needs.companions(["image", "second_image"], "e", entries) == ["a"]
    # ... or every such picture when the profile has an embedding to rank them
    assert needs.companions(["image", "second_image"], "a", entries, {"embedder"}) == ["c", "d", "e"]
    assert needs.companions(["image", "labelled_boxes"], "a", entries) == []


def test_items_per_source_and_models_used():
    judged = entry(reflectance=[{"a": (1, 1), "b": (2, 2), "darker": "a"}] * 2)
    assert needs.items_per_source(["image", "reflectance"], 5, judged) == 2
    assert needs.items_per_source(["image", "disparity"], 5, judged) == 5
    assert needs.models_used(["image", "countable"]) == {"detector"}
    assert needs.models_used(["image", "disparity"]) == {"depth"}
    assert needs.models_used(["image", "second_image"]) == {"embedder"}
    assert needs.models_used(["caption", "photograph", "generator"]) == {"generator"}
    assert needs.models_used(["image", "labelled_boxes"]) == frozenset()


def test_a_template_s_needs_are_checked_against_the_table():
    assert needs.check_needs(["image", "pose"]) == []
    assert needs.check_needs(["image", "depth"]) == [f"unknown need 'depth'; known: {', '.join(needs.NEEDS)}"]
    assert needs.check_needs(["pose", "style"]) == [
        "needs ['pose', 'style'] each take other companions; a task may name one kind"
    ]
    assert needs.check_needs(["style", "keypoints"]) == []  # one kind: sources that give the same


def test_complete_labels_must_name_a_label_the_image_boxes(tmp_path):
    """A typo in ``complete_labels`` would declare nothing complete without a word: the reader names it."""
    import json

    from PIL import Image

    from perceptforge.errors import InputError
    from perceptforge.store.sources import read_source_dir

    Image.new("RGB", (64, 64)).save(tmp_path / "a.png")
    image = {"id": 1, "file_name": "a.png", "width": 64, "height": 64, "complete_labels": ["wheel"]}
    boxes = [{"image_id": 1, "bbox": [1, 1, 10, 10], "label": "wheel"}]
    (tmp_path / "annotations.json").write_text(json.dumps({"images": [image], "annotations": boxes}))
    assert read_source_dir(tmp_path)[0].complete_labels == ["wheel"]
    image["complete_labels"] = ["wheels"]
    (tmp_path / "annotations.json").write_text(json.dumps({"images": [image], "annotations": boxes}))
    with pytest.raises(InputError, match=r"complete_labels names \['wheels'\], which no box of this image has"):
        read_source_dir(tmp_path)
