"""The CODIS and MME-RealWorld construction flows up to Label Studio: ingest, drafts, checks, report."""

import hashlib
import json

import pytest
from authored_sources import big_photo_source
from PIL import Image

from perceptforge.data.schema import AuthoredItem
from perceptforge.flows.run import run as run_flow


def tree_bytes(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_codis_drafts_one_item_per_source_the_same_every_time(prefect_api, sample_dir, tmp_path):
    first = run_flow("codis", source=str(sample_dir), out=str(tmp_path / "a"), seed=3)
    run_flow("codis", source=str(sample_dir), out=str(tmp_path / "b"), seed=3)
    assert tree_bytes(tmp_path / "a" / "drafts") == tree_bytes(tmp_path / "b" / "drafts")
    # CODIS asks about real scenes: the rendered scene and its two turned views are no photographs
    assert first["counts"] == {"sources": 9, "ingested": 9, "drafts": 6, "quarantined": 3}
    quarantine = [json.loads(line) for line in (tmp_path / "a" / "quarantine.jsonl").read_text().splitlines()]
    assert {q["file"] for q in quarantine} == {
        "images/depth_scene.png",
        "images/depth_scene_left.png",
        "images/depth_scene_right.png",
    }
    assert all("a rendered image, not a photograph" in q["detail"] for q in quarantine)
    drafts = [
        AuthoredItem.model_validate_json(p.read_text()) for p in sorted((tmp_path / "a" / "drafts").glob("*.json"))
    ]
    assert {d.status for d in drafts} == {"draft"} and {d.version for d in drafts} == {0}
    # only the orientation wording needs the picture; the others are flagged as scaffolds to rewrite
    for d in drafts:
        flagged = {c.name for c in d.flags}
        assert flagged == (set() if d.content.category == "Location and Orientation" else {"context_decides"})
    assert len({d.content.category for d in drafts}) == 5  # the five categories go round
    d = drafts[0]
    assert d.lineage.draft_backend.name == "template" and d.lineage.draft_prompts[0].id.startswith("draft/codis_")
    assert d.lineage.author is None and d.lineage.parent_id is None
    source = next(p for p in sample_dir.rglob(d.image.file_name.split("/")[-1]))
    assert (tmp_path / "a" / d.image.path).read_bytes() == source.read_bytes()
    report = (tmp_path / "a" / "report.html").read_text()
    assert d.content.question in report.replace("&#x27;", "'") and "items per category" in report


def test_mme_realworld_keeps_full_resolution_bytes_and_refuses_small_images(prefect_api, tmp_path):
    source = big_photo_source(tmp_path / "src")
    summary = run_flow("mme-realworld", source=str(source), out=str(tmp_path / "run"))
    assert summary["counts"] == {"sources": 2, "ingested": 1, "drafts": 1, "quarantined": 1}
    (refused,) = [json.loads(line) for line in (tmp_path / "run" / "quarantine.jsonl").read_text().splitlines()]
    assert (
        refused["stage"] == "ingest" and "300x200 is below the profile's full-resolution threshold" in refused["detail"]
    )
    (draft,) = [AuthoredItem.model_validate_json(p.read_text()) for p in (tmp_path / "run" / "drafts").glob("*.json")]
    original = (source / "street.jpg").read_bytes()
    stored = tmp_path / "run" / draft.image.path
    assert stored.read_bytes() == original and draft.image.path == f"images/{hashlib.sha256(original).hexdigest()}.jpg"
    assert (draft.image.width, draft.image.height) == (4000, 3000)
    c = draft.content
    assert c.choices[ord(c.answer) - ord("A")] == "In the lower right part of the image."
    assert c.choices[4] == "The image does not feature the red name plate." and c.domain is None
    assert not draft.flags  # 1/100 of the image, the E option names the plate, four distinct options
    # display copies only: the report shows a downscaled whole and the target crop at full resolution
    whole, crop = (Image.open(tmp_path / "run" / "display" / f"{draft.version_id}-{k}.jpg") for k in (0, 1))
    assert max(whole.size) == 768 and crop.size == (601, 451)


def test_a_run_that_lost_drafts_makes_only_those_again(prefect_api, sample_dir, tmp_path):
    run = tmp_path / "run"
    run_flow("codis", source=str(sample_dir), out=str(run), limit=4)
    before = tree_bytes(run / "drafts")
    for path in sorted((run / "drafts").glob("*.json"))[:2]:  # as if the run was killed before writing them
        path.unlink()
    again = run_flow("codis", source=str(sample_dir), out=str(run), limit=4)
    assert tree_bytes(run / "drafts") == before and again["counts"]["drafts"] == 4


def png_header(path, width: int, height: int) -> None:
    """A PNG that declares its size and holds no pixels: enough for a reader that looks at the header first."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


def test_originals_above_max_pixels_are_refused_from_their_header(tmp_path):
    from perceptforge.errors import InputError
    from perceptforge.store.rundir import RunDir

    run = RunDir(tmp_path / "run")
    png_header(tmp_path / "wide.png", 9000, 6000)  # 54 MP
    with pytest.raises(InputError, match=r"9000x6000 is 54.0 MP, above the profile's ingest.max_pixels \(40.0 MP\)"):
        run.store_original(tmp_path / "wide.png", max_pixels=40_000_000)
    png_header(tmp_path / "bomb.png", 20000, 20000)  # 400 MP: Pillow's own cap, before ours
    with pytest.raises(InputError, match="bomb.png: refused: .*decompression bomb"):
        run.store_original(tmp_path / "bomb.png", max_pixels=10**12)
    assert not (run.path / "images").exists()  # nothing was kept
