"""Every bad input of benchmarks/bad_inputs.py, run for real: each gives a clear one-line error or the right
result, never a traceback, a silently wrong result or lost data."""

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bad_inputs  # noqa: E402

OUTCOMES: dict[str, tuple[str, str]] = {}


@pytest.fixture(scope="module")
def case_env(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("bad-inputs")
    env = dict(os.environ, PERCEPTFORGE_STATE_DIR=str(root / "state"))
    env.pop("PREFECT_API_URL", None)
    return root, env


@pytest.mark.parametrize("name", list(bad_inputs.CASES))
def test_bad_input(name, case_env):
    root, env = case_env
    tmp = root / f"case-{list(bad_inputs.CASES).index(name):02d}"
    tmp.mkdir()
    outcome, detail = bad_inputs.CASES[name](tmp, env)
    OUTCOMES[name] = (outcome, detail)
    assert outcome in ("clear error", "handled"), f"{name}: {outcome}: {detail}"


def test_counts_by_outcome(capsys):
    counts = Counter(outcome for outcome, _ in OUTCOMES.values())
    with capsys.disabled():
        print(
            "\nbad inputs: "
            + ", ".join(f"{k}: {counts.get(k, 0)}" for k in ("clear error", "handled", *bad_inputs.FAILURES))
        )
    assert not any(counts.get(k) for k in bad_inputs.FAILURES)
