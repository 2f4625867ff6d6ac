"""Independent review on real Label Studio servers: each annotator labels on a server of their own (no one can reach
another's annotation), agreement comes from those independent verdicts, and a reviewer settles the disputed items
in the owner's adjudication project on the main server."""

import json
import shutil
import signal
import subprocess
import time

import httpx
import pytest
from helpers import annotate, perceptforge_cmd

from perceptforge.annotation.labeling import choice
from perceptforge.annotation.labelstudio import LabelStudio
from perceptforge.annotation.sync import pull, push
from perceptforge.flows.run import run as run_flow
from perceptforge.outputs.export import load_items

A, R = "Accept", "Reject"
TO = {"yes_no_pair": "natural", "single_mcq": "manipulated", "cross_mcq": "manipulated"}


def verdict(item, v: str) -> list[dict]:
    kind = item.question.kind
    reason = [choice("reject_reason", TO[kind], "The question is wrong or ambiguous")] if v == R else []
    return [choice("verdict", TO[kind], v), *reason]


def test_each_annotator_labels_alone_and_a_reviewer_settles_disputes(
    label_studio, independent_servers, prefect_api, sample_dir, tmp_path
):
    run = tmp_path / "run"
    run_flow("mvp", source=str(sample_dir), profile="local", out=str(run), seed=0, limit=1, categories=["S1"])
    ls = LabelStudio(label_studio.url, label_studio.admin.token, independent=independent_servers)
    server1, server2 = (m.url for m in ls.independent)
    solo1, solo2 = (LabelStudio(url, a.token) for url, a in zip((server1, server2), label_studio.independent))
    report = push(run, ls, label_studio.document_root)
    assert report["imported"] == 10  # 5 items, once on each annotator's own server
    again = push(run, ls, label_studio.document_root)
    assert (again["imported"], again["already_there"]) == (0, 10)
    own = report["annotator_projects"]
    assert set(own) == {"yes_no_pair", "single_mcq", "cross_mcq"}
    first = {k: v[server1] for k, v in own.items()}
    second = {k: v[server2] for k, v in own.items()}
    tasks1 = {t["data"]["item_id"]: t for pid in first.values() for t in solo1.export(pid)}
    tasks2 = {t["data"]["item_id"]: t for pid in second.values() for t in solo2.export(pid)}
    items = {i.id: i for i in load_items(run)}
    assert set(tasks1) == set(tasks2) == set(items)
    by = {(i.question.kind, getattr(i.question, "level", "")): i for i in items.values()}
    yn_low, yn_high = by["yes_no_pair", "low"], by["yes_no_pair", "high"]
    mine = annotate(solo1, tasks1[yn_low.id]["id"], verdict(yn_low, A))
    # the second annotator has no account where the first one's answer is, and none on the main server
    for url in (server1, label_studio.url):
        peek = httpx.get(
            f"{url}/api/annotations/{mine['id']}/",
            headers={"Authorization": f"Token {label_studio.independent[1].token}"},
        )
        assert peek.status_code == 401
    # and on their own server there is no annotation but their own
    assert all(not t["annotations"] for pid in second.values() for t in solo2.export(pid))

    # yn_low: both accept; yn_high: they disagree; the rest: both accept
    annotate(solo2, tasks2[yn_low.id]["id"], verdict(yn_low, A))
    annotate(solo1, tasks1[yn_high.id]["id"], verdict(yn_high, A))
    annotate(solo2, tasks2[yn_high.id]["id"], verdict(yn_high, R))
    for item in items.values():
        if item.id not in (yn_low.id, yn_high.id):
            annotate(solo1, tasks1[item.id]["id"], verdict(item, A))
            annotate(solo2, tasks2[item.id]["id"], verdict(item, A))

    summary = pull(run, ls)
    assert summary["status"] == {"disagreement": 1, "kept": 4}
    assert summary["agreement"]["overall"] == {"items": 5, "percent_agreement": 80.0, "cohens_kappa": 0.0}
    # the disputed item, and only it, went to the owner's adjudication project with both verdicts in view
    owner = label_studio.client()
    (review_task,) = owner.export(report["projects"]["yes_no_pair"])
    assert review_task["data"]["item_id"] == yn_high.id and review_task["annotations"] == []
    shown = review_task["data"]["independent_verdicts"]
    assert "solo1@example.com: Accept" in shown and "solo2@example.com: Reject (The question is wrong" in shown
    assert all(owner.export(report["projects"][k]) == [] for k in ("single_mcq", "cross_mcq"))

    annotate(owner, review_task["id"], verdict(yn_high, A))  # the reviewer keeps it
    summary = pull(run, ls)
    assert summary["status"] == {"kept": 5}
    assert summary["agreement"]["overall"]["percent_agreement"] == 80.0  # adjudication does not count as agreement
    decisions = {
        d["item_id"]: d for d in map(json.loads, (run / "verification" / "decisions.jsonl").read_text().splitlines())
    }
    settled = decisions[yn_high.id]
    assert settled["adjudication"] == {"reviewer": "admin@example.com", "verdict": A, "was": "disagreement"}
    assert [v["annotator"] for v in settled["verdicts"]] == ["solo1@example.com", "solo2@example.com"]
    assert settled["label_studio"]["task"] == review_task["id"]
    assert {a["server"] for a in settled["label_studio"]["annotators"]} == {server1, server2}
    assert len(owner.export(report["projects"]["yes_no_pair"])) == 1  # a second pull sends nothing again
    assert (run / "verification" / "items" / f"{yn_high.id}.json").exists()


def sign_in(url: str, email: str, password: str) -> httpx.Client | None:
    """Sign in as a person does (the login form), then the API answers in that session; None if refused."""
    browser = httpx.Client(base_url=url, timeout=30)
    browser.get("/user/login/")
    signed_in = browser.post(
        "/user/login/",
        data={"email": email, "password": password, "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        headers={"Referer": f"{url}/user/login/"},
    )
    return browser if signed_in.status_code == 302 else None


def test_cli_add_annotator_then_serve_starts_the_annotators_own_server(label_studio, tmp_path, cli_env):
    """`annotate add-annotator EMAIL` (no --shared) then `annotate serve`, as commands: the annotator's own server
    starts beside the main one, they sign in there with the password from the file the command named (which no
    output shows), the owner's token reaches it, and the annotator has no account on the main server. The main
    server's data folder is a copy of the session's (its admin alone), as a first `annotate serve` leaves it
    (test_serve_initialises_starts_and_stops_on_sigterm runs that first start); the annotator's own is made by
    the command, with `label-studio init`."""
    from conftest import LABEL_STUDIO_VENV

    from perceptforge.annotation.server import free_port

    state, port = tmp_path / "state", free_port()
    shutil.copytree(label_studio.template, state / "label-studio" / "data")
    admin = label_studio.admin
    main_url = f"http://127.0.0.1:{port}"
    creds = {"url": main_url, "email": admin.email, "password": admin.password, "token": admin.token}
    (state / "label-studio" / "credentials.json").write_text(json.dumps(creds | {"document_root": str(tmp_path)}))
    env = {**cli_env, "PERCEPTFORGE_STATE_DIR": str(state)}
    venv = ("--venv", str(LABEL_STUDIO_VENV))

    add = [*perceptforge_cmd(), "annotate", "add-annotator", "solo3@example.com", *venv]
    added = subprocess.run(add, env=env, capture_output=True, text=True, timeout=300)
    assert added.returncode == 0, added.stderr
    kept = state / "label-studio" / "annotators" / "solo3@example.com.json"
    record = json.loads(kept.read_text())
    assert oct(kept.stat().st_mode & 0o777) == "0o600" and str(kept) in added.stdout
    assert "label-studio init" in added.stdout  # said while it waits, not only on a terminal
    assert record["password"] not in added.stdout + added.stderr and record["main_url"] == main_url
    own = record["url"]
    assert f"{own} once a running `perceptforge annotate serve` has started their server" in added.stdout

    serve = subprocess.Popen(
        [*perceptforge_cmd(), "annotate", "serve", "--port", str(port), *venv, "--document-root", str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline, healthy = time.monotonic() + 180, False
        while not healthy and time.monotonic() < deadline and serve.poll() is None:
            try:
                healthy = httpx.get(f"{own}/health", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(0.5)
        assert healthy, serve.stdout.read() if serve.poll() is not None else f"{own} not healthy after 180 s"
        annotator = sign_in(own, "solo3@example.com", record["password"])
        assert (
            annotator is not None and annotator.get("/api/current-user/whoami").json()["email"] == "solo3@example.com"
        )
        owner = httpx.get(f"{own}/api/current-user/whoami", headers={"Authorization": f"Token {admin.token}"})
        assert owner.json()["email"] == admin.email  # push and pull reach the annotator's server with it
        assert sign_in(main_url, "solo3@example.com", record["password"]) is None  # no account on the main server
    finally:
        serve.send_signal(signal.SIGTERM)
        out, _ = serve.communicate(timeout=60)
    assert f"solo3@example.com labels at {own}" in out and "starting solo3@example.com's own Label Studio" in out
    assert record["password"] not in out and admin.password not in out
    for url in (own, main_url):  # both servers went down with serve
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)
