"""Drawing a source folder's outlines in Label Studio (``perceptforge sources outline``): Label Studio's polygons
(percentages) ⇄ COCO polygons (pixels), holes bridged in, and a push and pull through a real server."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from helpers import annotate, perceptforge_cmd

from perceptforge.annotation import outlines
from perceptforge.annotation.labelstudio import plain
from perceptforge.errors import InputError
from perceptforge.logic.outline import outline_mask
from perceptforge.store.sources import read_source_dir

SQUARE = [(10.0, 10.0), (90.0, 10.0), (90.0, 90.0), (10.0, 90.0)]
GAP = [(40.0, 40.0), (60.0, 40.0), (60.0, 60.0), (40.0, 60.0)]


def test_a_polygon_goes_to_pixels_and_back():
    result = [outlines.polygon_result(SQUARE, 200, 100, "outline")]
    assert result[0]["value"]["points"][1] == [45.0, 10.0]  # Label Studio's percentages of the image
    drawn, holes = outlines.drawn_polygons(result, 200, 100, "task 1")
    assert drawn == [SQUARE] and holes == []
    # a point dragged a little past the edge (Label Studio allows it) is taken to the edge
    result[0]["value"]["points"][2] = [100.4, 101.0]
    assert outlines.drawn_polygons(result, 200, 100, "task 1")[0][0][2] == (200.0, 100.0)


def test_a_hole_is_bridged_into_the_outline_around_it_and_stays_open():
    parts = outlines.segmentation([SQUARE], [GAP], "task 1")
    assert len(parts) == 1 and len(parts[0]) == 2 * (len(SQUARE) + len(GAP) + 2)
    mask = outline_mask(parts, 100, 100)
    assert mask[20, 20] and mask[80, 50] and not mask[50, 50]  # the ring kept, the gap open
    assert mask.sum() == 80 * 80 - 20 * 20
    with pytest.raises(InputError, match="task 1.*a hole at \\(40.0, 40.0\\) lies inside no outline"):
        outlines.segmentation([], [GAP], "task 1")


def test_a_polygon_of_two_points_is_refused_by_task():
    two = outlines.polygon_result(SQUARE[:2], 100, 100, "hole")
    with pytest.raises(InputError, match="outline task 7.*a polygon \\(hole\\) has 2 points"):
        outlines.drawn_polygons([two], 100, 100, "outline task 7")


def test_the_regions_to_outline_are_the_subjects_and_hair(sample_dir, tmp_path):
    found = outlines.targets(sample_dir)
    assert [(t.key, t.label) for t in found] == [
        ("1/1", "woman"),
        ("1/20", "hair"),
        ("2/7", "man"),
        ("2/21", "hair"),
        ("3/11", "woman"),
    ]  # "<image id>/<annotation id>"
    # the drawn ones open as suggestions; the cameraman's hair (a black-and-white photo, never recoloured) has none
    assert [bool(t.outline) for t in found] == [True, True, True, False, True]
    doc = json.loads((sample_dir / "annotations.json").read_text())
    del doc["annotations"][0]["id"]
    folder = tmp_path / "src"
    shutil.copytree(sample_dir, folder)
    (folder / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="annotation 0 \\(woman\\).*needs an 'id'"):
        outlines.targets(folder)


def test_two_regions_of_one_image_under_one_id_are_refused(sample_dir, tmp_path):
    doc = json.loads((sample_dir / "annotations.json").read_text())
    hair = next(a for a in doc["annotations"] if a["label"] == "hair" and a["image_id"] == 1)
    hair["id"] = "1"  # the woman's id, as text: the same key on pull ("1/1"), so one outline would go to both
    folder = tmp_path / "src"
    shutil.copytree(sample_dir, folder)
    (folder / "annotations.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"\(hair\): id '1' is also the id of annotation 0 of this image"):
        outlines.targets(folder)


def test_a_pull_waits_for_the_push_or_pull_of_the_same_folder(sample_dir, tmp_path):
    import threading

    from perceptforge.fileio import exclusive

    folder = tmp_path / "src"
    shutil.copytree(sample_dir, folder)
    ended = threading.Event()
    failures = []

    def pull():
        try:
            outlines.pull(folder, None)  # no project yet: it refuses, once it holds the folder's lock
        except Exception as exc:  # noqa: BLE001 -- the refusal is the outcome looked at
            failures.append(exc)
        ended.set()

    with exclusive(folder / outlines.LOCK):  # another process's push or pull, mid-way
        worker = threading.Thread(target=pull)
        worker.start()
        assert not ended.wait(1.0), "the pull ran while the folder's lock was held"
    assert ended.wait(30) and "no outline project yet" in str(failures[0])
    worker.join()


def test_outlines_are_drawn_in_label_studio_and_written_back(label_studio, sample_dir, tmp_path, cli_env):
    folder = tmp_path / "photos"  # under the server's document root (the session's temporary folder)
    shutil.copytree(sample_dir, folder)
    before = json.loads((folder / "annotations.json").read_text())
    ls = label_studio.client()
    first = outlines.push(folder, ls, label_studio.document_root)
    assert (first["imported"], first["already_there"]) == (5, 0)
    assert outlines.push(folder, ls, label_studio.document_root)["imported"] == 0  # again: nothing twice
    tasks = {t["data"]["key"]: t for t in ls.export(first["project"])}
    assert set(tasks) == {"1/1", "1/20", "2/7", "2/21", "3/11"}
    astronaut = tasks["1/1"]
    (prediction,) = ls.call("reading predictions", lambda: plain(ls.sdk().predictions.list(task=astronaut["id"])))
    suggested = prediction["result"]
    w, h = before["images"][0]["width"], before["images"][0]["height"]
    (as_drawn,), _ = outlines.drawn_polygons(suggested, w, h, "")
    bundled = next(a for a in before["annotations"] if a["id"] == 1)["segmentation"][0]
    assert np.allclose(np.ravel(as_drawn), bundled, atol=0.01)  # the outline so far, to the pixel
    assert [r["type"] for r in suggested] == ["rectanglelabels", "polygonlabels"]  # the box, the outline so far
    # the annotator redraws the astronaut as a ring with a gap, and removes the hair's outline
    ring = outlines.polygon_result(SQUARE, w, h, "outline")
    gap = outlines.polygon_result(GAP, w, h, "hole")
    annotate(ls, astronaut["id"], [ring, gap])
    hair = tasks["1/20"]
    annotate(ls, hair["id"], [])
    report = outlines.pull(folder, ls)
    assert (report["changed"], report["removed"], report["waiting"]) == (["1/1"], ["1/20"], 3)
    after = json.loads((folder / "annotations.json").read_text())
    by_id = {a["id"]: a for a in after["annotations"]}
    assert by_id[1]["segmentation"] == outlines.segmentation([SQUARE], [GAP], "")
    assert "segmentation" not in by_id[20]
    assert by_id[7]["segmentation"] == next(a for a in before["annotations"] if a["id"] == 7)["segmentation"]
    assert list(after) == list(before)  # the file's own order kept
    entry = next(e for e in read_source_dir(folder) if e.source_id == "1")
    mask = outline_mask(entry.regions[0]["segmentation"], entry.height, entry.width)
    assert mask[20, 20] and not mask[50, 50]
    # pulled again, by the command a user types: nothing new
    env = {**cli_env, "LABEL_STUDIO_URL": label_studio.url, "LABEL_STUDIO_API_KEY": label_studio.admin.token}
    done = subprocess.run(
        [*perceptforge_cmd(), "sources", "outline", "pull", str(folder)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "0 written, 0 removed, 2 unchanged, 3 not drawn yet" in " ".join(done.stdout.split())
