"""Drawing the outlines of a source folder's regions in Label Studio (``perceptforge sources outline``).

A drawn outline (an annotation's COCO ``segmentation``) is what a background edit keeps and what a recolour
changes, to the pixel, so it needs a drawing tool with a zoom. ``push`` gives every region whose outline a run uses
(the ``subject``, a ``hair`` region) one task: the photo with the region's box, its outline so far as a suggestion.
``pull`` writes what was drawn back into the annotation file: each ``outline`` polygon as a COCO polygon in pixels,
each ``hole`` polygon joined to the outline around it by a zero-width bridge (COCO's way to draw a hole; the
rasteriser's even-odd rule keeps it open).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from perceptforge.annotation.labeling import config_text, rectangle_result
from perceptforge.annotation.labelstudio import LabelStudio
from perceptforge.annotation.sync import ensure_project, ensure_storage
from perceptforge.annotation.task_data import local_files_url
from perceptforge.data.geometry import xywh_to_xyxy
from perceptforge.errors import InputError, PerceptforgeError
from perceptforge.fileio import atomic_write_text, exclusive, read_json, write_json
from perceptforge.logic.outline import Point, with_holes
from perceptforge.prompts.library import load_prompt
from perceptforge.store.sources import outline_of, read_source_dir, resolve_inside

KIND = "outline"
MODEL_VERSION = "annotation file"
STATE = Path(".perceptforge", "outlines.json")  # the project's id per server, beside the annotation file
# one push or pull of a folder at a time: two pushes would make two projects or import a task twice, two pulls (or
# a pull and a person's edit through another pull) would each rewrite the annotation file from what they read
LOCK = Path(".perceptforge", "outlines.lock")


@dataclass(frozen=True)
class Target:
    """One region to outline: an annotation of the folder's annotation file."""

    key: str  # "<image id>/<annotation id>": the task's identity across pushes
    annotation_id: object
    label: str
    role: str
    file_name: str
    width: int
    height: int
    box: tuple[float, float, float, float]  # pixels, x0 y0 x1 y1
    outline: list[list[float]] | None


def needs_outline(region: dict) -> bool:
    """The regions a run reads an outline of: the subject (a background edit keeps it) and hair (a recolour)."""
    return region.get("role") == "subject" or region.get("label") == "hair"


def targets(source_dir: Path, annotation_file: str = "annotations.json") -> list[Target]:
    """Every region of the folder that a drawn outline serves, in the file's order. An annotation without an
    ``id`` cannot be found again on pull and is refused, naming it."""
    found = []
    for entry in read_source_dir(source_dir, annotation_file):
        seen: dict[str, int] = {}
        for k, region in enumerate(entry.regions):
            if not needs_outline(region):
                continue
            where = f"{source_dir / annotation_file}: image {entry.source_id}, annotation {k} ({region.get('label')})"
            if region.get("id") is None:
                raise InputError(where, "needs an 'id' so that its outline can be written back to it")
            key = f"{entry.source_id}/{region['id']}"
            if key in seen:
                raise InputError(
                    where,
                    f"id {region['id']!r} is also the id of annotation {seen[key]} of this image: an outline is "
                    "written back by its annotation's id, so each needs its own",
                )
            seen[key] = k
            found.append(
                Target(
                    key=key,
                    annotation_id=region["id"],
                    label=str(region.get("label") or ""),
                    role=str(region.get("role") or "object"),
                    file_name=entry.file_name,
                    width=entry.width,
                    height=entry.height,
                    box=xywh_to_xyxy(region["bbox"]),
                    outline=outline_of(region, entry.width, entry.height, where),
                )
            )
    return found


# --- polygons: Label Studio's percentages of the image ⇄ COCO pixels --------------------------------------------
def polygon_result(points: list[Point], width: int, height: int, label: str) -> dict:
    return {
        "from_name": "outline",
        "to_name": "image",
        "type": "polygonlabels",
        "original_width": width,
        "original_height": height,
        "value": {
            "points": [[100 * x / width, 100 * y / height] for x, y in points],
            "closed": True,
            "polygonlabels": [label],
        },
    }


def coco_points(flat: list[float]) -> list[Point]:
    return list(zip(flat[0::2], flat[1::2], strict=True))


def suggestion(target: Target) -> list[dict]:
    """The region's box, and its outline so far as polygons to correct (a hole stays bridged, as it was drawn)."""
    result = [rectangle_result("box", "image", target.box, target.width, target.height, "annotated box")]
    for part in target.outline or []:
        result.append(polygon_result(coco_points(part), target.width, target.height, "outline"))
    return result


def drawn_polygons(
    result: list[dict], width: int, height: int, where: str
) -> tuple[list[list[Point]], list[list[Point]]]:
    """(outlines, holes) in pixels from one annotation's result; a point placed a little past the image's edge
    (Label Studio allows it) is taken to the edge; a polygon of fewer than three points is refused."""
    outlines: list[list[Point]] = []
    holes: list[list[Point]] = []
    for r in result:
        if r.get("type") != "polygonlabels":
            continue
        value = r.get("value") or {}
        labels = value.get("polygonlabels") or ["outline"]
        try:
            points = [
                (
                    round(min(max(float(x), 0.0), 100.0) * width / 100, 2),
                    round(min(max(float(y), 0.0), 100.0) * height / 100, 2),
                )
                for x, y in value.get("points") or []
            ]
        except (TypeError, ValueError):
            raise InputError(
                where, f"a polygon's points are not [x, y] pairs of numbers: {value.get('points')!r}"
            ) from None
        if len(points) < 3:
            raise InputError(where, f"a polygon ({labels[0]}) has {len(points)} points; it needs three or more")
        (holes if labels[0] == "hole" else outlines).append(points)
    return outlines, holes


def segmentation(outlines: list[list[Point]], holes: list[list[Point]], where: str) -> list[list[float]]:
    """COCO polygons: each outline with the holes inside it bridged in (``logic.outline.with_holes``); a hole
    inside no outline is refused, naming where (it would be drawn as a piece of the region)."""
    try:
        return with_holes(outlines, holes)
    except ValueError as exc:
        raise InputError(where, str(exc)) from None


# --- the project ---------------------------------------------------------------------------------------------
def project_settings(source_dir: Path) -> dict:
    tag = hashlib.sha256(str(source_dir.resolve()).encode()).hexdigest()[:6]
    return {
        "title": f"perceptforge outlines {source_dir.resolve().name} {tag}",
        "description": f"outlines of the regions of {source_dir.resolve()}",
        "label_config": config_text(KIND),
        "expert_instruction": load_prompt("annotation/outline_instructions").text,
        "show_instruction": True,
        "maximum_annotations": 1,
        "show_collab_predictions": True,
        "sampling": "Sequential sampling",
    }


def task_for(target: Target, source_dir: Path, document_root: Path) -> dict:
    image = resolve_inside(source_dir, target.file_name)
    return {
        "data": {
            "key": target.key,
            "what": f"Outline: {target.label} ({target.role})",
            "where": f"annotation {target.annotation_id} of {target.file_name} ({target.width}×{target.height})",
            "image": local_files_url(image, document_root),
        },
        "predictions": [{"model_version": MODEL_VERSION, "result": suggestion(target)}],
    }


def push(source_dir: Path, ls: LabelStudio, document_root: Path, annotation_file: str = "annotations.json") -> dict:
    """The folder's outline project on ``ls`` (made once, found again by its record or title) with a task for
    every region it lacks (by key). Returns {project, imported, already_there, url}."""
    source_dir = Path(source_dir).resolve()
    with exclusive(source_dir / LOCK):
        return _push(source_dir, ls, document_root, annotation_file)


def _push(source_dir: Path, ls: LabelStudio, document_root: Path, annotation_file: str) -> dict:
    found = targets(source_dir, annotation_file)
    try:
        local_files_url(source_dir, document_root)
    except ValueError as exc:
        raise PerceptforgeError(str(exc)) from None
    state_path = source_dir / STATE
    record = read_json(state_path) if state_path.exists() else {}
    record = ensure_project(ls, project_settings(source_dir), record)
    write_json(state_path, record)  # at once, so a failure later cannot make a second project
    ensure_storage(ls, record["id"], source_dir)
    present = {t["data"].get("key") for t in ls.export(record["id"])}
    new = [task_for(t, source_dir, document_root) for t in found if t.key not in present]
    if new:
        ls.import_tasks(record["id"], new)
    return {
        "project": record["id"],
        "imported": len(new),
        "already_there": len(found) - len(new),
        "url": f"{ls.url.rstrip('/')}/projects/{record['id']}/data",
    }


def latest(task: dict) -> dict | None:
    """The task's newest submitted (not skipped) annotation."""
    done = [a for a in task.get("annotations") or [] if not a.get("was_cancelled")]
    return max(done, key=lambda a: (a.get("updated_at") or "", a.get("id") or 0), default=None)


def pull(source_dir: Path, ls: LabelStudio, annotation_file: str = "annotations.json") -> dict:
    """Write each task's newest annotation back as its region's ``segmentation`` (replacing the old one;
    none drawn removes it). The annotation file is checked as a whole before it is replaced, in one rename.
    Returns {changed: [key …], removed: [key …], unchanged: n, waiting: n}."""
    source_dir = Path(source_dir).resolve()
    with exclusive(source_dir / LOCK):
        return _pull(source_dir, ls, annotation_file)


def _pull(source_dir: Path, ls: LabelStudio, annotation_file: str) -> dict:
    state_path = source_dir / STATE
    if not state_path.exists():
        raise PerceptforgeError(
            f"{source_dir} has no outline project yet: run `perceptforge sources outline push` first"
        )
    record = read_json(state_path)
    project_id = record.get("servers", {}).get(ls.url.rstrip("/"))
    if project_id is None:
        raise PerceptforgeError(
            f"{source_dir}'s outline project was pushed to {sorted(record.get('servers', {}))}, not {ls.url}"
        )
    by_key = {t.key: t for t in targets(source_dir, annotation_file)}
    drawn: dict[str, list[list[float]] | None] = {}
    waiting = 0
    for task in ls.export(project_id):
        key = task["data"].get("key")
        annotation = latest(task)
        if key not in by_key or annotation is None:
            waiting += annotation is None
            continue
        target = by_key[key]
        where = (
            f"outline task {task.get('id')} ({target.label}, annotation {target.annotation_id} of {target.file_name})"
        )
        outlines, holes = drawn_polygons(annotation.get("result") or [], target.width, target.height, where)
        drawn[key] = segmentation(outlines, holes, where) or None
    path = resolve_inside(source_dir, annotation_file)
    doc = read_json(path)
    report: dict = {"changed": [], "removed": [], "unchanged": 0, "waiting": waiting}
    for ann in doc.get("annotations", []):
        key = f"{ann.get('image_id')}/{ann.get('id')}"
        if key not in drawn:
            continue
        if drawn[key] == (ann.get("segmentation") or None):
            report["unchanged"] += 1
        elif drawn[key] is None:
            ann.pop("segmentation", None)
            report["removed"].append(key)
        else:
            ann["segmentation"] = drawn[key]
            outline_of(ann, by_key[key].width, by_key[key].height, f"{path}: annotation {ann.get('id')}")
            report["changed"].append(key)
    if report["changed"] or report["removed"]:
        # the file's own key order kept (a reordered file is a diff a person has to read)
        atomic_write_text(path, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    return report
