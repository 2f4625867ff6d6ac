"""Human verification against a real Label Studio server on 127.0.0.1 (see the label_studio fixture)."""

import json
import subprocess

import httpx
import pytest
from helpers import annotate, perceptforge_cmd, validate_config

from perceptforge.annotation.labeling import KINDS, choice, config_text, text
from perceptforge.annotation.sync import pull, push
from perceptforge.errors import PerceptforgeError
from perceptforge.flows.run import run as run_flow
from perceptforge.outputs.export import export_split, load_items

A, R = "Accept", "Reject"


def make_run(out, sample_dir, **kw):
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(out), seed=0, **kw)
    return out


def tasks_by_item(ls, run):
    projects = json.loads((run / "annotation" / "projects.json").read_text())
    return {t["data"]["item_id"]: t for p in projects.values() for t in ls.export(p["id"])}


def test_every_labeling_config_is_valid_on_the_server(label_studio):
    ls = label_studio.client()
    scratch = ls.create_project({"title": "config check", "label_config": config_text("single_mcq")})["id"]
    for kind in KINDS:
        validate_config(ls, scratch, config_text(kind))
    with pytest.raises(PerceptforgeError, match="HTTP 400.*not found in names"):
        validate_config(ls, scratch, config_text("yes_no_pair").replace('toName="natural"', 'toName="nowhere"', 1))


@pytest.mark.parametrize("token_kind", ["legacy", "personal"])
def test_push_annotate_pull(label_studio, prefect_api, sample_dir, tmp_path, capfd, monkeypatch, token_kind):
    """The whole verification round through the SDK, with a legacy token or a personal access token."""
    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["S1"])
    ls, root = label_studio.client(kind=token_kind), label_studio.document_root
    first = push(run, ls, root)
    assert first["imported"] == 5 and set(first["projects"]) == {"yes_no_pair", "single_mcq", "cross_mcq"}
    again = push(run, ls, root)
    assert (again["imported"], again["already_there"], again["projects"]) == (0, 5, first["projects"])
    tasks = tasks_by_item(ls, run)
    assert len(tasks) == 5
    items = {i.id: i for i in load_items(run)}
    task = next(iter(tasks.values()))
    assert task["data"]["lineage"]["template_id"] == "S1" and task["data"]["natural"].startswith(
        "/data/local-files/?d="
    )
    served = httpx.get(
        label_studio.url + task["data"]["natural"], headers={"Authorization": f"Token {label_studio.admin.token}"}
    )
    assert (
        served.status_code == 200
        and served.content == (run / items[task["data"]["item_id"]].pair.natural.path).read_bytes()
    )

    by = {(i.question.kind, getattr(i.question, "level", "")): i for i in items.values()}
    yn_low, yn_high, single = by["yes_no_pair", "low"], by["yes_no_pair", "high"], by["single_mcq", "low"]
    cross_low, cross_high = by["cross_mcq", "low"], by["cross_mcq", "high"]
    ann1, ann2 = (label_studio.client(a, token_kind) for a in label_studio.annotators)
    to = {"yes_no_pair": "natural", "single_mcq": "manipulated", "cross_mcq": "manipulated"}

    def verdict(item, v, *extra):
        reason = (
            [choice("reject_reason", to[item.question.kind], "The question is wrong or ambiguous")] if v == R else []
        )
        return [choice("verdict", to[item.question.kind], v), *reason, *extra]

    wrong = next(letter for letter in "ABCDE" if letter != single.question.answer)
    fix = [
        choice("distractor_letter", "manipulated", wrong),
        text("distractor_fix", "manipulated", "a tiny purple umbrella"),
    ]
    annotate(ann1, tasks[yn_low.id]["id"], verdict(yn_low, A))  # both accept → kept
    annotate(ann2, tasks[yn_low.id]["id"], verdict(yn_low, A))
    annotate(ann1, tasks[yn_high.id]["id"], verdict(yn_high, A))  # one accepts, one rejects → disagreement
    annotate(ann2, tasks[yn_high.id]["id"], verdict(yn_high, R))
    annotate(ann1, tasks[single.id]["id"], verdict(single, A, *fix))  # accept with an edited distractor → v2
    annotate(ann2, tasks[single.id]["id"], verdict(single, A))
    annotate(ann1, tasks[cross_low.id]["id"], verdict(cross_low, R))  # both reject
    annotate(ann2, tasks[cross_low.id]["id"], verdict(cross_low, R))
    annotate(ann1, tasks[cross_high.id]["id"], verdict(cross_high, A))  # one annotation only → incomplete
    annotate(
        ann2, tasks[cross_high.id]["id"], [choice("bogus_control", "manipulated", "x")]
    )  # stored by the server, invalid here

    summary = pull(run, ls)
    decisions = {
        d["item_id"]: d for d in map(json.loads, (run / "verification" / "decisions.jsonl").read_text().splitlines())
    }
    assert [decisions[i.id]["status"] for i in (yn_low, yn_high, single, cross_low, cross_high)] == [
        "kept",
        "disagreement",
        "kept",
        "rejected",
        "incomplete",
    ]
    # every verdict, reason and correction names its annotator; every decision names its task
    assert decisions[yn_high.id]["verdicts"] == [
        {"annotator": "ann1@example.com", "verdict": A},
        {"annotator": "ann2@example.com", "verdict": R},
    ]
    assert decisions[yn_high.id]["reject_reasons"] == [
        {"annotator": "ann2@example.com", "reason": "The question is wrong or ambiguous"}
    ]
    assert decisions[single.id]["corrections"] == [
        {"field": f"option_{wrong}", "value": "a tiny purple umbrella", "annotators": ["ann1@example.com"]}
    ]
    assert all(decisions[i]["label_studio"]["task"] == tasks[i]["id"] for i in decisions)
    assert decisions[cross_high.id]["invalid_annotations"][0]["annotator"] == "ann2@example.com"
    assert decisions[cross_high.id]["invalid_annotations"][0]["errors"] == [
        "unknown control 'bogus_control'",
        "required control 'verdict' is missing",
    ]
    assert summary["status"] == {"disagreement": 1, "incomplete": 1, "kept": 2, "rejected": 1}
    assert summary["corrected"] == 1
    # pairs: yes/no (A,A), (A,R) → 50 %, kappa 0; single (A,A) and cross (R,R) → 100 %, kappa undefined;
    # overall (A,A), (A,R), (A,A), (R,R): p_o 3/4, p_e 1/2 → kappa 0.5
    assert summary["agreement"] == {
        "yes_no_pair": {"items": 2, "percent_agreement": 50.0, "cohens_kappa": 0.0},
        "single_mcq": {"items": 1, "percent_agreement": 100.0, "cohens_kappa": None},
        "cross_mcq": {"items": 1, "percent_agreement": 100.0, "cohens_kappa": None},
        "overall": {"items": 4, "percent_agreement": 75.0, "cohens_kappa": 0.5},
    }
    assert json.loads((run / "summary.json").read_text())["verification"] == summary
    report = (run / "report.html").read_text()
    assert (
        "human verification" in report
        and report.count('class="tag kept"') == 2
        and report.count('class="tag rejected"') == 1
        and report.count('class="tag disagreement"') == 1
    )
    # what annotators did is on the report, under ids that open their Label Studio task
    assert "a tiny purple umbrella" in report and "The question is wrong or ambiguous" in report
    assert f"data?task={tasks[yn_high.id]['id']}" in report

    kept = json.loads((run / "verification" / "items" / f"{single.id}.json").read_text())
    assert kept["version"] == 2 and kept["verified"] and kept["lineage"]["parent_id"] == single.id
    assert kept["question"]["options"]["ABCDE".index(wrong)] == "a tiny purple umbrella"
    original = json.loads((run / "items" / f"{single.id}.json").read_text())
    assert original["version"] == 1 and "a tiny purple umbrella" not in original["question"]["options"]
    assert sorted(i.id for i in load_items(run, only_verified=True)) == sorted([yn_low.id, single.id])

    written = {p: p.read_bytes() for p in sorted((run / "verification").rglob("*")) if p.is_file()}
    pull(run, ls)
    assert {p: p.read_bytes() for p in sorted((run / "verification").rglob("*")) if p.is_file()} == written

    # Changed project settings reach the server; the unchanged config is not re-sent (the server would
    # re-check it against the stored bogus annotation and refuse).
    from perceptforge.annotation import sync

    original_settings = sync.project_settings
    monkeypatch.setattr(
        sync, "project_settings", lambda r, k: {**original_settings(r, k), "expert_instruction": "<p>v2</p>"}
    )
    push(run, ls, root)
    assert all(ls.project(pid)["expert_instruction"] == "<p>v2</p>" for pid in first["projects"].values())
    monkeypatch.setattr(sync, "project_settings", original_settings)

    # More items in the run: a new push adds only those, and annotated tasks stay as they were.
    make_run(run, sample_dir, limit=1, categories=["S1", "I1"])
    before = tasks_by_item(ls, run)
    added = push(run, ls, root)
    assert added["imported"] == len(load_items(run)) - 5 > 0 and added["already_there"] == 5
    after = tasks_by_item(ls, run)
    assert len(after) == len(load_items(run))
    for item_id, task in before.items():
        assert (
            after[item_id]["annotations"] == task["annotations"] and after[item_id]["updated_at"] == task["updated_at"]
        )

    export_split(run, tmp_path / "split", only_verified=True)
    written_files = [*run.rglob("*"), *(tmp_path / "split").rglob("*")]
    everything = b"".join(p.read_bytes() for p in written_files if p.is_file() and p.suffix not in (".png",))
    logs = capfd.readouterr()
    for secret in label_studio.secrets():
        assert secret.encode() not in everything and secret not in logs.out + logs.err


class DiesMidImport(httpx.HTTPTransport):
    """Between the client and the server: forwards the task import, lets the server finish it, then kills
    the server before its answer reaches the client, the case in which a retried POST imports twice."""

    def __init__(self, session, at_import: int):
        super().__init__()
        self.session, self.at_import, self.imports = session, at_import, 0
        self.sizes: list[int] = []  # tasks per import, as sent

    def handle_request(self, request):
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/import"):
            self.imports += 1
            self.sizes.append(len(json.loads(request.content)))
            if self.imports == self.at_import:
                response.read()
                self.session.server.process.kill()  # SIGKILL: no clean shutdown
                self.session.server.process.wait()
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return response


def test_server_killed_mid_import_then_push_adds_only_what_is_missing(label_studio, prefect_api, sample_dir, tmp_path):
    from perceptforge.annotation.labelstudio import LabelStudio

    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["S1", "I1"])
    n = len(load_items(run))
    assert n >= 3, "two imports of up to 2 tasks need at least 3 items"
    transport = DiesMidImport(label_studio, at_import=2)
    ls = LabelStudio(label_studio.url, label_studio.admin.token, httpx_client=httpx.Client(transport=transport))
    try:
        with pytest.raises(PerceptforgeError, match=r"did not answer while importing (\d+) tasks.*push.* again") as err:
            push(run, ls, label_studio.document_root, chunk_size=2)
    finally:  # whatever the outcome, the session's server runs again for the tests after this one
        if label_studio.server.process.poll() is not None:
            label_studio.start()
    assert transport.imports == 2  # the import whose answer was lost was not sent again
    assert f"importing {transport.sizes[-1]} tasks" in str(err.value)
    assert label_studio.admin.token not in str(err.value)
    ls = label_studio.client()
    report = push(run, ls, label_studio.document_root, chunk_size=2)
    landed = sum(transport.sizes)  # the killed import had landed as well
    assert report["already_there"] == landed and report["imported"] == n - landed
    item_ids = [
        t["data"]["item_id"]
        for p in json.loads((run / "annotation" / "projects.json").read_text()).values()
        for t in ls.export(p["id"])
    ]
    assert sorted(item_ids) == sorted(i.id for i in load_items(run))  # each item once


@pytest.mark.parametrize("token_kind", ["legacy", "personal"])
def test_cli_push_and_pull(label_studio, prefect_api, sample_dir, tmp_path, cli_env, token_kind):
    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["S1"])
    token = label_studio.token(kind=token_kind)
    env = {
        **cli_env,
        "LABEL_STUDIO_URL": label_studio.url,
        "LABEL_STUDIO_API_KEY": token,
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(label_studio.document_root),
    }
    pushed = subprocess.run(
        [*perceptforge_cmd(), "annotate", "push", str(run)], env=env, capture_output=True, text=True, timeout=300
    )
    assert pushed.returncode == 0, pushed.stderr
    assert "imported 5 new tasks" in pushed.stdout
    pulled = subprocess.run(
        [*perceptforge_cmd(), "annotate", "pull", str(run)], env=env, capture_output=True, text=True, timeout=300
    )
    assert pulled.returncode == 0, pulled.stderr
    assert "5 items: 5 incomplete" in pulled.stdout
    bad = subprocess.run(
        [*perceptforge_cmd(), "annotate", "push", str(run)],
        env={**env, "LABEL_STUDIO_API_KEY": "wrong-token-123"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "refused the API token" in bad.stderr and "wrong-token-123" not in bad.stderr
    for out in (pushed, pulled):
        assert token not in out.stdout + out.stderr


def test_verify_flow_waits_then_pulls(label_studio, prefect_api, sample_dir, tmp_path, monkeypatch):
    from perceptforge.flows.verify import verify_flow

    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.admin.token)
    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["I1"])
    args = {"run_dir": str(run), "document_root": str(label_studio.document_root), "url": label_studio.url}
    n = len(load_items(run))  # I1's questions (neither "is this hair dyed?" nor an identity one about a colour)
    assert n >= 2
    timed_out = verify_flow(**args, timeout_s=1, poll_s=0.5)
    assert timed_out["still_waiting"] == n and timed_out["status"] == {"incomplete": n}
    ls = label_studio.client()
    for task in tasks_by_item(ls, run).values():
        anchor = "natural" if task["data"]["kind"] == "yes_no_pair" else "manipulated"
        for annotator in label_studio.annotators:
            annotate(label_studio.client(annotator), task["id"], [choice("verdict", anchor, A)])
    done = verify_flow(**args, timeout_s=60, poll_s=1)
    assert done["still_waiting"] == 0 and done["pushed"]["imported"] == 0 and done["status"] == {"kept": n}
    assert done["agreement"]["overall"] == {"items": n, "percent_agreement": 100.0, "cohens_kappa": None}
    now = verify_flow(**args, now=True)
    assert now["status"] == {"kept": n}


def test_serve_initialises_starts_and_stops_on_sigterm(label_studio, tmp_path, cli_env):
    """`make label-studio`'s command: a data folder and admin account on first start, credentials readable
    only by their owner and never printed, and a SIGTERM that takes the server down with it."""
    import contextlib
    import signal
    import time

    import httpx
    from conftest import LABEL_STUDIO_VENV

    from perceptforge.annotation.server import free_port

    port, env = free_port(), {**cli_env, "PERCEPTFORGE_STATE_DIR": str(tmp_path / "state")}
    serve = subprocess.Popen(
        [
            *perceptforge_cmd(),
            "annotate",
            "serve",
            "--port",
            str(port),
            "--venv",
            str(LABEL_STUDIO_VENV),
            "--document-root",
            str(tmp_path),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    creds_path = tmp_path / "state" / "label-studio" / "credentials.json"
    deadline = time.monotonic() + 240
    while not creds_path.exists() and time.monotonic() < deadline and serve.poll() is None:
        time.sleep(1)
    assert creds_path.exists(), serve.stdout.read() if serve.poll() is not None else "no credentials after 240 s"
    creds = json.loads(creds_path.read_text())
    assert oct(creds_path.stat().st_mode & 0o777) == "0o600" and creds["url"] == f"http://127.0.0.1:{port}"
    me = httpx.get(
        f"{creds['url']}/api/current-user/whoami", headers={"Authorization": f"Token {creds['token']}"}
    ).json()
    assert me["email"] == creds["email"]

    # an annotator account: the password is kept in a file only its owner reads, and never printed
    # (--shared: on the main server; an independent annotator's own server is tested in test_independent_review)
    add = [
        *perceptforge_cmd(),
        *("annotate", "add-annotator", "ann3@example.com", "--shared", "--venv", str(LABEL_STUDIO_VENV)),
    ]
    added = subprocess.run(add, env=env, capture_output=True, text=True, timeout=300)
    assert added.returncode == 0, added.stderr
    kept = tmp_path / "state" / "label-studio" / "annotators" / "ann3@example.com.json"
    annotator = json.loads(kept.read_text())
    assert oct(kept.stat().st_mode & 0o777) == "0o600" and str(kept) in added.stdout
    assert annotator["password"] not in added.stdout + added.stderr
    browser = httpx.Client(base_url=creds["url"])
    browser.get("/user/login/")
    signed_in = browser.post(
        "/user/login/",
        data={
            "email": "ann3@example.com",
            "password": annotator["password"],
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        headers={"Referer": f"{creds['url']}/user/login/"},
    )
    assert (
        signed_in.status_code == 302 and browser.get("/api/current-user/whoami").json()["email"] == "ann3@example.com"
    )
    again = subprocess.run(add, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "already has an account" in again.stderr

    # an independent annotator added while serve runs: their own server starts without a restart
    solo = [*perceptforge_cmd(), "annotate", "add-annotator", "solo9@example.com", "--venv", str(LABEL_STUDIO_VENV)]
    added = subprocess.run(solo, env=env, capture_output=True, text=True, timeout=600)
    assert added.returncode == 0, added.stderr
    own = json.loads((tmp_path / "state" / "label-studio" / "annotators" / "solo9@example.com.json").read_text())
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{own['url']}/health", timeout=2).status_code == 200:
                break
        time.sleep(1)
    else:
        pytest.fail(f"{own['url']}: the new annotator's server did not start within 120 s of add-annotator")

    serve.send_signal(signal.SIGTERM)
    out, _ = serve.communicate(timeout=60)
    assert creds["token"] not in out and creds["password"] not in out and "credentials.json" in out
    assert "`label-studio init`: about a minute, once); the server starts after it" in out  # said, not only spun
    assert "starting solo9@example.com's own Label Studio" in out
    for url in (creds["url"], own["url"]):
        with pytest.raises(httpx.TransportError):  # nothing listens any more: the servers went down with serve
            httpx.get(f"{url}/health", timeout=2)


def test_two_pushes_at_once_make_one_set_of_projects_and_tasks(label_studio, prefect_api, sample_dir, tmp_path):
    """Two `annotate push` of one run at the same moment: the second waits for the first (a lock in the run
    directory) and then finds its projects and tasks, so nothing is created twice."""
    from concurrent.futures import ThreadPoolExecutor

    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["I1"])
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda _: push(run, label_studio.client(), label_studio.document_root), range(2)))
    n = len(load_items(run))
    assert sorted(r["imported"] for r in reports) == [0, n]
    assert reports[0]["projects"] == reports[1]["projects"]
    assert len(tasks_by_item(label_studio.client(), run)) == n
    projects = label_studio.client().projects()
    ours = {p["title"] for p in projects if p["id"] in reports[0]["projects"].values()}
    assert sum(p["title"] in ours for p in projects) == len(ours) == 3  # no project made twice


def test_project_ids_are_kept_per_server_and_checked_against_the_projects_title(
    label_studio, prefect_api, sample_dir, tmp_path
):
    """Another server (here: the same one under another URL) never gets the first one's project ids; an id that
    names another project is never written to, and pull refuses it."""
    from perceptforge.annotation.labelstudio import LabelStudio

    run = make_run(tmp_path / "run", sample_dir, limit=1, categories=["S1"])
    ls, root = label_studio.client(), label_studio.document_root
    first = push(run, ls, root)
    other_url = ls.url.replace("127.0.0.1", "localhost")
    other = LabelStudio(other_url, label_studio.admin.token)
    with pytest.raises(PerceptforgeError, match=f"nothing of this run was pushed to {other_url}"):
        pull(run, other)
    # someone else's project, and projects.json pointing this server's ids at it
    theirs = ls.create_project({"title": "someone else's project", "label_config": config_text("single_mcq")})["id"]
    state = run / "annotation" / "projects.json"
    doc = json.loads(state.read_text())
    for record in doc.values():
        record["servers"] = {ls.url.rstrip("/"): theirs}
    state.write_text(json.dumps(doc))
    with pytest.raises(PerceptforgeError, match=f"recorded as id {theirs}, is not there"):
        pull(run, ls)
    again = push(run, ls, root)  # finds this run's projects by their titles; theirs stays untouched
    assert again["projects"] == first["projects"] and again["imported"] == 0
    assert ls.export(theirs) == [] and ls.local_storages(theirs) == []
    recorded = json.loads(state.read_text())
    assert all(r["servers"][ls.url.rstrip("/")] == first["projects"][k] for k, r in recorded.items())
