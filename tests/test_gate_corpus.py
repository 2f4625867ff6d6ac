"""The gate corpus (benchmarks/gate_corpus): its pairs judged through pair_gates on tiny drawn pairs, the figures
and table it prints, the seeded defects, labels checked against a run's pairs, and the audit page's section."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import candidate_for, undrawn
from PIL import Image

from perceptforge.backends.writers import TemplateWriter
from perceptforge.configs.profile import Gates, load_profile
from perceptforge.data.schema import Box, Candidate, Edit, EditRecord, Grounding, ImagePair, Region, Rendering
from perceptforge.logic.gate_corpus import corpus_view, limits_fingerprint
from perceptforge.logic.templates import templates
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import grounding_from_entry, read_source_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from gate_corpus import defects, measure  # noqa: E402

S = 64  # the tiny pairs' side
SUBJECT = (20.0, 12.0, 44.0, 64.0)  # a person standing in the middle
FACE = (24.0, 14.0, 40.0, 32.0)
HAIR = (22.0, 10.0, 42.0, 15.0)


@pytest.fixture(scope="module")
def candidates(sample_dir) -> dict[str, Candidate]:
    """B1's and I1's candidates, as the questions stage writes them (the astronaut's)."""
    entry = next(e for e in read_source_dir(sample_dir) if e.file_name.endswith("astronaut.jpg"))
    grounding = undrawn(grounding_from_entry(entry))
    return {
        t: Candidate.model_validate(
            candidate_for(templates()[t], grounding, "0" * 64, TemplateWriter(), templates(), 0)
        )
        for t in ("B1", "I1")
    }


def natural() -> np.ndarray:
    rng = np.random.default_rng(0)
    image = np.full((S, S, 3), (70, 110, 200), np.uint8)  # a blue backdrop
    x0, y0, x1, y1 = (int(v) for v in SUBJECT)
    image[y0:y1, x0:x1] = (150, 90, 60)  # the person, brown
    image[10:15, 22:42] = (40, 30, 20)  # dark hair
    noise = rng.integers(-3, 4, image.shape)
    return np.clip(image.astype(int) + noise, 0, 255).astype(np.uint8)


def background_swap() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A clean background swap: the new scene (green stripes) wherever the person is not."""
    nat = natural()
    mask = np.ones((S, S), bool)
    x0, y0, x1, y1 = (int(v) for v in SUBJECT)
    mask[y0:y1, x0:x1] = False
    mask[10:15, 22:42] = False
    scene = np.zeros_like(nat)
    scene[..., 1] = 160 + 40 * (np.arange(S)[:, None] // 4 % 2)
    return nat, np.where(mask[..., None], scene, nat), mask


def hair_recolour() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nat = natural()
    mask = np.zeros((S, S), bool)
    mask[10:15, 22:42] = True
    manipulated = nat.copy()
    manipulated[mask] = (30, 60, 200)  # blue hair
    return nat, manipulated, mask


BLUE = Rendering(value="blue hair", high="dyed hair", backend="recolour", how="colour", colour="#1e3cc8", region="hair")


def pair(pid, label, defect, nat, manip, mask, candidate, rendered=None, origin="run"):
    return measure.CorpusPair(
        pid, label, defect, Image.fromarray(nat), Image.fromarray(manip), mask, candidate, rendered, SUBJECT, origin
    )


def tiny_corpus(candidates) -> list:
    b1, i1 = candidates["B1"], candidates["I1"]
    nat, swapped, mask = background_swap()
    _, recoloured, hair = hair_recolour()
    painted = recoloured.copy()
    painted[18:40, 22:42] = (30, 60, 200)  # the face painted too, outside the hair's mask
    faint = nat.copy()
    faint[hair] = np.clip(nat[hair].astype(int) + 4, 0, 255)  # a recolour that hardly changed anything
    seamed = defects.seam(defects.Base(nat, swapped, mask, SUBJECT, faces=[FACE]), np.random.default_rng(1))
    return [
        pair("b1-good", "good", "", nat, swapped, mask, b1),
        pair("i1-good", "good", "", nat, recoloured, hair, i1, BLUE),
        pair("i1-forehead", "bad", "spill_forehead", nat, painted, hair, i1, BLUE),
        pair("i1-faint", "bad", "too_little", nat, faint, hair, i1, BLUE),
        pair("b1-good~seam", "bad", "seam", nat, seamed.manipulated, seamed.mask, b1, origin="synthetic"),
        # the good swap's pixels labelled bad for what no gate measures (a cut an annotator saw and the referees
        # did not): a miss the table must show
        pair("b1-cut", "bad", "subject_cut", nat, swapped, mask, b1),
        # a defect drawn into a pair the gates already stop says nothing of the defect: left out
        pair("i1-faint~spill_skin", "bad", "spill_skin", nat, painted, hair, i1, BLUE, origin="synthetic"),
    ]


def test_gate_names_are_reasons_without_their_figures():
    assert measure.gate_name("2.6% of the face oval changed (at most 2.0%)") == "of the face oval changed"
    assert measure.gate_name("too little change inside the edit region: 3.1 < 12.0") == (
        "too little change inside the edit region"
    )
    assert measure.gate_name("only 80% of the region changed (at least 90%)") == "of the region changed"
    assert measure.gate_name("12.5% of an ear's place changed (the ear is cut or painted) (at most 10.0%)") == (
        "of an ear's place changed (the ear is cut or painted)"
    )


def test_tiny_pairs_are_judged_by_pair_gates_and_tabulated(candidates):
    gates = load_profile("local").gates
    doc, verdicts = measure.measure(tiny_corpus(candidates), gates, "local", date="2026-11-29")
    by_id = {v.id: v for v in verdicts}
    assert not by_id["b1-good"].stopped and not by_id["i1-good"].stopped
    assert by_id["i1-forehead"].gate == "too much change outside the edit region"
    assert by_id["i1-faint"].gate == "too little change inside the edit region"
    # a dotted seam along the cut: its dashes, each off every blend of the sides, are a seam
    assert by_id["b1-good~seam"].gate == "of the kept outline shows a seam (a dotted, light or dark line along the cut)"
    assert not by_id["b1-cut"].stopped
    assert "i1-faint~spill_skin" not in by_id and doc["not_judged"] == [
        "i1-faint~spill_skin: its base pair is stopped (too little change inside the edit region: 4.0 < 12.0)"
    ]
    assert doc["pairs"] == 6 and doc["bad"] == 4 and doc["good"] == 2
    assert doc["recall"]["stopped"] == 3 and doc["recall"]["overall %"] == 75.0
    assert doc["recall"]["by_defect"]["seam"] == {"pairs": 1, "stopped": 1, "recall %": 100.0}
    assert doc["recall"]["by_defect"]["subject_cut"] == {"pairs": 1, "stopped": 0, "recall %": 0.0}
    assert doc["false_quarantines"] == {"stopped": 0, "share %": 0.0}
    assert doc["misses"] == [{"id": "b1-cut", "defect": "subject_cut"}]
    assert doc["gates"]["too much change outside the edit region"] == {
        "stopped_bad": {"spill_forehead": 1},
        "stopped_good": 0,
    }
    assert doc["limits_fingerprint"] == limits_fingerprint(gates.model_dump(mode="json"))
    # each gate on its own: the faint recolour fails its inside change and its region changed, both counted
    assert doc["alone"]["seam"] == {"stopped_bad": {"seam": 1}, "stopped_good": 0}
    assert doc["alone"]["inside_change"]["stopped_bad"] == {"too_little": 1}
    assert doc["alone"]["region_changed"]["stopped_bad"] == {"too_little": 1}
    assert doc["origins"] == {"run/bad": 3, "run/good": 2, "synthetic/bad": 1}
    text = measure.table(doc)
    assert "| too little change inside the edit region | 0 | 0 | 0 | 1 | 0 |" in text
    assert "recall on bad pairs: 3/4 = 75.0%" in text and "- b1-cut (subject_cut)" in text
    assert "| `seam` | 1 | 0 | 0 | 0 | 0 |" in text  # each gate on its own, after the first-gate table
    # a limit the other way round makes a false quarantine: the good recolour is stopped
    strict = Gates(min_inside_change=200.0)
    doc, _ = measure.measure(tiny_corpus(candidates)[:2], strict, "strict", date="2026-11-29")
    assert doc["false_quarantines"]["stopped"] == 2 and doc["false"][0]["id"] == "b1-good"
    assert doc["limits_fingerprint"] != limits_fingerprint(gates.model_dump(mode="json"))


def test_defects_are_seeded_drawn_where_the_annotation_says_and_refused_where_they_cannot_be():
    nat, swapped, mask = background_swap()
    base = defects.Base(nat, swapped, mask, SUBJECT, faces=[FACE], hair=[HAIR], objects=[(26.0, 40.0, 38.0, 52.0)])
    for kind in defects.BACKGROUND_DEFECTS:
        one, again = defects.draw(kind, base, 7), defects.draw(kind, base, 7)
        assert np.array_equal(one.manipulated, again.manipulated), kind
        changed = np.abs(one.manipulated.astype(int) - swapped).max(axis=2) > 0
        assert changed.any() and not (changed & ~one.region).any(), kind  # only the defect's place changes
    ear = defects.draw("ear_removed", base, 0)
    ys, xs = np.nonzero(ear.region)
    w, h = FACE[2] - FACE[0], FACE[3] - FACE[1]
    assert ear.mask[ear.region].all()  # the faulty edit replaced it: its mask covers the ear
    # beside the face box (either side), at the eyes' and nose's height
    assert min(abs(np.median(xs) - FACE[0]), abs(np.median(xs) - FACE[2])) <= 0.15 * w
    assert FACE[1] + 0.3 * h <= ys.min() and ys.max() <= FACE[1] + 0.75 * h
    # the old background comes back in a rim: the kept outline's outside, by the natural photo's pixels
    rim = defects.draw("halo", base, 3)
    assert np.array_equal(rim.manipulated[rim.region], nat[rim.region]) and not rim.mask[rim.region].any()
    _, recoloured, hair = hair_recolour()
    hair_base = defects.Base(nat, recoloured, hair, SUBJECT, faces=[FACE], hair=[HAIR], colour="#1e3cc8")
    forehead = defects.draw("spill_forehead", hair_base, 0)
    ys, _ = np.nonzero(forehead.region)
    assert ys.min() >= FACE[1] and ys.max() <= FACE[1] + 0.27 * (FACE[3] - FACE[1])
    assert forehead.manipulated[forehead.region, 2].mean() > nat[forehead.region, 2].mean() + 40  # it turned blue
    with pytest.raises(defects.NotApplicable, match="no face box"):
        defects.draw("ear_removed", defects.Base(nat, swapped, mask, SUBJECT), 0)
    with pytest.raises(defects.NotApplicable, match="replaced the background"):
        defects.draw("halo", defects.Base(nat, swapped, None, SUBJECT), 0)
    with pytest.raises(ValueError, match="unknown defect 'smudge'"):
        defects.draw("smudge", base, 0)


def tiny_run(tmp_path: Path, candidates) -> tuple[Path, dict]:
    """A run directory holding the tiny B1 pair as the edit and gate stages leave it, and its grounding."""
    run = RunDir(tmp_path / "run")
    nat, swapped, mask = background_swap()
    cand = candidates["B1"].model_copy(update={"unit": "t-B1"})
    source = cand.lineage.source_id
    grounding = Grounding(
        source_id=source,
        caption="a person before a blue backdrop",
        subject=Region(label="woman", box=Box(x0=20, y0=12, x1=44, y1=64), role="subject"),
        regions=[Region(label="face", box=Box(x0=24, y0=14, x1=40, y1=32), role="face")],
        backend="annotations",
    )
    refs = [run.store_image(Image.fromarray(a)) for a in (nat, swapped)]
    record = EditRecord(
        unit="t-B1",
        pair=ImagePair(natural=refs[0], manipulated=refs[1], mask=run.store_mask(mask)),
        edit=Edit(kind="background_substitution", backend="composite", seed=0),
        backends={},
    )
    run.write_record("edits/t-B1.json", record.model_dump(mode="json"))
    run.write_record("candidates/t-B1.json", cand.model_dump(mode="json"))
    run.write_record(f"groundings/{source}.json", grounding.model_dump(mode="json"))
    labels = {
        "pairs": [{"unit": "t-B1", "manipulated": refs[1].sha256, "label": "good", "seen": "clean cut"}],
        "synthetic": [{"id": "t-B1~halo", "label": "bad", "defect": "halo", "seen": "a blue rim"}],
    }
    return run.path, labels


def test_labels_find_their_pairs_in_a_run_and_a_changed_pair_is_not_judged(tmp_path, candidates):
    run, labels = tiny_run(tmp_path, candidates)
    pairs = measure.run_pairs(run)
    corpus, problems = measure.build(labels, pairs)
    assert [p.id for p in corpus] == ["t-B1", "t-B1~halo"] and problems == []
    assert corpus[1].origin == "synthetic" and corpus[1].defect == "halo" and corpus[1].region.any()
    todo = measure.unlabelled(labels, pairs)  # every other defect the good pair can carry, to look at next
    assert {p.id for p in todo} == {"t-B1~ear_removed", "t-B1~seam", "t-B1~old_patch"}
    to_fill = measure.entries_to_fill(todo, pairs)
    assert to_fill["pairs"] == [] and {e["label"] for e in to_fill["synthetic"]} == {"?"}
    seam = next(e for e in to_fill["synthetic"] if e["id"] == "t-B1~seam")
    # its SHA-256 names the drawn pixels: labelled with it, the seam is judged; a changed drawing would not be
    labels["synthetic"].append(seam | {"label": "bad", "seen": "a dotted line"})
    assert [p.id for p in measure.build(labels, pairs)[0]] == ["t-B1", "t-B1~halo", "t-B1~seam"]
    labels["synthetic"][-1]["manipulated"] = "0" * 64
    assert measure.build(labels, pairs)[1] == ["t-B1~seam: the drawn pair changed since it was labelled: look again"]
    labels["synthetic"].pop()
    labels["pairs"][0]["manipulated"] = "f" * 64
    corpus, problems = measure.build(labels, pairs)
    assert corpus == [] and problems == [
        "t-B1: the pair changed since it was labelled: look again",
        "t-B1~halo: its base pair is not a labelled good pair of the run",
    ]
    (tmp_path / "labels.json").write_text(json.dumps({"pairs": [{"unit": "t-B1", "label": "bad"}]}))
    with pytest.raises(SystemExit, match=r"entry 0 \(t-B1\): a bad pair names its defect"):
        measure.read_labels(tmp_path / "labels.json")
    (tmp_path / "labels.json").write_text("[]")
    with pytest.raises(SystemExit, match="labels are an object with a list 'pairs'"):
        measure.read_labels(tmp_path / "labels.json")
    out = tmp_path / "figures.json"
    labels["pairs"][0]["manipulated"] = measure.run_pairs(run)["t-B1"].manipulated_sha256
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    measure.main(["--run", str(run), "--labels", str(tmp_path / "labels.json"), "--json", str(out)])
    doc = json.loads(out.read_text())
    assert doc["pairs"] == 2 and doc["good"] == 1 and doc["not_judged"] == []
    # a frozen copy holds the labelled pairs alone and is read as the run was: the same figures
    assert measure.freeze(run, labels, tmp_path / "frozen") == 1
    frozen = tmp_path / "frozen.json"
    measure.main(["--run", str(tmp_path / "frozen"), "--labels", str(tmp_path / "labels.json"), "--json", str(frozen)])
    assert json.loads(frozen.read_text()) == doc
    # the photo annotated again (a face box moved): the pairs are judged with the annotation as it is now
    source = tmp_path / "photos"
    (source / "images").mkdir(parents=True)
    Image.fromarray(background_swap()[0]).save(source / "images" / "t.png")
    coco = {
        "images": [
            {
                "id": pairs["t-B1"].candidate.lineage.source_id,
                "file_name": "images/t.png",
                "width": S,
                "height": S,
                "caption": "a person before a blue backdrop",
                "subject": "woman",
            }
        ],
        "annotations": [
            {
                "id": 1,
                "image_id": pairs["t-B1"].candidate.lineage.source_id,
                "label": "woman",
                "role": "subject",
                "bbox": [20, 12, 24, 52],
            },
            {
                "id": 2,
                "image_id": pairs["t-B1"].candidate.lineage.source_id,
                "label": "face",
                "role": "face",
                "bbox": [26, 14, 14, 18],
            },
        ],
    }
    (source / "annotations.json").write_text(json.dumps(coco))
    assert measure.reannotated(pairs, source) == 1
    assert [r.box.xyxy for r in pairs["t-B1"].grounding.regions if r.role == "face"] == [(26.0, 14.0, 40.0, 32.0)]
    assert measure.reannotated(pairs, source) == 0
    with pytest.raises(SystemExit, match="units t-B1 are in an earlier --run too"):
        measure.main(["--run", str(run), "--run", str(tmp_path / "frozen"), "--labels", str(tmp_path / "labels.json")])


FIGURES = {
    "date": "2026-11-29",
    "profile": "local",
    "pairs": 4,
    "bad": 3,
    "good": 1,
    "limits_fingerprint": limits_fingerprint(load_profile("local").gates.model_dump(mode="json")),
    "targets": {"recall %": 95.0, "false quarantines %": 10.0},
    "gates": {"of the face oval changed": {"stopped_bad": {"ear_removed": 2}, "stopped_good": 0}},
    "recall": {
        "overall %": 66.7,
        "stopped": 2,
        "by_defect": {
            "ear_removed": {"pairs": 2, "stopped": 2, "recall %": 100.0},
            "seam": {"pairs": 1, "stopped": 0, "recall %": 0.0},
        },
    },
    "false_quarantines": {"stopped": 0, "share %": 0.0},
    "misses": [{"id": "x~seam", "defect": "seam"}],
}


def test_the_corpus_view_flags_figures_measured_with_other_limits():
    limits = load_profile("local").gates.model_dump(mode="json")
    view = corpus_view(FIGURES, limits)
    assert view["stale"] is False and view["recall"] == 66.7 and view["misses"] == 1
    assert view["rows"]["of the face oval changed"] == {"ear_removed": 2, "seam": 0, "good pairs stopped": 0}
    assert view["rows"]["all gates (recall %)"] == {"ear_removed": 100.0, "seam": 0.0, "good pairs stopped": 0.0}
    assert corpus_view(FIGURES, limits | {"max_old_rim": 0.3})["stale"] is True
    assert corpus_view(FIGURES, None)["stale"] is None


def test_the_audit_page_shows_the_gate_corpus_beside_the_human_verification(tmp_path, capsys):
    from test_export import make_run

    from perceptforge.audit.run import audit
    from perceptforge.errors import InputError
    from perceptforge.outputs.export import export_split

    out = tmp_path / "s"
    export_split(make_run(tmp_path), out, formats=("jsonl",))
    fixture = tmp_path / "gate_corpus.json"
    fixture.write_text(json.dumps(FIGURES))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["profile"]["gates"] = load_profile("local").gates.model_dump(mode="json")
    (out / "manifest.json").write_text(json.dumps(manifest))
    doc = audit([out], out, gate_corpus=fixture)
    assert doc["gate_corpus"]["stale"] is False and doc["gate_corpus"]["bad"] == 3
    page = (out / "audit.html").read_text()
    human, corpus = page.index('id="human_verification"'), page.index('id="gate_corpus"')
    assert human < corpus < page.index('id="flagged"')  # right after what the annotators found
    assert "the gates stopped 66.7% of the bad pairs (target at least 95%)" in page
    assert '<th>of the face oval changed</th><td class="n">2</td><td class="n">0</td>' in page
    from perceptforge.cli.audit import print_audit

    print_audit(doc, out)
    said = " ".join(capsys.readouterr().out.split())
    assert "gate corpus (2026-11-29, 4 pairs labelled by looking): the gates stop 66.7% of the bad pairs" in said
    manifest["profile"]["gates"]["max_old_rim"] = 0.5  # the split was gated with other limits
    (out / "manifest.json").write_text(json.dumps(manifest))
    audit([out], out, gate_corpus=fixture)
    assert "stale: measured with gate limits" in (out / "audit.html").read_text()
    fixture.write_text(json.dumps({"date": "x"}))
    with pytest.raises(InputError, match="gate corpus's figures lack pairs, bad"):
        audit([out], out, gate_corpus=fixture)


def test_an_object_on_the_subject_the_edit_painted_over_is_quarantined(candidates):
    """A lapel pin (an annotated object on the subject, ``worn_objects``) that the mask gave to the background, the
    new scene painted over it: what stays with the subject was replaced. Judged without the objects on the subject,
    the pair passes every gate."""
    from perceptforge.tasks.gates import pair_gates

    gates = load_profile("local").gates
    nat, swapped, mask = background_swap()
    pin = (30.0, 40.0, 36.0, 46.0)
    painted_over = mask.copy()
    painted_over[40:46, 30:36] = True
    removed = swapped.copy()
    removed[40:46, 30:36] = (0, 200, 0)  # the new scene's green where the pin was
    b1 = candidates["B1"]
    args = (Image.fromarray(nat), Image.fromarray(removed), painted_over, b1, None, gates, None, SUBJECT)
    assert pair_gates(*args, {}, {})[1] is None
    measured, reason, _, _ = pair_gates(*args, {}, {"pin": pin})
    assert measured["kept_replaced:pin"] == 1.0
    assert "replaced with the background" in (reason or "")
