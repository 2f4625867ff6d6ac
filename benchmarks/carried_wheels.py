"""The wheels a lent GPU machine lacks for `benchmarks/gpu_check.sh`, downloaded here into ``.whl/`` (it has no network,
and the tree that travels is capped at 64 MiB): what perceptforge's flow, its model backends and the Dask runner import,
with their dependencies, for the machine's Python (3.12, manylinux x86-64), less every package its image already holds
(``gpu_machine_packages.txt``). Prints what it carries and the total.

    python benchmarks/carried_wheels.py            # then: echo /.whl/ >> .git/info/exclude; carry .whl
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# What the gpu check's imports reach (pyproject's core and models dependencies, prefect-dask), not what it never
# loads there (Label Studio's SDK, the selfie segmenter's runtime): their dependencies are most of the weight.
ROOTS = [
    "prefect==3.8.8", "fastapi<0.151", "pydantic>=2.7,<3", "numpy", "pandas", "pillow", "opencv-python-headless",
    "openai", "typer", "rich", "pyyaml", "matplotlib", "pyarrow", "scipy==1.17.1", "imagehash>=4.3",
    "diffusers==0.42.1", "segment-anything==1.0", "prefect-dask==0.3.7",
    # prefect asks for sqlalchemy[asyncio] and httpx[http2]; an extra's requirements are not followed below
    "greenlet", "h2",
]  # fmt: skip
PLATFORMS = ["manylinux1_x86_64", "manylinux2014_x86_64"] + [
    f"manylinux_2_{n}_x86_64" for n in (17, 24, 27, 28, 31, 34, 35)
]
KEEP = {"asyncpg"}  # on the image, but prefect's server needs the version it pins


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def needs(wheel: Path) -> list[str]:
    """The wheel's unconditional requirements on CPython 3.12 / Linux."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "os_name": "posix",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "extra": ""}  # fmt: skip
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    reqs = [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]
    return [norm(r.name) for r in reqs if r.marker is None or r.marker.evaluate(env)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=HERE.parent / ".whl")
    args = p.parse_args()
    have = {norm(n) for n in (HERE / "gpu_machine_packages.txt").read_text().split() if not n.startswith("#")}
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.12",
               "--implementation", "cp", "-d", tmp, *(f"--platform={p}" for p in PLATFORMS), *ROOTS]  # fmt: skip
        subprocess.run(cmd, check=True)
        wheels = {norm(w.name.split("-")[0]): w for w in Path(tmp).glob("*.whl")}
        reached, todo = set(), [norm(re.split(r"[<>=]", r)[0]) for r in ROOTS]
        while todo:  # the roots' closure, as pip resolved it for the machine
            name = todo.pop()
            if name in wheels and name not in reached:
                reached.add(name)
                todo += needs(wheels[name])
        shutil.rmtree(args.out, ignore_errors=True)
        args.out.mkdir(parents=True)
        carried = sorted(n for n in reached if n not in have or n in KEEP)
        for name in carried:
            shutil.copy(wheels[name], args.out)
    total = sum(w.stat().st_size for w in args.out.glob("*.whl"))
    print(f"{len(carried)} wheels, {total / 2**20:.1f} MiB in {args.out}: {', '.join(carried)}")


if __name__ == "__main__":
    main()
