"""Source directories: COCO-style annotation files, read into typed records.

A source directory holds images and one annotation file (``annotations.json`` by default) in COCO's
layout (``images``, ``annotations`` with ``bbox`` as xywh, ``categories``, ``licenses``) plus these
perceptforge fields, documented in ``data/SCHEMA.md``:

- on an image: ``caption`` (str), ``subject`` (the main subject's noun or null), ``attributes``
  (attribute → value for the main subject);
- on an annotation: ``label`` (free-text noun) and ``role`` (``subject`` | ``object`` | ``face`` | ``other``).

Problems with one image (missing file, a path outside the directory, a box outside the image) are
returned as that image's problem, so the caller can quarantine it and go on with the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from perceptforge.data.schema import CODIS_CATEGORIES, MME_DOMAINS, Box, Grounding, Region
from perceptforge.errors import InputError, describe_validation_error
from perceptforge.fileio import read_json
from perceptforge.store.rundir import safe_name


@dataclass(frozen=True)
class SourceEntry:
    """One image of a source directory as its annotation file describes it."""

    source_id: str
    file_name: str
    width: int
    height: int
    licence: str
    attribution: str
    caption: str
    subject: str | None
    attributes: dict[str, str]
    regions: list[dict] = field(default_factory=list)
    # per-task extras (BLINK-style flows): name → file in the source folder, e.g. a disparity map
    extras: dict[str, str] = field(default_factory=dict)
    # a view in a sequence of one scene (Multi-view Reasoning): sequence name, camera yaw in degrees (right
    # positive), and whether it also serves other tasks (a secondary view does not)
    pose: dict | None = None
    synthetic: bool = False  # rendered, not photographed (never the "real photograph" of Forensic Detection)
    # the human-authored flows: MME-RealWorld's domain and subtask, CODIS's category, when the source knows them
    benchmark_labels: dict[str, str] = field(default_factory=dict)
    style: str | None = None  # a painting's art style (BLINK Art Style)
    count_labels: list[str] = field(default_factory=list)  # what to count with a detector (BLINK Counting)
    # labels every instance of which in the photo is boxed (BLINK Counting and Object Localization count on it)
    complete_labels: list[str] = field(default_factory=list)
    # photos sharing a scene name show one scene or subject from different views (BLINK Visual Similarity)
    scene: str | None = None
    # pairwise reflectance judgements (IIW style): {"a": (x, y), "b": (x, y), "darker": "a" | "b" | "equal"}
    reflectance: list[dict] = field(default_factory=list)


# C0/C1 controls (NUL included) and the bidirectional embeddings, overrides and isolates: invisible, they
# would reorder or hide text in questions and in report.html.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")


def clean_text(value: object, where: str) -> str:
    """``value`` as text (a number is written as one); a list, a mapping, true/false, or control or
    bidirectional-override characters are refused, naming the place."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(where, f"must be text, got {type(value).__name__} {value!r}")
    text = str(value)
    bad = _CONTROLS.search(text)
    if bad:
        raise InputError(where, f"contains the control character U+{ord(bad.group()):04X}: {text!r}")
    return text


def read_source_dir(source_dir: str | Path, annotation_file: str = "annotations.json") -> list[SourceEntry]:
    """Parse the annotation file; structural errors (not a COCO file, duplicate ids, text with control
    characters, attributes that are not a mapping) raise, naming the file and the entry."""
    source_dir = Path(source_dir)
    if not source_dir.is_dir():
        raise InputError(str(source_dir), "the source must be a directory (images and an annotation file)")
    path = resolve_inside(source_dir, annotation_file)
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise InputError(str(path), "not a COCO-style file: expected an object with an 'images' list")
    licences = {lic.get("id"): lic for lic in doc.get("licenses", []) if isinstance(lic, dict)}
    by_image: dict[object, list[dict]] = {}
    for k, ann in enumerate(doc.get("annotations", [])):
        if not isinstance(ann, dict) or "image_id" not in ann or "bbox" not in ann:
            raise InputError(f"{path}: annotations[{k}]", "needs 'image_id' and 'bbox'")
        by_image.setdefault(ann["image_id"], []).append(ann)
    entries = []
    seen: dict[str, int] = {}
    names: dict[str, tuple[int, object]] = {}
    for k, img in enumerate(doc["images"]):
        where = f"{path}: images[{k}]"
        try:
            image_id, file_name = img["id"], img["file_name"]
            width, height = int(img["width"]), int(img["height"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(where, f"needs id, file_name, width, height ({exc})") from None
        # Ids become file names and dictionary keys as text: 1 and "1" would be one source.
        if str(image_id) in seen:
            raise InputError(where, f"id {image_id!r} is already used by images[{seen[str(image_id)]}]")
        seen[str(image_id)] = k
        # ... and as file names made safe (``safe_name``), on a file system that may ignore case: "a b" and "a_b",
        # or "A" and "a", would write one file for two sources.
        name = safe_name(str(image_id))
        if name.casefold() in names:
            j, other = names[name.casefold()]
            raise InputError(
                where,
                f"id {image_id!r} makes the file name {name!r}, as images[{j}]'s id {other!r} does: give ids that "
                "differ in letters or digits, not only in case, spaces or punctuation",
            )
        names[name.casefold()] = (k, image_id)
        attributes = img.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise InputError(
                where, f"'attributes' must be a mapping of attribute → value, got {type(attributes).__name__}"
            )
        lic = licences.get(img.get("license"), {})
        subject = img.get("subject")
        regions = by_image.get(image_id, [])
        for ann in regions:
            if ann.get("label") is not None:
                clean_text(ann["label"], f"{where} annotation {ann.get('id')} label")
            check_keypoints(ann, width, height, f"{where} annotation {ann.get('id')}")
        entries.append(
            SourceEntry(
                source_id=clean_text(image_id, f"{where} id"),
                file_name=clean_text(file_name, f"{where} file_name"),
                width=width,
                height=height,
                licence=str(lic.get("name") or "unknown"),
                attribution=str(lic.get("url") or ""),
                caption=clean_text(img.get("caption") or "", f"{where} caption"),
                subject=clean_text(subject, f"{where} subject") if subject else None,
                attributes={
                    clean_text(a, f"{where} attributes"): clean_text(v, f"{where} attributes.{a}")
                    for a, v in attributes.items()
                    if v
                },
                regions=regions,
                extras=extras_of(source_dir, img, where),
                pose=pose_of(img, where),
                synthetic=bool(img.get("synthetic", False)),
                benchmark_labels=benchmark_labels_of(img, where),
                style=clean_text(img["style"], f"{where} style") if img.get("style") else None,
                count_labels=[clean_text(v, f"{where} count_labels") for v in img.get("count_labels") or []],
                complete_labels=complete_labels_of(img, regions, where),
                scene=clean_text(img["scene"], f"{where} scene") if img.get("scene") else None,
                reflectance=reflectance_of(img, width, height, where),
            )
        )
    # after the images' own checks: a duplicate or missing image id is the error to show first
    image_ids = {
        img.get("id") for img in doc["images"] if isinstance(img, dict) and isinstance(img.get("id"), (str, int))
    }
    for image_id, anns in by_image.items() if entries else ():  # no images at all: the caller's one line says so
        if image_id not in image_ids:  # 1 and "1" are two ids here, as in the look-up below
            # an annotation for no image would be dropped without a word: the box a user drew, lost
            k = doc["annotations"].index(anns[0])
            raise InputError(f"{path}: annotations[{k}]", f"image_id {image_id!r} names no image in 'images'")
    return entries


def complete_labels_of(img: dict, regions: list[dict], where: str) -> list[str]:
    """``complete_labels``: labels of this image every instance of which is boxed; each must name a label one of
    the image's boxes has (a typo would otherwise silently declare nothing)."""
    declared = img.get("complete_labels") or []
    if not isinstance(declared, list):
        raise InputError(where, "complete_labels must be a list of labels every instance of which is boxed")
    labels = [clean_text(v, f"{where} complete_labels") for v in declared]
    boxed = {str(r.get("label")) for r in regions if r.get("label") is not None}
    unknown = [label for label in labels if label not in boxed]
    if unknown:
        raise InputError(where, f"complete_labels names {unknown}, which no box of this image has")
    return labels


def pose_of(img: dict, where: str) -> dict | None:
    """``{"sequence": name, "yaw": degrees, "reference": bool}`` when the image is a view of a sequence."""
    pose = img.get("pose")
    if pose is None:
        return None
    if not isinstance(pose, dict) or not isinstance(pose.get("sequence"), str):
        raise InputError(where, "pose must be an object with a 'sequence' name and a 'yaw' in degrees")
    try:
        yaw = float(pose["yaw"])
    except (KeyError, TypeError, ValueError):
        raise InputError(where, f"pose.yaw must be a number of degrees, got {pose.get('yaw')!r}") from None
    return {
        "sequence": clean_text(pose["sequence"], f"{where} pose.sequence"),
        "yaw": yaw,
        "reference": bool(pose.get("reference", True)),
    }


def point_of(value: object, width: int, height: int, where: str) -> tuple[float, float]:
    """An ``[x, y]`` pixel point inside the image, else an error naming the place."""
    if not (isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value)):
        raise InputError(where, f"expected a point [x, y] in pixels, got {value!r}")
    x, y = float(value[0]), float(value[1])
    if not (0 <= x < width and 0 <= y < height):
        raise InputError(where, f"point {[x, y]} lies outside the {width}x{height} image")
    return x, y


def outline_of(ann: dict, width: int, height: int, where: str) -> list[list[float]] | None:
    """COCO's ``segmentation`` as polygons (``[[x0, y0, x1, y1, ...], ...]``, pixels), each point inside the
    image (its edge included); absent or empty is no outline. RLE is refused: draw polygons (Label Studio's
    COCO export writes them). How many points a polygon needs is the record's own check (``Region``)."""
    parts = ann.get("segmentation")
    if parts is None or parts == []:
        return None
    if isinstance(parts, dict):
        raise InputError(where, "segmentation is RLE; only polygons ([[x0, y0, x1, y1, ...], ...]) are read")
    if not isinstance(parts, list) or not all(isinstance(p, list) for p in parts):
        raise InputError(where, "segmentation must be a list of polygons, each [x0, y0, x1, y1, ...]")
    out = []
    for k, part in enumerate(parts):
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in part):
            raise InputError(where, f"segmentation polygon {k}: every coordinate must be a number")
        xs, ys = part[0::2], part[1::2]
        if xs and ys and (min(xs) < 0 or min(ys) < 0 or max(xs) > width or max(ys) > height):
            raise InputError(where, f"segmentation polygon {k} reaches outside the {width}x{height} image")
        out.append([float(v) for v in part])
    return out


def check_keypoints(ann: dict, width: int, height: int, where: str) -> None:
    """``keypoints`` ({name: [x, y]}, SPair-71k style: the same names correspond across objects of one label) and
    ``functional_keypoints`` ({action: {part: [x, y]}}, FunKPoint style: the same parts correspond across
    objects used for one action)."""
    named = ann.get("keypoints")
    if named is not None:
        if not isinstance(named, dict):
            raise InputError(where, "keypoints must be a mapping of name → [x, y]")
        for name, point in named.items():
            point_of(point, width, height, f"{where} keypoints.{name}")
    functional = ann.get("functional_keypoints")
    if functional is not None:
        if not isinstance(functional, dict) or not all(isinstance(v, dict) for v in functional.values()):
            raise InputError(where, "functional_keypoints must be a mapping of action → {part: [x, y]}")
        for action, parts in functional.items():
            for part, point in parts.items():
                point_of(point, width, height, f"{where} functional_keypoints.{action}.{part}")


def reflectance_of(img: dict, width: int, height: int, where: str) -> list[dict]:
    judgements = img.get("reflectance") or []
    if not isinstance(judgements, list):
        raise InputError(where, "reflectance must be a list of {a: [x, y], b: [x, y], darker: a|b|equal}")
    found = []
    for k, j in enumerate(judgements):
        at = f"{where} reflectance[{k}]"
        if not isinstance(j, dict) or j.get("darker") not in ("a", "b", "equal"):
            raise InputError(at, "needs a, b (points) and darker: 'a', 'b' or 'equal'")
        found.append(
            {
                "a": point_of(j.get("a"), width, height, at + ".a"),
                "b": point_of(j.get("b"), width, height, at + ".b"),
                "darker": j["darker"],
            }
        )
    return found


def benchmark_labels_of(img: dict, where: str) -> dict[str, str]:
    """``domain`` (one of MME-RealWorld's five), ``subtask`` and ``codis_category`` (one of CODIS's five)."""
    labels = {k: clean_text(img[k], f"{where} {k}") for k in ("domain", "subtask", "codis_category") if img.get(k)}
    for key, known in (("domain", MME_DOMAINS), ("codis_category", CODIS_CATEGORIES)):
        if key in labels and labels[key] not in known:
            raise InputError(where, f"{key} {labels[key]!r} is not one of {', '.join(known)}")
    return labels


EXTRAS = ("disparity",)


def extras_of(source_dir: Path, img: dict, where: str) -> dict[str, str]:
    """The image's per-task extra files (``"disparity": "depth/x.png"``), each checked to exist inside the folder."""
    found = {}
    for name in EXTRAS:
        if name in img:
            rel = clean_text(img[name], f"{where} {name}")
            path = resolve_inside(source_dir, rel)
            if not path.is_file():
                raise InputError(where, f"{name} file {rel} not found in {source_dir}")
            found[name] = rel
    return found


def resolve_inside(source_dir: str | Path, file_name: str) -> Path:
    """The file's path, refusing one that escapes the source directory (``../``, absolute, symlink out) or that is
    there but not a regular file: opening a named pipe waits for a writer that never comes, a device never ends."""
    root = Path(source_dir).resolve()
    candidate = (root / file_name).resolve()
    if not candidate.is_relative_to(root):
        raise InputError(file_name, f"points outside the source directory {root}")
    if candidate.exists() and not candidate.is_file():
        kind = "a folder" if candidate.is_dir() else "a named pipe, socket or device"
        raise InputError(str(candidate), f"is {kind}, not a regular file: refused")
    return candidate


def grounding_from_entry(entry: SourceEntry) -> Grounding:
    """The ``annotations`` grounder: caption, subject and regions straight from the annotation file."""
    where = f"source {entry.source_id} ({entry.file_name})"
    if not entry.subject:
        raise InputError(where, "no main subject annotated (image-level 'subject' is empty)")
    if not entry.caption:
        raise InputError(where, "no caption annotated")
    regions = []
    for ann in entry.regions:
        try:
            box = Box.from_xywh(ann["bbox"])
        except (ValueError, ValidationError) as exc:
            raise InputError(f"{where} annotation {ann.get('id')}", f"bad bbox {ann.get('bbox')}: {exc}") from None
        if not box.within(entry.width, entry.height):
            raise InputError(
                f"{where} annotation {ann.get('id')}",
                f"bbox {ann['bbox']} lies outside the {entry.width}x{entry.height} image",
            )
        role = ann.get("role", "object")
        outline = outline_of(ann, entry.width, entry.height, f"{where} annotation {ann.get('id')}")
        try:
            regions.append(Region(label=str(ann.get("label") or "object"), box=box, role=role, outline=outline))
        except ValidationError as exc:
            raise InputError(f"{where} annotation {ann.get('id')}", "; ".join(describe_validation_error(exc))) from None
    subjects = [r for r in regions if r.role == "subject"]
    if len(subjects) != 1:
        raise InputError(where, f"expected exactly one region with role 'subject', found {len(subjects)}")
    subject = Region(label=entry.subject, box=subjects[0].box, role="subject", outline=subjects[0].outline)
    return Grounding(
        source_id=entry.source_id,
        caption=entry.caption,
        subject=subject,
        regions=[r for r in regions if r.role != "subject"],
        attributes=entry.attributes,
        backend="annotations",
    )
