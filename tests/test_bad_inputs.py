"""Every bad input of benchmarks/bad_inputs, run for real, each as its own test: it gives the outcome it
declares (a clear one-line error or the right result), never a traceback, a silently wrong result, lost data,
a security fault or a hang. A case that cannot run here is a skip with its reason."""

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bad_inputs  # noqa: E402

OUTCOMES: Counter[str] = Counter()


@pytest.fixture(scope="module")
def case_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-inputs")
    yield root
    if OUTCOMES:  # what the benchmark prints, for the cases this session ran
        print("\nbad inputs: " + ", ".join(f"{k}: {n}" for k, n in sorted(OUTCOMES.items())))


@pytest.mark.parametrize("name", list(bad_inputs.CASES))
def test_bad_input(name, case_root, request):
    case = bad_inputs.CASES[name]
    env = bad_inputs.case_env(case_root)
    if case.needs == "label-studio":
        ls = request.getfixturevalue("label_studio")
        env |= {
            "LABEL_STUDIO_URL": ls.url,
            "LABEL_STUDIO_API_KEY": ls.admin.token,
            "LS_DOCUMENT_ROOT": str(ls.document_root),
        }
    tmp = case_root / f"case-{list(bad_inputs.CASES).index(name):02d}"
    tmp.mkdir()
    outcome, detail = bad_inputs.try_case(case, tmp, env)
    OUTCOMES[outcome] += 1
    if outcome == "skipped":
        pytest.skip(detail)
    assert outcome == case.expect, f"{name}: {outcome} (expected {case.expect}): {detail}"
