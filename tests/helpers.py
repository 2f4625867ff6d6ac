"""Helpers shared by tests (importable because pytest puts tests/ on the path)."""

import sys

import numpy as np
from PIL import Image

# Gates that let every mask through: for tests of the stages after the mask, not of the gates.
OPEN_GATES = {
    "mask_area": {},
    "max_subject_in_mask": {},
    "max_old_kept": 1.0,
    "max_protected_in_mask": 1.0,
    "max_object_cut": 0.5,
    "max_object_replaced": 1.0,
    "max_ragged_outline": 1.0,
    # the referee gates still run and record their measurements (the same gates on every profile's path), but let
    # the noise of random weights through
    "max_hair_on_face": 1.0,
    "max_hair_skin_changed": 1.0,
    "max_hair_on_eyebrows": 1.0,
    "max_hair_in_background": 1.0,
    "max_face_changed": 1.0,
    "max_ear_changed": 1.0,
    "max_old_rim": 1.0,
    "max_old_patch": 1.0,
    "max_seam": 1.0,
    "max_person_cut": 1.0,
    "max_background_kept": 1.0,
    "max_kept_changed": 1.0,
    "max_kept_replaced": 1.0,
    "max_body_changed": 1.0,
    "max_side_hair_cut": 1.0,
}


def perceptforge_cmd() -> list[str]:
    return [sys.executable, "-m", "perceptforge.cli"]


def annotate(ls, task_id: int, result: list[dict]) -> dict:
    """Submit one annotation to task ``task_id`` as the account of client ``ls`` (what a person does in the
    labeling UI; the product only reads annotations)."""
    from perceptforge.annotation.labelstudio import SEND_ONCE, plain

    return ls.call(
        f"annotating task {task_id}",
        lambda: plain(ls.sdk().annotations.create(task_id, result=result, request_options=SEND_ONCE)),
    )


def validate_config(ls, project_id: int, label_config: str) -> None:
    """Have the server check ``label_config`` (ServerRefused, HTTP 400, when it is not a valid one)."""
    ls.call(
        "validating a labeling config",
        lambda: ls.sdk().projects.validate_label_config(project_id, label_config=label_config),
    )


def local_offers(template) -> list:
    """What the local profile's edit backends declare they can render for ``template`` (empty if none)."""
    from perceptforge.configs.profile import load_profile
    from perceptforge.flows.common import renderable_values

    prof = load_profile("local")
    offers, _ = renderable_values({template.id: template}, prof, prof.build("inpainter"), prof.build("editor"))
    return offers.get(template.id, [])


def candidate_for(template, grounding, source_sha256, writer, all_templates, seed, offered=None) -> dict:
    """A unit's candidate as the idea and questions stages write it (``candidates/<unit>.json``). The
    values drawn from are ``offered``, by default the local profile's, else (a category it cannot
    render) the template's list as a text-driven editor offers it."""
    from perceptforge.logic.renderings import from_alternatives
    from perceptforge.tasks.idea import make_idea
    from perceptforge.tasks.questions import make_candidate

    if offered is None:
        offered = local_offers(template) or from_alternatives(template, "sd-inpaint")
    idea = make_idea(template, grounding, writer, offered, seed)
    descriptions = {tid: t.cross_description for tid, t in all_templates.items()}
    return make_candidate(template, grounding, source_sha256, idea, writer, descriptions, seed).model_dump(
        mode="json", exclude_none=True
    )


def photo(w: int, h: int, seed: int = 0) -> Image.Image:
    """A noise image: enough texture for the tiny models, the same bytes for the same seed."""
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (h, w, 3), dtype=np.uint8))


def dist_info(root, name: str, entry_points: str):
    """A distribution's metadata beside its package under ``root`` (on PYTHONPATH), so ``importlib.metadata``
    finds its entry points as it would an installed package's."""
    import textwrap

    info = root / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    return root


def prefect_servers_here() -> int:
    """Prefect API servers this process started (its temporary-server instances and their processes); run on a
    Dask worker by ``client.run``, so it lives in an importable module."""
    import psutil
    from prefect.server.api.server import SubprocessASGIServer

    children = psutil.Process().children(recursive=True)
    serving = [p for p in children if "prefect" in " ".join(p.cmdline()) and "server" in " ".join(p.cmdline())]
    return len(SubprocessASGIServer._instances) + len(serving)


def clustered_hashes(n: int, seed: int) -> list[int]:
    """Hashes in clusters (a few bits flipped from a few centres), as perceptual hashes of similar pictures are."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = [int(c) for c in rng.integers(0, 2**63, size=max(1, n // 8), dtype=np.int64)]
    out = []
    for _ in range(n):
        h = centres[int(rng.integers(len(centres)))]
        for bit in rng.choice(64, size=int(rng.integers(0, 7)), replace=False):
            h ^= 1 << int(bit)
        out.append(h)
    return out


def undrawn(grounding):
    """``grounding`` with its subject's drawn outline taken off: the segmenter's path, as for a photo nobody
    outlined (the bundled photos carry outlines)."""
    return grounding.model_copy(update={"subject": grounding.subject.model_copy(update={"outline": None})})
