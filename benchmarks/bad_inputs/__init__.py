"""Bad inputs and faults a careful new user tries, each run for real, with counts by outcome.

    python benchmarks/bad_inputs                 # every case; one line per case, then the counts
    python benchmarks/bad_inputs --only "NAME"   # one case (each stands alone)

Each case is named and declares the outcome it must have: ``clear error`` (exit status 1 or 2, one ``error:``
line naming the problem, no traceback) or ``handled`` (the right result). What it can have instead is a
failure: ``traceback``, ``silently wrong``, ``data lost``, ``security`` (a file outside what the user named was
read or sent, or input reached the terminal raw) or ``hang`` (a command ran past its bound). A case that cannot
run here (no way to mount a small file system, no Label Studio server) is ``skipped`` with its reason, never
counted as handled. ``tests/test_bad_inputs.py`` runs every case as its own test.

The cases live by what they feed: ``runs.py`` (source folders, run directories, the disk), ``endpoints.py``
(chat endpoints, ``predict``, Label Studio URLs) and ``readers.py`` (official and own files read by ``score``
and ``audit``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

OK = ("clear error", "handled")
FAILURES = ("traceback", "silently wrong", "data lost", "security", "hang")
SAMPLE = Path(str(resources.files("perceptforge.data").joinpath("sample")))
Outcome = tuple[str, str]


@dataclass(frozen=True)
class Case:
    """One bad input: how to try it (``run(tmp, env)`` → outcome and a line of detail), and what it must give."""

    name: str
    run: Callable[[Path, dict], Outcome]
    expect: str
    needs: str = ""  # "label-studio": the env must name a server (LABEL_STUDIO_URL, LABEL_STUDIO_API_KEY)


CASES: dict[str, Case] = {}


def case(name: str, expect: str = "clear error", needs: str = ""):
    assert expect in OK, expect

    def register(fn: Callable[[Path, dict], Outcome]) -> Callable[[Path, dict], Outcome]:
        assert name not in CASES, f"two cases named {name!r}"
        CASES[name] = Case(name, fn, expect, needs)
        return fn

    return register


class Hang(Exception):
    """A command ran past the bound the case gives it."""


def cli(env: dict, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [sys.executable, "-m", "perceptforge.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise Hang(f"perceptforge {' '.join(args[:2])} still running after {timeout} s") from None


def last_line(proc: subprocess.CompletedProcess) -> str:
    lines = (line.strip("│╰─╯ ") for line in reversed(proc.stderr.strip().splitlines()))
    return next((line for line in lines if line), "")


def verdict(proc: subprocess.CompletedProcess, must_say: str) -> Outcome:
    """A clear error: a non-zero exit, an ``error:`` (or usage) line naming the problem, no traceback."""
    text = proc.stderr + proc.stdout
    if "Traceback" in text:
        return "traceback", last_line(proc)
    if proc.returncode not in (1, 2):
        return "silently wrong", f"exit {proc.returncode}"
    return ("clear error" if must_say in text else "silently wrong"), last_line(proc)


def try_case(c: Case, tmp: Path, env: dict) -> Outcome:
    """The case's outcome; one that could not even be set up is a traceback to look at."""
    if c.needs == "label-studio" and not env.get("LABEL_STUDIO_URL"):
        return "skipped", "needs a Label Studio server: LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY"
    try:
        return c.run(tmp, env)
    except Hang as exc:
        return "hang", str(exc)
    except Exception as exc:
        return "traceback", f"{type(exc).__name__}: {exc}"[:300]


def source_copy(tmp: Path, edit: Callable[[dict], None] | None = None) -> Path:
    src = tmp / "src"
    shutil.copytree(SAMPLE, src)
    if edit:
        doc = json.loads((src / "annotations.json").read_text())
        edit(doc)
        (src / "annotations.json").write_text(json.dumps(doc))
    return src


_RUN: dict[str, Path] = {}


def small_run(tmp: Path, env: dict) -> Path:
    """One real run (I1 on the astronaut), shared by the cases that need a run directory."""
    if "run" not in _RUN:
        out = tmp.parent / "shared-run"
        proc = cli(env, "run", "mvp", "--source", str(SAMPLE), "--out", str(out), "--categories", "I1", "--limit", "1")
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        _RUN["run"] = out
    return _RUN["run"]


def run_all(root: Path, env: dict, only: list[str] | None = None) -> dict[str, Outcome]:
    results = {}
    for k, (name, c) in enumerate(CASES.items()):
        if not only or name in only:
            tmp = root / f"case-{k:02d}"
            tmp.mkdir(parents=True)
            results[name] = try_case(c, tmp, env)
    return results


def case_env(root: Path) -> dict:
    """The environment every case's commands run in: their own Prefect state, no outside API."""
    env = dict(os.environ, PERCEPTFORGE_STATE_DIR=str(root / "state"))
    env.pop("PREFECT_API_URL", None)
    return env


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", help="run only this case (by name; repeatable)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = run_all(Path(tmp), case_env(Path(tmp)), args.only)
    width = max(map(len, results), default=0)
    for name, (outcome, detail) in results.items():
        expected = CASES[name].expect
        mark = "" if outcome in (expected, "skipped") else f"  (expected {expected})"
        print(f"{outcome:15s} {name:{width}s}  {detail}{mark}")
    counts = Counter(outcome for outcome, _ in results.values())
    print("\n" + ", ".join(f"{k}: {counts.get(k, 0)}" for k in (*OK, "skipped", *FAILURES)))
    wrong = [n for n, (o, _) in results.items() if o not in (CASES[n].expect, "skipped")]
    sys.exit(1 if wrong else 0)


from . import endpoints, readers, runs  # noqa: E402, F401  (the cases register themselves on import)
