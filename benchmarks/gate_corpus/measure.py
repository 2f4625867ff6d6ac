"""The gate corpus: pairs labelled good or bad by looking, judged by every gate (``tasks/gates.pair_gates``, the
function the run's gate stage calls) with a profile's limits; prints each gate's catches by defect kind, the
recall on bad pairs, the false quarantines on good ones and every miss, and writes the figures as JSON (by default
``audit/gate_corpus.json``, which ``perceptforge audit`` shows beside what the annotators found).

    python benchmarks/gate_corpus/measure.py --run RUN_DIR            # judge the labelled corpus
    python benchmarks/gate_corpus/measure.py --run RUN_DIR --sheet DIR  # also draw every pair to look at

RUN_DIR is ``perceptforge run mvp --source PHOTOS --out RUN_DIR --seed 0`` on the photos ``labels.json`` names
(a run is byte-identical on a rerun); ``--run`` again adds another run (the hair-outlined photo's), ``--freeze DIR``
copies the labelled pairs into a run of their own, which ``--run DIR`` then reads. The corpus's pairs are that run's pairs, quarantined ones included, and
synthetic defects drawn into its good pairs (``defects.py``); ``labels.json`` holds each pair's label by the
manipulated image's SHA-256, so a pair that changed since it was looked at is reported, not judged.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the folder `gate_corpus` is found

from gate_corpus.defects import BACKGROUND_DEFECTS, HAIR_DEFECTS, Base, Drawn, NotApplicable, draw  # noqa: E402

from perceptforge.configs.profile import Gates, load_profile  # noqa: E402
from perceptforge.data.schema import Candidate, EditRecord, Grounding, Rendering  # noqa: E402
from perceptforge.logic.edit_region import kept_objects, worn_objects  # noqa: E402
from perceptforge.logic.gate_corpus import limits_fingerprint  # noqa: E402
from perceptforge.store.images import load_rgb  # noqa: E402
from perceptforge.store.rundir import RunDir, safe_name  # noqa: E402
from perceptforge.tasks.gates import pair_gates, pair_limits  # noqa: E402
from perceptforge.tasks.mask import hair_box  # noqa: E402

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels.json"
FIGURES = HERE.parents[1] / "audit" / "gate_corpus.json"
TARGETS = {"recall %": 95.0, "false quarantines %": 10.0}  # issue 41's acceptance


@dataclass
class CorpusPair:
    """One pair as ``pair_gates`` takes it, with its label (``defect``: the kind a bad pair shows; "" for good)."""

    id: str
    label: str  # "good" or "bad"
    defect: str
    natural: Image.Image
    manipulated: Image.Image
    mask: np.ndarray | None
    candidate: Candidate
    rendered: Rendering | None
    subject_box: tuple[float, float, float, float] | None
    origin: str = "run"  # or "synthetic"
    region: np.ndarray | None = None  # a synthetic defect's place, for the sheet
    seen: str = ""
    grounding: Grounding | None = None  # what the annotation says of the photo (boxes a gate may be given)


@dataclass
class Verdict:
    id: str
    label: str
    defect: str
    origin: str
    stopped: bool
    gate: str | None
    reason: str
    measurements: dict[str, float] = field(default_factory=dict)
    over: list[str] = field(default_factory=list)  # every limit the pair fails on its own (not only the first)


def gate_name(reason: str) -> str:
    """A gate's name from its failure's reason: the words without the figures (``2.6% of the face oval changed
    (at most 2.0%)`` → ``of the face oval changed``), so a gate added to ``pair_gates`` is counted under its own
    name with no list to keep here."""
    text = re.sub(r"\s*\((?:at most|at least)[^)]*\)", "", reason).split(":")[0]
    text = re.sub(r"[-+]?\d[\d.,]*%?", "", text)
    text = re.sub(r"^\s*only\b", "", text)
    return re.sub(r"\s+", " ", text).strip(" ,;")


def judge(pair: CorpusPair, gates: Gates, clip: Any = None) -> Verdict:
    """Every gate on the pair, as the run's gate stage runs them."""
    # what a background edit keeps with the subject, from the photo's annotation, as the run's gate stage is given it
    g = pair.grounding
    kept = None if g is None else {r.label: r.box.xyxy for r in kept_objects(g)}
    worn = None if g is None else {r.label: r.box.xyxy for r in worn_objects(g)}
    hair = None if g is None else hair_box(g)
    measured, reason, _, _ = pair_gates(
        pair.natural,
        pair.manipulated,
        pair.mask,
        pair.candidate,
        pair.rendered,
        gates,
        clip,
        pair.subject_box,
        kept,
        worn,
        hair,
    )
    masked = pair.mask is not None and bool(pair.mask.any()) and not bool(pair.mask.all())
    limits = pair_limits(gates, pair.candidate, pair.rendered, masked)
    return Verdict(
        pair.id,
        pair.label,
        pair.defect,
        pair.origin,
        reason is not None,
        None if reason is None else gate_name(reason),
        reason or "",
        measured,
        over_limits(measured, limits),
    )


def over_limits(measured: dict[str, float], limits: dict[str, Any]) -> list[str]:
    """The names of the limits (``GateLimit``s by measurement name; ``ear_changed`` covers ``ear_changed:left``)
    that the measurements fail, each gate on its own."""
    out = []
    for name, limit in limits.items():
        values = [v for k, v in measured.items() if k == name or k.startswith(name + ":")]
        if any(
            (limit.at_most is not None and v > limit.at_most) or (limit.at_least is not None and v < limit.at_least)
            for v in values
        ):
            out.append(name)
    return out


def figures(verdicts: Sequence[Verdict], fingerprint: str, date: str, profile: str) -> dict:
    """The corpus's figures: per gate the bad pairs it stopped by defect kind and the good pairs it stopped (a pair
    counts under the first gate that stops it, as in a run), the recall per defect kind and overall, the false
    quarantines, and every miss and false quarantine by id."""
    bad = [v for v in verdicts if v.label == "bad"]
    good = [v for v in verdicts if v.label == "good"]
    kinds = sorted({v.defect for v in bad})
    gates: dict[str, dict] = {}
    for v in verdicts:
        if v.stopped and v.gate is not None:
            row = gates.setdefault(v.gate, {"stopped_bad": {}, "stopped_good": 0})
            if v.label == "bad":
                row["stopped_bad"][v.defect] = row["stopped_bad"].get(v.defect, 0) + 1
            else:
                row["stopped_good"] += 1
    by_defect = {}
    for kind in kinds:
        of_kind = [v for v in bad if v.defect == kind]
        stopped = sum(v.stopped for v in of_kind)
        by_defect[kind] = {"pairs": len(of_kind), "stopped": stopped, "recall %": _pct(stopped, len(of_kind))}
    stopped_bad, stopped_good = sum(v.stopped for v in bad), sum(v.stopped for v in good)
    # each gate on its own: every pair whose measurement is over its limit, whichever gate a run would name first
    alone: dict[str, dict] = {}
    for v in verdicts:
        for name in v.over:
            row = alone.setdefault(name, {"stopped_bad": {}, "stopped_good": 0})
            if v.label == "bad":
                row["stopped_bad"][v.defect] = row["stopped_bad"].get(v.defect, 0) + 1
            else:
                row["stopped_good"] += 1
    return {
        "date": date,
        "profile": profile,
        "limits_fingerprint": fingerprint,
        "pairs": len(verdicts),
        "bad": len(bad),
        "good": len(good),
        "origins": dict(Counter(f"{v.origin}/{v.label}" for v in verdicts)),
        "targets": TARGETS,
        "gates": dict(sorted(gates.items())),
        "alone": dict(sorted(alone.items())),
        "recall": {"overall %": _pct(stopped_bad, len(bad)), "stopped": stopped_bad, "by_defect": by_defect},
        "false_quarantines": {"stopped": stopped_good, "share %": _pct(stopped_good, len(good))},
        "misses": [{"id": v.id, "defect": v.defect} for v in bad if not v.stopped],
        "false": [{"id": v.id, "gate": v.gate, "reason": v.reason} for v in good if v.stopped],
    }


def _pct(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(100 * part / whole, 1)


def table(doc: dict) -> str:
    """The figures as a Markdown table (what the note and the docs show), then the misses and false quarantines."""
    kinds = list(doc["recall"]["by_defect"])
    head = ["gate", *kinds, "good pairs stopped"]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for gate, row in doc["gates"].items():
        cells = [str(row["stopped_bad"].get(k, 0)) for k in kinds] + [str(row["stopped_good"])]
        lines.append(f"| {gate} | " + " | ".join(cells) + " |")
    by = doc["recall"]["by_defect"]
    lines.append("| **pairs** | " + " | ".join(str(by[k]["pairs"]) for k in kinds) + f" | {doc['good']} |")
    fq = doc["false_quarantines"]
    lines.append(
        "| **stopped by any gate** | "
        + " | ".join(f"{by[k]['stopped']} ({by[k]['recall %']}%)" for k in kinds)
        + f" | {fq['stopped']} ({fq['share %']}%) |"
    )
    r = doc["recall"]
    out = [
        f"gate corpus, {doc['date']}: {doc['pairs']} pairs ({doc['bad']} bad, {doc['good']} good; "
        + ", ".join(f"{k} {n}" for k, n in sorted(doc["origins"].items()))
        + f"), profile {doc['profile']}, limits {doc['limits_fingerprint']}",
        "",
        *lines,
        "",
        f"recall on bad pairs: {r['stopped']}/{doc['bad']} = {r['overall %']}% (target ≥ {TARGETS['recall %']}%); "
        f"false quarantines: {fq['stopped']}/{doc['good']} = {fq['share %']}% (target ≤ {TARGETS['false quarantines %']}%)",
    ]
    if doc.get("alone"):
        out += ["", "each gate on its own (every pair over its limit, whichever gate a run names first):", ""]
        out += [lines[0], lines[1]]
        for gate, row in doc["alone"].items():
            cells = [str(row["stopped_bad"].get(k, 0)) for k in kinds] + [str(row["stopped_good"])]
            out.append(f"| `{gate}` | " + " | ".join(cells) + " |")
    if doc["misses"]:
        out += ["", "missed (bad, passed every gate):"] + [f"- {m['id']} ({m['defect']})" for m in doc["misses"]]
    if doc["false"]:
        out += ["", "false quarantines (good, stopped):"] + [f"- {f['id']}: {f['reason']}" for f in doc["false"]]
    return "\n".join(out)


# --- the corpus from a run ------------------------------------------------------------------------------------


@dataclass
class RunPair:
    unit: str
    natural: Image.Image
    manipulated: Image.Image
    mask: np.ndarray | None
    candidate: Candidate
    rendered: Rendering | None
    grounding: Grounding
    manipulated_sha256: str

    def judged_as(self, pid: str, label: str, defect: str, drawn: Drawn | None = None, seen: str = "") -> CorpusPair:
        """This pair as the corpus judges it: as the run made it, or with a synthetic defect ``drawn`` into it."""
        return CorpusPair(
            pid,
            label,
            defect,
            self.natural,
            self.manipulated if drawn is None else Image.fromarray(drawn.manipulated),
            self.mask if drawn is None else drawn.mask,
            self.candidate,
            self.rendered,
            self.grounding.subject.box.xyxy,
            "run" if drawn is None else "synthetic",
            None if drawn is None else drawn.region,
            seen,
            grounding=self.grounding,
        )


def run_pairs(run_path: Path) -> dict[str, RunPair]:
    """Every pair the run made (``edits/``), passed or quarantined by the gates, by unit."""
    run = RunDir(run_path)
    out = {}
    for path in sorted((run_path / "edits").glob("*.json")):
        edit = EditRecord.model_validate_json(path.read_text())
        candidate = Candidate.model_validate_json(run.sub("candidates", f"{safe_name(edit.unit)}.json").read_text())
        source = candidate.lineage.source_id
        grounding = Grounding.model_validate_json(run.sub("groundings", f"{safe_name(source)}.json").read_text())
        out[edit.unit] = RunPair(
            edit.unit,
            load_rgb(run.sub(edit.pair.natural.path)),
            load_rgb(run.sub(edit.pair.manipulated.path)),
            run.load_mask(edit.pair.mask.path) if edit.pair.mask else None,
            candidate,
            edit.edit.rendered,
            grounding,
            edit.pair.manipulated.sha256,
        )
    return out


def reannotated(pairs: dict[str, RunPair], source_dir: Path) -> int:
    """Give each pair whose photo ``source_dir`` annotates that annotation as it is now (an object given the role
    ``occluder`` since the run, say): the gates are judged with it and defects drawn by it. Returns how many pairs
    changed."""
    from perceptforge.store.sources import grounding_from_entry, read_source_dir

    now = {e.source_id: grounding_from_entry(e) for e in read_source_dir(source_dir)}
    changed = 0
    for pair in pairs.values():
        grounding = now.get(pair.candidate.lineage.source_id)
        if grounding is not None and grounding != pair.grounding:
            pair.grounding, changed = grounding, changed + 1
    return changed


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def base_of(pair: RunPair) -> Base:
    """What a defect is drawn from: the pair and its photo's annotated boxes. Objects that may stand in front of the
    subject: those the annotation calls ``occluder``, and those whose box lies (90% or more) inside the subject's,
    smaller than a third of it, and not on the face (glasses): a microphone, a lei; a flag or a painting behind the
    subject is larger or reaches out of its box."""
    g = pair.grounding
    subject = g.subject.box.xyxy
    area = (subject[2] - subject[0]) * (subject[3] - subject[1])
    faces = [r.box.xyxy for r in g.regions if r.role == "face"]
    objects = []
    for r in g.regions:
        box = r.box.xyxy
        size = (box[2] - box[0]) * (box[3] - box[1])
        inside = _overlap(box, subject) >= 0.9 * size
        worn = any(_overlap(box, f) >= 0.5 * size for f in faces)
        # an occluder (the role SCHEMA gives an object that stays in front of the subject) is one by its annotation
        front = r.role == "occluder" or (r.role == "object" and size < area / 3 and inside)
        if front and r.label != "hair" and not worn:
            objects.append(box)
    return Base(
        np.asarray(pair.natural),
        np.asarray(pair.manipulated),
        pair.mask,
        subject,
        faces=faces,
        hair=[r.box.xyxy for r in g.regions if r.label == "hair"],
        objects=objects,
        colour=pair.rendered.colour if pair.rendered is not None else None,
    )


def defects_for(pair: RunPair) -> tuple[str, ...]:
    """The synthetic defects a good pair can carry: a background edit's, or a hair recolour's."""
    if pair.candidate.edit_kind.value == "background_substitution" and pair.mask is not None:
        return BACKGROUND_DEFECTS
    if pair.rendered is not None and pair.rendered.region == "hair":
        return HAIR_DEFECTS
    return ()


def synthetic_seed(base: str, kind: str) -> int:
    """The seed of a synthetic defect: from its base pair's unit and its kind, so adding a photo changes no other."""
    return int.from_bytes(hashlib.sha256(f"{base}~{kind}".encode()).digest()[:4], "big")


def synthetic_id(base: str, kind: str) -> str:
    return f"{base}~{kind}"


def pixels_sha256(image: Image.Image) -> str:
    """A drawn pair's name by its pixels (not by a PNG encoder's bytes, which a Pillow upgrade may change)."""
    a = np.asarray(image)
    return hashlib.sha256(repr(a.shape).encode() + a.tobytes()).hexdigest()


def build(labels: dict, pairs: dict[str, RunPair]) -> tuple[list[CorpusPair], list[str]]:
    """The labelled pairs found in the run, and a line for each label whose pair is missing or changed since it was
    looked at (those are not judged: their label may no longer be true)."""
    corpus, problems = [], []
    entries = labels["pairs"]
    for entry in entries:
        unit = entry["unit"]
        pair = pairs.get(unit)
        if pair is None:
            problems.append(f"{unit}: not in the run (no edit made)")
            continue
        if pair.manipulated_sha256 != entry["manipulated"]:
            problems.append(f"{unit}: the pair changed since it was labelled: look again")
            continue
        corpus.append(pair.judged_as(unit, entry["label"], entry.get("defect", ""), seen=entry.get("seen", "")))
    for entry in labels.get("synthetic", []):
        base_unit, kind = entry["id"].rsplit("~", 1)
        pair = pairs.get(base_unit)
        if pair is None or not any(
            p["unit"] == base_unit and p["manipulated"] == pair.manipulated_sha256 and p["label"] == "good"
            for p in entries
        ):
            problems.append(f"{entry['id']}: its base pair is not a labelled good pair of the run")
            continue
        try:
            drawn = draw(kind, base_of(pair), synthetic_seed(base_unit, kind))
        except NotApplicable as exc:
            problems.append(f"{entry['id']}: {exc}")
            continue
        if entry.get("manipulated") and pixels_sha256(Image.fromarray(drawn.manipulated)) != entry["manipulated"]:
            problems.append(f"{entry['id']}: the drawn pair changed since it was labelled: look again")
            continue
        defect = entry.get("defect", kind) if entry["label"] == "bad" else ""
        corpus.append(pair.judged_as(entry["id"], entry["label"], defect, drawn, entry.get("seen", "")))
    return corpus, problems


def unlabelled(labels: dict, pairs: dict[str, RunPair]) -> list[CorpusPair]:
    """The run's pairs without a label, and every synthetic defect a labelled good pair can carry that has none:
    what to look at next (labelled ``?``)."""
    labelled = {e["unit"] for e in labels["pairs"]} | {e["id"] for e in labels.get("synthetic", [])}
    good = {e["unit"] for e in labels["pairs"] if e["label"] == "good"}
    out = []
    for unit, pair in pairs.items():
        if unit not in labelled:
            out.append(pair.judged_as(unit, "?", ""))
        if unit not in good:
            continue
        for kind in defects_for(pair):
            sid = synthetic_id(unit, kind)
            if sid in labelled:
                continue
            try:
                drawn = draw(kind, base_of(pair), synthetic_seed(unit, kind))
            except NotApplicable:
                continue
            out.append(pair.judged_as(sid, "?", kind, drawn))
    return out


def freeze(run_path: Path, labels: dict, out: Path) -> int:
    """Copy the labelled pairs of the run at ``run_path`` (their edit, candidate and grounding records and their
    images) into ``out``, a run directory holding those units alone, which ``--run`` reads as it reads a run: the
    corpus then stays the pairs that were looked at while the stages that make pairs change. Returns how many
    pairs were copied."""
    import shutil

    run, frozen = RunDir(run_path), RunDir(out)
    units = [e["unit"] for e in labels["pairs"]]
    copied = 0
    for unit in units:
        name = safe_name(unit)
        if not run.sub("edits", f"{name}.json").is_file():
            continue
        edit = EditRecord.model_validate_json(run.sub("edits", f"{name}.json").read_text())
        candidate = Candidate.model_validate_json(run.sub("candidates", f"{name}.json").read_text())
        source = safe_name(candidate.lineage.source_id)
        refs = [edit.pair.natural, edit.pair.manipulated, *([edit.pair.mask] if edit.pair.mask else [])]
        for rel in [f"edits/{name}.json", f"candidates/{name}.json", f"groundings/{source}.json"] + [
            r.path for r in refs
        ]:
            target = frozen.sub(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(run.sub(rel), target)
        copied += 1
    return copied


def entries_to_fill(todo: Sequence[CorpusPair], pairs: dict[str, RunPair]) -> dict[str, list[dict]]:
    """``labels.json`` entries for the unlabelled pairs, their label and what was seen left to fill in."""
    out: dict[str, list[dict]] = {"pairs": [], "synthetic": []}
    for p in todo:
        if p.origin == "run":
            out["pairs"].append({"unit": p.id, "manipulated": pairs[p.id].manipulated_sha256, "label": "?", "seen": ""})
        else:
            sha = pixels_sha256(p.manipulated)
            out["synthetic"].append({"id": p.id, "manipulated": sha, "label": "?", "defect": p.defect, "seen": ""})
    return out


# --- looking at pairs -----------------------------------------------------------------------------------------


def sheet(pair: CorpusPair, verdict: Verdict | None = None) -> Image.Image:
    """The pair side by side at 100%, and below it at 2× a crop of 256 px square of the photo (a synthetic defect's
    place; a background or whole-image edit's head; else the change's middle), with its id, label and verdict."""
    a, b = np.asarray(pair.natural), np.asarray(pair.manipulated)
    where = pair.region if pair.region is not None and pair.region.any() else np.abs(a.astype(int) - b).max(2) > 8
    h, w = a.shape[:2]
    whole = pair.mask is None or pair.mask.all() or pair.candidate.edit_kind.value == "background_substitution"
    if (pair.region is None or not pair.region.any()) and whole and pair.subject_box is not None:
        # a background or whole-image edit: the head, where the cut and the filter are judged first
        sx0, sy0, sx1, sy1 = pair.subject_box
        cy, cx = int(sy0 + 0.2 * (sy1 - sy0)), int((sx0 + sx1) / 2)
    elif where.any():
        ys, xs = np.nonzero(where)
        cy, cx = int(np.median(ys)), int(np.median(xs))
    else:
        cy, cx = h // 2, w // 2
    half = 128
    x0, y0 = max(0, min(w - 2 * half, cx - half)), max(0, min(h - 2 * half, cy - half))
    box = (x0, y0, min(w, x0 + 2 * half), min(h, y0 + 2 * half))
    crops = [im.crop(box) for im in (pair.natural, pair.manipulated)]
    crops = [c.resize((2 * c.width, 2 * c.height), Image.Resampling.NEAREST) for c in crops]
    width = max(2 * w, sum(c.width for c in crops)) + 10
    out = Image.new("RGB", (width, 30 + h + 10 + crops[0].height), "white")
    out.paste(pair.natural, (0, 30))
    out.paste(pair.manipulated, (w + 10, 30))
    out.paste(crops[0], (0, 40 + h))
    out.paste(crops[1], (crops[0].width + 10, 40 + h))
    text = f"{pair.id}  label={pair.label} {pair.defect}"
    if verdict is not None:
        text += f"  -> {'STOPPED: ' + verdict.reason if verdict.stopped else 'passed'}"
    ImageDraw.Draw(out).text((4, 8), text, fill="black")
    return out


# --- the command ----------------------------------------------------------------------------------------------


def read_labels(path: Path) -> dict:
    try:
        labels = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(labels, dict) or not isinstance(labels.get("pairs"), list):
        raise SystemExit(f"{path}: labels are an object with a list 'pairs' (and 'synthetic')")
    for n, entry in enumerate([*labels.get("pairs", []), *labels.get("synthetic", [])]):
        if entry.get("label") not in ("good", "bad"):
            raise SystemExit(f"{path}: entry {n} ({entry.get('unit') or entry.get('id')}): label must be good or bad")
        if entry["label"] == "bad" and not entry.get("defect") and "~" not in entry.get("id", ""):
            raise SystemExit(f"{path}: entry {n} ({entry.get('unit')}): a bad pair names its defect")
    for n, entry in enumerate(labels.get("pairs", [])):
        if not entry.get("manipulated"):
            raise SystemExit(f"{path}: pairs[{n}] ({entry.get('unit')}): the manipulated image's SHA-256 is missing")
    return labels


def measure(
    corpus: Iterable[CorpusPair], gates: Gates, profile: str, date: str | None = None
) -> tuple[dict, list[Verdict]]:
    """Judge every pair; the figures and the verdicts. A synthetic pair whose base (the run pair its id starts with)
    is itself stopped is left out of the figures (``not_judged``): a gate that stops the base would be counted as
    catching the defect drawn into it."""
    verdicts = [judge(p, gates) for p in corpus]
    stopped = {v.id: v.reason for v in verdicts if v.stopped and v.origin == "run"}
    kept, left_out = [], []
    for v in verdicts:
        base = v.id.rsplit("~", 1)[0]
        if v.origin == "synthetic" and base in stopped:
            left_out.append(f"{v.id}: its base pair is stopped ({stopped[base]})")
        else:
            kept.append(v)
    date = date or dt.date.today().isoformat()
    doc = figures(kept, limits_fingerprint(gates.model_dump(mode="json")), date, profile)
    doc["not_judged"] = left_out
    return doc, kept


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--run",
        type=Path,
        action="append",
        required=True,
        help="an mvp run on the labelled photos (--seed 0), or a frozen copy; given again, another run",
    )
    ap.add_argument("--labels", type=Path, default=LABELS)
    ap.add_argument("--profile", default="local", help="whose gate limits judge the pairs (default: local)")
    ap.add_argument("--json", type=Path, default=FIGURES, help=f"where the figures go (default: {FIGURES})")
    ap.add_argument("--sheet", type=Path, help="draw every pair, labelled and not, into this folder to look at")
    ap.add_argument("--freeze", type=Path, help="copy the labelled pairs into this folder (a run of them alone)")
    ap.add_argument(
        "--annotations",
        type=Path,
        action="append",
        default=[],
        help="a source folder whose annotation replaces what the runs read of its photos (a role added since)",
    )
    args = ap.parse_args(argv)
    labels = read_labels(args.labels)
    if args.freeze:
        copied = sum(freeze(run, labels, args.freeze) for run in args.run)
        print(f"{copied} labelled pairs copied into {args.freeze}")
    pairs: dict[str, RunPair] = {}
    for run in args.run:
        found = run_pairs(run)
        twice = sorted(set(found) & set(pairs))
        if twice:
            raise SystemExit(f"{run}: units {', '.join(twice)} are in an earlier --run too")
        pairs |= found
    for folder in args.annotations:
        reannotated(pairs, folder)
    corpus, problems = build(labels, pairs)
    for line in problems:
        print(f"not judged: {line}")
    gates = load_profile(args.profile).gates
    doc, verdicts = measure(corpus, gates, args.profile)
    for line in doc["not_judged"]:
        print(f"not judged: {line}")
    doc["not_judged"] = problems + doc["not_judged"]
    if args.sheet:
        args.sheet.mkdir(parents=True, exist_ok=True)
        judged = {v.id: v for v in verdicts}
        for pair in corpus:
            sheet(pair, judged.get(pair.id)).save(args.sheet / f"{pair.id}.png")
        todo = unlabelled(labels, pairs)
        for pair in todo:
            sheet(pair, judge(pair, gates)).save(args.sheet / f"unlabelled_{pair.id}.png")
        (args.sheet / "unlabelled.json").write_text(json.dumps(entries_to_fill(todo, pairs), indent=1) + "\n")
        print(f"{len(corpus) + len(todo)} pairs drawn in {args.sheet} ({len(todo)} unlabelled: unlabelled.json)")
    print(table(doc))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(f"figures: {args.json}")


if __name__ == "__main__":
    main()
