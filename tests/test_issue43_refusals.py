"""Issue 43's small refusals, as plain functions: --dask-address implies the Dask runner (or contradicts
--runner in one line), BLINK's --prompt-variants that name nothing, export --out treated as run --out is, a
scorer plug-in that fails to import, and Label Studio requests bounded by one deadline, whole."""

import json
import socket
import threading
import time

import pytest

from perceptforge.errors import InputError, PerceptforgeError


# --- --dask-address ----------------------------------------------------------------------------------------------
def test_dask_address_implies_the_dask_runner():
    from perceptforge.flows.run import choose_executor

    assert choose_executor(None, "tcp://10.0.0.5:8786", "threads") == "dask"
    assert choose_executor("dask", "tcp://10.0.0.5:8786", "threads") == "dask"
    assert choose_executor(None, None, "threads") == "threads"
    assert choose_executor(None, None, "dask") == "dask"
    assert choose_executor("threads", None, "dask") == "threads"


@pytest.mark.parametrize(
    "runner, address, says",
    [
        ("threads", "tcp://10.0.0.5:8786", "--dask-address: names a Dask scheduler, but --runner threads was given"),
        (None, "  ", "--dask-address: is empty"),
        ("processes", None, "--runner: unknown runner 'processes'"),
    ],
)
def test_contradicting_runner_options_are_one_line(runner, address, says):
    from perceptforge.flows.run import choose_executor

    with pytest.raises(InputError) as err:
        choose_executor(runner, address, "threads")
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_dead_scheduler_address_is_one_line_within_its_wait():
    from perceptforge.tasks.engine import check_scheduler, scheduler_host_port

    assert scheduler_host_port("tcp://10.0.0.5:8786") == ("10.0.0.5", 8786)
    assert scheduler_host_port("10.0.0.5:8786") == ("10.0.0.5", 8786)
    assert scheduler_host_port("inproc://x/1/2") is None
    with pytest.raises(InputError, match="is not a scheduler address"):
        scheduler_host_port("tcp://host:port")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(InputError, match=f"no Dask scheduler answers at tcp://127.0.0.1:{port}"):
        check_scheduler(f"tcp://127.0.0.1:{port}", timeout_s=5)
    assert time.monotonic() - started < 6


# --- BLINK --prompt-variants ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, says",
    [
        (",", "the radii part ',' names no value"),
        (", ,:red", "the radii part ', ,' names no value"),
        ("5:,", "the colours part ',' names no value"),
        ("0", "a radius must be more than 0"),
        ("-5", "a radius must be more than 0"),
        ("nan", "a radius must be more than 0"),
        ("inf", "a radius must be more than 0"),
        ("1e9", "at most 200 px"),
        ("five", "radii must be numbers, got 'five'"),
        ("5,5.0", "names the variant(s) ['r5-red'] twice"),
        ("5:red,red", "names the variant(s) ['r5-red'] twice"),
    ],
)
def test_prompt_variants_that_name_nothing_or_nonsense_are_refused(spec, says):
    from perceptforge.flows.blink import parse_variants

    with pytest.raises(InputError) as err:
        parse_variants(spec)
    assert str(err.value).startswith("--prompt-variants: ") and says in str(err.value)


def test_prompt_variants_left_out_parts_take_their_defaults():
    from perceptforge.flows.blink import parse_variants

    assert [v.name for v in parse_variants(":grey")] == ["r10-grey"]
    assert [v.name for v in parse_variants("5")] == ["r5-red"]
    assert [v.name for v in parse_variants(None)] == ["default"]


# --- export --out ---------------------------------------------------------------------------------------------------
def test_export_out_may_be_new_empty_or_a_previous_export_of_the_same_kind(tmp_path):
    from perceptforge.flows.common import EXPORT_MARKER, begin_export, check_export_out

    run = tmp_path / "run"
    run.mkdir()
    check_export_out(tmp_path / "new", run, "mvp")
    (tmp_path / "empty").mkdir()
    check_export_out(tmp_path / "empty", run, "mvp")
    mvp = tmp_path / "mvp-split"
    begin_export(mvp, "mvp")
    (mvp / "manifest.json").write_text(json.dumps({"name": "x", "version": "1", "seed": 0, "files": []}))
    (mvp / "val.jsonl").write_text("")
    check_export_out(mvp, run, "mvp")
    with pytest.raises(InputError, match="holds a mvp export, and this is a blink run"):
        check_export_out(mvp, run, "blink")
    # an export made before the marker: its manifest says it is one, of a family it does not name
    older = tmp_path / "older"
    older.mkdir()
    (older / "manifest.json").write_text(json.dumps({"benchmark": "blink", "files": {}}))
    check_export_out(older, run, "blink")
    # an export killed before its manifest: its marker says whose it is, so the same command may finish it
    killed = tmp_path / "killed"
    begin_export(killed, "codis")
    (killed / "images").mkdir()
    assert (killed / EXPORT_MARKER).read_text() == "codis\n"
    check_export_out(killed, run, "codis")
    with pytest.raises(InputError, match="holds a codis export"):
        check_export_out(killed, run, "blink")


def test_export_out_over_user_files_the_run_or_the_source_folder_is_one_line(tmp_path, sample_dir):
    from perceptforge.flows.common import check_export_out

    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    user = tmp_path / "mine"
    user.mkdir()
    (user / "val.jsonl").write_text("my own\n")
    cases = [
        (user, "--out is not empty and holds no export (manifest.json)"),
        (run, "--out is inside the run directory"),
        (run / "split", "--out is inside the run directory"),
        (sample_dir, "--out is not empty and holds no export"),
        (run / "run.json", "--out is a file"),
    ]
    for out, says in cases:
        with pytest.raises(InputError) as err:
            check_export_out(out, run, "mvp")
        assert says in str(err.value), out
    other_run = tmp_path / "other"
    other_run.mkdir()
    (other_run / "run.json").write_text("{}")
    with pytest.raises(InputError, match="holds a run"):
        check_export_out(other_run, run, "mvp")
    assert (user / "val.jsonl").read_text() == "my own\n"


# --- a scorer plug-in that fails to import ------------------------------------------------------------------------
def test_a_scorer_plugin_that_fails_to_import_is_one_line_and_the_others_work(tmp_path, monkeypatch):
    import sys

    from helpers import dist_info

    from perceptforge.scorer import benchmarks

    (tmp_path / "broken_scorer.py").write_text("import numpy\nraise RuntimeError('half-installed')\n")
    (tmp_path / "good_scorer.py").write_text("def score(data, predictions, protocol, judge):\n    return 7\n")
    dist_info(tmp_path, "scorers", "[perceptforge.benchmarks]\nbroken = broken_scorer\ngood = good_scorer\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "broken_scorer", raising=False)
    with pytest.raises(InputError) as err:
        benchmarks.get("broken")
    said = str(err.value)
    assert said.startswith("perceptforge.benchmarks entry point broken = broken_scorer: cannot be imported: ")
    assert "RuntimeError: half-installed" in said and "broken_scorer.py:2" in said and "\n" not in said
    assert benchmarks.get("good").score(None, None, None, None) == 7
    assert benchmarks.get("mvp-bench").__name__.endswith("mvp_bench")
    assert "broken" not in benchmarks.predictable() and "mvp-bench" in benchmarks.predictable()


# --- Label Studio: one deadline per request ---------------------------------------------------------------------
@pytest.fixture
def silent_server():
    """A socket that accepts connections and reads what is sent, and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


def test_label_studio_that_accepts_and_never_answers_is_one_line_within_the_deadline(silent_server):
    from perceptforge.annotation.labelstudio import LabelStudio, ServerGone

    ls = LabelStudio(silent_server, "t0ken", timeout_s=2)
    started = time.monotonic()
    with pytest.raises(ServerGone) as err:
        ls.projects()
    took = time.monotonic() - started
    assert took < 5, took
    said = str(err.value)
    assert said.startswith(f"Label Studio at {silent_server} did not answer while listing projects within 2 s")
    assert "t0ken" not in said and "\n" not in said


def test_label_studio_that_trickles_its_answer_is_bounded_as_a_whole():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bad_inputs.servers import Trickle, serving

    from perceptforge.annotation.labelstudio import LabelStudio, ServerGone

    with serving(lambda body: Trickle((200, b"[]" * 50, "application/json"), 0.3)) as (url, _):
        started = time.monotonic()
        with pytest.raises(ServerGone, match="within 2 s"):
            LabelStudio(url, "t", timeout_s=2).projects()
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "1e9"])
def test_label_studio_timeout_from_the_environment_is_checked(value):
    from perceptforge.annotation.labelstudio import label_studio_timeout

    assert label_studio_timeout({}) == 300.0
    assert label_studio_timeout({"PERCEPTFORGE_LABEL_STUDIO_TIMEOUT": "2.5"}) == 2.5
    with pytest.raises(PerceptforgeError, match="PERCEPTFORGE_LABEL_STUDIO_TIMEOUT: must be seconds"):
        label_studio_timeout({"PERCEPTFORGE_LABEL_STUDIO_TIMEOUT": value})


# --- a source changed between a killed run and its resume ----------------------------------------------------------
def test_a_source_changed_since_the_run_read_it_is_named_in_one_line(tmp_path):
    from perceptforge.fileio import sha256_file
    from perceptforge.flows.common import changed_sources, refuse_changed_sources
    from perceptforge.store.sources import SourceEntry

    src, run = tmp_path / "src", tmp_path / "run"
    (src / "images").mkdir(parents=True)
    run.mkdir()
    entries = []
    for k in range(3):
        (src / "images" / f"p{k}.jpg").write_bytes(bytes([k]) * 100)
        entries.append(SourceEntry(str(k), f"images/p{k}.jpg", 1, 1, "CC0", "", "", None, {}))
    refuse_changed_sources(run, src, entries)  # no sources.jsonl yet: nothing read, nothing to compare
    records = [{"id": e.source_id, "sha256": sha256_file(src / e.file_name)} for e in entries[:2]]
    (run / "sources.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    refuse_changed_sources(run, src, entries)  # the same bytes: the resume goes on
    (src / "images" / "p1.jpg").write_bytes(b"\xff" * 100)  # same size, other bytes
    (src / "images" / "p2.jpg").write_bytes(b"\xee" * 100)  # never read by the run: not a change
    assert [name for name, _, _ in changed_sources(run, src, entries)] == ["images/p1.jpg"]
    with pytest.raises(InputError) as err:
        refuse_changed_sources(run, src, entries)
    said = str(err.value)
    assert said.startswith(f"{src / 'images' / 'p1.jpg'}: changed since the run in {run} read it (sha256 ")
    assert said.endswith("restore the file, or give --fresh to start the run over") and "\n" not in said
    (src / "images" / "p0.jpg").unlink()
    with pytest.raises(InputError, match=r"p0.jpg: is gone \(the run read it.*, as did 1 other source\(s\)"):
        refuse_changed_sources(run, src, entries)
