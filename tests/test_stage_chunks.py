"""The stage runner's pure parts: chunks of units, their size limit, resources for Dask, and exceptions that must
cross a process boundary as themselves."""

import pickle

import pytest

from perceptforge.backends.chat import EndpointUnavailable
from perceptforge.backends.writers import LLMReplyError
from perceptforge.errors import InputError
from perceptforge.store.rundir import RunDir
from perceptforge.tasks.engine import CPU_STAGE, GPU, MODEL_STAGE, Resources
from perceptforge.tasks.gates import QualityGate
from perceptforge.tasks.runner import (
    StageRunner,
    TransientUnits,
    Unit,
    UnitFault,
    chunk_size,
    chunked,
    portable,
    reference,
    resolve,
    run_chunk,
)


def test_chunks_keep_order_and_never_split_a_batch():
    assert chunked(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    batches = [["a", "b", "c"], ["d"], ["e", "f"], ["g", "h", "i", "j"]]
    assert chunked(batches, 4, weight=len) == [[["a", "b", "c"], ["d"]], [["e", "f"]], [["g", "h", "i", "j"]]]
    assert chunked([], 5) == []


def test_chunk_size_keeps_every_worker_busy_and_stays_within_the_setting():
    assert chunk_size(10, 24, 2) == 5  # two workers, two chunks
    assert chunk_size(1000, 24, 8) == 24  # thousands of units: the setting
    assert chunk_size(1, 24, 8) == 1
    assert 1000 / chunk_size(1000, 24, 2) <= 50  # task runs per 1,000 units


def test_a_chunk_too_heavy_for_one_task_is_halved(tmp_path):
    runner = StageRunner(RunDir(tmp_path), max_task_bytes=2_000)
    units = [Unit(f"u{k}", "f", str(k) * 700) for k in range(6)]
    fitted = runner._fit([[u] for u in units], False, "m:f", {})
    assert [len(c) for c, _, _ in fitted] == [1, 2, 1, 2]
    assert all(size <= 2_000 for _, _, size in fitted)
    assert [u.name for c, _, _ in fitted for g in c for u in g] == [u.name for u in units]  # order kept


def test_resources_become_dask_resources_only_on_a_gpu_run():
    assert MODEL_STAGE.for_dask("cpu") == {} and MODEL_STAGE.for_dask("cuda") == {GPU: 1}
    assert CPU_STAGE.for_dask("cuda") == {}
    assert Resources(memory_gb=2).for_dask("cpu") == {"MEMORY": 2 * 2**30}


@pytest.mark.parametrize(
    "exc",
    [
        InputError("labels.json:3", "invalid JSON"),
        QualityGate("mask area 100%", {"mask_area": 1.0}, {"mask": "images/x.png"}),
        LLMReplyError("not JSON", raw="{oops"),
        EndpointUnavailable("http://127.0.0.1:1: 503"),
        OSError(28, "No space left on device"),
    ],
)
def test_our_exceptions_cross_a_process_boundary_as_themselves(exc):
    back = pickle.loads(pickle.dumps(portable(exc)))
    assert type(back) is type(exc) and str(back) == str(exc)
    for attr in ("where", "what", "measurements", "evidence", "raw", "errno"):
        assert getattr(back, attr, None) == getattr(exc, attr, None)


def test_an_exception_that_does_not_pickle_keeps_its_name_message_and_traceback():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    try:
        raise Odd(1, 2)
    except Odd as exc:
        twin = portable(exc, fault=True)
    assert (
        isinstance(twin, UnitFault) and twin.error_type == "Odd" and str(twin) == "1/2" and "raise Odd" in twin.detail
    )
    assert pickle.loads(pickle.dumps(twin)).error_type == "Odd"


def unit_fn(value, run_path, boom=None):
    if value == boom:
        raise ValueError(f"{value} is bad")
    if value == "later":
        return EndpointUnavailable("try later")
    return value.upper()


def test_a_chunk_keeps_each_units_outcome_and_asks_for_a_retry_when_an_endpoint_may_recover(tmp_path):
    fn = run_chunk.fn
    assert resolve(reference(unit_fn)) is unit_fn or reference(unit_fn) is unit_fn
    out = fn(unit_fn, ["a", "b", "c"], False, tmp_path, {"boom": "b"})
    assert out[0] == "A" and isinstance(out[1], ValueError) and "is bad" in str(out[1]) and out[2] == "C"
    assert "raise ValueError" in out[1].traceback  # a fault keeps where it happened
    with pytest.raises(TransientUnits) as raised:
        fn(unit_fn, ["a", "later"], False, tmp_path, {})
    assert raised.value.results[0] == "A" and isinstance(raised.value.results[1], EndpointUnavailable)
    # a batched stage: one call per batch, a failed batch fails each of its units
    batch = fn(lambda vs, run_path: [v * 2 for v in vs], [[1, 2], [3]], True, tmp_path, {})
    assert batch == [2, 4, 6]


def test_a_task_that_fails_outside_its_units_stops_the_run_and_quarantines_nothing(prefect_api, tmp_path):
    from prefect import flow

    from perceptforge.tasks.runner import RunStopped

    runner = StageRunner(RunDir(tmp_path))

    @flow
    def stage():  # the chunk task itself fails (its stage cannot be imported where it runs), not a unit
        return runner.map("lost", "no_such_module_here:fn", [Unit("u1", "a.jpg", 1), Unit("u2", "b.jpg", 2)])

    with pytest.raises(RunStopped, match="stage lost: a task failed outside its units .*ModuleNotFoundError"):
        stage()
    assert not (tmp_path / "quarantine").exists() and not runner.failures
