import dataclasses
import random

import numpy as np
import pytest
from helpers import OPEN_GATES, candidate_for

from perceptforge.backends.devices import call_lock, device_lock
from perceptforge.backends.writers import TemplateWriter
from perceptforge.configs.profile import Gates, load_profile
from perceptforge.data.schema import Candidate
from perceptforge.logic.ids import edit_seed
from perceptforge.logic.templates import templates
from perceptforge.store.rundir import RunDir
from perceptforge.store.sources import grounding_from_entry, read_source_dir
from perceptforge.tasks.edit import EditUnit, edit_batch, edit_request, plan_batches
from perceptforge.tasks.ingest import ingest_entry
from perceptforge.tasks.mask import make_mask


class CountingBackend:
    """The real composite inpainter, with a record of how many requests each call carried."""

    def __init__(self, fail_on: str | None = None):
        self.inner, self.calls, self.fail_on = load_profile("local").build("inpainter")[0], [], fail_on
        self.name, self.model_id = self.inner.name, self.inner.model_id

    def edit(self, requests):
        self.calls.append(len(requests))
        if self.fail_on and any(r.prompt == self.fail_on for r in requests):
            raise RuntimeError(f"cannot draw {self.fail_on!r}")
        return self.inner.edit(requests)


@pytest.fixture(scope="module")
def units_and_run(sample_dir, tmp_path_factory):
    run = RunDir(tmp_path_factory.mktemp("run"))
    entries = read_source_dir(sample_dir)
    sources = {e.source_id: ingest_entry(sample_dir, e, run) for e in entries}
    found = templates()
    segmenter = load_profile("local").build("segmenter")
    units = []
    for e in entries:
        if not e.subject:
            continue
        g, src = grounding_from_entry(e), sources[e.source_id]
        for tid in ("B1", "S1", "R2"):  # R2's values go to a text-driven editor: a second backend in the plan
            cand = Candidate.model_validate(candidate_for(found[tid], g, src.sha256, TemplateWriter(), found, 0))
            mask = make_mask(found[tid], cand, src, g, run, segmenter, Gates(**OPEN_GATES), 0)
            units.append(EditUnit(found[tid], cand, src, mask))
    composite = [u for u in units if u.backend == "composite"]
    return composite, run, units


def test_the_hair_a_mask_record_names_reaches_the_compositors_request(units_and_run):
    """The mask stage records where a boxes-only subject's outline is hair; the edit stage hands it to the compositor,
    which unmixes the strands there (``matting.strand_share``). A record without it (a drawn outline, a record
    written before) asks for nothing."""
    composite, run, _ = units_and_run
    unit = composite[0]
    assert unit.mask.hair is None and edit_request(unit, run, 0).hair is None
    zone = np.zeros((unit.source.height, unit.source.width), bool)
    zone[:20, 10:40] = True
    named = dataclasses.replace(unit, mask=unit.mask.model_copy(update={"hair": run.store_mask(zone)}))
    assert (edit_request(named, run, 0).hair == zone).all()


def models(backend):
    return {"composite": backend}


def test_plan_is_fixed_by_the_units_and_respects_backend_size_and_batch_size(units_and_run):
    _, _, units = units_and_run
    sizes = {"composite": 2, "sd-inpaint": 3}
    plan = plan_batches(units, lambda u: sizes[u.backend])
    shuffled = units[:]
    random.Random(3).shuffle(shuffled)
    again = plan_batches(shuffled, lambda u: sizes[u.backend])
    assert [[u.name for u in b] for b in again] == [[u.name for u in b] for b in plan]
    assert sorted(u.name for b in plan for u in b) == sorted(u.name for u in units)
    assert {u.backend for u in units} == {"composite", "sd-inpaint"}
    for batch in plan:
        assert len(batch) <= sizes[batch[0].backend]
        assert len({(u.backend, u.source.width, u.source.height) for u in batch}) == 1
    # two composite units per photo share a size: 3 full batches of 2
    assert sum(len(b) == 2 and b[0].backend == "composite" for b in plan) == 3


def test_one_backend_call_per_batch_and_results_do_not_depend_on_batch_mates(units_and_run):
    units, run, _ = units_and_run
    backend = CountingBackend()
    together = edit_batch(units[:3], run, models(backend), seed=0)
    assert backend.calls == [3]
    alone = [edit_batch([u], run, models(CountingBackend()), seed=0)[0] for u in units[:3]]
    assert together == alone
    assert [r.edit.seed for r in together] == [edit_seed(0, u.name) for u in units[:3]]
    assert len({r.edit.seed for r in together}) == 3


def test_a_failing_unit_is_returned_as_its_error_and_the_rest_of_the_batch_survives(units_and_run):
    units, run, _ = units_and_run
    missing = dataclasses.replace(
        units[1], source=units[1].source.model_copy(update={"stored": "images/not-there.png"})
    )
    out = edit_batch([units[0], missing, units[2]], run, models(CountingBackend()), seed=0)
    assert isinstance(out[1], Exception) and "not-there.png" in str(out[1])
    assert out[0].unit == units[0].name and out[2].unit == units[2].name

    backend = CountingBackend(fail_on=units[1].candidate.idea.new_caption)
    out = edit_batch(units[:3], run, models(backend), seed=0)
    assert backend.calls == [3, 1, 1, 1]  # the batch, then each unit alone
    assert isinstance(out[1], RuntimeError) and "cannot draw" in str(out[1])
    assert [out[0].unit, out[2].unit] == [units[0].name, units[2].name]


def test_device_lock_is_shared_per_accelerator_and_absent_on_cpu():
    assert device_lock("cuda") is device_lock("cuda") and device_lock("cuda") is not device_lock("cuda:1")
    with device_lock("cpu"), device_lock("cpu"):  # no lock: nesting does not deadlock
        pass


def test_call_lock_is_the_models_own_on_cpu():
    one, two, free = CountingBackend(), CountingBackend(), CountingBackend()
    free.concurrent_calls = True
    assert call_lock("cpu", one) is call_lock("cpu", one) and call_lock("cpu", one) is not call_lock("cpu", two)
    assert call_lock("cuda", one) is device_lock("cuda")  # one model stage per GPU, whatever the model
    with call_lock("cpu", one), call_lock("cpu", one), call_lock("cpu", free), call_lock("cpu", free):
        pass  # the model's own lock is re-entrant; a model declaring concurrent calls takes none

    class Slotted:  # no weak reference to it
        __slots__ = ()

    slotted = Slotted()
    assert call_lock("cpu", slotted) is call_lock("cpu", slotted)


class SlowBackend(CountingBackend):
    """Records how many batches are inside the model at once."""

    def __init__(self):
        super().__init__()
        import threading

        self.inside = self.most_inside = 0
        self.guard = threading.Lock()

    def edit(self, requests):
        import time

        with self.guard:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        time.sleep(2.0)  # far longer than the gap between the two threads finishing their masks
        with self.guard:
            self.inside -= 1
        return super().edit(requests)


# a diffusers pipeline keeps its scheduler's step index between steps: two threads in one copy on the CPU changed
# each other's pixels; a model with nothing kept between calls (the composite) may serve both threads
@pytest.mark.parametrize("device, concurrent, expected", [("cuda:7", True, 1), ("cpu", False, 1), ("cpu", True, 2)])
def test_one_model_call_at_a_time_per_accelerator_and_per_model(units_and_run, device, concurrent, expected):
    from concurrent.futures import ThreadPoolExecutor

    units, run, _ = units_and_run
    backend = SlowBackend()
    backend.concurrent_calls = concurrent
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda b: edit_batch(b, run, models(backend), 0, device), [units[:2], units[2:4]]))
    assert backend.most_inside == expected
