"""imagehash's perceptual and difference hashes against the hand-written ones they replaced (kept here, frozen, as
the reference): on the bundled photos, the synthetic depth scene turned a few degrees, re-encoded, resized,
blurred, brightened, cropped, turned and mirrored copies of them, and change images like those the gates hash
(what an edit changed), the near-duplicates found are the same for the gates' phash, and about as good for the
audit's difference hash (it now resizes with LANCZOS, so a few bits near a tie fall the other way)."""

import io
from collections.abc import Callable
from functools import cache
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageFilter, ImageOps
from synthetic_scene import render

from perceptforge.audit import checks
from perceptforge.audit.run import thresholds
from perceptforge.configs.profile import Gates
from perceptforge.logic.gates import hamming, near_duplicates, phash
from perceptforge.logic.hash_index import hash_int

DATA = Path(__file__).resolve().parents[1] / "data"


def old_phash(image: Image.Image, size: int = 8) -> int:
    """logic/gates.phash before imagehash: cv2's orthonormal DCT, the median taken without the DC term."""
    import cv2

    small = np.asarray(image.convert("L").resize((4 * size, 4 * size), Image.Resampling.LANCZOS), dtype=np.float32)
    low = np.asarray(cv2.dct(small), np.float32)[:size, :size].flatten()
    bits = low > np.median(low[1:])
    return int("".join("1" if b else "0" for b in bits), 2)


def old_dhash(image: Image.Image, size: int = 8) -> int:
    """audit/checks.image_hash before imagehash: Pillow's default (bicubic) resize, a bit for left brighter."""
    px = list(image.convert("L").resize((size + 1, size)).tobytes())
    bits = 0
    for row in range(size):
        for col in range(size):
            bits = bits << 1 | (px[row * (size + 1) + col] > px[row * (size + 1) + col + 1])
    return bits


def _jpeg(image: Image.Image, quality: int) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def _crop(image: Image.Image, share: float) -> Image.Image:
    w, h = image.size
    dx, dy = int(w * share), int(h * share)
    return image.crop((dx, dy, w - dx, h - dy))


# the same picture as a near-duplicate finder should see it
BENIGN: dict[str, Callable[[Image.Image], Image.Image]] = {
    "jpeg30": lambda im: _jpeg(im, 30),
    "jpeg75": lambda im: _jpeg(im, 75),
    "half": lambda im: im.resize((im.width // 2, im.height // 2), Image.Resampling.BILINEAR),
    "blur": lambda im: im.filter(ImageFilter.GaussianBlur(1)),
    "brighter": lambda im: ImageEnhance.Brightness(im).enhance(1.1),
}
# changed more: a hash may or may not call these the same picture (a 3% crop mostly not, a 10% crop never)
OTHER: dict[str, Callable[[Image.Image], Image.Image]] = {
    "crop3%": lambda im: _crop(im, 0.03),
    "turned2": lambda im: im.rotate(2, resample=Image.Resampling.BILINEAR),
    "crop10%": lambda im: _crop(im, 0.10),
    "mirrored": ImageOps.mirror,
    "turned10": lambda im: im.rotate(10),
}
# the same picture under two names: rocket.jpg is launch_pad.jpg, depth_scene.png is render(0)
SAME_PICTURE = [{"rocket", "launch_pad"}, {"depth_scene", "scene+0"}]


@cache
def pictures() -> dict[str, Image.Image]:
    """The bundled photos and donors, the synthetic scene turned -4..4 degrees, and change images (|edited -
    natural|, what the gates hash) of a donor pasted into, or a colour shift over, a box of a photo."""
    found = {p.stem: Image.open(p).convert("RGB") for p in sorted((DATA / "sample" / "images").iterdir())}
    found |= {p.stem: Image.open(p).convert("RGB") for p in sorted((DATA / "donors").glob("*.jpg"))}
    found |= {f"scene{yaw:+d}": render(yaw)[0].convert("RGB") for yaw in (-4, -2, 0, 2, 4)}
    donor = found["brick_wall"]
    for k, name in enumerate(("astronaut", "chelsea", "coffee", "grace_hopper")):
        natural = found[name].resize((256, 256))
        x0, y0 = 24 + 40 * k, 160 - 36 * k
        box = (x0, y0, x0 + 96, y0 + 80)
        pasted, shifted = natural.copy(), natural.copy()
        pasted.paste(donor.resize((96, 80)), box[:2])
        region = np.asarray(natural.crop(box), np.int16)
        shifted.paste(Image.fromarray(np.clip(region[..., ::-1] + 20, 0, 255).astype(np.uint8)), box[:2])
        for how, edited in (("pasted", pasted), ("recoloured", shifted)):
            change = np.abs(np.asarray(edited, np.int16) - np.asarray(natural, np.int16)).astype(np.uint8)
            found[f"change:{name}:{how}"] = Image.fromarray(change)
    return found


@cache
def variants() -> dict[tuple[str, str], Image.Image]:
    return {
        (name, how): image if how == "original" else {**BENIGN, **OTHER}[how](image)
        for name, image in pictures().items()
        for how in ("original", *BENIGN, *OTHER)
    }


@pytest.fixture(scope="module")
def hashed(tmp_path_factory) -> dict[str, dict[tuple[str, str], int]]:
    """Each image of the set by each hash; the audit's own ``image_hash`` reads files, so it hashes PNG copies."""
    folder = tmp_path_factory.mktemp("variants")
    files = {}
    for k, (key, image) in enumerate(variants().items()):
        files[key] = folder / f"{k}.bmp"  # uncompressed: quick to write and read
        image.save(files[key])
    return {
        "old_phash": {key: old_phash(image) for key, image in variants().items()},
        "phash": {key: phash(image) for key, image in variants().items()},
        "old_dhash": {key: old_dhash(image) for key, image in variants().items()},
        "dhash": {key: checks.image_hash(str(path)) for key, path in files.items()},
    }


def same_picture(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return a[0] == b[0] or {a[0], b[0]} in SAME_PICTURE


def test_hash_int_reads_the_bits_row_by_row_first_bit_highest():
    bits = np.zeros((8, 8), bool)
    bits[0, 0] = bits[7, 7] = True
    assert hash_int(bits) == (1 << 63) | 1
    import imagehash

    h = imagehash.phash(pictures()["chelsea"])
    assert hash_int(h.hash) == int(str(h), 16) and hamming(hash_int(h.hash), phash(pictures()["coffee"])) == (
        h - imagehash.phash(pictures()["coffee"])
    )


def test_gates_phash_finds_the_same_near_duplicates_as_the_hand_written_one(hashed):
    """The gates' verdict (``near_duplicates`` at the profile's ``min_phash_distance``, 4) on every pair of the set
    is the one the hand-written DCT hash gave: same units dropped, for the same twins. Both hashes split at a
    median, so half their bits are set and every distance is even: any threshold from 3 to 6 gives these
    verdicts (at 2 the same units are dropped, some for another twin; from 7 on a few turned copies differ)."""
    old, new = hashed["old_phash"], hashed["phash"]
    units = [f"{name}/{how}" for name, how in old]
    for min_distance in (Gates().min_phash_distance, 3, 6):
        assert near_duplicates(list(zip(units, new.values())), min_distance) == near_duplicates(
            list(zip(units, old.values())), min_distance
        )
    close = {(a, b) for a, b in combinations(old, 2) if hamming(old[a], old[b]) < Gates().min_phash_distance}
    assert close == {(a, b) for a, b in combinations(new, 2) if hamming(new[a], new[b]) < Gates().min_phash_distance}
    benign = [hamming(new[(name, "original")], new[(name, how)]) for name in pictures() for how in BENIGN]
    assert sum(d < Gates().min_phash_distance for d in benign) >= len(benign) - 1, sorted(benign)[-3:]


def test_audit_dhash_finds_near_duplicates_about_as_well_as_the_hand_written_one(hashed):
    """At the audit's ``image_hamming`` imagehash's difference hash calls about as many benign copies
    near-duplicates of their picture as the hand-written hash did (123 and 124 of 125 here), and fewer pairs of
    different pictures (145 and 153 of 37,675, most of them change images alike or the scene turned 2 degrees).
    Where they differ is a tie: imagehash resizes to the 9x8 thumbnail with LANCZOS where the old hash took
    Pillow's bicubic default, so on a brick wall whose thumbnail columns are nearly equally bright a few bits
    fall the other way (the direction of the comparison, right brighter rather than left, changes no distance)."""
    within = thresholds(None)["duplicates"]["image_hamming"]
    found = {}
    for kind in ("old_dhash", "dhash"):
        h = hashed[kind]
        benign = [hamming(h[(n, "original")], h[(n, how)]) for n in pictures() for how in BENIGN]
        found[kind] = {
            "benign": sum(d <= within for d in benign),
            "wrong": sum(not same_picture(a, b) and hamming(h[a], h[b]) <= within for a, b in combinations(h, 2)),
        }
    assert found["dhash"]["benign"] >= found["old_dhash"]["benign"] - len(benign) // 50, found
    assert found["dhash"]["wrong"] <= found["old_dhash"]["wrong"], found
